"""The relaxed walk (know3/relaxed.py): weights computed by hand on a six-film KB."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import graph_from_triples

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.methods.know3.relaxed import RelaxedWalker, linking_relations

# D directed F1 only (the KB lost "F2 directed_by D"), wrote F2 and acts in F3; F4 shares F1's
# year (an attribute link that must never stand in for a person). has_genre: fan-in 4/3,
# release_year: fan-in 2; the person relations: 1.
TRIPLES = [
    ("F1", "directed_by", "D"),
    ("F2", "written_by", "D"),
    ("F3", "starred_actors", "D"),
    ("F1", "has_genre", "Drama"),
    ("F4", "has_genre", "Drama"),
    ("F2", "has_genre", "Comedy"),
    ("F3", "has_genre", "Horror"),
    ("F1", "release_year", "2000"),
    ("F4", "release_year", "2000"),
]
CHAIN = ["directed_by", "~directed_by", "has_genre"]  # genres of the films of F1's director


@pytest.fixture(scope="module")
def graph() -> KnowledgeGraph:
    return graph_from_triples(TRIPLES)


def _weights(walker: RelaxedWalker, graph: KnowledgeGraph, **kw) -> dict[str, float]:
    v = walker.scores([graph.index_of("F1")], CHAIN, **kw)
    return {graph.entity_ids[i]: float(v[i]) for i in np.flatnonzero(v)}


def test_linking_relations_are_the_low_fan_ones(graph):
    assert linking_relations(graph, max_fan=1.2) == ["directed_by", "written_by", "starred_actors"]
    assert "has_genre" in linking_relations(graph, max_fan=1.5)
    assert set(linking_relations(graph, max_fan=2.0)) == set(graph.relations)


def test_relaxed_walk_bridges_the_missing_hop_with_other_person_relations(graph):
    walker = RelaxedWalker(graph, max_fan=1.2)
    # the KB walk (eps 0) dies: F1's director directed no other film in the KB
    assert _weights(walker, graph, eps=0.0) == {}
    # random walk: D -> F1 (1), F2 (eps), F3 (eps), normalised by 1 + 2 eps; F1 is the topic
    w = _weights(walker, graph, eps=0.1, normalise=True)
    assert w == pytest.approx({"Comedy": 0.1 / 1.2, "Horror": 0.1 / 1.2})
    # path counts: eps per relaxed edge
    assert _weights(walker, graph, eps=0.1, normalise=False) == pytest.approx({"Comedy": 0.1, "Horror": 0.1})
    # F4 (same year as F1) is never reached: release_year is not a linking relation; the last
    # hop follows has_genre only (no person is ever an answer)
    assert "Drama" not in w and "D" not in w
    # ties go to the smaller id, k cuts
    tie = pytest.approx(0.1 / 1.2)
    assert walker.walk(["F1"], CHAIN, eps=0.1) == [("Comedy", tie), ("Horror", tie)]
    assert [e for e, _ in walker.walk(["F1", "nobody"], CHAIN, eps=0.1, k=1)] == ["Comedy"]
    assert walker.walk(["nobody"], CHAIN) == [] and walker.walk(["F1"], []) == []


def test_the_chains_own_relation_outweighs_a_relaxed_one(graph):
    g = graph_from_triples(
        [
            ("F1", "directed_by", "D"),
            ("F5", "directed_by", "D"),
            ("F2", "written_by", "D"),
            ("F5", "has_genre", "Western"),
            ("F2", "has_genre", "Comedy"),
        ]
    )
    walker = RelaxedWalker(g, max_fan=5.0)
    ends = walker.walk(["F1"], CHAIN, eps=0.5)
    assert [e for e, _ in ends] == ["Western", "Comedy"] and ends[0][1] == pytest.approx(2 * ends[1][1])


def test_rule_weights_are_the_kbs_substitution_confidences():
    """``weights="rules"``: another relation stands in with ``eps`` times the confidence of
    ``s(x, y) <= o(x, y)``: shared pairs / (pairs of ``o`` + 5)."""
    triples = [(f"G{i}", "directed_by", f"P{i}") for i in range(4)]  # 4 films written by their director
    triples += [(f"G{i}", "written_by", f"P{i}") for i in range(4)]
    triples += [("G4", "written_by", "P0"), ("G5", "starred_actors", "P0")]  # P0 also wrote G4, acts in G5
    triples += [("T", "directed_by", "P0"), ("G4", "has_genre", "Noir"), ("G5", "has_genre", "Musical")]
    g = graph_from_triples(triples)
    walker = RelaxedWalker(g, max_fan=3.0)
    # directed_by <= written_by: 4 of written_by's 5 pairs are directed_by pairs -> 4 / (5 + 5)
    assert walker.confidence[("directed_by", "written_by")] == pytest.approx(0.4)
    assert walker.confidence[("~directed_by", "~written_by")] == pytest.approx(0.4)
    assert walker.confidence[("directed_by", "starred_actors")] == 0.0  # no shared pair
    # genres of the other films of T's director: G0 is his (directed_by, weight 1, but no
    # genre); G4 only through written_by (0.4 eps); G5 through starred_actors (confidence 0: never)
    chain = ["directed_by", "~directed_by", "has_genre"]
    v = walker.scores([g.index_of("T")], chain, eps=1.0, normalise=False, weights="rules")
    assert v[g.index_of("Noir")] == pytest.approx(0.4) and v[g.index_of("Musical")] == 0.0
    uniform = walker.scores([g.index_of("T")], chain, eps=1.0, normalise=False, weights="uniform")
    assert uniform[g.index_of("Noir")] == pytest.approx(1.0) and uniform[g.index_of("Musical")] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="weights must be one of"):
        walker.scores([0], chain, weights="learned")


def test_the_step_cache_is_bounded_and_results_do_not_depend_on_it(graph, monkeypatch):
    from kgrag_plugins.methods.know3 import relaxed

    monkeypatch.setattr(relaxed, "STEP_CACHE", 2)
    walker = RelaxedWalker(graph, max_fan=1.2)
    first = _weights(walker, graph, eps=0.1)
    for eps in (0.2, 0.3, 0.4):
        _weights(walker, graph, eps=eps)
    assert len(walker._steps) <= 2
    assert _weights(walker, graph, eps=0.1) == first


def test_bad_input_gets_a_clear_error(graph):
    with pytest.raises(ValueError, match="max_fan"):
        RelaxedWalker(graph, max_fan=0)
    walker = RelaxedWalker(graph, max_fan=1.2)
    with pytest.raises(ValueError, match="eps"):
        walker.scores([0], CHAIN, eps=-1)
    with pytest.raises(ValueError, match="topic rows"):
        walker.scores([graph.num_entities], CHAIN)
    with pytest.raises(KeyError, match="unknown relation step"):
        walker.scores([0], ["produced_by"])
