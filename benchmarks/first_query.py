"""The first query after ``KnowledgeIndex.open``, per retriever (issue 36 item 4: measurement).

For each retriever of ``kgrag bench`` a fresh Python process opens the cached ``kgrag bench`` index
of one dataset (MuSiQue's shared half: 4,516 passages, the closest set to 5k), constructs the
retriever, runs the dataset's first question, then its second. Reported per retriever: process
start-up with imports and the embedder's load (``embedder_load_s``, paid once per process by every
retriever), ``open_s``, ``construct_s``, ``first_query_s`` and ``second_query_s``, and what the
index generation held before and after (the derived files a first query writes, e.g.
``triple_vectors.npy``, are reused by the next process). A retriever still running after
``--timeout`` seconds is reported as such.

Run (the indexes must be cached: ``kgrag bench --dataset musique ...`` builds them)::

    KGRAG_DATA_DIR=../shared/data python benchmarks/first_query.py     # docs/benchmarks/first-query.{json,md}
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "first-query.json"
RETRIEVERS = ("dense", "bm25", "hybrid", "ppr", "activation", "sa-rag", "kg-infused", "frag", "translator")
log = logging.getLogger("benchmarks.first_query")

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from kgrag_plugins.datasets import load_dataset
from kgrag_plugins.datasets.indexes import _slug, default_cache_dir
from kgrag_plugins.eval.bench import DATASET_AWARE, RETRIEVERS
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.models.embed import default_embedder
name, dataset = sys.argv[1], sys.argv[2]
ds = load_dataset(dataset)
factory, _, builder = RETRIEVERS[name]
emb = default_embedder()
# the cached kgrag bench index (dataset_index's naming), found without opening it
slug = f"{_slug(ds.name)}-{ds.corpus_hash()}-{_slug(emb.name)}" + (f"-{builder}" if builder else "")
path = default_cache_dir() / slug
assert (path / "manifest.json").is_file(), f"no cached index at {path}: run kgrag bench first"
res = {"embedder_load_s": time.perf_counter() - t0}
gen = lambda: sorted(p.name for p in (path / json.loads((path / "manifest.json").read_text())["generation"]).iterdir())
res["files_before"] = gen()
t = time.perf_counter(); idx = KnowledgeIndex.open(path); res["open_s"] = time.perf_counter() - t
t = time.perf_counter()
r = factory(idx, **({"dataset": ds.name} if name in DATASET_AWARE else {}))
res["construct_s"] = time.perf_counter() - t
q1, q2 = ds.questions[0].question, ds.questions[1].question
t = time.perf_counter(); r.retrieve(q1, 5); res["first_query_s"] = time.perf_counter() - t
t = time.perf_counter(); r.retrieve(q2, 5); res["second_query_s"] = time.perf_counter() - t
res["files_after"] = gen()
res["passages"] = len(idx.passages)
print("RESULT " + json.dumps(res))
"""


def measure(name: str, dataset: str, timeout: float) -> dict[str, Any]:
    t = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, name, dataset],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KGRAG_PROGRESS": "0"},
        )
    except subprocess.TimeoutExpired:
        return {"error": f"still running after {timeout:.0f} s"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    res = json.loads(line[7:])
    res["process_s"] = time.perf_counter() - t
    res["new_files"] = sorted(set(res.pop("files_after")) - set(res.pop("files_before")))
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"First query after `KnowledgeIndex.open`, {report['dataset']} ({report.get('passages', '?')} passages), "
        "one fresh process per retriever; seconds.",
        "",
        "| retriever | open | construct | first query | second query | over 2 s | files the first query wrote |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in report["retrievers"].items():
        if "error" in r:
            over = "yes" if r["error"].startswith("still running") else "not measured"
            lines.append(f"| {name} | | | {r['error']} | | {over} | |")
            continue
        over = "yes" if r["first_query_s"] > 2.0 else "no"
        new = ", ".join(r["new_files"]) or "—"
        lines.append(
            f"| {name} | {r['open_s']:.2f} | {r['construct_s']:.2f} | {r['first_query_s']:.2f} | "
            f"{r['second_query_s']:.3f} | {over} | {new} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="musique")
    p.add_argument("--retrievers", default=",".join(RETRIEVERS))
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report: dict[str, Any] = {"command": "python benchmarks/first_query.py " + " ".join(argv or sys.argv[1:])}
    report.update(dataset=args.dataset, date=time.strftime("%Y-%m-%d"), cpus=os.cpu_count(), retrievers={})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in [r for r in args.retrievers.split(",") if r]:
        res = measure(name, args.dataset, args.timeout)
        report["passages"] = res.get("passages", report.get("passages"))
        report["retrievers"][name] = res
        log.info("%s: %s", name, res)
        out.write_text(json.dumps(report, indent=2) + "\n")  # after each: a later failure keeps the rest
        out.with_suffix(".md").write_text(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
