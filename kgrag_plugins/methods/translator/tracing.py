"""Clue tracing and ranking (KG-Translator §3.4 Eq. 8-10, App. J Alg. 2).

Eq. 8: the sentences of a clue (ê, r̂) are those whose hyperrelation r_s *contains* r̂ (r̂ is a
span, so "r̂ = r_s" is read as "substring", docs/methods.md §3(a) step 6) and in which ê takes the
right role: **head** for a forward clue (r_s ∈ R⁺(ê)), **tail** for a reverse clue (R⁻).
Eq. 9: their passages. Eq. 10: passages ranked by MiniLM cosine to the question (the passage
vectors stored in the index, no re-embedding), top k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np


@dataclass
class Clue:
    """One (entity, relation) clue and what it traced to."""

    entity: str
    name: str
    relation: str
    direction: str = "forward"
    score: float = 0.0
    sentences: list[int] = field(default_factory=list)
    passage_ids: list[str] = field(default_factory=list)
    step: int = 0
    #: sentence id -> the full hyperrelation it traced through (``relation`` is a span of it); what
    #: says which entity mention fills which ``##`` slot when the clue is shown with names.
    hyperrelations: dict[int, str] = field(default_factory=dict)


def trace_clue(parsekg: Any, clue: Clue) -> Clue:
    """Fill ``clue.sentences`` / ``clue.passage_ids`` / ``clue.hyperrelations`` (Eq. 8-9); returns the clue."""
    role = "head" if clue.direction == "forward" else "tail"
    hypers = parsekg.out_hyperrelations(clue.entity) if role == "head" else parsekg.in_hyperrelations(clue.entity)
    rel = " ".join(clue.relation.split())
    sents: list[int] = []
    texts: dict[int, str] = {}
    for h in hypers:
        text = parsekg.hyperrelation(h)
        if rel and rel in " ".join(text.split()):
            found = parsekg.sentences_of(h, clue.entity, role)
            sents.extend(found)
            for s in found:
                texts.setdefault(s, text)
    clue.sentences = list(dict.fromkeys(sents))
    clue.hyperrelations = texts
    clue.passage_ids = parsekg.passages_of(clue.sentences) if clue.sentences else []
    return clue


def rank_passages(index: Any, qvec: np.ndarray, passage_ids: Iterable[str]) -> list[tuple[str, float]]:
    """``(passage id, cosine)`` best first (Eq. 10); ids the store does not hold are dropped."""
    store = index.passages
    ids = [p for p in dict.fromkeys(passage_ids) if p in store]
    if not ids:
        return []
    pos = np.array([store.position(p) for p in ids], dtype=np.int64)
    sims = store.dense_scores(np.asarray(qvec, dtype=np.float32), pos)  # a long passage: its best window
    order = np.argsort(-sims, kind="stable")
    return [(ids[i], float(sims[i])) for i in order]


def clue_passages(clues: Sequence[Clue]) -> list[str]:
    """Passage ids of all clues, first-seen order."""
    return list(dict.fromkeys(p for c in clues for p in c.passage_ids))
