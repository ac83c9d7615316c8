"""``kgrag train hop-classifier``: train FRAG's hop classifier on hop-labelled questions.

Data: every dataset under ``KGRAG_DATA_DIR`` whose questions carry hop counts (MetaQA 1/2/3-hop,
MuSiQue 2/3/4-hop, 2Wiki 2/4, HotpotQA 2, PopQA 1). Each dataset is shuffled (seed 0), capped at
``limit`` questions (MetaQA balanced over its hops) and split into train / held-out parts; the
report gives accuracy and macro-F1 per dataset on the held-out part.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..eval.datasets import Question, load_dataset
from ..methods.frag.hop_classifier import COMPLEX, HopClassifier, strip_topic_marks

DEFAULT_DATASETS = ("metaqa", "musique", "2wikimultihopqa", "hotpotqa", "popqa")


def _macro_f1(gold: Sequence[int], pred: Sequence[int]) -> float:
    scores = []
    for c in (0, 1):
        tp = sum(1 for g, p in zip(gold, pred) if g == c and p == c)
        fp = sum(1 for g, p in zip(gold, pred) if g != c and p == c)
        fn = sum(1 for g, p in zip(gold, pred) if g == c and p != c)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def _sample(questions: list[Question], limit: int, rng: random.Random) -> list[Question]:
    by: dict[int, list[Question]] = {}
    for q in questions:
        by.setdefault(int(q.hops), []).append(q)
    per = max(1, limit // max(1, len(by)))
    out = [q for h in sorted(by) for q in rng.sample(by[h], min(per, len(by[h])))]
    rng.shuffle(out)
    return out


def train_hop_classifier(
    out: str | Path,
    *,
    datasets: Sequence[str] = DEFAULT_DATASETS,
    data_dir: str | Path | None = None,
    limit: int = 2000,
    holdout: float = 0.3,
    embedder: Any = None,
    test_only: Sequence[str] = (),
) -> dict[str, Any]:
    """Train on the train parts of ``datasets``, evaluate on their held-out parts, save to ``out``.

    ``test_only`` datasets are evaluated on a sample of ``limit`` questions and never trained on
    (cross-dataset generalisation, e.g. train without MuSiQue, test on MuSiQue). MetaQA's
    ``[bracketed]`` topic marks are removed, as :class:`~kgrag_plugins.methods.frag.FRAGRetriever`
    removes them before routing."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    rng = random.Random(0)
    train: list[Question] = []
    tests: dict[str, list[Question]] = {}
    overlap = set(datasets) & set(test_only)
    if overlap:
        raise ValueError(f"{sorted(overlap)} cannot be both trained on and test-only")
    for name in list(datasets) + list(test_only):
        qs = [q for q in load_dataset(name, data_dir=data_dir).questions if q.hops]
        if not qs:
            raise ValueError(f"dataset {name!r} has no hop-labelled questions")
        qs = _sample(qs, limit, rng)
        cut = 0 if name in test_only else int(round(len(qs) * (1 - holdout)))
        train += qs[:cut]
        tests[name] = qs[cut:]
    clf = HopClassifier(embedder).fit([strip_topic_marks(q.question) for q in train], [int(q.hops) for q in train])
    report: dict[str, Any] = {"delta": clf.delta, "n_train": len(train), "held_out": {}}
    for name, qs in tests.items():
        if not qs:
            continue
        gold = [int(int(q.hops) > clf.delta) for q in qs]
        pred = [int(p == COMPLEX) for p in clf.predict([strip_topic_marks(q.question) for q in qs])]
        report["held_out"][name] = {
            "n": len(qs),
            "trained_on": name not in test_only,
            "complex_share": round(float(np.mean(gold)), 3),
            "accuracy": round(float(np.mean([g == p for g, p in zip(gold, pred)])), 4),
            "macro_f1": round(_macro_f1(gold, pred), 4),
        }
    report["out"] = str(clf.save(out))
    return report
