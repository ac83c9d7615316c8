"""A bounded local PageRank for FRAG on large graphs: synchronous forward push (docs/frag.md).

FRAG (docs/methods.md §2 step 2) ranks the k-hop neighbourhood of the topic entities by a
personalized PageRank (restart at the topics, damping 0.8) and keeps the top n = 2000. On a
graph of ``LARGE_GRAPH_ENTITIES`` (1M) entities the neighbourhood of a topic next to a hub has
10^5 entities (135,588 on the 1M-entity benchmark graph), and a graph database must send every
edge among them to the client for the exact walk. This walk is bounded instead: the forward push
of Andersen, Chung and Lang (FOCS 2006), run in synchronous rounds,

* every entity ``u`` holds an estimate ``p(u)`` and a residual ``r(u)``; the topics start with
  ``r = 1 / |topics|``;
* a round pushes every entity with ``r(u) >= eps * deg(u)`` (and the topics in the first round,
  whatever their degree): ``p(u) += (1 - d) r(u)``, each of its edges passes ``d r(u) / deg(u)``
  to the neighbour, ``r(u) = 0``; ``deg`` is the whole graph's degree (parallel edges count, both
  directions when the walk is undirected), so mass that would leave the k-hop ball is dropped as
  in the exact local walk;
* an entity is in the ball when a pushed entity within k - 1 hops reached it.

The score of an entity is ``p(u) + (1 - d) r(u)``: what it keeps of the residual at its next
push, so a hub that is never pushed ranks by the mass that reached it (with ``p`` alone it
would score 0 and lose every PageRank tie-break to its leaves).

Only pushed entities' edges are ever read: their degrees sum to at most about
``rounds / eps``, whatever the ball's size, and a hub (``deg(u) > r(u) / eps``) is never
expanded, so the entities only reachable through a hub drop out of the ball. Those have
PageRank below ``eps * deg(hub) * d / deg(hub)`` each, which is why the exact walk ranks them
below its top n on such balls. Error bound (ACL): ``0 <= p*(u) - score(u) <= eps * deg(u)`` for the
exact walk ``p*`` on the reached ball (undirected; tests/methods/frag/test_local_walk.py).

The result is exactly reproducible from any source of edges: each entity's neighbours are
reduced to (neighbour row, multiplicity) sorted by row, and a round adds its contributions in
increasing order of pushing row, so a graph database's fetched edges give bit-identical scores
to the in-memory graph's (``DBFRAGRetriever``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .paths import PathGraph

#: Residual per unit degree below which an entity is not pushed (``eps``).
PUSH_EPS = 1e-4
#: Rounds after which the walk stops (the remaining residual is reported).
MAX_ROUNDS = 200

#: ``neighbours(rows)`` -> ``(owner, nbr)``: for every edge of the given entity rows in the walk's
#: direction(s), the index into ``rows`` of its source and the row of its other end.
NeighbourSource = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]


@dataclass
class LocalWalk:
    """What the bounded walk reached: ``rows`` (sorted entity rows of the ball), ``scores``
    (PageRank estimate per row, aligned with ``rows``), counters for the trace, and ``kept``:
    the rows FRAG keeps of the ball (set by the database retriever, which fetches only those)."""

    rows: np.ndarray
    scores: np.ndarray
    pushed: int = 0
    edges_read: int = 0
    rounds: int = 0
    fetch_rounds: int = 0
    residual: float = 0.0
    kept: np.ndarray | None = None

    def dense(self, n: int) -> np.ndarray:
        """The scores as an array over all ``n`` entity rows (0 outside the ball)."""
        out = np.zeros(n)
        out[self.rows] = self.scores
        return out

    def trace(self) -> dict:
        return {
            "walk": "push",
            "ball_entities": int(len(self.rows)),
            "pushed_entities": self.pushed,
            "edges_read": self.edges_read,
            "rounds": self.rounds,
            "fetch_rounds": self.fetch_rounds,
            "residual": round(self.residual, 8),
        }


def top_rows(rows: np.ndarray, scores: np.ndarray, seeds: np.ndarray, n: int) -> np.ndarray:
    """FRAG's node cut (§2 step 2): the ``n`` best of the sorted ``rows`` by ``scores`` (ties in row
    order) and the ``seeds``; all ``rows`` when there are at most ``n``. One rule for memory and
    the database retriever, whose fetch must hold exactly what memory keeps."""
    if len(rows) <= n:
        return rows
    return np.union1d(rows[np.argsort(-scores, kind="stable")[:n]], seeds)


def graph_source(pg: PathGraph) -> tuple[Callable[[np.ndarray], np.ndarray], NeighbourSource]:
    """``degree`` and ``neighbours`` of an in-memory :class:`~.paths.PathGraph` for :func:`push_walk`."""
    deg = np.diff(pg.indptr)

    def neighbours(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos, owner = pg.gather(rows)
        return owner, pg.dst[pos].astype(np.int64)

    return (lambda rows: deg[rows]), neighbours


def push_walk(
    seeds: Sequence[int],
    k: int,
    degree: Callable[[np.ndarray], np.ndarray],
    neighbours: NeighbourSource,
    *,
    damping: float = 0.8,
    eps: float = PUSH_EPS,
    max_rounds: int = MAX_ROUNDS,
) -> LocalWalk:
    """Bounded personalized PageRank from ``seeds`` (entity rows) within ``k`` hops.

    ``degree(rows)``: the whole graph's walk degree of each row; ``neighbours(rows)``: their
    edges (:data:`NeighbourSource`), read once per entity and only for pushed entities."""
    seeds_arr = np.unique(np.asarray(seeds, dtype=np.int64))
    if not len(seeds_arr):
        raise ValueError("push_walk needs at least one seed")
    adj: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # row -> (sorted neighbour rows, multiplicity)
    r: dict[int, float] = {}
    p: dict[int, float] = {}
    dist: dict[int, int] = {}
    deg: dict[int, float] = {}
    for s in seeds_arr.tolist():
        r[s] = 1.0 / len(seeds_arr)
        dist[s] = 0
    walk = LocalWalk(rows=seeds_arr, scores=np.zeros(len(seeds_arr)))
    pushed: set[int] = set()

    def degrees_of(rows: list[int]) -> None:
        new = [u for u in rows if u not in deg]
        if new:
            for u, d in zip(new, np.asarray(degree(np.asarray(new, dtype=np.int64)), dtype=np.float64).tolist()):
                deg[u] = d

    degrees_of(seeds_arr.tolist())
    active = seeds_arr.tolist()  # the topics push first, whatever their degree
    rounds = 0
    while active and rounds < max_rounds:
        rounds += 1
        active.sort()
        missing = [u for u in active if u not in adj and deg[u] > 0]
        if missing:
            walk.fetch_rounds += 1
            owner, nbr = neighbours(np.asarray(missing, dtype=np.int64))
            owner = np.asarray(owner, dtype=np.int64)
            nbr = np.asarray(nbr, dtype=np.int64)
            walk.edges_read += int(len(nbr))
            order = np.lexsort((nbr, owner))
            owner, nbr = owner[order], nbr[order]
            cuts = np.searchsorted(owner, np.arange(len(missing) + 1))
            for i, u in enumerate(missing):
                rows, counts = np.unique(nbr[cuts[i] : cuts[i + 1]], return_counts=True)
                adj[u] = (rows, counts.astype(np.float64))
        touched: list[int] = []
        restart = 0.0
        for u in active:
            ru = r.get(u, 0.0)
            if ru <= 0.0:
                continue
            r[u] = 0.0
            p[u] = p.get(u, 0.0) + (1.0 - damping) * ru
            if deg[u] <= 0:  # dangling: the walk restarts at the topics
                restart += damping * ru
                continue
            pushed.add(u)
            du = dist[u] + 1
            share = damping * ru / deg[u]
            rows, counts = adj[u]
            for v, c in zip(rows.tolist(), counts.tolist()):
                dv = dist.get(v)
                if dv is None or dv > du:
                    if du > k:
                        continue
                    dist[v] = dv = du
                r[v] = r.get(v, 0.0) + share * c
                touched.append(v)
        if restart > 0.0:
            for s in seeds_arr.tolist():
                r[s] = r.get(s, 0.0) + restart / len(seeds_arr)
                touched.append(s)
        degrees_of(sorted(set(touched)))
        active = [v for v in set(touched) if r[v] > 0.0 and r[v] >= eps * max(deg[v], 1.0)]
    walk.rounds, walk.pushed = rounds, len(pushed)
    walk.residual = float(sum(r.values()))
    rows = np.array(sorted(dist), dtype=np.int64)
    walk.rows = rows
    # an entity's unpushed residual would keep (1 - d) of itself at its next push: counted, so a
    # hub (never pushed) ranks by the mass that reached it instead of 0
    walk.scores = np.array([p.get(u, 0.0) + (1.0 - damping) * r.get(u, 0.0) for u in rows.tolist()])
    return walk
