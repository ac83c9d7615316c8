"""``kgrag train path-ranker``: weakly supervised relation-chain ranker for FRAG on a KGQA set.

For each training question (topic entity + gold answers, e.g. MetaQA), the label is the relation
chain from the topic whose end set best matches the answers
(:func:`~kgrag_plugins.methods.frag.path_ranker.best_chains`); the ranker learns question -> chain
(MiniLM embedding plus hashed word features).
The report gives, on held-out questions, how often the predicted chain equals the label chain.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..config import progress_enabled
from ..datasets.loaders import Question, load_dataset
from ..index.graph import KnowledgeGraph
from ..methods.frag.path_ranker import (
    HUB_CAP,
    Chain,
    PathRanker,
    best_chains,
    chain_ends,
    chain_key,
    relation_query,
)
from .common import graph_rows, sample_by_hops

#: Hashed word uni/bigram features of the ranker. Chosen with ``ties="set"`` on the
#: training split of the MetaQA bench (2,996 labelled questions, 80/20 inside it); chain accuracy
#: on the 20 % (1-hop / 2-hop / 3-hop): embedding only, uniform ties 0.980 / 0.952 / 0.953;
#: +1024 word features 0.980 / 0.956 / 0.953; embedding only, set ties 0.980 / 0.952 / 0.953;
#: both 0.980 / 0.961 / 0.953.
LEXICAL_DIM = 1024
#: ``kgrag train path-ranker``'s default question count (balanced over hops): 3,000 per MetaQA hop
#: count, as the KGQA bench trains (``eval.kgqa.TRAIN_PER_HOP``; 1,000 per hop in earlier releases).
PATH_RANKER_LIMIT = 9000


def _search_graph(graph: KnowledgeGraph) -> tuple[Any, Any]:
    """The path graph (both directions) and name index the label search reads."""
    from ..index.builders.linking import NameIndex
    from ..methods.frag.paths import PathGraph

    return PathGraph(graph, inverse=True), NameIndex.from_graph(graph)


def _label_search(
    graph: KnowledgeGraph, pg: Any, names: Any, q: Question, max_hops: int, hub_cap: int
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...]], float]:
    """``(topic rows, answer rows, best chains, F1)`` of one question (:func:`best_chains`; the
    question's ``hops`` restricts the length when known); no chains when the topic is unknown."""
    topic = np.array(graph_rows(graph, [q.topic_entity] if q.topic_entity else [], names), dtype=np.int64)
    answers = np.unique(np.array(graph_rows(graph, q.answers, names), dtype=np.int64))
    if not len(topic):
        return topic, answers, [], 0.0
    hops = q.hops if q.hops and q.hops <= max_hops else None
    best, f1 = best_chains(pg, topic, answers, max_hops=max_hops, hops=hops, hub_cap=hub_cap)
    return topic, answers, best, f1


def label_questions(
    graph: KnowledgeGraph,
    questions: Sequence[Question],
    *,
    max_hops: int = 3,
    hub_cap: int = HUB_CAP,
    min_f1: float = 0.1,
    progress: bool = True,
) -> tuple[list[str], list[list[Chain]], list[Question], dict[str, int]]:
    """``(relation queries, label chains (ties kept), the labelled questions, counts)`` for
    questions with a topic entity in the graph and a chain reaching their answers (F1 ≥
    ``min_f1``); the question's ``hops`` restricts the chain length when known."""
    pg, names = _search_graph(graph)
    rels = graph.relations
    R = len(rels)
    queries: list[str] = []
    chains: list[list[Chain]] = []
    kept: list[Question] = []
    counts = {"questions": len(questions), "no_topic": 0, "no_chain": 0, "labelled": 0}
    for q in tqdm(questions, desc="labelling chains", disable=not progress_enabled(progress), leave=False):
        topic, _, best, f1 = _label_search(graph, pg, names, q, max_hops, hub_cap)
        if not len(topic):
            counts["no_topic"] += 1
            continue
        if not best or f1 < min_f1:
            counts["no_chain"] += 1
            continue
        counts["labelled"] += 1
        queries.append(relation_query(q.question, [q.topic_entity or ""]))
        chains.append([chain_key([rels[r % R] for r in c], [r >= R for r in c]) for c in best])
        kept.append(q)
    return queries, chains, kept, counts


def answer_ceiling(graph: KnowledgeGraph, questions: Sequence[Question], *, max_hops: int = 3) -> list[float | None]:
    """Per question, the expected Hits@1 of an oracle that follows the question's label chain
    (:func:`label_questions`' chains) and answers with one of its ends at random:
    ``max(|answers ∩ ends| / |ends|)`` over the tied label chains; ``None`` when unlabelled.

    Below 1 where the KB gives the asked relation more ends than the gold answers. On MetaQA
    that is its merged same-title films: "who directed [The Italian Job]" reaches both films'
    directors in the KB (one node per title), the gold names one film's (docs/frag.md). No
    method that reads only the question and the KB can tell such answers apart, so the mean of
    this figure bounds Hits@1 in expectation."""
    pg, names = _search_graph(graph)
    out: list[float | None] = []
    for q in questions:
        topic, answers, best, _ = _label_search(graph, pg, names, q, max_hops, HUB_CAP)
        ratios = [len(np.intersect1d(e, answers)) / len(e) for e in (chain_ends(pg, topic, c) for c in best) if len(e)]
        out.append(max(ratios) if ratios else None)
    return out


def train_path_ranker(
    graph: KnowledgeGraph,
    questions: Sequence[Question],
    *,
    holdout: float = 0.2,
    embedder: Any = None,
    seed: int = 0,
    progress: bool = True,
    lexical_dim: int = LEXICAL_DIM,
    ties: str = "set",
) -> tuple[PathRanker, dict[str, Any]]:
    """Label, split (``holdout`` of the labelled questions held out), train; return the ranker
    (trained on the train part) and a report with held-out chain accuracy. ``lexical_dim``: the
    ranker's hashed word features (0 = embedding only, as in earlier releases); ``ties``: how tied label
    chains train (:meth:`PathRanker.fit`; ``"uniform"`` in earlier releases)."""
    qs, chains, _, counts = label_questions(graph, questions, progress=progress)
    order = list(range(len(qs)))
    random.Random(seed).shuffle(order)
    n_test = int(len(order) * holdout)
    test, train = order[:n_test], order[n_test:]
    ranker = PathRanker(embedder, lexical_dim=lexical_dim, ties=ties)
    vecs = np.asarray(ranker._embedder().embed(qs, progress=progress), dtype=np.float64) if qs else np.zeros((0, 1))
    ranker.fit([qs[i] for i in train], [chains[i] for i in train], vectors=vecs[train])
    report: dict[str, Any] = {**counts, "train": len(train), "held_out": len(test), "chains": len(ranker)}
    if test:
        logits = ranker.logits(vecs[test], [qs[i] for i in test])
        pred = [ranker.chains[int(i)] for i in logits.argmax(axis=1)]
        report["held_out_chain_accuracy"] = round(float(np.mean([p in chains[i] for p, i in zip(pred, test)])), 4)
    return ranker, report


def train_path_ranker_cli(
    out: str | Path,
    *,
    dataset: str = "metaqa",
    data_dir: str | Path | None = None,
    limit: int = PATH_RANKER_LIMIT,
    holdout: float = 0.2,
    embedder: Any = None,
) -> dict[str, Any]:
    """Train on up to ``limit`` questions of a KGQA dataset (balanced over hops), save to ``out``."""
    from ..index.importers import load_kg

    ds = load_dataset(dataset, data_dir=data_dir)
    if ds.kb_path is None:
        raise ValueError(f"{dataset} has no knowledge graph (kb_path); path rankers need a KGQA dataset")
    graph, _ = load_kg(ds.kb_path, format="metaqa" if dataset.startswith("metaqa") else "tsv", progress=False)
    sample = sample_by_hops([q for q in ds.questions if q.hops], limit, random.Random(0))
    ranker, report = train_path_ranker(graph, sample, holdout=holdout, embedder=embedder)
    ranker.save(out)
    return {"dataset": dataset, "out": str(out), **report}
