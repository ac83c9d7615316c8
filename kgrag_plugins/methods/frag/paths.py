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


def walk_paths(
    pg: PathGraph,
    s: int,
    in_s: np.ndarray,
    hops: int,
    width: int,
    max_candidates: int,
    chain: Sequence[int] | None = None,
    revisit: bool = False,
) -> Candidates:
    """Simple paths from ``s`` inside ``in_s``: all of length 1..``hops``, or, with ``chain``
    (signed relation ids), only those following it to its end. Arrays are ``width`` wide.

    ``revisit``: a path may pass through a node twice, except ``s`` (set semantics of a relation
    chain, as KGQA answer sets are defined: MetaQA's "who directed films for the writer of [X]"
    counts the writer when the writer also directed one of those films; only the topic is
    excluded)."""
    parts: list[Candidates] = []
    frontier = Candidates(
        np.full((1, width + 1), -1, np.int64), np.full((1, width), -1, np.int64), np.zeros(1, np.int64)
    )
    frontier.nodes[0, 0] = s
    for depth in range(hops):
        ends = frontier.nodes[:, depth]
        pos, owner = pg.gather(ends)
        w = pg.dst[pos].astype(np.int64)
        if revisit:
            ok = in_s[w] & (w != s)
        else:
            ok = in_s[w] & ~(frontier.nodes[owner, : depth + 1] == w[:, None]).any(axis=1)
        if chain is not None:
            ok &= pg.rel[pos] == chain[depth]
        nodes = frontier.nodes[owner[ok]]
        rels = frontier.rels[owner[ok]]
        nodes[:, depth + 1] = w[ok]
        rels[:, depth] = pg.rel[pos[ok]]
        frontier = Candidates(nodes, rels, np.full(len(nodes), depth + 1, np.int64))
        if chain is None or depth == hops - 1:
            parts.append(frontier)
        if not len(frontier) or len(frontier) > max_candidates:
            break
    return Candidates.concat(parts, width)


def rank_order(score: np.ndarray, ends: np.ndarray, tie: np.ndarray, chain: np.ndarray | None = None) -> np.ndarray:
    """Candidate order: ``score`` descending; with ``chain`` (a chain index per path), equal
    scores put the end reached by more paths of the same chain first; then ``tie`` (PageRank of
    the end) descending, then the end's row."""
    if chain is None or not len(ends):
        return np.lexsort((ends, -tie, -score))
    pairs = chain.astype(np.int64) * (int(ends.max()) + 1) + ends
    _, pair, support = np.unique(pairs, return_inverse=True, return_counts=True)
    return np.lexsort((ends, -tie, -support[np.asarray(pair).ravel()], -score))


def shortest_paths(pg: PathGraph, s: int, in_s: np.ndarray, max_hops: int) -> Candidates:
    """One unit-weight shortest path from ``s`` to every node within ``max_hops`` inside
    ``in_s`` (FRAG's Dijkstra module); the first edge found in breadth-first order wins."""
    L = max_hops
    parent: dict[int, tuple[int, int]] = {}
    visited = np.zeros(pg.n, dtype=bool)
    visited[s] = True
    frontier = np.array([s], dtype=np.int64)
    levels: list[np.ndarray] = []
    par_node: list[np.ndarray] = []
    par_rel: list[np.ndarray] = []
    for _ in range(L):
        pos, owner = pg.gather(frontier)
        nb = pg.dst[pos].astype(np.int64)
        ok = in_s[nb] & ~visited[nb]
        pos, owner, nb = pos[ok], owner[ok], nb[ok]
        if not len(nb):
            break
        uniq, first = np.unique(nb, return_index=True)
        visited[uniq] = True
        levels.append(uniq)
        par_node.append(frontier[owner[first]])
        par_rel.append(pg.rel[pos[first]].astype(np.int64))
        frontier = uniq
    if not levels:
        return Candidates.empty(L)
    for lv, pn, pr in zip(levels, par_node, par_rel):
        parent.update(zip(lv.tolist(), zip(pn.tolist(), pr.tolist())))
    total = sum(len(lv) for lv in levels)
    nodes = np.full((total, L + 1), -1, np.int64)
    rels = np.full((total, L), -1, np.int64)
    lengths = np.zeros(total, np.int64)
    row = 0
    for depth, lv in enumerate(levels, start=1):
        for node in lv.tolist():
            cur = node
            for j in range(depth, 0, -1):
                nodes[row, j] = cur
                cur, rels[row, j - 1] = parent[cur]
            nodes[row, 0] = s
            lengths[row] = depth
            row += 1
    return Candidates(nodes, rels, lengths)
