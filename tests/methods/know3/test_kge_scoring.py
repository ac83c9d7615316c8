"""TripleVerifier (methods/know3/scoring.py): relative score (Know³-RAG Eq. 2), raw and same-type
rank against hand-computed values on a toy KG with hand-set embeddings; aggregation, skips,
calibration."""

from __future__ import annotations

import numpy as np
import pytest

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.methods.know3.scoring import TripleVerifier, Verification
from kgrag_plugins.models.kge import KGEModel
from kgrag_plugins.types import Entity

ENTS = ["a", "b", "c", "d", "e"]
# 1-d DistMult, one direction: s(h, r, t) = h * r * t
VALUES = {"a": 1.0, "b": 2.0, "c": 3.0, "d": -1.0, "e": 0.5}
KNOWN = [("a", "likes", "b"), ("a", "likes", "c"), ("a", "knows", "d"), ("b", "likes", "c"), ("e", "knows", "a")]
KNOWN += [("d", "likes", "e")]
# scores: a-likes-b 2, a-likes-c 3, a-knows-d -2, b-likes-c 6, e-knows-a 1, d-likes-e -0.5
# same-head reference means: a -> (2 + 3 - 2) / 3 = 1, b -> 6, d -> -0.5, e -> 1; c has none


def _kge() -> KGEModel:
    E = np.array([[VALUES[e]] for e in ENTS], dtype=np.float32)
    R = np.array([[1.0], [2.0], [1.0], [2.0]], dtype=np.float32)  # likes, knows, ~likes, ~knows
    return KGEModel("distmult", ENTS, ["likes", "knows"], E, R, directions="tail")


def _verifier(**kw) -> TripleVerifier:
    return TripleVerifier(_kge(), KNOWN, **kw)


def test_relative_score_matches_hand_computation():
    v = _verifier(method="relative")
    s = v.score_triple("a", "likes", "e")  # raw 0.5, reference mean of head a = 1
    assert s.raw == pytest.approx(0.5) and s.relative == pytest.approx(0.5) and s.score == pytest.approx(0.5)
    s = v.score_triple("a", "likes", "d")  # raw -1 -> |-1 - 1| = 2
    assert s.relative == pytest.approx(2.0)
    s = v.score_triple("b", "likes", "a")  # raw 2, reference mean of head b = 6
    assert s.relative == pytest.approx(4.0)
    out = v.verify([("a", "likes", "e"), ("a", "likes", "d")])
    assert isinstance(out, Verification) and out.score == pytest.approx(1.25) and out.scored == 2
    assert _verifier(method="relative", aggregate="sum").verify([("a", "likes", "e"), ("a", "likes", "d")]).score == (
        pytest.approx(2.5)
    )


def test_reciprocal_relations_use_reciprocal_references():
    v = _verifier(method="relative")
    # (c, ~likes, d) = the KB's (d, likes, c): raw s(c, ~likes, d) = 3 * 1 * -1 = -3; references of c
    # as a reciprocal head: (c, ~likes, a) = 3 and (c, ~likes, b) = 6 -> mean 4.5 -> |-3 - 4.5|
    s = v.score_triple("c", "~likes", "d")
    assert s.raw == pytest.approx(-3.0) and s.relative == pytest.approx(7.5)
    # same-type rank among the heads of "likes" {a, b, d}: (e, ~likes, ·) knows d, the candidate is a,
    # left: b with s(e, ~likes, b) = 1 > s(e, ~likes, a) = 0.5 -> rank 1
    assert _verifier(method="type_rank", sides="tail").score_triple("e", "~likes", "a").type_rank == 1.0


def test_raw_score_is_negated_kge():
    v = _verifier(method="raw")
    s = v.score_triple("b", "likes", "c")
    assert s.raw == pytest.approx(6.0) and s.score == pytest.approx(-6.0)


def test_same_type_rank_tail_and_both_sides():
    v = _verifier(method="type_rank", sides="tail")
    # tails of "likes": {b, c, e}; (b, likes, ·) knows c -> left out; the candidate e is ranked
    # against b alone: s(b, likes, b) = 4 > s(b, likes, e) = 1 -> rank 1 / 1
    assert v.score_triple("b", "likes", "e").type_rank == pytest.approx(1.0)
    assert v.score_triple("b", "likes", "b").type_rank == pytest.approx(0.0)  # 4 > s(b, likes, e) = 1
    # (a, likes, e): known tails b, c are left out, nothing to rank against
    s = v.score_triple("a", "likes", "e")
    assert s.type_rank is None and s.score is None and "no other entity" in s.reason
    both = _verifier(method="type_rank", sides="both")
    # head side of (b, likes, e): heads of "likes" {a, b, d}; d is a known head for tail e; b is the
    # candidate; vs a: s(a, likes, e) = 0.5 < s(b, likes, e) = 1 -> rank 0; mean with the tail side 1
    assert both.score_triple("b", "likes", "e").type_rank == pytest.approx(0.5)
    # (a, likes, e) now gets the head-side rank alone: vs b (s = 1 > 0.5) -> 1
    assert both.score_triple("a", "likes", "e").type_rank == pytest.approx(1.0)


def test_ties_count_half():
    E = np.array([[1.0], [1.0], [1.0]], dtype=np.float32)
    m = KGEModel("distmult", ["x", "y", "z"], ["r"], E, np.ones((2, 1), np.float32), directions="tail")
    v = TripleVerifier(m, [("x", "r", "y"), ("y", "r", "z"), ("z", "r", "x")], method="type_rank", sides="tail")
    assert v.score_triple("x", "r", "z").type_rank == pytest.approx(0.5)  # tie with x (y is known)


def test_skips_are_explained():
    v = _verifier(method="relative")
    s = v.score_triple("c", "likes", "a")  # head c has no reference triple
    assert s.raw == pytest.approx(3.0) and s.relative is None and s.score is None
    assert "no reference triples with head 'c'" in s.reason
    s = v.score_triple("zz", "hates", "a")
    assert s.raw is None and "head 'zz'" in s.reason and "relation 'hates'" in s.reason
    out = v.verify([("zz", "likes", "a"), ("a", "likes", "e")])
    assert out.score == pytest.approx(0.5) and out.scored == 1 and out.reason is None
    none = v.verify([("zz", "likes", "a"), ("c", "likes", "a")])
    assert none.score is None and "no scorable triple" in none.reason and "unknown to the KGE" in none.reason
    empty = v.verify([])
    assert empty.score is None and empty.reason == "no triples"
    d = out.to_dict()
    assert d["method"] == "relative" and d["aggregate"] == "mean" and len(d["triples"]) == 2
    assert d["triples"][0]["reason"].startswith("unknown to the KGE")


def test_calibrate_is_a_percentile_of_known_true_triples():
    v = _verifier(method="relative")
    # relative scores of the known triples: 1, 2, 3 (head a), 0 (b), 0 (e), 0 (d) -> median 0.5
    assert v.calibrate(percentile=50, sample=100) == pytest.approx(0.5)
    assert v.calibrate(percentile=100, sample=100) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="percentile"):
        v.calibrate(percentile=120)


def test_verifier_accepts_a_knowledge_graph_and_batches_agree():
    g = KnowledgeGraph()
    for e in ENTS:
        g.add_entity(Entity(e, e))
    for h, r, t in KNOWN:
        g.add_triple(h, r, t)
    from_graph = TripleVerifier(_kge(), g, method="relative")
    from_list = _verifier(method="relative")
    cands = [("a", "likes", "e"), ("b", "likes", "a"), ("d", "knows", "c"), ("e", "likes", "b")]
    got = [s.to_dict() for s in from_graph.score_triples(cands)]
    assert got == [s.to_dict() for s in from_list.score_triples(cands)]
    assert got == [from_list.score_triple(*c).to_dict() for c in cands]  # batched == one by one


def test_argument_errors():
    with pytest.raises(ValueError, match="unknown verifier method"):
        _verifier(method="vibes")
    with pytest.raises(ValueError, match="unknown aggregate"):
        _verifier(aggregate="max")
    with pytest.raises(ValueError, match="sides"):
        _verifier(sides="left")
