"""TripleVerifier plausibility (methods/know3/scoring.py): a [0, 1], higher-is-more-plausible
reading of the lower-is-better scores, beside the unchanged scores, per triple and per answer,
with reprs that say which way is better."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kgrag_plugins.methods.know3.scoring import METHODS, TripleVerifier, plausibility
from kgrag_plugins.models.kge import KGEModel

ENTS = ["a", "b", "c", "d", "e"]
VALUES = {"a": 1.0, "b": 2.0, "c": 3.0, "d": -1.0, "e": 0.5}  # 1-d DistMult: s(h, r, t) = h * r * t
KNOWN = [("a", "likes", "b"), ("a", "likes", "c"), ("a", "knows", "d"), ("b", "likes", "c"), ("e", "knows", "a")]
KNOWN += [("d", "likes", "e")]
TRIPLES = [("a", "likes", "e"), ("a", "likes", "d"), ("b", "likes", "a"), ("b", "likes", "e"), ("b", "likes", "b")]


def _verifier(**kw) -> TripleVerifier:
    E = np.array([[VALUES[e]] for e in ENTS], dtype=np.float32)
    R = np.array([[1.0], [2.0], [1.0], [2.0]], dtype=np.float32)
    return TripleVerifier(KGEModel("distmult", ENTS, ["likes", "knows"], E, R, directions="tail"), KNOWN, **kw)


@pytest.mark.parametrize("method", METHODS)
def test_plausibility_is_a_decreasing_map_into_unit_interval(method):
    scores = {
        "type_rank": [0.0, 0.25, 0.5, 1.0],
        "relative": [0.0, 0.5, 2.0, 50.0],
        "raw": [-800.0, -3.0, 0.0, 3.0, 800.0],
    }
    got = [plausibility(s, method) for s in scores[method]]
    assert all(0.0 <= p <= 1.0 for p in got)
    assert got == sorted(got, reverse=True) and len(set(got)) == len(got)  # strictly decreasing
    assert plausibility(None, method) is None and plausibility(float("nan"), method) is None
    with pytest.raises(ValueError, match="unknown verifier method"):
        plausibility(0.1, "cosine")


def test_plausibility_mapping_values():
    # the user's case: a true triple with same-type rank 0.25 and a false one with 0.0
    assert plausibility(0.25, "type_rank") == pytest.approx(0.75)
    assert plausibility(0.0, "type_rank") == 1.0
    assert plausibility(1.0, "relative") == pytest.approx(0.5)
    assert plausibility(-2.0, "raw") == pytest.approx(1 / (1 + math.exp(-2.0)))  # sigmoid(KGE = 2)


@pytest.mark.parametrize("method", METHODS)
def test_per_triple_plausibility_beside_unchanged_scores(method):
    v = _verifier(method=method)
    for ts in v.score_triples(TRIPLES):
        if ts.score is None:
            assert ts.plausibility is None
            continue
        assert ts.plausibility == pytest.approx(plausibility(ts.score, method))
        expected = {"relative": ts.relative, "raw": -ts.raw, "type_rank": ts.type_rank}[method]
        assert ts.score == pytest.approx(expected)  # the score itself is what it always was
        assert ts.to_dict()["plausibility"] == ts.plausibility
    scored = [t for t in v.score_triples(TRIPLES) if t.score is not None]
    by_score = sorted(scored, key=lambda t: t.score)
    by_plaus = sorted(scored, key=lambda t: -t.plausibility)
    assert [t.score for t in by_score] == [t.score for t in by_plaus]  # same order, reversed direction


def test_aggregate_plausibility_mean_and_sum():
    pair = [("a", "likes", "e"), ("a", "likes", "d")]
    mean = _verifier(method="relative").verify(pair)
    assert mean.score == pytest.approx(1.25)  # unchanged (hand-computed in test_kge_scoring.py)
    assert mean.plausibility == pytest.approx(1 / (1 + 1.25))
    total = _verifier(method="relative", aggregate="sum").verify(pair)
    assert total.score == pytest.approx(2.5) and total.plausibility == pytest.approx(mean.plausibility)
    assert mean.to_dict()["plausibility"] == mean.plausibility
    none = _verifier(method="type_rank").verify([("a", "likes", "zz")])
    assert none.score is None and none.plausibility is None


def test_reprs_say_which_way_is_better():
    v = _verifier(method="type_rank")
    ts = v.score_triple("b", "likes", "e")
    text = repr(ts)
    assert "lower = more consistent" in text and "higher = more plausible" in text and "plausibility=0" in text
    ver = v.verify([("b", "likes", "e"), ("b", "likes", "b")])
    text = str(ver)
    assert "lower = more consistent" in text and "higher = more plausible" in text
    assert "type_rank mean" in text and "2 of 2 triples scored" in text
