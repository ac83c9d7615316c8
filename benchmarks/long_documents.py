"""Long documents (issue 34 item 1): window vectors on the four shared halves, and a 2 MB passage.

1. For each shared half (MuSiQue, 2Wiki, HotpotQA, PopQA) the cached ``kgrag bench`` indexes
   (plain, and ``builder="mentions"`` for activation) are opened and dense, hybrid and activation
   are evaluated on every question (k = 5) twice in the same process: with the long passages'
   window vectors (the default) and with them switched off (``passages.windows = None``: the
   passage vector alone, what the index did before windows). The report gives R@2/R@5 of both
   and the change in points.
2. A 2 MB passage (the bundled sample's prose repeated, one new fact in its last 1%) is indexed
   beside the 69 sample passages with the mentions builder; the rank of the passage for the
   fact's question under dense, hybrid and activation, and the build's timings, are recorded.

Run::

    KGRAG_DATA_DIR=../shared/data python benchmarks/long_documents.py      # docs/benchmarks/long-documents.{json,md}
    python benchmarks/long_documents.py --datasets popqa --skip-2mb --out /tmp/ld.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "long-documents.json"
DATASETS = ("musique", "2wikimultihopqa", "hotpotqa", "popqa")
METHODS = ("dense", "hybrid", "activation")
log = logging.getLogger("benchmarks.long_documents")


def on_the_four_sets(datasets: list[str], data_dir: str | None) -> dict[str, Any]:
    from kgrag_plugins.datasets import load_dataset
    from kgrag_plugins.datasets.indexes import dataset_index
    from kgrag_plugins.eval.bench import RETRIEVERS, evaluate_retriever

    out: dict[str, Any] = {}
    for name in datasets:
        ds = load_dataset(name, data_dir=data_dir)
        t0 = time.perf_counter()
        plain, _ = dataset_index(ds, progress=False)
        graph, _ = dataset_index(ds, builder="mentions", progress=False)
        row: dict[str, Any] = {
            "passages": len(plain.passages),
            "questions": len(ds.questions),
            "long_passages_windowed": len(set(plain.passages.windows.owners)) if plain.passages.windows else 0,
            "windows": len(plain.passages.windows) if plain.passages.windows else 0,
            "index_open_or_build_s": round(time.perf_counter() - t0, 1),
        }
        saved = {id(ix): ix.passages.windows for ix in (plain, graph)}
        for mode in ("windows", "no_windows"):
            for ix in (plain, graph):
                ix.passages.windows = saved[id(ix)] if mode == "windows" else None
                ix.passages._win_rows = None
            for method in METHODS:
                factory, _, builder = RETRIEVERS[method]
                res = evaluate_retriever(factory(graph if builder else plain), ds, progress=False)
                row.setdefault(method, {})[mode] = {k: res[k] for k in ("recall@2", "recall@5")}
        for method in METHODS:
            m = row[method]
            m["delta_points"] = {
                k: round(100 * (m["windows"][k] - m["no_windows"][k]), 2) for k in ("recall@2", "recall@5")
            }
        log.info("%s: %s", name, {m: row[m]["delta_points"] for m in METHODS})
        out[name] = row
    return out


def two_megabyte_passage() -> dict[str, Any]:
    from kgrag_plugins.datasets.loaders import sample_corpus
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.activation import ActivationRetriever
    from kgrag_plugins.methods.baselines import DenseRetriever, HybridRetriever
    from kgrag_plugins.types import Passage

    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "index")]  # conftest's HashEmbedder, the test
    from test_long_passages import FACT, QUESTION, long_document  # the test's own document

    text = long_document(2_000_000)
    res: dict[str, Any] = {"chars": len(text), "fact_at": round(text.index(FACT) / len(text), 4)}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        idx = KnowledgeIndex.build(
            sample_corpus() + [Passage("long", text, title="Collected notes")],
            Path(d) / "ix",
            builder="mentions",
            progress=False,
        )
        res["build_s"] = round(time.perf_counter() - t0, 1)
        res["timings"] = {k: round(float(v), 1) for k, v in idx.manifest["timings"].items()}
        res["windows"] = idx.manifest["windows"]
        for cls in (DenseRetriever, HybridRetriever, ActivationRetriever):
            r = cls(idx)
            r.retrieve(QUESTION, k=5)  # warm
            t1 = time.perf_counter()
            ids = [sp.passage.id for sp in r.retrieve(QUESTION, k=5).passages]
            res[r.name] = {
                "rank": ids.index("long") + 1 if "long" in ids else None,
                "ms": round(1000 * (time.perf_counter() - t1), 1),
            }
        idx.passages.windows, idx.passages._win_rows = None, None
        ids = [sp.passage.id for sp in DenseRetriever(idx).retrieve(QUESTION, k=20).passages]
        res["dense_rank_without_windows"] = ids.index("long") + 1 if "long" in ids else "> 20"
        idx.close()
    return res


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| set | long passages (windows) | method | R@2 windows / without (Δ pt) | R@5 windows / without (Δ pt) |",
        "|---|---|---|---|---|",
    ]
    for name, row in report.get("sets", {}).items():
        for method in METHODS:
            m = row[method]
            cells = [
                f"{m['windows'][k]:.4f} / {m['no_windows'][k]:.4f} ({m['delta_points'][k]:+.2f})"
                for k in ("recall@2", "recall@5")
            ]
            windowed = f"{row['long_passages_windowed']} ({row['windows']})"
            lines.append(f"| {name} | {windowed} | {method} | {' | '.join(cells)} |")
    big = report.get("two_mb")
    if big:
        lines += [
            "",
            f"2 MB passage ({big['chars']:,} characters, fact at {big['fact_at']:.2%}, {big['windows']} windows, "
            f"build {big['build_s']} s): rank dense {big['dense']['rank']}, hybrid {big['hybrid']['rank']}, "
            f"activation {big['activation']['rank']}; dense without windows: {big['dense_rank_without_windows']}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--data-dir", default=None)
    p.add_argument("--skip-2mb", action="store_true")
    p.add_argument("--skip-sets", action="store_true")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report: dict[str, Any] = {"command": "python benchmarks/long_documents.py " + " ".join(argv or sys.argv[1:])}
    if not args.skip_sets:
        report["sets"] = on_the_four_sets([d for d in args.datasets.split(",") if d], args.data_dir)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for part in ("sets", "two_mb"):  # written after each part: a failure keeps what was measured
        if part == "two_mb" and not args.skip_2mb:
            report["two_mb"] = two_megabyte_passage()
        out.write_text(json.dumps(report, indent=2) + "\n")
        out.with_suffix(".md").write_text(markdown(report))
    log.info("wrote %s and %s", out, out.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
