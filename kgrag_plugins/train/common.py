"""What the FRAG trainers share (:mod:`.hop`, :mod:`.path`): gold names -> graph rows, and a
hop-balanced sample of questions."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ..datasets.loaders import Question
from ..index.builders.names import name_key
from ..index.graph import KnowledgeGraph

__all__ = ["graph_rows", "sample_by_hops"]


def graph_rows(graph: KnowledgeGraph, names: Sequence[str], index: Any) -> list[int]:
    """Graph rows of ``names`` (entity ids, or names looked up by their name key in ``index``)."""
    out = []
    for n in names:
        eid = n if n in graph else index.get(name_key(n))
        if eid is not None:
            out.append(graph.index_of(eid))
    return out


def sample_by_hops(questions: list[Question], limit: int, rng: random.Random) -> list[Question]:
    """Up to ``limit`` questions, the same number from each hop count, shuffled."""
    by: dict[int, list[Question]] = {}
    for q in questions:
        by.setdefault(int(q.hops), []).append(q)
    per = max(1, limit // max(1, len(by)))
    out = [q for h in sorted(by) for q in rng.sample(by[h], min(per, len(by[h])))]
    rng.shuffle(out)
    return out
