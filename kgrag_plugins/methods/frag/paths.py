"""FRAG's graph view: both-direction CSR walks, k-hop neighbourhoods and path candidate arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...index.graph import KnowledgeGraph


def humanise_relation(relation: str) -> str:
    """``"film.film.directed_by"`` / ``"directed_by"`` -> ``"directed by"`` (the last dotted part)."""
    tail = relation.rsplit(".", 1)[-1] if "." in relation and " " not in relation else relation
    return " ".join(tail.replace("_", " ").split())


# --------------------------------------------------------------------------- graph view


class PathGraph:
    """The KG's edges as one CSR over entity rows, walked both ways when ``inverse``.

    Edge attributes: ``dst`` (entity row), ``rel`` (relation id; ``+ R`` for an inverse edge)."""

    def __init__(self, graph: KnowledgeGraph, inverse: bool) -> None:
        h, r, t = (a.astype(np.int64) for a in graph.triple_arrays())
        self.n = graph.num_entities
        self.R = len(graph.relations)
        self.inverse = inverse
        if inverse:
            src, dst, rel = np.concatenate([h, t]), np.concatenate([t, h]), np.concatenate([r, r + self.R])
        else:
            src, dst, rel = h, t, r
        order = np.argsort(src, kind="stable")
        self.dst = dst[order].astype(np.int32)
        self.rel = rel[order].astype(np.int32)
        self.indptr = np.zeros(self.n + 1, dtype=np.int64)
        self.indptr[1:] = np.cumsum(np.bincount(src, minlength=self.n))

    def gather(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Edge positions of all out-edges of ``nodes`` and, per edge, the index into ``nodes``."""
        nodes = np.asarray(nodes, dtype=np.int64)
        starts = self.indptr[nodes]
        counts = self.indptr[nodes + 1] - starts
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(nodes)), counts)
        offs = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        return starts[owner] + offs, owner

    def k_hop(self, seeds: np.ndarray, k: int) -> np.ndarray:
        """Entity rows within ``k`` hops of ``seeds`` (seeds included), sorted."""
        seen = np.zeros(self.n, dtype=bool)
        seen[seeds] = True
        frontier = np.unique(seeds)
        for _ in range(k):
            pos, _ = self.gather(frontier)
            nb = self.dst[pos]
            nb = np.unique(nb[~seen[nb]])
            if not len(nb):
                break
            seen[nb] = True
            frontier = nb
        return np.flatnonzero(seen)


@dataclass
class Candidates:
    """Candidate paths as arrays: ``nodes`` (P, L+1) and ``rels`` (P, L), padded with -1."""

    nodes: np.ndarray
    rels: np.ndarray
    lengths: np.ndarray

    @classmethod
    def empty(cls, width: int) -> "Candidates":
        return cls(np.zeros((0, width + 1), np.int64), np.zeros((0, width), np.int64), np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.lengths)

    def unique(self) -> "Candidates":
        """Without duplicate paths (first occurrence kept, order preserved)."""
        if len(self) < 2:
            return self
        _, first = np.unique(np.hstack([self.nodes, self.rels]), axis=0, return_index=True)
        return self.select(np.sort(first))

    def ends(self) -> np.ndarray:
        return self.nodes[np.arange(len(self)), self.lengths]

    def select(self, mask: np.ndarray) -> "Candidates":
        return Candidates(self.nodes[mask], self.rels[mask], self.lengths[mask])

    @staticmethod
    def concat(parts: Sequence["Candidates"], width: int) -> "Candidates":
        parts = [p for p in parts if len(p)]
        if not parts:
            return Candidates.empty(width)
        return Candidates(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("nodes", "rels", "lengths")))
