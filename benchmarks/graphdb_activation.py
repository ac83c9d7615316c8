"""Bounded activation over a graph database vs in memory (issue 36 item 2; docs/graphdb.md).

``DBActivationRetriever`` fetches an ``--hops`` ball around the question's sources by default
and walks it with the whole graph's degrees (mass leaving the ball is dropped); ``hops=None``
fetches the sources' whole component (exact). This builds a mentions index over a dataset
subset (the supporting passages of the first ``--questions`` questions, plus the next corpus
passages up to ``--passages``), loads its graph into each database and reports, per mode, the
share of questions whose top-5 passages equal the in-memory retriever's, R@5 on both and the
query times::

    python benchmarks/graphdb_activation.py --dataset 2wikimultihopqa --questions 100 --passages 600 --json out.json

The index is built under ``--out-dir`` (a temporary directory by default), never in the repository.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from graphdb_common import finish
from graphdb_common import ms_percentile as _p


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--passages", type=int, default=600)
    ap.add_argument("--hops", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--backends", nargs="+", default=["kuzu"])
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from kgrag_plugins.datasets.loaders import load_dataset
    from kgrag_plugins.datasets.metrics import recall_at_k
    from kgrag_plugins.index.graphdb import FalkorDBServer
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.integrations.llama_index.graphdb import falkordb_kg, kuzu_kg
    from kgrag_plugins.methods.activation import ActivationRetriever
    from kgrag_plugins.methods.graphdb import DBActivationRetriever, index_view

    ds = load_dataset(args.dataset, data_dir=args.data_dir)
    qs = [q for q in ds.questions if q.supporting_passage_ids][: args.questions]
    by_id = {p.id: p for p in ds.corpus}
    ids = list(dict.fromkeys(p for q in qs for p in q.supporting_passage_ids if p in by_id))
    seen = set(ids)
    ids += [p.id for p in ds.corpus if p.id not in seen][: max(0, args.passages - len(ids))]
    report: dict = {
        "dataset": args.dataset,
        "questions": len(qs),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_start": os.getloadavg()},
        "modes": {},
    }
    with tempfile.TemporaryDirectory(dir=args.out_dir) as tmp:
        t = time.perf_counter()
        index = KnowledgeIndex.build([by_id[i] for i in ids], Path(tmp) / "index", builder="mentions", progress=False)
        report["build_s"] = round(time.perf_counter() - t, 1)
        g = index.graph
        report["index"] = {"passages": len(index.passages), "entities": g.num_entities, "triples": g.num_triples}
        print("index", report["index"], flush=True)
        mem = ActivationRetriever(index)
        mem.retrieve(qs[0].question, 5)  # warm-up (query embedder)
        ref, times = [], []
        for q in qs:
            t = time.perf_counter()
            ref.append(mem.retrieve(q.question, 5))
            times.append(time.perf_counter() - t)

        def recall(evs):
            return round(sum(recall_at_k([p.passage.id for p in e.passages], q.supporting_passage_ids, 5)
                             for e, q in zip(evs, qs)) / len(qs), 4)  # fmt: skip

        report["modes"]["memory"] = {"R@5": recall(ref), "p50_ms": _p(times, 0.5), "p95_ms": _p(times, 0.95)}
        print("memory", report["modes"]["memory"], flush=True)
        server = FalkorDBServer() if "falkordb" in args.backends else None
        try:
            for backend in args.backends:
                kg = kuzu_kg(Path(tmp) / "kuzu") if backend == "kuzu" else falkordb_kg(server.start(), graph="act")
                kg.load(g)
                view = index_view(index, kg.entity_table())
                for hops in [None, *args.hops]:
                    db = DBActivationRetriever(view, kg, hops=hops)
                    evs, times, sizes = [], [], []
                    for q in qs:
                        t = time.perf_counter()
                        evs.append(db.retrieve(q.question, 5))
                        times.append(time.perf_counter() - t)
                        sizes.append(evs[-1].trace["graph_db"]["entities"])
                    same = sum(
                        [p.passage.id for p in a.passages] == [p.passage.id for p in b.passages]
                        for a, b in zip(ref, evs)
                    )
                    key = f"{backend} hops={'exact' if hops is None else hops}"
                    report["modes"][key] = {
                        "top5_identical": round(same / len(qs), 4),
                        "R@5": recall(evs),
                        "p50_ms": _p(times, 0.5),
                        "p95_ms": _p(times, 0.95),
                        "entities_fetched_median": sorted(sizes)[len(sizes) // 2],
                        "entities_fetched_max": max(sizes),
                    }
                    print(key, report["modes"][key], flush=True)
        finally:
            if server is not None:
                server.stop()
    return finish(report, args.json)


if __name__ == "__main__":
    main()
