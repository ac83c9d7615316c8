"""Mined Horn rules beside a KGE (``models/kge_rules.py``): confidences computed by hand on a small
KG, the name-equivalence relation, scoring, and the combined ranking."""

from __future__ import annotations

import numpy as np
import pytest

from kgrag_plugins.models.kge_rules import SAME_NAME, PathRules, name_key, role_counts, rule_augmented_scores

REL = ["directed_by", "written_by", "has_tags"]


def _kg() -> tuple[list[str], list[tuple[str, str, str]]]:
    """12 films written by ``Pat i``; films 0-8 also directed by her, 9-11 by ``Quinn``; films 0-5
    tagged with her name in lower case; ``Film X`` has only the tag ``pat 3``."""
    triples = []
    for i in range(12):
        triples.append((f"Film {i}", "written_by", f"Pat {i}"))
        triples.append((f"Film {i}", "directed_by", f"Pat {i}" if i < 9 else "Quinn"))
        if i < 6:
            triples.append((f"Film {i}", "has_tags", f"pat {i}"))
    triples.append(("Film X", "has_tags", "pat 3"))
    ents = list(dict.fromkeys(x for h, _, t in triples for x in (h, t)))
    return ents, triples


def _mine(**kw):
    ents, triples = _kg()
    idx = {e: i for i, e in enumerate(ents)}
    rows = np.array([(idx[h], REL.index(r), idx[t]) for h, r, t in triples])
    rules = PathRules.mine(
        rows[:, 0], rows[:, 1], rows[:, 2], num_entities=len(ents), num_relations=3, names=ents, **kw
    )
    return ents, idx, rows, rules


def _rule(rules: PathRules, head: int, body: tuple) -> object:
    found = [r for r in rules.rules_for(head) if r.body == body]
    assert len(found) == 1, (head, body, [r.body for r in rules.rules_for(head)])
    return found[0]


def test_confidences_match_the_definition():
    _, _, _, rules = _mine(min_support=5, pseudo_count=5.0)
    d, w, tg = 0, 1, 2
    # directed_by(x,y) <= written_by(x,y): 12 body pairs, 9 of them directed_by facts
    r = _rule(rules, d, (w,))
    assert (r.support, r.body_size) == (9, 12) and r.confidence == pytest.approx(9 / 17)
    # written_by <= directed_by: body = 9 (Film i, Pat i) + 3 (Film j, Quinn), 9 supported
    r = _rule(rules, w, (d,))
    assert (r.support, r.body_size) == (9, 12) and r.confidence == pytest.approx(9 / 17)
    # the inverse direction is mined too (~directed_by(y,x) <= ~written_by(y,x))
    assert _rule(rules, d + 3, (w + 3,)).confidence == pytest.approx(9 / 17)
    # written_by(x,y) <= has_tags(x,z), same_name(z,y): 7 body pairs (Film X -> Pat 3 too), 6 true
    r = _rule(rules, w, (tg, SAME_NAME))
    assert (r.support, r.body_size) == (6, 7) and r.confidence == pytest.approx(6 / 12)
    assert "written_by(x,y) <= has_tags(x,z1), same_name(z1,y)" in r.describe(REL)
    # fewer than min_support correct predictions: no rule (has_tags <= written_by has 6)
    assert not [x for x in rules.rules_for(tg) if x.body == (w,)]
    _, _, _, loose = _mine(min_support=1)
    assert [x for x in loose.rules_for(tg) if x.body == (w, SAME_NAME)]


def test_scores_predict_missing_links_and_never_the_head():
    ents, idx, _, rules = _mine(min_support=5)
    conf = rules.confidences([idx["Film X"], idx["Film 10"]], 1)  # written_by of Film X / Film 10
    assert conf.shape == (2, len(ents)) and conf.dtype == np.float32
    # Film X: its tag names Pat 3 -> the same-name rule predicts her, nothing else
    assert np.flatnonzero(conf[0]).tolist() == [idx["Pat 3"]]
    assert conf[0, idx["Pat 3"]] == pytest.approx(6 / 12)
    # Film 10: directed by Quinn -> written_by <= directed_by predicts Quinn (max over rules)
    assert conf[1, idx["Quinn"]] == pytest.approx(9 / 17) and conf[1, idx["Film 10"]] == 0
    # the inverse query: films Pat 3 wrote, from ~written_by <= ~has_tags/same_name and ~directed_by
    inv = rules.confidences([idx["Pat 3"]], 1 + 3)[0]
    assert inv[idx["Film X"]] > 0 and inv[idx["Film 3"]] > 0 and inv[idx["Pat 3"]] == 0
    # no rule reaches the support: nothing is predicted
    _, _, _, none = _mine(min_support=100)
    assert len(none) == 0 and not none.confidences([idx["Film X"]], 1).any()


def test_rule_augmented_scores_put_rule_predictions_first():
    ents, idx, rows, rules = _mine(min_support=5)
    n = len(ents)
    rng = np.random.default_rng(0)
    kge = rng.normal(size=(1, n))
    kge[0, idx["Pat 7"]] = 50.0  # the KGE alone is sure of a wrong writer
    plain = rule_augmented_scores(kge, np.array([idx["Film X"]]), np.array([1]))
    assert np.exp(plain).sum() == pytest.approx(1.0) and int(plain.argmax()) == idx["Pat 7"]
    ruled = rule_augmented_scores(kge, np.array([idx["Film X"]]), np.array([1]), rules=rules, rule_weight=1000.0)
    assert int(ruled.argmax()) == idx["Pat 3"]
    # below the rule predictions, the KGE order is kept
    order = np.argsort(-ruled[0])
    assert order[0] == idx["Pat 3"] and order[1] == idx["Pat 7"]
    # the role prior: log(1 + how often an entity is a written_by tail)
    counts = role_counts(rows[:, 0], rows[:, 1], rows[:, 2], n, 3)
    assert counts[1, idx["Pat 3"]] == 1 and counts[0, idx["Quinn"]] == 3 and counts[1 + 3, idx["Film 0"]] == 1
    flat = np.zeros((1, n))
    pri = rule_augmented_scores(flat, np.array([idx["Film X"]]), np.array([0]), counts=counts, prior_weight=1.0)
    assert int(pri.argmax()) == idx["Quinn"]


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="out of range"):
        PathRules.mine(np.array([0]), np.array([3]), np.array([1]), num_entities=2, num_relations=3)
    with pytest.raises(ValueError, match="names has 1 entries"):
        PathRules.mine(np.array([0]), np.array([0]), np.array([1]), num_entities=2, num_relations=1, names=["a"])
    with pytest.raises(ValueError, match="max_length"):
        PathRules.mine(np.array([0]), np.array([0]), np.array([1]), num_entities=2, num_relations=1, max_length=3)
    assert name_key("  Tom\tHANKS ") == "tom hanks"
