"""``kgrag train kge``: KG embeddings for the Know³-RAG verifier (Know³-RAG §3.2; docs/methods.md §5(a)).

* ``--index DIR``: train on a saved index's graph and store the model in its live generation
  (``gen-<id>/kge/``, :func:`~kgrag_plugins.index.kge.kge_for_index`).
* ``--dataset metaqa``: the measured protocol of docs/kge.md. MetaQA's KB is loaded, the gold
  answer triples of ``questions`` (300) one-hop shared questions are held out (unseen by training),
  plus ``test_fraction`` (5 %) of the remaining triples (fixed seed; every held-out entity keeps a
  training triple). The model trains on the rest (its own validation split for early stopping
  comes out of that) and the report gives:

  - ``mrr`` / ``hits@1`` / ``hits@3`` / ``hits@10``: filtered, head and tail prediction, on a sample
    of ``test_sample`` held-out triples (``mrr_sample`` says how many), every KB triple filtered;
  - ``auc_raw`` / ``auc_relative`` / ``auc_type_rank`` / ``auc_verifier``: triple classification
    ROC-AUC of the held-out triples vs type-consistent corruptions (tail replaced by a random entity
    that is a tail of the same relation in the KB and forms no KB fact with the head); the
    verifier's known facts are the training triples;
  - ``answer_auc`` (default verifier) and ``answer_auc_<method>``: per question, the gold answer vs a
    random wrong answer of the same type, each scored as the triple ``(topic, r, answer)`` where
    ``r`` is the KB relation linking topic and gold answer (one of the gold triples, at random),
    taken as its reciprocal ``~r`` when the KB stores ``(answer, r, topic)`` (MetaQA keeps
    ``movie -> person``); the wrong answer is a random entity in the answer's position of ``r``
    that is neither a gold answer nor linked to the topic by ``r`` in the KB.
    ``answer_auc_topic_seen``: the same over the questions whose topic keeps a training triple
    (``answer_topics_unseen`` lost every triple with the held-out answers).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: One-hop questions whose answer triples are held out (``answer_auc``).
ANSWER_QUESTIONS = 300
#: Held-out share of the remaining KB triples (``mrr``, ``auc_*``).
TEST_FRACTION = 0.05
#: Held-out triples evaluated (filtered ranks and triple classification).
TEST_SAMPLE = 3000


class _ManifestEmbedder:
    """Stands in for the index's embedder when only the graph is needed (KGE training)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def embed(self, texts: Any, *, progress: Any = None) -> np.ndarray:
        raise RuntimeError("kgrag train kge opened the index without its embedder; nothing should embed")


def train_kge_index(index_dir: str | Path, *, progress: bool = True, **train_kwargs: Any) -> dict[str, Any]:
    """Train a KGE on a saved index's graph and store it in the live generation (replacing any)."""
    from ..index.kge import CORPUS_BUILDERS, KGE_DIR
    from ..index.store import KnowledgeIndex, read_manifest
    from ..models.kge import train_kge

    manifest = read_manifest(index_dir)
    emb = manifest.get("embedder") or {}
    with KnowledgeIndex.open(index_dir, embedder=_ManifestEmbedder(emb.get("name"), int(emb.get("dim", 0)))) as index:
        if not index.graph.num_triples:
            raise ValueError(f"the index in {index_dir} has no graph triples to train a KG embedding on")
        train_kwargs.setdefault("canonicalize", index.manifest.get("builder") in CORPUS_BUILDERS)
        model, report = train_kge(index.graph, progress=progress, **train_kwargs)
        path = index.derived_path(KGE_DIR)
        if path is None:  # pragma: no cover - an opened index always has a generation
            raise ValueError(f"{index_dir} has no live generation")
        model.save(path)
    report = {k: v for k, v in report.items() if k != "history"} | {"history": report["history"]}
    return {"index": str(index_dir), "saved": str(path), **report}


def _question_triples(graph: Any, idx: np.ndarray, questions: list[Any], rng: np.random.Generator) -> list[dict]:
    """Per usable one-hop question: its gold KB triples (row indices) and the scored triple."""
    h, t = idx[:, 0], idx[:, 2]
    order = np.argsort(h, kind="stable")
    order_t = np.argsort(t, kind="stable")
    out = []
    for q in questions:
        if not q.topic_entity or q.topic_entity not in graph:
            continue
        topic = graph.index_of(q.topic_entity)
        answers = {graph.index_of(a) for a in q.answers if a in graph}
        if not answers:
            continue
        a0, b0 = np.searchsorted(h[order], topic, "left"), np.searchsorted(h[order], topic, "right")
        a1, b1 = np.searchsorted(t[order_t], topic, "left"), np.searchsorted(t[order_t], topic, "right")
        rows = [int(i) for i in order[a0:b0] if t[i] in answers] + [int(i) for i in order_t[a1:b1] if h[i] in answers]
        if not rows:
            continue
        first = rows[int(rng.integers(len(rows)))]
        out.append({"question": q, "topic": topic, "answers": answers, "rows": rows, "scored": first})
    return out


def _answer_pair(
    idx: np.ndarray, q: dict, by_rel: dict, known: Any, rel_row: int, num_relations: int, rng: np.random.Generator
) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """The question's scored triple as ``(topic, r, answer)`` in KGE rows (``r`` is the reciprocal
    row ``R + r`` when the KB stores ``(answer, r, topic)``) and the same triple with a random wrong
    answer of the same type: an entity in the answer's position of ``r`` that is neither a gold
    answer nor linked to the topic by ``r`` in the KB."""
    h, r, t = (int(x) for x in idx[q["scored"]])
    topic = q["topic"]
    answer_is_tail = h == topic
    pool = by_rel[("t" if answer_is_tail else "h", r)]
    row = rel_row if answer_is_tail else rel_row + num_relations
    for _ in range(100):
        x = int(pool[rng.integers(len(pool))])
        if x in q["answers"] or x == topic:
            continue
        kh, kt = (h, x) if answer_is_tail else (x, t)
        if not known.contains(np.array([kh]), np.array([r]), np.array([kt]))[0]:
            return (topic, row, t if answer_is_tail else h), (topic, row, x)
    return None


@dataclass
class MetaQASplit:
    """The MetaQA KB split of the module docstring (rows of ``idx`` = distinct KB triples over the
    graph's entity rows and relation ids)."""

    entity_ids: list[str]
    relations: list[str]
    idx: np.ndarray
    train_mask: np.ndarray
    test_rows: np.ndarray
    answer_rows: np.ndarray
    questions: list[dict]
    seed: int

    def train_triples(self) -> list[tuple[str, str, str]]:
        ents, rels = self.entity_ids, self.relations
        return [(ents[a], rels[b], ents[c]) for a, b, c in self.idx[self.train_mask]]


def metaqa_split(
    data_dir: str | Path | None = None,
    *,
    questions: int = ANSWER_QUESTIONS,
    test_fraction: float = TEST_FRACTION,
    seed: int = 0,
    progress: bool = True,
) -> MetaQASplit:
    """Load MetaQA's KB and hold out the answer triples of ``questions`` one-hop questions plus
    ``test_fraction`` of the rest (fixed ``seed``)."""
    from ..datasets.loaders import load_dataset
    from ..index.importers import load_kg
    from ..models.kge_eval import split_holdout

    ds = load_dataset("metaqa-1hop", data_dir)
    graph, _ = load_kg(ds.kb_path, "metaqa", progress=progress)
    h, r, t = graph.triple_arrays()
    idx = np.unique(np.stack([h, r, t], axis=1).astype(np.int64), axis=0)
    rng = np.random.default_rng(seed)
    qs = _question_triples(graph, idx, list(ds.questions), rng)
    pick = sorted(rng.choice(len(qs), size=min(questions, len(qs)), replace=False).tolist())
    qs = [qs[i] for i in pick]
    answer_rows = np.zeros(len(idx), dtype=bool)
    for q in qs:
        answer_rows[q["rows"]] = True
    rest = np.flatnonzero(~answer_rows)
    test_rows = rest[split_holdout(idx[rest], test_fraction, seed=seed)]
    train_mask = ~answer_rows
    train_mask[test_rows] = False
    log.info(
        "metaqa kge: %d train, %d test, %d answer triples held out", train_mask.sum(), len(test_rows), answer_rows.sum()
    )
    return MetaQASplit(graph.entity_ids, graph.relations, idx, train_mask, test_rows, answer_rows, qs, seed)


def evaluate_metaqa(
    model: Any, split: MetaQASplit, *, test_sample: int = TEST_SAMPLE, progress: bool = True
) -> dict[str, Any]:
    """Filtered link prediction, triple classification and answer AUCs of ``model`` on ``split``."""
    from ..methods.know3.scoring import DEFAULT_METHOD, METHODS, TripleVerifier
    from ..models.kge_eval import KnownTails, roc_auc

    ents, rels, idx = split.entity_ids, split.relations, split.idx
    n, m = len(ents), len(rels)
    rng = np.random.default_rng(split.seed + 1)
    if list(model.entity_ids) != list(ents):
        raise ValueError("the model's entity rows differ from the MetaQA graph's")
    rmap = np.array([model.relation_row(x) for x in rels], dtype=np.int64)
    known_all = KnownTails(idx, n, m)
    # filtered link prediction on a sample of the held-out triples, every KB triple filtered
    sample = rng.choice(split.test_rows, size=min(test_sample, len(split.test_rows)), replace=False)
    test = idx[sample].copy()
    test[:, 1] = rmap[test[:, 1]]
    t0 = time.perf_counter()
    lp = model.evaluate(test, known_all, progress=progress)
    eval_seconds = time.perf_counter() - t0
    # triple classification: held-out vs type-consistent corruptions (verifier = training triples)
    t0 = time.perf_counter()
    triples = split.train_triples()
    verifier = TripleVerifier(model, triples, method=DEFAULT_METHOD)  # score_rows gives all three scores
    both_sides = TripleVerifier(model, triples, method="type_rank", sides="both")
    tails_of = {rr: np.unique(idx[idx[:, 1] == rr, 2]) for rr in range(m)}
    heads_of = {rr: np.unique(idx[idx[:, 1] == rr, 0]) for rr in range(m)}
    by_rel = {("t", rr): tails_of[rr] for rr in range(m)} | {("h", rr): heads_of[rr] for rr in range(m)}
    pos_rows, neg_rows = [], []
    for a, b, c in idx[sample]:
        pool = tails_of[int(b)]
        for _ in range(100):
            x = int(pool[rng.integers(len(pool))])
            if x != c and not known_all.contains(np.array([a]), np.array([b]), np.array([x]))[0]:
                pos_rows.append((a, rmap[b], c))
                neg_rows.append((a, rmap[b], x))
                break
    pos, neg = np.array(pos_rows), np.array(neg_rows)
    aucs = _aucs(verifier, pos, neg, METHODS, roc_auc, "auc")
    aucs["auc_type_rank_both"] = _aucs(both_sides, pos, neg, ["type_rank"], roc_auc, "x")["x_type_rank"]
    n_class = len(pos_rows)
    # answer AUC on the held-out questions (and on those whose topic keeps a training triple)
    train_idx = idx[split.train_mask]
    deg = np.bincount(np.r_[train_idx[:, 0], train_idx[:, 2]], minlength=n)
    pos_rows, neg_rows, seen = [], [], []
    for q in split.questions:
        pair = _answer_pair(idx, q, by_rel, known_all, int(rmap[idx[q["scored"], 1]]), model.num_relations, rng)
        if pair is not None:
            pos_rows.append(pair[0])
            neg_rows.append(pair[1])
            seen.append(deg[q["topic"]] > 0)
    pos, neg, seen_a = np.array(pos_rows), np.array(neg_rows), np.array(seen, dtype=bool)
    answer = _aucs(verifier, pos, neg, METHODS, roc_auc, "answer_auc")
    answer["answer_auc_type_rank_both"] = _aucs(both_sides, pos, neg, ["type_rank"], roc_auc, "x")["x_type_rank"]
    if seen_a.any():
        answer["answer_auc_topic_seen"] = _aucs(verifier, pos[seen_a], neg[seen_a], [DEFAULT_METHOD], roc_auc, "x")[
            f"x_{DEFAULT_METHOD}"
        ]
    return {
        **{k: round(v, 4) for k, v in lp.items() if k != "queries"},
        "mrr_sample": int(len(test)),
        "mrr_queries": lp["queries"],
        **aucs,
        "auc_verifier": aucs[f"auc_{DEFAULT_METHOD}"],
        "verifier_method": DEFAULT_METHOD,
        "answer_auc": answer[f"answer_auc_{DEFAULT_METHOD}"],
        **answer,
        "classification_pairs": n_class,
        "answer_pairs": len(pos_rows),
        "answer_topics_unseen": int((~seen_a).sum()),
        "eval_seconds": round(eval_seconds, 1),
        "classify_seconds": round(time.perf_counter() - t0, 1),
    }


def train_kge_metaqa(
    out: str | Path | None,
    *,
    data_dir: str | Path | None = None,
    questions: int = ANSWER_QUESTIONS,
    test_fraction: float = TEST_FRACTION,
    test_sample: int = TEST_SAMPLE,
    seed: int = 0,
    progress: bool = True,
    **train_kwargs: Any,
) -> dict[str, Any]:
    """The MetaQA protocol of the module docstring; saves the model to ``out`` (when given)."""
    from ..models.kge import train_kge

    t_start = time.perf_counter()
    split = metaqa_split(data_dir, questions=questions, test_fraction=test_fraction, seed=seed, progress=progress)
    model, report = train_kge(
        split.train_triples(), entity_ids=split.entity_ids, progress=progress, seed=seed, **train_kwargs
    )
    if out is not None:
        model.save(out)
    ev = evaluate_metaqa(model, split, test_sample=test_sample, progress=progress)
    return {
        "dataset": "metaqa",
        "out": str(out) if out is not None else None,
        "model": report["model"],
        "dim": report["dim"],
        "lr": report["lr"],
        "epochs": report["epochs"],
        "epochs_run": report["epochs_run"],
        "best_epoch": report["best_epoch"],
        "train_seconds": report["train_seconds"],
        "valid_mrr": report["valid_mrr"],
        **ev,
        "num_triples": int(len(split.idx)),
        "num_train_triples": int(split.train_mask.sum()),
        "num_test_triples": int(len(split.test_rows)),
        "num_answer_triples": int(split.answer_rows.sum()),
        "num_questions": len(split.questions),
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "train": {k: v for k, v in report.items() if k not in ("model", "dim", "lr", "epochs")},
    }


def _aucs(v: Any, pos: np.ndarray, neg: np.ndarray, methods: Any, roc_auc: Any, prefix: str) -> dict[str, float]:
    """ROC-AUC per verifier score (lower score = more plausible, so the AUC ranks ``-score``)."""
    sp, sn = v.score_rows(pos.reshape(-1, 3)), v.score_rows(neg.reshape(-1, 3))
    out = {}
    for meth in methods:
        a = -sp["raw"] if meth == "raw" else sp[meth]  # verifier values: lower = more plausible
        b = -sn["raw"] if meth == "raw" else sn[meth]
        out[f"{prefix}_{meth}"] = round(float(roc_auc(-a, -b)), 4)
    return out
