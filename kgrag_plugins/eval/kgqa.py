"""KGQA benchmarks (MetaQA): FRAG's path retrieval scored against gold answer entities.

Protocol (``kgrag bench --dataset metaqa --retrievers frag,frag-simple,frag-complex``):

- Questions whose answers are not all reachable in the KB (``answers_reachable_in_kb`` < 1) or
  whose topic entity is not in it are excluded and counted.
- Evaluation: a balanced sample of ``per_hop`` questions per hop count (seed 0). Training: the
  hop classifier and the path ranker are fitted in-process on up to ``train_per_hop`` *other*
  questions per hop of the same split (never the evaluated ones), so the reported figures are
  held-out. Nothing is written but the report.
- Per retriever: ``hits@1`` (FRAG/RoG convention, :func:`~kgrag_plugins.eval.metrics.hits_at_1`,
  on the LLM-free answer: the end entity of the top path), ``answer_coverage@32`` (any gold
  answer among the entities on the returned paths, topic excluded), ``end_coverage@32`` (any
  gold answer among the paths' end entities), the same under ``by_hops``, latency p50/p95 per
  question (after one warm-up), and for routed retrievers the routing accuracy against the
  gold hop count (complex iff hops > 2).

Retrievers: ``frag`` (routed by the trained classifier, trained path ranker), ``frag-simple`` /
``frag-complex`` (one pipeline for every question, FRAG's ablation), ``frag-zeroshot`` (routed
by the heuristic, bi-encoder chain scores: nothing trained).
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..index.store import KnowledgeIndex
from ..methods.frag import FRAGRetriever
from ..methods.frag.hop_classifier import COMPLEX, HopClassifier, strip_topic_marks
from .datasets import Dataset, Question
from .metrics import hits_at_1, normalize_answer, percentile

KGQA_RETRIEVERS = ("frag", "frag-simple", "frag-complex", "frag-zeroshot")
COVERAGE_K = 32


def split_questions(
    dataset: Dataset, graph: Any, *, per_hop: int, train_per_hop: int, seed: int = 0
) -> tuple[list[Question], list[Question], dict[str, int]]:
    """``(evaluation sample, training questions, exclusion counts)``; see the module docstring."""
    excluded = {"answers_not_reachable_in_kb": 0, "topic_entity_not_in_kb": 0}
    by_hop: dict[int, list[Question]] = defaultdict(list)
    for q in dataset.questions:
        if float(q.metadata.get("answers_reachable_in_kb", 1.0)) < 1.0:
            excluded["answers_not_reachable_in_kb"] += 1
        elif q.topic_entity is not None and q.topic_entity not in graph:
            excluded["topic_entity_not_in_kb"] += 1
        else:
            by_hop[int(q.hops or 0)].append(q)
    rng = random.Random(seed)
    evaluation: list[Question] = []
    train: list[Question] = []
    for h in sorted(by_hop):
        qs = by_hop[h][:]
        rng.shuffle(qs)
        evaluation += qs[:per_hop]
        train += qs[per_hop : per_hop + train_per_hop]
    return evaluation, train, excluded


def _entity_names(retriever: FRAGRetriever, ev: Any) -> tuple[list[str], set[str]]:
    g = retriever.graph
    ends, on_path = [], set()
    for f in ev.facts:
        nodes = f.data.get("nodes", [])
        if nodes:
            ends.append(normalize_answer(g.name_of(nodes[-1])))
            on_path.update(normalize_answer(g.name_of(n)) for n in nodes[1:])
    return ends, on_path


def evaluate_kgqa(retriever: FRAGRetriever, questions: Sequence[Question], *, progress: bool = True) -> dict[str, Any]:
    """hits@1, answer/end coverage@32, per-hop figures, latency and routing of one retriever."""
    if questions:
        retriever.retrieve(questions[0].question, COVERAGE_K)  # warm-up
    rows: list[dict[str, Any]] = []
    for q in tqdm(questions, desc=retriever.name, disable=not progress, leave=False):
        t0 = time.perf_counter()
        ev = retriever.retrieve(q.question, COVERAGE_K)
        ms = (time.perf_counter() - t0) * 1000
        gold = {normalize_answer(a) for a in q.answers} - {""}
        ends, on_path = _entity_names(retriever, ev)
        answers = ev.trace.get("answers") or []
        rows.append(
            {
                "hops": int(q.hops or 0),
                "hits@1": hits_at_1(answers, q.answers),
                "answer_coverage@32": float(bool(gold & on_path)),
                "end_coverage@32": float(bool(gold & set(ends))),
                "ms": ms,
                "route_ok": float((ev.trace.get("route") == COMPLEX) == (int(q.hops or 0) > 2)),
                "complex": float(ev.trace.get("route") == COMPLEX),
            }
        )
    return _summarise(rows, routed=retriever.mode == "auto")


def _summarise(rows: list[dict[str, Any]], routed: bool) -> dict[str, Any]:
    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {
            m: round(float(np.mean([r[m] for r in rs])), 4) if rs else 0.0
            for m in ("hits@1", "answer_coverage@32", "end_coverage@32")
        }
        out["n"] = len(rs)
        out["routed_complex"] = round(float(np.mean([r["complex"] for r in rs])), 4) if rs else 0.0
        return out

    res = block(rows)
    res["latency_ms"] = {
        "p50": round(percentile([r["ms"] for r in rows], 50), 2),
        "p95": round(percentile([r["ms"] for r in rows], 95), 2),
    }
    if routed:
        res["routing_accuracy"] = round(float(np.mean([r["route_ok"] for r in rows])), 4) if rows else 0.0
    res["by_hops"] = {str(h): block([r for r in rows if r["hops"] == h]) for h in sorted({r["hops"] for r in rows})}
    return res


def run_kgqa_bench(
    dataset: Dataset,
    retrievers: Sequence[str],
    *,
    per_hop: int = 300,
    train_per_hop: int = 1000,
    embedder: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Load the dataset's KG, train on the training questions, evaluate ``retrievers``."""
    from ..index.importers import load_kg
    from ..models.embed import default_embedder
    from ..train.path import train_path_ranker

    unknown = [r for r in retrievers if r not in KGQA_RETRIEVERS]
    if unknown:
        raise ValueError(f"unknown KGQA retriever(s) {unknown}; available: {', '.join(KGQA_RETRIEVERS)}")
    if dataset.kb_path is None:
        raise ValueError(f"{dataset.name} has no knowledge graph (kb_path)")
    t0 = time.perf_counter()
    graph, load_report = load_kg(dataset.kb_path, "metaqa", progress=progress)
    index = KnowledgeIndex.build([], graph=graph, embedder=embedder or default_embedder(), progress=False)
    load_s = time.perf_counter() - t0
    evaluation, train, excluded = split_questions(dataset, graph, per_hop=per_hop, train_per_hop=train_per_hop)
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "task": "kgqa",
        "n_questions": len(evaluation),
        "n_train": len(train),
        "excluded": excluded,
        "kg": {"entities": graph.num_entities, "triples": graph.num_triples, "relations": len(graph.relations)},
        "kg_load_seconds": round(load_s, 2),
        "embedder": index.embedder.name,
        "results": {},
    }
    ranker = classifier = None
    needs_training = [r for r in retrievers if r != "frag-zeroshot"]
    if needs_training:
        t = time.perf_counter()
        ranker, ranker_report = train_path_ranker(graph, train, holdout=0.0, embedder=index.embedder, progress=progress)
        report["path_ranker"] = {**ranker_report, "seconds": round(time.perf_counter() - t, 2)}
        if "frag" in retrievers:
            t = time.perf_counter()
            texts = [strip_topic_marks(q.question) for q in train]  # as FRAG routes them
            classifier = HopClassifier(index.embedder).fit(texts, [int(q.hops) for q in train])
            report["hop_classifier"] = {"train": len(train), "seconds": round(time.perf_counter() - t, 2)}
    for name in retrievers:
        if name == "frag-zeroshot":
            r = FRAGRetriever(index)
            r.name = name
        elif name == "frag":
            r = FRAGRetriever(index, classifier=classifier, path_ranker=ranker)
        else:
            r = FRAGRetriever(index, mode=name.split("-")[1], path_ranker=ranker)  # type: ignore[arg-type]
        report["results"][name] = evaluate_kgqa(r, evaluation, progress=progress)
    return report


def kgqa_markdown_table(report: dict[str, Any]) -> str:
    """A KGQA report as a markdown table: overall and per-hop hits@1 / answer coverage@32."""
    hops = sorted({h for r in report["results"].values() for h in r["by_hops"]}, key=int)
    head = (
        f"**{report['dataset']}** (KGQA): {report['n_questions']} held-out questions "
        f"({', '.join(f'{h}-hop' for h in hops)}), KG {report['kg']['triples']} triples\n\n"
        "| retriever | Hits@1 | Coverage@32 | "
        + " | ".join(f"{h}-hop Hits@1 / Cov@32" for h in hops)
        + " | routing acc | p50 ms | p95 ms |\n|---|---|---|"
        + "---|" * len(hops)
        + "---|---|---|\n"
    )
    rows = []
    for name, r in report["results"].items():
        per_hop = " | ".join(
            f"{r['by_hops'][h]['hits@1']:.3f} / {r['by_hops'][h]['answer_coverage@32']:.3f}"
            if h in r["by_hops"]
            else "-"
            for h in hops
        )
        routing = f"{r['routing_accuracy']:.3f}" if "routing_accuracy" in r else "-"
        rows.append(
            f"| {name} | {r['hits@1']:.3f} | {r['answer_coverage@32']:.3f} | {per_hop} | {routing} | "
            f"{r['latency_ms']['p50']:.1f} | {r['latency_ms']['p95']:.1f} |"
        )
    return head + "\n".join(rows) + "\n"
