"""Measure LLM-free graph builds on a benchmark corpus (issue: graph builders acceptance).

First the embedding-only time: MiniLM over all passages, alone, in this process. Then for each
builder one fresh ``KnowledgeIndex.build(..., builder=B)`` (passage vectors included) into a
temp dir; reports wall time, graph time, passages/s, the ratio total build / embedding-only,
counts, and optionally the time to compute entity vectors on first use.

    .venv/bin/python benchmarks/graph_build.py --dataset musique --builders mentions,parsekg --json out.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kgrag_plugins.config import setup_offline_env
from kgrag_plugins.datasets import load_dataset
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.models.embed import default_embedder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="musique")
    ap.add_argument("--builders", default="mentions,parsekg")
    ap.add_argument("--limit-passages", type=int, default=None)
    ap.add_argument("--entity-vectors", action="store_true", help="also time entity vectors (first use)")
    ap.add_argument("--sequential", action="store_true", help="no overlap of embedding and spaCy")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    setup_offline_env()
    ds = load_dataset(args.dataset)
    passages = ds.corpus[: args.limit_passages] if args.limit_passages else ds.corpus
    emb = default_embedder()
    emb.embed(["warm-up"])
    out = {"dataset": ds.name, "passages": len(passages), "results": {}}
    t0 = time.perf_counter()
    emb.embed([p.embed_text for p in passages], progress=False)
    embed_only = time.perf_counter() - t0
    out["embedding_only_s"] = round(embed_only, 1)
    print(json.dumps({"embedding_only_s": out["embedding_only_s"]}), flush=True)
    for b in args.builders.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            idx = KnowledgeIndex.build(
                passages, Path(tmp) / "idx", builder=b, embedder=emb, progress=False, overlap=not args.sequential
            )
            total = time.perf_counter() - t0
            t = idx.manifest["timings"]
            r = {
                "total_s": round(total, 1),
                "embed_passages_s_in_build": round(t["embed_passages_s"], 1),
                "overlapped": not args.sequential,
                "graph_s": round(t["graph_s"], 1),
                "spacy_s": round(idx.manifest["build_stats"]["spacy_s"], 1),
                "passages_per_s": round(len(passages) / total, 1),
                "ratio_total_to_embedding": round(total / embed_only, 2),
                "counts": idx.counts,
            }
            if args.entity_vectors:
                t1 = time.perf_counter()
                _ = idx.entity_vectors
                r["entity_vectors_s"] = round(time.perf_counter() - t1, 1)
                r["ratio_with_entity_vectors"] = round((total + r["entity_vectors_s"]) / embed_only, 2)
            out["results"][b] = r
            print(json.dumps({b: r}), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
