"""KnowledgeGraph on a small hand-made graph with known structure."""

import networkx as nx
import numpy as np
import pytest

from kgrag_plugins.index.graph import KnowledgeGraph, UnknownEntityError
from kgrag_plugins.types import Entity

# curie -born_in-> warsaw -on_river-> vistula ; curie -worked_at-> sorbonne -in_city-> paris
# paris -on_river-> seine ; einstein isolated except einstein -worked_at-> eth
EDGES = [
    ("curie", "born in", "warsaw", ["p1"]),
    ("warsaw", "on river", "vistula", ["p2"]),
    ("curie", "worked at", "sorbonne", ["p1"]),
    ("sorbonne", "in city", "paris", ["p3"]),
    ("paris", "on river", "seine", ["p3"]),
    ("einstein", "worked at", "eth", []),
]


@pytest.fixture
def graph():
    g = KnowledgeGraph()
    for eid in ["curie", "warsaw", "vistula", "sorbonne", "paris", "seine", "einstein", "eth"]:
        g.add_entity(Entity(eid, eid.title(), description=f"about {eid}"))
    for h, r, t, src in EDGES:
        g.add_triple(h, r, t, src)
    g.link("curie", "p1")
    g.link("warsaw", "p1")
    g.link("warsaw", "p2")
    return g


def test_counts_and_duplicate_merge(graph):
    assert (graph.num_entities, graph.num_triples) == (8, 6)
    ti = graph.add_triple("curie", "born in", "warsaw", ["p9"])
    assert ti == 0 and graph.num_triples == 6
    assert graph.triple(0).source_ids == ["p1", "p9"]
    graph.add_entity(Entity("curie", "Curie", ["Marie Curie"]))
    assert graph.entity("curie").aliases == ["Marie Curie"] and graph.num_entities == 8


def test_neighbors_both_directions(graph):
    assert graph.neighbors("warsaw", "out") == [("vistula", "on river", "out")]
    assert graph.neighbors("warsaw", "in") == [("curie", "born in", "in")]
    assert sorted(graph.neighbors("warsaw")) == [("curie", "born in", "in"), ("vistula", "on river", "out")]
    assert graph.neighbors("vistula", "out") == []


def test_parallel_edges_are_kept(graph):
    graph.add_triple("curie", "died in", "warsaw")  # not true, but a second edge between the pair
    rels = [r for nb, r, d in graph.neighbors("curie", "out") if nb == "warsaw"]
    assert rels == ["born in", "died in"]


def test_k_hop(graph):
    assert graph.k_hop(["curie"], 1) == {"curie": 0, "warsaw": 1, "sorbonne": 1}
    two = graph.k_hop(["curie"], 2)
    assert two == {"curie": 0, "warsaw": 1, "sorbonne": 1, "vistula": 2, "paris": 2}
    assert graph.k_hop(["seine"], 2, direction="out") == {"seine": 0}
    assert graph.k_hop(["seine"], 2, direction="in") == {"seine": 0, "paris": 1, "sorbonne": 2}


def test_subgraph_is_networkx(graph):
    sub = graph.subgraph(["curie", "warsaw", "vistula", "einstein"])
    assert isinstance(sub, nx.MultiDiGraph)
    assert set(sub.nodes) == {"curie", "warsaw", "vistula", "einstein"}
    assert sorted((u, v, d["relation"]) for u, v, d in sub.edges(data=True)) == [
        ("curie", "warsaw", "born in"),
        ("warsaw", "vistula", "on river"),
    ]


def test_ppr_matches_networkx(graph):
    scores = graph.personalized_pagerank({"curie": 1.0}, damping=0.85)
    ref_graph = nx.Graph()
    ref_graph.add_nodes_from(graph.entity_ids)
    ref_graph.add_edges_from((h, t) for h, _, t, _ in EDGES)
    ref = nx.pagerank(ref_graph, alpha=0.85, personalization={"curie": 1.0}, tol=1e-12, max_iter=1000)
    ours = {eid: scores[graph.index_of(eid)] for eid in graph.entity_ids}
    for eid in graph.entity_ids:
        assert ours[eid] == pytest.approx(ref[eid], abs=1e-6)
    assert scores.sum() == pytest.approx(1.0)
    assert ours["einstein"] == 0.0 and ours["curie"] == max(ours.values())


def test_local_ppr_confined_to_rows(graph):
    """``within=``: all rows gives the whole-graph PageRank; a subset keeps the walk inside it,
    with the whole graph's transition probabilities (a brute-force power iteration checks it)."""
    full = graph.personalized_pagerank({"curie": 1.0}, damping=0.8, tol=1e-12, max_iter=1000)
    every = np.arange(graph.num_entities)
    np.testing.assert_allclose(
        graph.personalized_pagerank({"curie": 1.0}, damping=0.8, tol=1e-12, max_iter=1000, within=every), full
    )
    rows = np.array([graph.index_of(e) for e in ("curie", "warsaw", "sorbonne")])
    local = graph.personalized_pagerank({"curie": 1.0}, damping=0.8, tol=1e-12, max_iter=1000, within=rows)
    outside = np.setdiff1d(every, rows)
    assert (local[outside] == 0).all() and local[graph.index_of("curie")] == local.max()
    # brute force: dense undirected transition matrix restricted to the rows
    n = graph.num_entities
    a = np.zeros((n, n))
    for h, _, t, _ in EDGES:
        a[graph.index_of(h), graph.index_of(t)] += 1
        a[graph.index_of(t), graph.index_of(h)] += 1
    deg = a.sum(1)
    p = np.divide(a, deg[:, None], out=np.zeros_like(a), where=deg[:, None] > 0)[np.ix_(rows, rows)]
    s = np.array([1.0, 0.0, 0.0])
    r = s.copy()
    for _ in range(1000):
        r = 0.8 * (p.T @ r) + 0.2 * s
    np.testing.assert_allclose(local[rows], r, atol=1e-9)
    with pytest.raises(ValueError, match="within"):
        graph.personalized_pagerank({"curie": 1.0}, within=outside)


def test_ppr_needs_a_seed(graph):
    with pytest.raises(ValueError, match="seed"):
        graph.personalized_pagerank({"curie": 0.0})
    with pytest.raises(UnknownEntityError, match="nobody"):
        graph.personalized_pagerank({"nobody": 1.0})


def test_links(graph):
    assert graph.passages_of("warsaw") == ["p1", "p2"]
    assert sorted(graph.entities_of("p1")) == ["curie", "warsaw"]
    assert graph.entities_of("missing") == []
    m = graph.link_matrix()
    assert m.shape == (8, len(graph.passage_ids)) and m.sum() == 3


def test_unknown_entity_errors(graph):
    with pytest.raises(UnknownEntityError, match="'atlantis'"):
        graph.neighbors("atlantis")
    with pytest.raises(UnknownEntityError):
        graph.add_triple("curie", "visited", "atlantis")
    assert "atlantis" not in graph and "curie" in graph


def test_save_load_roundtrip(graph, tmp_path):
    graph.save(tmp_path / "g")
    back = KnowledgeGraph.load(tmp_path / "g")
    assert [t.to_dict() for t in back.triples()] == [t.to_dict() for t in graph.triples()]
    assert [e.to_dict() for e in back.entities()] == [e.to_dict() for e in graph.entities()]
    assert back.passages_of("warsaw") == ["p1", "p2"]
    assert back.k_hop(["curie"], 2) == graph.k_hop(["curie"], 2)
    np.testing.assert_allclose(back.personalized_pagerank({"paris": 1.0}), graph.personalized_pagerank({"paris": 1.0}))


def test_load_reports_missing_and_corrupt_files(graph, tmp_path):
    graph.save(tmp_path / "g")
    (tmp_path / "g" / "relations.json").unlink()
    with pytest.raises(ValueError, match="missing relations.json"):
        KnowledgeGraph.load(tmp_path / "g")
    graph.save(tmp_path / "h")
    (tmp_path / "h" / "entities.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="corrupt"):
        KnowledgeGraph.load(tmp_path / "h")


def test_empty_graph():
    g = KnowledgeGraph()
    assert g.personalized_pagerank({}).shape == (0,)
    assert g.k_hop([], 3) == {} and g.num_triples == 0
    assert g.adjacency().shape == (0, 0)


def test_links_stay_current_after_new_links(graph):
    assert sorted(graph.entities_of("p2")) == ["warsaw"]
    graph.link("vistula", "p2")  # invalidates the cached incidence matrices
    assert sorted(graph.entities_of("p2")) == ["vistula", "warsaw"]
    assert graph.passages_of("vistula") == ["p2"]
