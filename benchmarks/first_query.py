"""The first query after ``KnowledgeIndex.open``, per retriever (issue 36 item 4: measurement).

For each retriever of ``kgrag bench`` a fresh Python process opens the cached ``kgrag bench`` index
of one dataset (MuSiQue's shared half: 4,516 passages, the closest set to 5k), constructs the
retriever, runs the dataset's first question, then its second. Reported per retriever: process
start-up with imports and the embedder's load (``embedder_load_s``, paid once per process by every
retriever), ``open_s``, ``construct_s``, ``first_query_s`` and ``second_query_s``, and what the
index generation held before and after (the vectors a first query stores, e.g.
``triple_vectors.<fingerprint>.npy`` (:mod:`kgrag_plugins.index.vector_cache`), are reused by the
next process). A retriever still running after ``--timeout`` seconds is reported as such.

Also reported, from a fresh process of its own: spaCy's one-time cost (importing torch, which
spaCy's ``thinc`` imports when installed; the rest of spaCy's import; the NER pipeline's load),
which the retrievers that link the question with spaCy (ppr, activation, frag, translator) pay on
their first query.

``--precompute entities,triples,relations,translator`` first stores those vectors in each cached index
(``kgrag_plugins.index.vector_cache.precompute``, what ``kgrag index --precompute`` runs at build),
in a process of its own with no time limit, and reports the one-time cost: seconds per kind and
the files' rows, embedding seconds and size. ``--fresh`` deletes the stored vectors first, so that
cost is measured rather than found; ``--build-missing`` builds a missing cached index (e.g.
MuSiQue's ParseKG index for the translator) and reports its build time.

Run (the indexes must be cached: ``kgrag bench --dataset musique ...`` builds them)::

    KGRAG_DATA_DIR=../shared/data python benchmarks/first_query.py     # docs/benchmarks/first-query.{json,md}
    KGRAG_DATA_DIR=../shared/data python benchmarks/first_query.py --precompute entities,triples,translator \
        --fresh --build-missing
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
from kgrag_plugins.index.vector_cache import stored
res["files_before"] = gen()
t = time.perf_counter(); idx = KnowledgeIndex.open(path); res["open_s"] = time.perf_counter() - t
t = time.perf_counter()
r = factory(idx, **({"dataset": ds.name} if name in DATASET_AWARE else {}))
res["construct_s"] = time.perf_counter() - t
q1, q2 = ds.questions[0].question, ds.questions[1].question
t = time.perf_counter(); r.retrieve(q1, 5); res["first_query_s"] = time.perf_counter() - t
t = time.perf_counter(); r.retrieve(q2, 5); res["second_query_s"] = time.perf_counter() - t
res["files_after"] = gen()
res["vectors"] = stored(path / json.loads((path / "manifest.json").read_text())["generation"])
res["passages"] = len(idx.passages)
res["embedder"] = idx.embedder.name
print("RESULT " + json.dumps(res))
"""


#: What the first query of the spaCy-linking retrievers (ppr, activation, frag, translator) pays
#: once per process, in a fresh process: spaCy's import as the package does it
#: (``kgrag_plugins._spacy.import_spacy``: thinc is not offered torch unless it is already imported),
#: the NER pipeline's load (``load_spacy(False)``) and the first doc.
_SPACY = r"""
import json, sys, time
t = time.perf_counter()
from kgrag_plugins._spacy import import_spacy
spacy = import_spacy(); b = time.perf_counter() - t
torch_imported = "torch" in sys.modules
from kgrag_plugins.index.builders.nlp import load_spacy
t = time.perf_counter(); nlp = load_spacy(False); c = time.perf_counter() - t
t = time.perf_counter(); nlp("Who founded the company that makes the iPhone?"); d = time.perf_counter() - t
res = {"import_spacy_s": b, "load_pipeline_s": c, "first_doc_s": d}
print("RESULT " + json.dumps({**res, "torch_imported": torch_imported}))
"""


def _run_child(code: str, *args: str, timeout: float | None = None) -> dict[str, Any] | str:
    """Run ``code`` in a fresh interpreter: the JSON of its ``RESULT`` line, else why not (a str)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KGRAG_PROGRESS": "0"},
        )
    except subprocess.TimeoutExpired:
        return f"still running after {timeout:.0f} s"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return json.loads(line[7:])


def spacy_cost() -> dict[str, Any]:
    """Seconds of spaCy's one-time cost in a fresh process (:data:`_SPACY`)."""
    res = _run_child(_SPACY)
    if isinstance(res, str):
        return {"error": res}
    torch_imported = bool(res.pop("torch_imported", False))
    res = _rounded(res)
    res["total_s"] = round(sum(res.values()), 3)
    res["torch_imported"] = torch_imported
    return res


#: Which precompute kinds each cached index gets (the translator reads the ParseKG index only).
_KINDS_OF = {"mentions": ("entities", "triples", "relations"), "parsekg": ("translator",)}
_VECTOR_STEMS = (
    "entity_vectors",
    "triple_vectors",
    "relation_vectors",
    "relation_rows",
    "translator_windows",
    "translator_entity_vectors",
)

_PREPARE = r"""
import json, sys, time
from pathlib import Path
from kgrag_plugins.datasets import load_dataset
from kgrag_plugins.datasets.indexes import _slug, dataset_index, default_cache_dir
from kgrag_plugins.index import vector_cache as vc
from kgrag_plugins.models.embed import default_embedder
dataset, builder, kinds, stems = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[6].split(",")
fresh, build = sys.argv[4] == "1", sys.argv[5] == "1"
ds = load_dataset(dataset)
emb = default_embedder()
path = default_cache_dir() / (f"{_slug(ds.name)}-{ds.corpus_hash()}-{_slug(emb.name)}-{builder}")
res = {"index": path.name}
if not (path / "manifest.json").is_file() and not build:
    print("RESULT " + json.dumps({**res, "error": "no cached index (--build-missing builds it)"})); sys.exit()
t = time.perf_counter(); idx, reused = dataset_index(ds, embedder=emb, builder=builder, progress=False)
res["build_s" if not reused else "open_s"] = time.perf_counter() - t
gdir = idx.path / idx.manifest["generation"]
if fresh:
    res["deleted"] = sorted(p.name for s in stems for p in gdir.glob(s + ".*") if p.suffix in (".npy", ".npz", ".json"))
    for name in res["deleted"]:
        (gdir / name).unlink()
    idx = type(idx).open(idx.path, embedder=emb)
res["precompute_s"] = vc.precompute(idx, [k for k in kinds if k])
res["stored"] = vc.stored(gdir)
res["counts"] = idx.counts
print("RESULT " + json.dumps(res))
"""


def prepare(dataset: str, builder: str, kinds: list[str], fresh: bool, build: bool) -> dict[str, Any]:
    """Store the ``kinds`` vectors of the cached ``builder`` index (one process, no time limit)."""
    t = time.perf_counter()
    args = [dataset, builder, ",".join(kinds), str(int(fresh)), str(int(build)), ",".join(_VECTOR_STEMS)]
    res = _run_child(_PREPARE, *args)
    if isinstance(res, str):
        return {"error": res}
    res["process_s"] = time.perf_counter() - t
    return _rounded(res)


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 3)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def measure(name: str, dataset: str, timeout: float) -> dict[str, Any]:
    t = time.perf_counter()
    res = _run_child(_CHILD, name, dataset, timeout=timeout)
    if isinstance(res, str):
        return {"error": res}
    res["process_s"] = time.perf_counter() - t
    res["new_files"] = sorted(set(res.pop("files_after")) - set(res.pop("files_before")))
    return _rounded(res)


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
    sp = report.get("spacy", {})
    if "total_s" in sp:
        lines += [
            "",
            f"spaCy's one-time cost in a fresh process (the spaCy-linking retrievers' first query): "
            f"{sp['total_s']:.2f} s = importing spaCy {sp['import_spacy_s']:.2f} s (torch imported with it: "
            f"{'yes' if sp.get('torch_imported') else 'no'}) + loading the NER pipeline "
            f"{sp['load_pipeline_s']:.2f} s + the first doc {sp['first_doc_s']:.2f} s.",
        ]
    for builder, r in report.get("precompute", {}).items():
        lines += ["", f"One-time cost, the `{builder}` index ({r.get('index', '?')}):"]
        if "error" in r:
            lines.append(f"{r['error']}")
            continue
        built = f"built in {r['build_s']:.0f} s; " if r.get("build_s") is not None else ""
        done = ", ".join(f"{k} {v:.1f} s" for k, v in r.get("precompute_s", {}).items())
        lines += [
            f"{built}precompute ({done}).",
            "",
            "| stored vectors | rows | embedding s | MB |",
            "|---|---|---|---|",
        ]
        for f, v in r.get("stored", {}).items():
            secs = f"{v['seconds']:.1f}" if v.get("seconds") is not None else "(not recorded)"
            lines.append(f"| {f} | {v.get('rows') or '?'} | {secs} | {v['bytes'] / 1e6:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="musique")
    p.add_argument("--retrievers", default=",".join(RETRIEVERS))
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--precompute", default="", help="store these vectors first: entities,triples,relations,translator")
    p.add_argument("--fresh", action="store_true", help="with --precompute: delete stored vectors first")
    p.add_argument("--build-missing", action="store_true", help="with --precompute: build missing cached indexes")
    p.add_argument(
        "--embedder", default=None, help="the cached indexes of this embedder (torch, onnx-int8; default: the default)"
    )
    args = p.parse_args(argv)
    if args.embedder:  # the children read it (default_embedder() names the cached index)
        os.environ["KGRAG_EMBEDDER"] = args.embedder
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report: dict[str, Any] = {"command": "python benchmarks/first_query.py " + " ".join(argv or sys.argv[1:])}
    report.update(dataset=args.dataset, date=time.strftime("%Y-%m-%d"), cpus=os.cpu_count(), retrievers={})
    report["load_average_start"] = [round(x, 2) for x in os.getloadavg()]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in args.precompute.split(",") if k]
    if kinds:
        report["precompute"] = {}
        for builder, own in _KINDS_OF.items():
            res = prepare(args.dataset, builder, [k for k in kinds if k in own], args.fresh, args.build_missing)
            report["precompute"][builder] = res
            log.info("precompute %s: %s", builder, res)
            out.write_text(json.dumps(report, indent=2) + "\n")
    report["spacy"] = spacy_cost()
    log.info("spaCy's one-time cost: %s", report["spacy"])
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
