"""``kgrag train hop-classifier``: train FRAG's hop classifier on hop-labelled questions.

Data: every dataset under ``KGRAG_DATA_DIR`` whose questions carry hop counts (MetaQA 1/2/3-hop,
MuSiQue 2/3/4-hop, 2Wiki 2/4, HotpotQA 2, PopQA 1). Each dataset is shuffled (seed 0), capped at
``limit`` questions (MetaQA balanced over its hops) and split into train / held-out parts; the
report gives accuracy and macro-F1 per dataset on the held-out part. The classifier's features and how
they were chosen (cross-validation on the train parts only): docs/frag.md "Hop classifier features".

**Label sources** (``labels=``, ``kgrag train hop-classifier --labels``). FRAG labels a question
by ``h_min``, the fewest KG hops from its topic entity to an answer entity: simple iff
``h_min <= δ = 2`` (FRAG §3 "Preliminary", §4.2; docs/methods.md §2(b)). :func:`hmin_hops` computes it
by breadth-first search over the KG, edges walked both ways as FRAG's pipelines here walk them,
from the topic to the *nearest* answer ("the minimum hops across all correct reasoning paths").
``"hmin"`` uses it where the dataset has a KG (MetaQA); datasets without one keep their own hop
counts, and the report says which source each dataset used. ``"dataset"`` (default) uses the
datasets' hop counts (the number of relations in the question's template). For KG datasets the
report gives held-out accuracy / macro-F1 against *both* label sources and their agreement.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from ..datasets.loaders import Question, load_dataset
from ..index.graph import KnowledgeGraph
from ..methods.frag.hop_classifier import COMPLEX, HopClassifier, strip_topic_marks
from .common import graph_rows, sample_by_hops

logger = logging.getLogger(__name__)

DEFAULT_DATASETS = ("metaqa", "musique", "2wikimultihopqa", "hotpotqa", "popqa")
LabelSource = Literal["dataset", "hmin"]
LABEL_SOURCES = ("dataset", "hmin")
#: Deepest search for h_min (MetaQA's questions have at most 3 hops, so h_min <= 3 there).
HMIN_MAX_HOPS = 4


def hmin_hops(
    graph: KnowledgeGraph, questions: Sequence[Question], *, max_hops: int = HMIN_MAX_HOPS
) -> list[int | None]:
    """FRAG's ``h_min`` per question (FRAG §3, §4.2): the fewest edges, walked in either direction,
    from the topic entity to the nearest gold answer entity, by breadth-first search. ``None`` when
    the topic or every answer is not in the graph, or no answer is within ``max_hops``. Names are
    resolved as the path ranker's labelling does (entity id, else normalised name/alias)."""
    from ..index.builders.linking import NameIndex
    from ..methods.frag.paths import PathGraph

    pg = PathGraph(graph, inverse=True)
    names = NameIndex.from_graph(graph)
    seen = np.zeros(pg.n, dtype=bool)
    out: list[int | None] = []
    for q in questions:
        topic = graph_rows(graph, [q.topic_entity] if q.topic_entity else [], names)
        answers = np.array(graph_rows(graph, q.answers, names), dtype=np.int64)
        if not topic or not len(answers):
            out.append(None)
            continue
        is_answer = np.zeros(pg.n, dtype=bool)
        is_answer[answers] = True
        frontier = np.unique(np.array(topic, dtype=np.int64))
        touched = [frontier]
        seen[frontier] = True
        found: int | None = 0 if is_answer[frontier].any() else None
        depth = 0
        while found is None and depth < max_hops and len(frontier):
            depth += 1
            pos, _ = pg.gather(frontier)
            nb = np.unique(pg.dst[pos])
            frontier = nb[~seen[nb]].astype(np.int64)
            seen[frontier] = True
            touched.append(frontier)
            if is_answer[frontier].any():
                found = depth
        for t in touched:
            seen[t] = False
        out.append(found)
    return out


def _label(q: Question, hmin: dict[str, int | None] | None) -> int:
    """The question's h_min when ``hmin`` is given (and known), else its dataset hop count."""
    h = hmin.get(q.id) if hmin is not None else None
    return int(q.hops or 0) if h is None else int(h)


def _binary(hops: Sequence[int], delta: int) -> list[int]:
    return [int(int(h) > delta) for h in hops]


def _scores(gold: Sequence[int], pred: Sequence[int]) -> dict[str, Any]:
    return {
        "n": len(gold),
        "complex_share": round(float(np.mean(gold)), 3) if gold else 0.0,
        "accuracy": round(float(np.mean([g == p for g, p in zip(gold, pred)])), 4) if gold else 0.0,
        "macro_f1": round(_macro_f1(gold, pred), 4),
    }


def hmin_summary(questions: Sequence[Question], hmin: dict[str, int | None], delta: int = 2) -> dict[str, Any]:
    """How h_min labels compare with the dataset's hop counts on ``questions``: ``agreement`` (share
    of questions whose simple/complex label is the same under both, among those with an h_min),
    ``unlabelled`` (no h_min) and ``by_dataset_hops`` (dataset hop count -> h_min -> count)."""
    pairs = [(int(q.hops or 0), hmin.get(q.id)) for q in questions]
    known = [(d, h) for d, h in pairs if h is not None]
    table: dict[str, dict[str, int]] = {}
    for d, h in known:
        row = table.setdefault(str(d), {})
        row[str(h)] = row.get(str(h), 0) + 1
    return {
        "agreement": round(float(np.mean([(d > delta) == (h > delta) for d, h in known])), 4) if known else 0.0,
        "n": len(known),
        "unlabelled": len(pairs) - len(known),
        "by_dataset_hops": {d: dict(sorted(r.items())) for d, r in sorted(table.items())},
    }


def _kg_hmin(name: str, kb_path: Path | None, questions: Sequence[Question]) -> dict[str, int | None] | None:
    """``{question id: h_min}`` for a dataset with a KG (``kb_path``), else ``None``."""
    if kb_path is None:
        return None
    from ..index.importers import load_kg

    graph, _ = load_kg(kb_path, "metaqa" if name.startswith("metaqa") else "tsv", progress=False)
    return {q.id: h for q, h in zip(questions, hmin_hops(graph, questions))}


def _macro_f1(gold: Sequence[int], pred: Sequence[int]) -> float:
    scores = []
    for c in (0, 1):
        tp = sum(1 for g, p in zip(gold, pred) if g == c and p == c)
        fp = sum(1 for g, p in zip(gold, pred) if g != c and p == c)
        fn = sum(1 for g, p in zip(gold, pred) if g == c and p != c)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def train_hop_classifier(
    out: str | Path,
    *,
    datasets: Sequence[str] = DEFAULT_DATASETS,
    data_dir: str | Path | None = None,
    limit: int = 2000,
    holdout: float = 0.3,
    embedder: Any = None,
    test_only: Sequence[str] = (),
    labels: LabelSource = "dataset",
) -> dict[str, Any]:
    """Train on the train parts of ``datasets``, evaluate on their held-out parts, save to ``out``.

    ``test_only`` datasets are evaluated on a sample of ``limit`` questions and never trained on
    (cross-dataset generalisation, e.g. train without MuSiQue, test on MuSiQue). MetaQA's
    ``[bracketed]`` topic marks are removed, as :class:`~kgrag_plugins.methods.frag.FRAGRetriever`
    removes them before routing. ``labels``: ``"dataset"`` hop counts or FRAG's ``"hmin"`` (see
    the module docstring); with ``"hmin"``, questions whose h_min cannot be computed are dropped
    and counted (``held_out[name]["hmin"]["unlabelled"]``, over the whole sample)."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    if labels not in LABEL_SOURCES:
        raise ValueError(f"labels must be one of {', '.join(LABEL_SOURCES)}, got {labels!r}")
    rng = random.Random(0)
    train: list[Question] = []
    train_hops: list[int] = []
    tests: dict[str, list[Question]] = {}
    hmins: dict[str, dict[str, int | None] | None] = {}
    sources: dict[str, str] = {}
    samples: dict[str, list[Question]] = {}
    overlap = set(datasets) & set(test_only)
    if overlap:
        raise ValueError(f"{sorted(overlap)} cannot be both trained on and test-only")
    for name in list(datasets) + list(test_only):
        ds = load_dataset(name, data_dir=data_dir)
        qs = [q for q in ds.questions if q.hops]
        if not qs:
            raise ValueError(f"dataset {name!r} has no hop-labelled questions")
        qs = sample_by_hops(qs, limit, rng)
        samples[name] = qs
        hmins[name] = hmin = _kg_hmin(name, ds.kb_path, qs)
        sources[name] = "hmin" if labels == "hmin" and hmin is not None else "dataset"
        if labels == "hmin" and hmin is None:
            logger.warning("%s has no KG to compute h_min: its own hop counts are used as labels", name)
        if sources[name] == "hmin":
            assert hmin is not None
            qs = [q for q in qs if hmin[q.id] is not None]
        cut = 0 if name in test_only else int(round(len(qs) * (1 - holdout)))
        train += qs[:cut]
        train_hops += [_label(q, hmin if sources[name] == "hmin" else None) for q in qs[:cut]]
        tests[name] = qs[cut:]
    clf = HopClassifier(embedder).fit([strip_topic_marks(q.question) for q in train], train_hops)
    report: dict[str, Any] = {"delta": clf.delta, "labels": labels, "n_train": len(train), "held_out": {}}
    for name, qs in tests.items():
        hmin = hmins[name]
        if not qs:
            continue
        pred = [int(p == COMPLEX) for p in clf.predict([strip_topic_marks(q.question) for q in qs])]
        by_dataset = _scores(_binary([int(q.hops) for q in qs], clf.delta), pred)
        row: dict[str, Any] = {"trained_on": name not in test_only, "label_source": sources[name]}
        if hmin is not None:
            ok = [i for i, q in enumerate(qs) if hmin[q.id] is not None]
            by_hmin = _scores(_binary([_label(qs[i], hmin) for i in ok], clf.delta), [pred[i] for i in ok])
            row["by_label_source"] = {"dataset": by_dataset, "hmin": by_hmin}
            row["hmin"] = hmin_summary(samples[name], hmin, clf.delta)
        row.update(by_hmin if sources[name] == "hmin" else by_dataset)  # the figures for the labels used
        report["held_out"][name] = row
    report["out"] = str(clf.save(out))
    return report
