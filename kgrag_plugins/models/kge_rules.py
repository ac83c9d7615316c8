"""Horn rules mined from a KG, to rank missing links beside a KG embedding (issue 35, item 2).

An incomplete KG keeps evidence a KG embedding reads poorly: a film whose ``directed_by`` edge
was lost often still has the same person as ``written_by``, or a tag spelling the director's
name (MetaQA tags ``tom hanks`` films that star ``Tom Hanks``). :class:`PathRules` mines
AnyBURL-style cyclic rules (Meilicke et al., IJCAI 2019) from the triples, bottom-up and exact
by sparse matrix products:

- length 1: ``r(x, y) <= b(x, y)``;
- length 2: ``r(x, y) <= b1(x, z), b2(z, y)``;
- name equivalence: ``b`` followed or preceded by ``same_name(z, y)``, which links two distinct
  entities whose names are equal after case and whitespace folding (a tag and a person).

Relations are signed: ``r`` for ``0 <= r < R`` and its inverse ``r + R`` (the KGE's reciprocal
rows, FRAG's ``~r``). A rule's confidence is ``support / (body pairs + pseudo_count)`` (AnyBURL's
pessimistic confidence), over body pairs with ``x != y``; rules with fewer than ``min_support``
correct predictions are dropped. A candidate's rule score is the largest confidence of the rules
that predict it (AnyBURL's max aggregation; noisy-or measured no better on MetaQA).

:func:`rule_augmented_scores` ranks rule-predicted entities first ("rules first": a large
``rule_weight`` times the confidence) and orders the rest, and ties, by the KGE's log-softmax
plus a role-frequency prior ``prior_weight * log(1 + count)``. docs/kge.md measures it on MetaQA's
half KB. Pure numpy / scipy: mining MetaQA's half KB takes about 1.3 s.
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["PathRules", "Rule", "name_key", "role_counts", "rule_augmented_scores", "signed_adjacency"]

#: Body token for the name-equivalence relation.
SAME_NAME = "same_name"
#: Name groups larger than this are not linked (a name shared by that many entities says little).
MAX_NAME_GROUP = 20


def name_key(name: str) -> str:
    """Case- and whitespace-folded name (the ``same_name`` relation's key)."""
    return re.sub(r"\s+", " ", str(name).casefold()).strip()


@dataclass(frozen=True)
class Rule:
    """``head(x, y) <= body``; ``head`` and the body's relations are signed rows (``r + R`` =
    inverse), :data:`SAME_NAME` the name-equivalence step."""

    head: int
    body: tuple[int | str, ...]
    support: int
    body_size: int
    confidence: float

    def describe(self, relations: Sequence[str]) -> str:
        """Readable form, e.g. ``directed_by(x,y) <= written_by(x,y)`` (``~r`` = inverse)."""

        def lab(s: int | str) -> str:
            if s == SAME_NAME:
                return SAME_NAME
            i = int(s)
            R = len(relations)
            return relations[i] if i < R else "~" + relations[i - R]

        vars_ = ["x"] + [f"z{i}" for i in range(1, len(self.body))] + ["y"]
        atoms = [f"{lab(b)}({vars_[i]},{vars_[i + 1]})" for i, b in enumerate(self.body)]
        stats = f"[conf {self.confidence:.3f}, {self.support}/{self.body_size}]"
        return f"{lab(self.head)}(x,y) <= {', '.join(atoms)}  {stats}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "body": list(self.body),
            "support": self.support,
            "body_size": self.body_size,
            "confidence": round(self.confidence, 6),
        }


class PathRules:
    """Rules mined from one KG (:meth:`mine`); :meth:`confidences` scores candidate tails."""

    def __init__(self, rules: Sequence[Rule], bodies: dict[tuple, Any], num_entities: int, num_relations: int) -> None:
        self.num_entities, self.num_relations = int(num_entities), int(num_relations)
        self._by_head: dict[int, list[Rule]] = defaultdict(list)
        for rule in sorted(rules, key=lambda x: -x.confidence):
            self._by_head[rule.head].append(rule)
        self._bodies = bodies
        self.mine_seconds = 0.0
        #: the keyword options :meth:`mine` was called with (``names`` aside), so the same rules
        #: can be mined again from another graph (:meth:`ChainCompleter.rebased`)
        self.options: dict[str, Any] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_head.values())

    @property
    def rules(self) -> list[Rule]:
        return [r for h in sorted(self._by_head) for r in self._by_head[h]]

    def rules_for(self, signed_relation: int) -> list[Rule]:
        """The rules predicting ``signed_relation``, most confident first."""
        return list(self._by_head.get(int(signed_relation), []))

    # ------------------------------------------------------------------ mining
    @classmethod
    def mine(
        cls,
        heads: np.ndarray,
        relations: np.ndarray,
        tails: np.ndarray,
        *,
        num_entities: int,
        num_relations: int,
        names: Sequence[str] | None = None,
        max_length: int = 2,
        min_support: int = 10,
        pseudo_count: float = 5.0,
        min_confidence: float = 0.01,
        max_body: int = 5_000_000,
    ) -> "PathRules":
        """Mine rules from triples given as entity / relation rows (``0 <= r < num_relations``).

        ``names`` (one per entity row) adds the ``same_name`` relation; ``max_length`` is 1 or 2
        (length 3 was measured worse on MetaQA's half KB: more, noisier rules); bodies with more
        than ``max_body`` pairs are skipped (memory)."""
        if max_length not in (1, 2):
            raise ValueError(f"max_length must be 1 or 2, got {max_length!r}")
        h, r, t = (np.asarray(a, dtype=np.int64) for a in (heads, relations, tails))
        if not (len(h) == len(r) == len(t)):
            raise ValueError("heads, relations and tails must have the same length")
        n, R = int(num_entities), int(num_relations)
        if len(h) and (h.max() >= n or t.max() >= n or r.max() >= R or min(h.min(), t.min(), r.min()) < 0):
            raise ValueError("triple rows out of range for num_entities / num_relations")
        if names is not None and len(names) != n:
            raise ValueError(f"names has {len(names)} entries for {n} entities")
        t0 = time.perf_counter()

        A = signed_adjacency(h, r, t, n, R)
        S = _same_name_matrix(names, n) if names is not None else None

        def inverse(b: int) -> int:
            return (b + R) % (2 * R)

        def bodies() -> Iterator[tuple[tuple, Any]]:
            for b in range(2 * R):
                yield (b,), A[b]
                if S is not None and S.nnz:
                    yield (b, SAME_NAME), A[b] @ S
                    yield (SAME_NAME, b), S @ A[b]
            if max_length >= 2:
                for b1 in range(2 * R):
                    for b2 in range(2 * R):
                        if b2 == inverse(b1):  # x -> z -> back along the same edge type
                            continue
                        P = A[b1] @ A[b2]
                        if P.nnz <= max_body:
                            yield (b1, b2), P

        rules: list[Rule] = []
        kept: dict[tuple, Any] = {}
        for key, P in bodies():
            P = _binary(P)
            P.setdiag(0)
            P.eliminate_zeros()
            size = int(P.nnz)
            if not size:
                continue
            for head in range(2 * R):
                if key == (head,):
                    continue
                support = int(P.multiply(A[head]).nnz)
                if support < min_support:
                    continue
                conf = support / (size + pseudo_count)
                if conf >= min_confidence:
                    rules.append(Rule(head, key, support, size, conf))
                    kept[key] = P
        out = cls(rules, kept, n, R)
        out.mine_seconds = time.perf_counter() - t0
        out.options = dict(
            max_length=max_length,
            min_support=min_support,
            pseudo_count=pseudo_count,
            min_confidence=min_confidence,
            max_body=max_body,
        )
        logger.info("mined %d rules over %d triples in %.1f s", len(rules), len(h), out.mine_seconds)
        return out

    @classmethod
    def from_graph(cls, graph: Any, **options: Any) -> "PathRules":
        """Mine from a graph with ``entity_ids``, ``relations`` and ``triple_arrays()``; names from
        ``graph.name_of`` when it has one, else the entity ids."""
        h, r, t = graph.triple_arrays()
        ids = list(graph.entity_ids)
        name_of = getattr(graph, "name_of", None)
        names = [name_of(e) for e in ids] if callable(name_of) else ids
        return cls.mine(h, r, t, num_entities=len(ids), num_relations=len(graph.relations), names=names, **options)

    # ------------------------------------------------------------------ scoring
    def confidences(self, heads: Sequence[int] | np.ndarray, signed_relation: int) -> np.ndarray:
        """``[len(heads), num_entities]`` float32: per candidate tail of ``(head, signed_relation, ·)``
        the largest confidence of a rule predicting it (0: none). The head itself is never predicted."""
        heads = np.asarray(heads, dtype=np.int64).reshape(-1)
        out = np.zeros((len(heads), self.num_entities), dtype=np.float32)
        for rule in self._by_head.get(int(signed_relation), []):
            M = self._bodies[rule.body][heads]
            if not M.nnz:
                continue
            rows = np.repeat(np.arange(len(heads)), np.diff(M.indptr))
            np.maximum.at(out, (rows, M.indices), np.float32(rule.confidence))
        return out

    def describe(self, relations: Sequence[str], limit: int | None = None) -> list[str]:
        """The rules in readable form, per head relation, most confident first."""
        rows = [rule.describe(relations) for rule in self.rules]
        return rows if limit is None else rows[:limit]

    def to_dict(self, relations: Sequence[str] | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"rules": len(self), "mine_seconds": round(self.mine_seconds, 2)}
        if relations is not None:
            d["readable"] = self.describe(relations)
        return d


def _binary(m: Any) -> Any:
    """``m`` as CSR with every stored entry set to 1 (zeros dropped)."""
    m = m.tocsr()
    m.data[:] = 1.0
    m.eliminate_zeros()
    return m


def signed_adjacency(
    heads: np.ndarray,
    relations: np.ndarray,
    tails: np.ndarray,
    num_entities: int,
    num_relations: int,
    dtype: Any = np.float32,
) -> list[Any]:
    """``2R`` binary ``n × n`` CSR matrices: entry ``[x, y]`` is 1 when ``(x, r, y)`` is a triple
    (row ``r < R``) or ``(y, r - R, x)`` is (the inverse rows ``r >= R``); repeats count once."""
    import scipy.sparse as sp

    h, r, t = (np.asarray(a, dtype=np.int64) for a in (heads, relations, tails))
    n, R = int(num_entities), int(num_relations)
    A = []
    for rel in range(R):
        sel = r == rel
        A.append(_binary(sp.csr_matrix((np.ones(int(sel.sum()), dtype), (h[sel], t[sel])), shape=(n, n))))
    return A + [a.T.tocsr() for a in A]


def _same_name_matrix(names: Sequence[str], n: int) -> Any:
    """Symmetric 0/1 matrix linking distinct entities whose :func:`name_key` is equal."""
    import scipy.sparse as sp

    groups: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(names):
        groups[name_key(s)].append(i)
    rows: list[int] = []
    cols: list[int] = []
    for g in groups.values():
        if 1 < len(g) <= MAX_NAME_GROUP:
            for a in g:
                for b in g:
                    if a != b:
                        rows.append(a)
                        cols.append(b)
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))


def role_counts(
    heads: np.ndarray, relations: np.ndarray, tails: np.ndarray, num_entities: int, num_relations: int
) -> np.ndarray:
    """``[2R, n]`` int64: how often each entity is the far end of each signed relation (row
    ``r``: tails of ``r``; row ``r + R``: its heads)."""
    R, n = int(num_relations), int(num_entities)
    h, r, t = (np.asarray(a, dtype=np.int64) for a in (heads, relations, tails))
    out = np.zeros((2 * R, n), dtype=np.int64)
    for i in range(R):
        out[i] = np.bincount(t[r == i], minlength=n)
        out[i + R] = np.bincount(h[r == i], minlength=n)
    return out


def rule_augmented_scores(
    kge_scores: np.ndarray,
    heads: np.ndarray,
    signed_relations: np.ndarray,
    *,
    rules: PathRules | None = None,
    rule_weight: float = 1000.0,
    counts: np.ndarray | None = None,
    prior_weight: float = 0.0,
) -> np.ndarray:
    """Rank scores for the queries ``(heads[i], signed_relations[i], ·)`` over all entities:
    ``log_softmax(kge_scores) + prior_weight * log(1 + counts[r]) + rule_weight * confidence``
    (``counts``: :func:`role_counts`). ``kge_scores`` is ``[Q, n]`` (the KGE's ``score_all``)."""
    s = np.asarray(kge_scores, dtype=np.float64)
    s = s - s.max(axis=1, keepdims=True)
    s = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
    rel = np.asarray(signed_relations, dtype=np.int64)
    hd = np.asarray(heads, dtype=np.int64)
    if prior_weight and counts is not None:
        s = s + prior_weight * np.log1p(counts[rel], dtype=np.float32)
    if rules is not None and rule_weight:
        for sr in np.unique(rel):
            idx = np.flatnonzero(rel == sr)
            s[idx] += rule_weight * rules.confidences(hd[idx], int(sr))
    return s
