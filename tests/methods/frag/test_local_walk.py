"""FRAG's bounded local PageRank (kgrag_plugins/methods/frag/local_walk.py, docs/frag.md).

Oracles: the exact personalized PageRank of ``KnowledgeGraph.personalized_pagerank`` (power
iteration, scipy) and the Andersen-Chung-Lang error bound; the walk must also be bit-identical
whatever order a source returns edges in (what makes a database's walk equal memory's)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.methods.frag.local_walk import graph_source, push_walk
from kgrag_plugins.methods.frag.paths import PathGraph


def _graph(edges: list[tuple[int, int]], n: int) -> KnowledgeGraph:
    ids = [f"e{i}" for i in range(n)]
    h = np.array([a for a, _ in edges], dtype=np.int32)
    t = np.array([b for _, b in edges], dtype=np.int32)
    return KnowledgeGraph.from_columns(ids, ids, ["r"], h, np.zeros(len(edges), np.int32), t, dedupe=False)


graphs = st.integers(3, 14).flatmap(
    lambda n: st.tuples(
        st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=40)
    )
)


@settings(max_examples=60, deadline=None)
@given(graphs, st.booleans())
def test_with_a_tiny_threshold_the_walk_is_personalized_pagerank(g, inverse):
    """Every reachable entity pushed until nothing is left: the exact walk (both ways or along
    the triples, dangling mass back to the topic), to 1e-9."""
    n, edges = g
    graph = _graph(edges, n)
    pg = PathGraph(graph, inverse)
    walk = push_walk([0], n + 1, *graph_source(pg), damping=0.8, eps=1e-13, max_rounds=100_000)
    exact = graph.personalized_pagerank({"e0": 1.0}, damping=0.8, directed=not inverse, tol=1e-14, max_iter=10_000)
    got = walk.dense(n)
    assert np.abs(got - exact).max() < 1e-9
    assert set(walk.rows.tolist()) == set(np.flatnonzero(exact > 0).tolist()) | {0}


@settings(max_examples=60, deadline=None)
@given(graphs, st.sampled_from([1e-1, 1e-2, 1e-3]))
def test_the_andersen_chung_lang_bound_holds(g, eps):
    """Undirected walk stopped at residual < eps * deg: 0 <= exact - estimate <= eps * deg."""
    n, edges = g
    graph = _graph(edges, n)
    pg = PathGraph(graph, True)
    deg = np.diff(pg.indptr).astype(float)
    walk = push_walk([0], n + 1, *graph_source(pg), damping=0.8, eps=eps)
    exact = graph.personalized_pagerank({"e0": 1.0}, damping=0.8, tol=1e-14, max_iter=10_000)
    got = walk.dense(n)
    assert (got <= exact + 1e-12).all()
    assert (exact - got <= eps * np.maximum(deg, 1) + 1e-12).all()


@settings(max_examples=40, deadline=None)
@given(graphs, st.integers(1, 3), st.randoms(use_true_random=False))
def test_the_walk_does_not_depend_on_the_order_edges_arrive_in(g, k, rnd):
    """A source returning each entity's edges in any order (a database) gives bit-identical scores."""
    n, edges = g
    pg = PathGraph(_graph(edges, n), True)
    degree, neighbours = graph_source(pg)

    def shuffled(rows):
        owner, nbr = neighbours(rows)
        order = list(range(len(owner)))
        rnd.shuffle(order)
        return owner[order], nbr[order]

    a = push_walk([0], k, degree, neighbours, eps=1e-3)
    b = push_walk([0], k, degree, shuffled, eps=1e-3)
    assert np.array_equal(a.rows, b.rows) and np.array_equal(a.scores, b.scores)
    assert a.trace() == b.trace()


def test_a_hub_is_not_expanded_and_the_ball_stays_small():
    """Topic -> a few films -> one hub with 5,000 leaves: the hub's residual is far below
    eps * deg, so its 5,000 edges are never read and its leaves are not in the ball; the exact
    2-hop ball has them all."""
    hub, leaves = 4, list(range(5, 5005))
    edges = [(0, 1), (0, 2), (0, 3), (1, 4), (2, 3)] + [(hub, x) for x in leaves]
    graph = _graph(edges, 5005)
    pg = PathGraph(graph, True)
    read: list[int] = []
    degree, neighbours = graph_source(pg)

    def counting(rows):
        read.extend(rows.tolist())
        return neighbours(rows)

    walk = push_walk([0], 3, degree, counting, eps=1e-4)
    assert hub not in read and walk.edges_read < 40
    assert set(walk.rows.tolist()) == {0, 1, 2, 3, 4}
    assert len(pg.k_hop(np.array([0]), 3)) == 5005
    assert walk.scores[walk.rows.tolist().index(0)] >= 0.2  # at least the restart mass


def test_k_bounds_the_ball_and_the_topics_push_first():
    """A path 0-1-2-3-4: with k = 2 the ball is {0, 1, 2} and no mass reaches 3; a topic whose
    degree is far above 1 / eps is still pushed once (its 1-hop edges are FRAG's paths)."""
    graph = _graph([(0, 1), (1, 2), (2, 3), (3, 4)], 5)
    pg = PathGraph(graph, True)
    walk = push_walk([0], 2, *graph_source(pg), eps=1e-6)
    assert walk.rows.tolist() == [0, 1, 2] and (walk.scores > 0).all()
    star = _graph([(0, i) for i in range(1, 300)], 300)
    w = push_walk([0], 1, *graph_source(PathGraph(star, True)), eps=0.5)
    assert len(w.rows) == 300 and w.pushed == 1
    with pytest.raises(ValueError, match="seed"):
        push_walk([], 2, *graph_source(pg))
