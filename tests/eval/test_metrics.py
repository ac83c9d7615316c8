"""Metric tests. Every expected value is derived by hand in the comment next to it."""

from __future__ import annotations

import pytest

from kgrag_plugins.datasets.metrics import (
    accuracy,
    answer_recall_at_k,
    exact_match,
    f1_score,
    hits_at_1,
    mean,
    normalize_answer,
    recall_at_k,
)


def test_normalize_answer():
    # lower -> "the  quick, brown-fox!"; drop punctuation (no space inserted) -> "the  quick brownfox";
    # drop article "the" -> "  quick brownfox"; collapse whitespace -> "quick brownfox"
    assert normalize_answer("The  Quick, Brown-Fox!") == "quick brownfox"
    # articles only as whole words: "theater" keeps its "the"; "an" and "a" go -> "apple day theater"
    assert normalize_answer("An apple a day, theater") == "apple day theater"


def test_exact_match_articles_and_punctuation():
    # "The Cat!" -> "cat" and "cat" -> "cat": equal -> 1.0
    assert exact_match("The Cat!", "cat") == 1.0
    # "a cat" -> "cat", "the cat." -> "cat": equal -> 1.0
    assert exact_match("a cat", ["the cat."]) == 1.0
    # "cats" vs "cat": different strings -> 0.0
    assert exact_match("cats", "cat") == 0.0


def test_exact_match_max_over_aliases():
    # "NYC" != "new york", but "nyc" == "nyc" (second alias) -> max(0, 1) = 1.0
    assert exact_match("NYC", ["New York", "nyc"]) == 1.0


def test_f1_hand_computed():
    # pred "the cat sat" -> tokens [cat, sat] (2); gold "cat sat on mat" -> [cat, sat, on, mat] (4)
    # common = {cat, sat} = 2; P = 2/2 = 1; R = 2/4 = 0.5; F1 = 2*1*0.5/(1+0.5) = 1/1.5 = 2/3
    assert f1_score("the cat sat", "cat sat on mat") == pytest.approx(2 / 3)
    # token multiplicity: pred "the the cat cat cat" -> [cat, cat, cat] (3); gold "cat" -> [cat] (1)
    # common = min(3, 1) = 1; P = 1/3; R = 1/1; F1 = 2*(1/3)*1/(4/3) = (2/3)/(4/3) = 1/2
    assert f1_score("the the cat cat cat", "cat") == pytest.approx(0.5)
    # no shared token -> 0.0
    assert f1_score("dog", "cat") == 0.0


def test_f1_max_over_aliases_not_last_gold():
    # pred "New York City" -> [new, york, city] (3)
    #   vs "NYC" -> [nyc]: no overlap -> 0
    #   vs "New York" -> [new, york]: common 2; P = 2/3, R = 2/2 = 1; F1 = 2*(2/3)/(5/3) = 4/5 = 0.8
    # max = 0.8, whatever the alias order (KG-Infused RAG's last-gold-only scorer would give 0 for
    # the first ordering below).
    assert f1_score("New York City", ["New York", "NYC"]) == pytest.approx(0.8)
    assert f1_score("New York City", ["NYC", "New York"]) == pytest.approx(0.8)


def test_em_f1_empty_golds_raise():
    with pytest.raises(ValueError):
        exact_match("x", [])
    with pytest.raises(ValueError):
        f1_score("x", [])


def test_accuracy_substring():
    # "He was born in Paris, France." -> "he was born in paris france"; "paris" is a substring -> 1.0
    assert accuracy("He was born in Paris, France.", ["Paris"]) == 1.0
    # neither "london" nor "berlin" occurs -> 0.0
    assert accuracy("He was born in Paris, France.", ["London", "Berlin"]) == 0.0
    # gold "The" normalises to "" and is ignored (it would match anything) -> 0.0
    assert accuracy("anything", ["The"]) == 0.0


def test_recall_at_k_two_golds_cut_between():
    retrieved = ["p1", "p2", "p3", "p4"]
    gold = ["p3", "p1"]
    # k=1: top {p1} & {p1, p3} = {p1} -> 1/2
    assert recall_at_k(retrieved, gold, 1) == pytest.approx(0.5)
    # k=2: top {p1, p2} & {p1, p3} = {p1} -> 1/2 (k cuts between the two golds)
    assert recall_at_k(retrieved, gold, 2) == pytest.approx(0.5)
    # k=3: top {p1, p2, p3} contains both -> 2/2 = 1
    assert recall_at_k(retrieved, gold, 3) == 1.0
    # k larger than the list: all retrieved count -> 2/2 = 1
    assert recall_at_k(retrieved, gold, 10) == 1.0
    # duplicate gold ids count once: set {p1, p3}; k=2 finds p1 -> 1/2
    assert recall_at_k(retrieved, ["p1", "p1", "p3"], 2) == pytest.approx(0.5)
    # nothing relevant -> 0/2
    assert recall_at_k(["x", "y"], gold, 2) == 0.0


def test_recall_at_k_errors():
    with pytest.raises(ValueError):
        recall_at_k(["p1"], [], 5)  # undefined: callers skip questions without gold passages
    with pytest.raises(ValueError):
        recall_at_k(["p1"], ["p1"], 0)


def test_answer_recall_token_boundary():
    passages = ["The Halloween party was fun.", "Built in 1900, the town hall still stands."]
    # k=1: tokens [halloween, party, was, fun]; "hall" is not a token ("Halloween" must not match) -> 0
    assert answer_recall_at_k(passages, "Hall", 1) == 0.0
    # k=2: second passage tokens [built, in, 1900, town, hall, still, stands] contain [hall] -> 1
    assert answer_recall_at_k(passages, "Hall", 2) == 1.0


def test_answer_recall_multi_token_and_aliases():
    passages = ["He moved to New York, the city of lights.", "Nothing here."]
    # gold [new, york] is a contiguous run of [he, moved, to, new, york, city, of, lights] -> 1
    assert answer_recall_at_k(passages, "New York", 1) == 1.0
    # [york, new] does not occur contiguously in that order -> 0
    assert answer_recall_at_k(passages, "York New", 2) == 0.0
    # first alias absent, second ("the city" -> [city]) present -> 1
    assert answer_recall_at_k(passages, ["Paris", "the city"], 2) == 1.0
    # no passages -> 0
    assert answer_recall_at_k([], "New York", 5) == 0.0
    # unicode: composed "é" (U+00E9) in the passage, decomposed "e"+U+0301 in the gold; NFD makes them equal -> 1
    assert answer_recall_at_k(["Caf\u00e9 Society"], "Cafe\u0301", 1) == 1.0


def test_hits_at_1():
    # top prediction "Jamaican English" does not contain "french" -> 0
    assert hits_at_1(["Jamaican English", "French"], ["French"]) == 0.0
    # top prediction "French" contains "french" -> 1
    assert hits_at_1(["French", "Jamaican English"], ["Haitian Creole", "French"]) == 1.0
    # string prediction "The answer is French." -> "answer is french" contains "french" -> 1
    assert hits_at_1("The answer is French.", "French") == 1.0
    # empty prediction list -> no top prediction -> 0
    assert hits_at_1([], ["French"]) == 0.0


def test_mean():
    assert mean([]) == 0.0
    # (1 + 0 + 0.5) / 3 = 0.5
    assert mean([1.0, 0.0, 0.5]) == pytest.approx(0.5)


def test_sign_test_p_is_the_two_sided_exact_binomial_tail():
    from kgrag_plugins.datasets.metrics import sign_test_p

    assert sign_test_p(0, 7) == pytest.approx(2 / 2**7)  # all seven one way
    assert sign_test_p(8, 5) == sign_test_p(5, 8) == pytest.approx(2 * sum([1, 13, 78, 286, 715, 1287]) / 2**13)
    assert sign_test_p(3, 3) == 1.0 and sign_test_p(0, 0) == 1.0
