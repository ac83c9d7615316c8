"""FRAG's h_min hop labels (issue 13 item 11; FRAG §3 "Preliminary" and §4.2, docs/methods.md §2(b)).

A question is simple iff h_min <= δ = 2, where h_min is the fewest KG hops from its topic entity
to an answer entity. :func:`hmin_hops` computes it by BFS with edges walked both ways;
``kgrag train hop-classifier --labels hmin`` and the KGQA bench (``--labels hmin``) train the
classifier on it and report both label sources.
"""

from __future__ import annotations

import json

import networkx as nx
import pytest
from conftest import HashEmbedder
from faithful_kgqa import EXPECTED_HMIN, QUESTIONS, TRIPLES, write_tiny_metaqa

from kgrag_plugins.cli import main
from kgrag_plugins.datasets.loaders import Question, load_dataset
from kgrag_plugins.eval.bench import run_bench
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.importers import load_kg
from kgrag_plugins.methods.frag.hop_classifier import HopClassifier
from kgrag_plugins.train.hop import hmin_hops, hmin_summary, train_hop_classifier
from kgrag_plugins.types import Entity


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    return write_tiny_metaqa(tmp_path_factory.mktemp("hmin-data"))


def _q(qid: str, topic: str | None, answers: list[str], hops: int = 2) -> Question:
    return Question(id=qid, question="q", answers=answers, hops=hops, topic_entity=topic)


def test_hmin_walks_both_directions_to_the_nearest_answer():
    g = KnowledgeGraph()
    for e in ("film", "director", "other film", "year", "island"):
        g.add_entity(Entity(e, e.title()))
    g.add_triple("film", "directed_by", "director")  # stored one way, as MetaQA's kb.txt
    g.add_triple("other film", "directed_by", "director")
    g.add_triple("other film", "release_year", "year")
    qs = [
        _q("against-direction", "director", ["film"]),  # only reachable against the edge: 1
        _q("nearest", "film", ["year", "director"]),  # year is 3 hops away, director 1: h_min = 1
        _q("three", "film", ["year"]),
        _q("by-name", "film", ["Other Film"]),  # answers resolved by name as well as id
        _q("topic-is-answer", "film", ["film"]),
        _q("unreachable", "film", ["island"]),
        _q("no-topic", "nowhere", ["film"]),
        _q("no-answer-in-kg", "film", ["Atlantis"]),
    ]
    assert hmin_hops(g, qs) == [1, 1, 3, 2, 0, None, None, None]
    assert hmin_hops(g, qs[2:3], max_hops=2) == [None]  # no answer within the search depth


def test_hmin_on_the_tiny_metaqa_kg_matches_networkx(tiny_root):
    ds = load_dataset("metaqa", data_dir=tiny_root)
    graph, _ = load_kg(ds.kb_path, "metaqa", progress=False)
    got = dict(zip([q.id for q in ds.questions], hmin_hops(graph, ds.questions)))
    g = nx.Graph()
    g.add_edges_from((h, t) for h, _, t in TRIPLES)
    for q in ds.questions:  # networkx's undirected shortest path to the nearest answer
        assert got[q.id] == min(nx.shortest_path_length(g, q.topic_entity, a) for a in q.answers), q.id
    assert got == EXPECTED_HMIN
    s = hmin_summary(ds.questions, got)
    # one 3-hop question has h_min 1: 11 of 12 simple/complex labels agree
    assert (s["n"], s["unlabelled"], s["agreement"]) == (12, 0, round(11 / 12, 4))
    assert s["by_dataset_hops"] == {"1": {"1": 4}, "2": {"2": 4}, "3": {"1": 1, "3": 3}}


def _recording_fit(seen: list):
    fit = HopClassifier.fit

    def recording(self, texts, hops, *a, **kw):
        seen.append(dict(zip(texts, hops)))
        return fit(self, texts, hops, *a, **kw)

    return recording


def test_hmin_labels_train_the_hop_classifier(tiny_root, tmp_path, monkeypatch):
    seen: list = []
    monkeypatch.setattr(HopClassifier, "fit", _recording_fit(seen))
    report = train_hop_classifier(
        tmp_path / "h.npz", datasets=["metaqa"], data_dir=tiny_root, limit=12, labels="hmin", embedder=HashEmbedder()
    )
    hmin_by_text = {t.replace("[", "").replace("]", ""): h for _, t, _, _, _, h in QUESTIONS}
    trained = seen[-1]
    assert trained and all(hops == hmin_by_text[text] for text, hops in trained.items())
    row = report["held_out"]["metaqa"]
    assert report["labels"] == "hmin" and row["label_source"] == "hmin"
    assert set(row["by_label_source"]) == {"dataset", "hmin"}
    assert row["accuracy"] == row["by_label_source"]["hmin"]["accuracy"]
    assert row["hmin"]["agreement"] == round(11 / 12, 4) and row["hmin"]["unlabelled"] == 0

    # the default keeps the dataset's hop counts, and still reports both label sources
    report = train_hop_classifier(
        tmp_path / "d.npz", datasets=["metaqa"], data_dir=tiny_root, limit=12, embedder=HashEmbedder()
    )
    by_text = {t.replace("[", "").replace("]", ""): h for _, t, _, _, h, _ in QUESTIONS}
    assert all(hops == by_text[text] for text, hops in seen[-1].items())
    row = report["held_out"]["metaqa"]
    assert row["label_source"] == "dataset" and row["accuracy"] == row["by_label_source"]["dataset"]["accuracy"]


def test_hmin_labels_fall_back_to_dataset_hops_without_a_kg(tiny_root, tmp_path):
    (tiny_root / "popqa").mkdir(exist_ok=True)
    rows = [{"id": f"p{i}", "question": f"who is person {i}", "answers": ["x"], "hops": 1} for i in range(6)]
    (tiny_root / "popqa" / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tiny_root / "popqa" / "corpus.jsonl").write_text('{"id": "c", "title": "t", "text": "x"}\n')
    report = train_hop_classifier(
        tmp_path / "h.npz",
        datasets=["metaqa"],
        test_only=["popqa"],
        data_dir=tiny_root,
        limit=12,
        labels="hmin",
        embedder=HashEmbedder(),
    )
    assert report["held_out"]["popqa"]["label_source"] == "dataset"
    assert "by_label_source" not in report["held_out"]["popqa"]
    with pytest.raises(ValueError, match="labels must be one of dataset, hmin"):
        train_hop_classifier(tmp_path / "x.npz", datasets=["metaqa"], data_dir=tiny_root, labels="gold")


def test_hmin_cli_train_and_kgqa_bench(tiny_root, tmp_path, capsys):
    out = tmp_path / "hop.npz"
    argv = ["train", "hop-classifier", "--datasets", "metaqa", "--data-dir", str(tiny_root), "--out", str(out)]
    assert main(argv + ["--limit", "12", "--labels", "hmin"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["labels"] == "hmin" and report["held_out"]["metaqa"]["label_source"] == "hmin"

    seen: list = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HopClassifier, "fit", _recording_fit(seen))
        bench = run_bench(
            "metaqa", ["frag"], data_dir=tiny_root, per_hop=2, train_per_hop=2, progress=False, labels="hmin"
        )
    assert bench["hop_classifier"]["labels"] == "hmin" and bench["hop_labels"]["classifier_trained_on"] == "hmin"
    hmin_by_text = {t.replace("[", "").replace("]", ""): h for _, t, _, _, _, h in QUESTIONS}
    assert seen and all(hops == hmin_by_text[text] for text, hops in seen[-1].items())
    assert bench["hop_labels"]["evaluation"]["n"] + bench["hop_labels"]["train"]["n"] == 12
    r = bench["results"]["frag"]
    assert 0.0 <= r["routing_accuracy_hmin"] <= 1.0 and 0.0 <= r["routing_accuracy"] <= 1.0

    bad = ["bench", "--dataset", "metaqa", "--data-dir", str(tiny_root), "--labels", "gold"]
    with pytest.raises(SystemExit):
        main(bad)


def test_hmin_on_real_metaqa_is_at_most_the_dataset_hops(data_dir):
    ds = load_dataset("metaqa", data_dir=data_dir)
    graph, _ = load_kg(ds.kb_path, "metaqa", progress=False)
    by_hops: dict[int, list[Question]] = {}
    for q in ds.questions:
        if len(by_hops.setdefault(int(q.hops), [])) < 40 and q.metadata.get("answers_reachable_in_kb", 1.0) == 1.0:
            by_hops[int(q.hops)].append(q)
    for h, qs in by_hops.items():
        got = hmin_hops(graph, qs)
        assert all(x is not None and 1 <= x <= h for x in got), (h, got)
        if h == 1:
            assert got == [1] * len(qs)
