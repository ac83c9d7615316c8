"""FRAG hop classifier (building block of the hop-aware router): training, routing, save/load, adapt."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kgrag_plugins.methods.frag.hop_classifier import COMPLEX, SIMPLE, HopClassifier, normalize_question, question_stats


@pytest.fixture(scope="module")
def metaqa_split(data_dir):
    from kgrag_plugins.eval.datasets import load_dataset

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
    assert trained.route(test[-1].question) in (SIMPLE, COMPLEX)


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
