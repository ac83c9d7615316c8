"""FRAG hop classifier (building block of the hop-aware router): features, training, routing, save/load, adapt."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgrag_plugins.methods.frag.hop_classifier import (
    _CUES,
    COMPLEX,
    FEATURES_VERSION,
    PARSE_STATS,
    SIMPLE,
    HopClassifier,
    kmeans,
    normalize_question,
    question_stats,
    structure_features,
)


def _stat(q: str, name: str) -> float:
    return float(structure_features([normalize_question(q)])[0, len(_CUES) + 3 + PARSE_STATS.index(name)])


@pytest.fixture(scope="module")
def metaqa_split(data_dir):
    from kgrag_plugins.datasets.loaders import load_dataset

    rng = random.Random(0)
    by: dict[int, list] = {}
    for q in load_dataset("metaqa", data_dir=data_dir).questions:
        by.setdefault(q.hops, []).append(q)
    train, test = [], []
    for h in (1, 2, 3):
        qs = rng.sample(by[h], 300)
        train += qs[:200]
        test += qs[200:]
    return train, test


@pytest.fixture(scope="module")
def trained(metaqa_split):
    train, _ = metaqa_split
    return HopClassifier().fit([q.question for q in train], [q.hops for q in train])


def test_normalisation_and_stats():
    assert normalize_question("  who directed  [Heat] ") == "Who directed [Heat]?"
    assert normalize_question("Why?") == "Why?"
    s1 = question_stats("Who directed Heat?")
    s2 = question_stats("Who is the director of the film whose writer was born in the city of Paris, France?")
    assert s2[0] > s1[0] and s2[2] == 1  # longer, one comma
    assert s2.shape == s1.shape


def test_separates_metaqa_hops_on_held_out_questions(trained, metaqa_split):
    _, test = metaqa_split
    pred = trained.predict([q.question for q in test])
    gold = [COMPLEX if q.hops > 2 else SIMPLE for q in test]
    acc = np.mean([p == g for p, g in zip(pred, gold)])
    assert acc >= 0.85
    # route() (one question) gives the batch prediction; 4 questions of each hop count, both routes
    sample = list(range(0, len(test), 25))
    routes = [trained.route(test[i].question) for i in sample]
    assert routes == [pred[i] for i in sample] and set(routes) == {SIMPLE, COMPLEX}


def test_save_load_round_trip_and_embedder_check(trained, metaqa_split, tmp_path):
    from conftest import HashEmbedder

    _, test = metaqa_split
    qs = [q.question for q in test[:20]]
    path = trained.save(tmp_path / "hop.npz")
    loaded = HopClassifier.load(path, embedder=trained.embedder)
    assert np.allclose(loaded.predict_proba(qs), trained.predict_proba(qs))
    with pytest.raises(ValueError, match="trained with embedder"):
        HopClassifier.load(path, embedder=HashEmbedder())
    with pytest.raises(FileNotFoundError):
        HopClassifier.load(tmp_path / "missing.npz")


def test_adapt_moves_predictions_toward_feedback_labels(trained, metaqa_split, tmp_path):
    _, test = metaqa_split
    simple_qs = [q.question for q in test if q.hops == 1][:30]
    clf = HopClassifier.load(trained.save(tmp_path / "a.npz"), embedder=trained.embedder)
    before = clf.predict_proba(simple_qs).mean()
    clf.adapt(simple_qs, [COMPLEX] * len(simple_qs), weight=20.0)  # feedback says: these are long
    assert clf.predict_proba(simple_qs).mean() > before + 0.2


def test_bad_input_gives_clear_errors():
    from conftest import HashEmbedder

    clf = HopClassifier(HashEmbedder())
    with pytest.raises(ValueError, match="not trained"):
        clf.predict(["Who directed Heat?"])
    with pytest.raises(ValueError, match="both simple and complex"):
        clf.fit(["a?", "b?"], [1, 2])
    with pytest.raises(ValueError, match="hop labels"):
        clf.fit(["a?"], [1, 3])
    with pytest.raises(ValueError, match="non-empty"):
        clf.fit(["  ", "b?"], [1, 3])
    with pytest.raises(ValueError, match="fit first"):
        clf.adapt(["a?"], [SIMPLE])


def test_cli_trains_saves_and_reports_held_out_scores(data_dir, tmp_path, capsys):
    import json

    from kgrag_plugins.cli import main

    out = tmp_path / "hop.npz"
    rc = main(["train", "hop-classifier", "--out", str(out), "--datasets", "metaqa,popqa",
               "--limit", "600", "--data-dir", str(data_dir)])  # fmt: skip
    assert rc == 0 and out.is_file()
    report = json.loads(capsys.readouterr().out)
    assert set(report["held_out"]) == {"metaqa", "popqa"}
    assert report["held_out"]["metaqa"]["n"] == 180 and report["held_out"]["popqa"]["complex_share"] == 0.0
    assert report["held_out"]["metaqa"]["macro_f1"] >= 0.85
    clf = HopClassifier.load(out)
    assert clf.route("who directed the films that share actors with the film directed by Tom Tykwer") in (
        SIMPLE,
        COMPLEX,
    )
    assert main(["train", "hop-classifier", "--out", str(out), "--datasets", "nosuch",
                 "--data-dir", str(data_dir)]) == 2  # fmt: skip


def test_parse_stats_count_relations_not_name_words():
    # a long title is one mention: the masked word count does not grow with the name
    short = "Who founded the company that published Heat?"
    long = "Who founded the company that published Journal of Psychotherapy Integration?"
    assert _stat(short, "masked_words") == _stat(long, "masked_words")
    assert _stat(short, "mentions") == _stat(long, "mentions") == 1
    # each added relation (clause, "of"-chain, possessive) is counted
    one = "Who directed Heat?"
    two = "Who is the father of the director of Heat?"
    three = "Who is the father of the director of the film that Al Pacino starred in?"
    assert _stat(one, "masked_of") == 0 < _stat(two, "masked_of") == 2
    assert _stat(one, "relcl") == _stat(two, "relcl") == 0 < _stat(three, "relcl")
    assert _stat(one, "depth") < _stat(two, "depth") < _stat(three, "depth")
    assert _stat("Who is Heat's director's father?", "masked_poss") > _stat(two, "masked_poss") == 0
    assert "film_of" not in _CUES  # issue 20: the film/book/song word cue was dropped


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(min_size=1, max_size=80).filter(str.strip), min_size=1, max_size=3))
def test_structure_features_are_finite_counts_for_any_text(texts):
    qs = [normalize_question(t) for t in texts]
    f = structure_features(qs)
    assert f.shape == (len(qs), len(_CUES) + 3 + len(PARSE_STATS))
    assert np.isfinite(f).all() and (f >= 0).all()


def test_kmeans_is_deterministic_and_finds_separate_groups():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.1, (30, 4)), rng.normal(5, 0.1, (20, 4))])
    c1, c2 = kmeans(X, 2), kmeans(X, 2)
    assert np.array_equal(c1, c2)
    assert sorted(np.round(c1[:, 0]).tolist()) == [0.0, 5.0]
    with pytest.raises(ValueError, match="k-means"):
        kmeans(X, 0)


def test_style_clusters_round_trip_and_old_files_are_refused(metaqa_split, tmp_path):
    from conftest import HashEmbedder

    from kgrag_plugins.models.persist import load_npz, save_npz

    train, test = metaqa_split
    emb = HashEmbedder()
    qs, hops = [q.question for q in train[::4]], [q.hops for q in train[::4]]
    for k in (1, 3):
        clf = HopClassifier(emb, n_clusters=k).fit(qs, hops)
        assert (clf._centroids is None) == (k == 1)
        loaded = HopClassifier.load(clf.save(tmp_path / f"k{k}.npz"), embedder=emb)
        probe = [q.question for q in test[:10]]
        assert loaded.n_clusters == k and np.allclose(loaded.predict_proba(probe), clf.predict_proba(probe))
    # a file written before the v3 features (no stats/centroids) is refused with a retrain hint
    old = {k: v for k, v in load_npz(tmp_path / "k3.npz", emb, "hop classifier").items() if k != "embedder"}
    old["features_version"] = np.array(FEATURES_VERSION - 1)
    for key in ("stats_mean", "stats_std", "centroids", "n_clusters"):
        old.pop(key)
    save_npz(tmp_path / "v2.npz", emb, **old)
    with pytest.raises(ValueError, match="retrain it with `kgrag train hop-classifier`"):
        HopClassifier.load(tmp_path / "v2.npz", embedder=emb)
    with pytest.raises(ValueError, match="n_clusters"):
        HopClassifier(emb, n_clusters=0)
