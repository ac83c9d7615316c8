"""A relaxed walk along a relation chain the KB no longer has: path-ranking evidence without a KGE.

When a question's predicted chain (FRAG's path ranker, :class:`~.completion.Know3FRAGRetriever`)
is missing from an incomplete KB, an intermediate hop can often be bridged by a *neighbouring*
relation: a film's writer is often its director, its director often stars in it, a tag often
names its actor. The relaxed walk follows the chain as a weighted random walk (the path-ranking
algorithm's feature, Lao & Cohen 2010; the same evidence Know³-RAG §4.3 seeks from local
neighbour entities, docs/methods.md §5(a) step 4):

- at every hop but the last, the chain's own relation has weight 1 and every other **linking**
  relation ``o`` (both directions) a weight: ``eps`` (``weights="uniform"``), or ``eps`` times
  the confidence of the length-1 rule ``s(x, y) <= o(x, y)`` in the KB (``weights="rules"``:
  shared pairs / (pairs of ``o`` + 5), the confidence of
  :class:`~kgrag_plugins.models.kge_rules.PathRules`; MetaQA's kept half: a writer stands in for
  a director at 0.21, an actor at 0.03);
- the last hop follows the chain's relation only (it fixes the answer's type: a genre stays a
  genre);
- ``normalise=True`` divides each node's outgoing weights by their sum (random-walk
  probabilities, PRA's feature); ``False`` counts weighted paths;
- the topic entities are never a step's end (as in a KB walk).

A relation is *linking* when both its mean fan-in (heads per tail) and mean fan-out (tails per
head) are at most ``max_fan``; attribute relations whose values are shared by many entities
(a year, a genre, a language: MetaQA's fan-ins 74, 338 and 24) would connect everything to
everything. The relaxed walk only *ranks* entities of the answer's type: it is used for a
chain length only when its merge rule wins the sign test on training questions
(``eval/kgqa_know3.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...index.graph import KnowledgeGraph
from ...models.kge_rules import signed_adjacency
from ..frag.path_ranker import INVERSE_PREFIX

__all__ = ["MAX_FAN", "RelaxedWalker", "WEIGHTS", "linking_relations"]

#: Largest mean fan-in / fan-out of a relation that may stand in for another (a linking relation).
MAX_FAN = 10.0
#: How the other linking relations are weighted at an inner hop (see the module docstring).
WEIGHTS = ("rules", "uniform")
#: Smoothing of the substitution rules' confidence (as ``PathRules``).
CONF_SMOOTHING = 5.0
#: Weighted step matrices kept per walker (a relaxed one about the size of the linking relations'
#: edges: about 1.3 MB on MetaQA's half KB).
STEP_CACHE = 128


def linking_relations(graph: KnowledgeGraph, max_fan: float = MAX_FAN) -> list[str]:
    """The graph's relations whose mean fan-in and mean fan-out are both at most ``max_fan``
    (relations without triples are left out)."""
    h, r, t = graph.triple_arrays()
    out = []
    for j, rel in enumerate(graph.relations):
        m = r == j
        n = int(m.sum())
        if n and n / len(np.unique(t[m])) <= max_fan and n / len(np.unique(h[m])) <= max_fan:
            out.append(rel)
    return out


class RelaxedWalker:
    """Relaxed random walks over one graph's triples (see the module docstring).

    ``graph`` is read once (sparse adjacency per signed relation); build a new walker after the
    graph changes. ``max_fan`` selects the linking relations (:func:`linking_relations`)."""

    def __init__(self, graph: KnowledgeGraph, *, max_fan: float = MAX_FAN) -> None:
        from scipy import sparse

        if max_fan <= 0:
            raise ValueError(f"max_fan must be positive, got {max_fan}")
        self.graph = graph
        self.max_fan = float(max_fan)
        n = graph.num_entities
        rels = list(graph.relations)
        signed_rows = signed_adjacency(*graph.triple_arrays(), n, len(rels), dtype=np.float64)
        signed_names = rels + [INVERSE_PREFIX + rel for rel in rels]
        self._adj: dict[str, Any] = dict(zip(signed_names, signed_rows))
        self.linking = linking_relations(graph, max_fan)
        signed = [s for rel in self.linking for s in (rel, INVERSE_PREFIX + rel)]
        self._linking_sum = sum((self._adj[s] for s in signed), sparse.csr_matrix((n, n)))
        self._linking_signed = frozenset(signed)
        #: ``confidence[(s, o)]``: of the pairs linked by signed relation ``o``, the share also
        #: linked by ``s`` (smoothed), for every two distinct signed linking relations
        self.confidence: dict[tuple[str, str], float] = {}
        for a in signed:
            for b in signed:
                if a != b:
                    shared = float(self._adj[a].multiply(self._adj[b]).sum())
                    self.confidence[(a, b)] = shared / (float(self._adj[b].sum()) + CONF_SMOOTHING)
        self._steps: dict[tuple[str, float, bool, bool, str], Any] = {}

    def _step_matrix(self, step: str, eps: float, relax: bool, normalise: bool, weights: str) -> Any:
        """The (cached) weighted adjacency of one step, transposed."""
        from scipy import sparse

        if step not in self._adj:
            raise KeyError(f"unknown relation step {step!r}; the graph has {', '.join(self.graph.relations)}")
        relax = bool(relax and eps > 0)
        key = (step, float(eps), True, bool(normalise), weights) if relax else (step, 0.0, False, bool(normalise), "")
        if key in self._steps:
            return self._steps[key]
        m = self._adj[step]
        if relax and weights == "uniform":
            others = self._linking_sum - m if step in self._linking_signed else self._linking_sum
            m = m + eps * others
        elif relax:
            for o in sorted(self._linking_signed - {step}):
                c = self.confidence.get((step, o), 0.0)
                if c > 0:
                    m = m + (eps * c) * self._adj[o]
        if normalise:
            deg = np.asarray(m.sum(axis=1)).ravel()
            deg[deg == 0] = 1.0
            m = sparse.diags(1.0 / deg) @ m
        m = m.T.tocsr()  # applied as m.T @ v
        if len(self._steps) >= STEP_CACHE:  # bounded: oldest first out
            self._steps.pop(next(iter(self._steps)))
        self._steps[key] = m
        return m

    def scores(
        self,
        topics: Sequence[int],
        chain: Sequence[str],
        *,
        eps: float = 0.1,
        normalise: bool = True,
        weights: str = "uniform",
    ) -> np.ndarray:
        """Walk weights ``[num_entities]`` of the chain's ends from the topic rows (zeros when
        nothing is reached). ``chain`` holds signed steps (``"~r"`` = inverse)."""
        if eps < 0:
            raise ValueError(f"eps must be non-negative, got {eps}")
        if weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
        n = self.graph.num_entities
        rows = np.unique(np.asarray(list(topics), dtype=np.int64))
        if len(rows) and (rows.min() < 0 or rows.max() >= n):
            raise ValueError(f"topic rows must lie in [0, {n})")
        v = np.zeros(n)
        if not len(rows) or not chain:
            return v
        v[rows] = 1.0 / len(rows)
        for i, step in enumerate(chain):
            v = self._step_matrix(step, eps, i < len(chain) - 1, normalise, weights) @ v
            v[rows] = 0.0
            if not v.any():
                break
        return v

    def walk(
        self,
        topics: Sequence[str],
        chain: Sequence[str],
        *,
        eps: float = 0.1,
        normalise: bool = True,
        weights: str = "uniform",
        k: int = 10,
    ) -> list[tuple[str, float]]:
        """The ``k`` best ends ``(entity id, weight)`` of the relaxed walk from the topic entity
        ids (unknown ids are skipped); ties go to the smaller entity id."""
        g = self.graph
        rows = [g.index_of(t) for t in topics if t in g]
        v = self.scores(rows, chain, eps=eps, normalise=normalise, weights=weights)
        hit = np.flatnonzero(v > 0)
        if not len(hit):
            return []
        ids = g.entity_ids
        order = sorted(hit.tolist(), key=lambda i: (-v[i], ids[i]))[:k]
        return [(ids[i], float(v[i])) for i in order]
