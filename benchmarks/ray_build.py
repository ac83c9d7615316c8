"""Ray vs single-process index build on the first N MuSiQue passages (issue 19 item 5; docs/ray.md).

In one process, back to back: (1) the per-passage rates the 10M-passage arithmetic of
docs/ray.md uses -- embedding only (default MiniLM, this process's torch threads) and the
``mentions`` builder's spaCy pass only (one process), both on warm models; (2) the
single-process ``KnowledgeIndex.build`` (models already loaded); (3) ``build_index_ray`` on a
local Ray with ``--num-cpus`` CPUs (started and stopped inside the timing, its workers load
their own models); then checks parity (entities, triples, links, passage ids, vectors within
1e-5) and writes JSON with the load average before and after.

``--llm-tokens`` only counts the extraction prompt tokens per passage of ``--builder llm``
(tiktoken ``cl100k_base``, as ``build_llm_graph`` counts them): the NER prompt exactly, the RE
prompt without its entity list (a lower bound; the list depends on the NER reply). No LLM runs.

    nice -n 5 .venv/bin/python benchmarks/ray_build.py --json docs/benchmarks/ray-build-2k.json
    .venv/bin/python benchmarks/ray_build.py --llm-tokens
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from kgrag_plugins.config import data_dir, setup_offline_env
from kgrag_plugins.datasets import load_corpus_jsonl
from kgrag_plugins.index.builders.nlp import load_spacy, parse_passages
from kgrag_plugins.index.ray_build import build_index_ray
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.models.embed import default_embedder


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def graph_snapshot(index: KnowledgeIndex) -> tuple:
    g = index.graph
    links = g.link_matrix().tocoo()
    return (
        [(e.id, e.name, tuple(e.aliases), e.description, e.type) for e in g.entities()],
        [(t.head, t.relation, t.tail, tuple(t.source_ids)) for t in g.triples()],
        g.passage_ids,
        sorted(zip(links.row.tolist(), links.col.tolist())),
        index.passages.ids,
    )


def llm_prompt_tokens(passages: list) -> dict[str, Any]:
    """Mean extraction prompt tokens per chunk and per passage (see the module doc)."""
    from kgrag_plugins.index.builders import prompts
    from kgrag_plugins.index.builders.llm_extract import _message_tokens, _token_counter, chunk_words

    count = _token_counter()
    ner, re_min = [], []
    for p in passages:
        for window in chunk_words(p.text, 500, 100):
            text = f"{p.title}\n{window}" if p.title else window
            ner.append(_message_tokens(prompts.ner_messages(text), count))
            re_min.append(_message_tokens(prompts.re_messages(text, []), count))
    return {
        "passages": len(passages),
        "chunks": len(ner),
        "ner_prompt_tokens_per_chunk": round(float(np.mean(ner)), 1),
        "re_prompt_tokens_per_chunk_without_entity_list": round(float(np.mean(re_min)), 1),
        "prompt_tokens_per_passage_lower_bound": round((sum(ner) + sum(re_min)) / len(passages), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="first N passages of musique/corpus.jsonl")
    ap.add_argument("--builder", default="mentions", choices=["mentions", "parsekg"])
    ap.add_argument("--num-cpus", type=int, default=os.cpu_count() or 1, help="CPUs of the local Ray")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--llm-tokens", action="store_true", help="only count LLM extraction prompt tokens")
    args = ap.parse_args()
    setup_offline_env()
    corpus = (args.data_dir or data_dir()) / "musique" / "corpus.jsonl"
    passages = load_corpus_jsonl(corpus)[: args.n]
    if args.llm_tokens:
        print(json.dumps(llm_prompt_tokens(passages), indent=2))
        return
    report: dict[str, Any] = {
        "corpus": f"first {len(passages)} passages of musique/corpus.jsonl",
        "builder": args.builder,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "ray_num_cpus": args.num_cpus,
        },
        "load_avg_start": load_avg(),
    }
    # (1) per-passage rates on warm models
    emb = default_embedder()
    load_spacy(args.builder == "parsekg")
    texts = [p.embed_text for p in passages]
    emb.embed(texts[:64], progress=False)
    t0 = time.perf_counter()
    emb.embed(texts, progress=False)
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in parse_passages(passages, parse=args.builder == "parsekg", progress=False, n_process=1):
        pass
    spacy_s = time.perf_counter() - t0
    import torch

    report["rates"] = {
        "embed_passages_per_s": round(len(passages) / embed_s, 1),
        "embed_seconds": round(embed_s, 2),
        "embed_torch_threads": torch.get_num_threads(),
        "spacy_passages_per_s_one_process": round(len(passages) / spacy_s, 1),
        "spacy_seconds": round(spacy_s, 2),
        "mean_chars_per_passage": round(float(np.mean([len(t) for t in texts])), 1),
    }
    print(json.dumps(report["rates"]), flush=True)
    work = Path(tempfile.mkdtemp(prefix="kgrag-ray-bench-"))
    try:
        # (2) single process, models warm
        t0 = time.perf_counter()
        single = KnowledgeIndex.build(passages, work / "single", builder=args.builder, progress=False)
        single_s = time.perf_counter() - t0
        report["single_process"] = {
            "wall_s": round(single_s, 2),
            "timings": {k: round(v, 2) for k, v in single.manifest["timings"].items()},
        }
        print(json.dumps({"single_wall_s": round(single_s, 2)}), flush=True)
        # (3) Ray, cold: ray.init, worker model loads and ray.shutdown are inside the timing
        t0 = time.perf_counter()
        dist = build_index_ray(
            passages,
            work / "ray",
            builder=args.builder,
            num_cpus=args.num_cpus,
            partitions=args.partitions,
            progress=False,
        )
        ray_s = time.perf_counter() - t0
        report["ray"] = {
            "wall_s": round(ray_s, 2),
            "engine": dist.manifest["engine"],
            "timings": {k: round(v, 2) for k, v in dist.manifest["timings"].items()},
        }
        print(json.dumps({"ray_wall_s": round(ray_s, 2)}), flush=True)
        same = graph_snapshot(single) == graph_snapshot(dist)
        diff = float(np.abs(single.passages.vectors - dist.passages.vectors).max())
        report["parity"] = {
            "identical_graph_and_passage_ids": same,
            "max_abs_vector_diff": diff,
            "vectors_within_1e-5": diff <= 1e-5,
            "counts": dist.counts,
        }
        report["ray_over_single_wall"] = round(ray_s / single_s, 3)
        report["load_avg_end"] = load_avg()
        single.close()
        dist.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if not (report["parity"]["identical_graph_and_passage_ids"] and report["parity"]["vectors_within_1e-5"]):
        raise SystemExit("parity check failed")


if __name__ == "__main__":
    main()
