"""``kgrag train kge``: on a saved index (--index), the MetaQA protocol on a synthetic MetaQA-style
data directory, clear errors, and (slow) the real MetaQA report with its floors (docs/kge.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from movie_kg import movie_triples

from kgrag_plugins.cli import main
from kgrag_plugins.index.kge import KGE_DIR
from kgrag_plugins.models.kge import KGEModel

TINY = ["--dim", "8", "--epochs", "2", "--threads", "1"]


def _saved_index(tmp_path):
    from conftest import HashEmbedder
    from small_corpus import SMALL

    from kgrag_plugins.index.store import KnowledgeIndex

    KnowledgeIndex.build(SMALL, tmp_path / "idx", embedder=HashEmbedder(), builder="mentions", progress=False).close()
    return tmp_path / "idx"


def test_cli_train_kge_on_an_index(tmp_path, capsys):
    from conftest import HashEmbedder

    from kgrag_plugins.index.kge import kge_for_index
    from kgrag_plugins.index.store import KnowledgeIndex

    idx_dir = _saved_index(tmp_path)
    rc = main(["train", "kge", "--index", str(idx_dir), "--report", str(tmp_path / "r.json"), *TINY])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "r.json").read_text())
    assert printed["epochs_run"] == 2 and printed["dim"] == 8 and printed["canonicalize"] is True
    with KnowledgeIndex.open(idx_dir, embedder=HashEmbedder()) as index:
        saved = index.derived_path(KGE_DIR)
        assert printed["saved"] == str(saved) and (saved / "weights.pt").is_file()
        model = kge_for_index(index, train=False)  # the stored model matches the live graph
        assert model is not None and model.dim == 8 and model.model_name == "complex"


def test_cli_train_kge_passes_the_training_options(tmp_path, capsys):
    idx_dir = _saved_index(tmp_path)
    opts = ["--full-softmax", "--reg", "0.05", "--batch-size", "32", "--device", "cpu", "--time-budget", "600"]
    assert main(["train", "kge", "--index", str(idx_dir), *TINY, *opts]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["full_softmax"] is True and printed["reg"] == 0.05 and printed["batch_size"] == 32
    assert printed["device"] == "cpu" and printed["epochs_run"] == 2


def test_cli_train_kge_cpu_preset_fills_what_was_not_given(tmp_path, capsys):
    idx_dir = _saved_index(tmp_path)
    # TINY's dim / epochs / threads win; the preset brings N3 0.1 and patience 3 (docs/kge.md)
    assert main(["train", "kge", "--index", str(idx_dir), "--preset", "cpu", *TINY]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["reg"] == 0.1 and printed["patience"] == 3
    assert printed["dim"] == 8 and printed["epochs"] == 2 and printed["full_softmax"] is False


def test_cli_train_kge_gpu_preset_without_cuda_is_one_clear_line(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    idx_dir = _saved_index(tmp_path)
    assert main(["train", "kge", "--index", str(idx_dir), "--preset", "gpu", *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no CUDA GPU" in err and "--preset cpu" in err
    # the same preset with an explicit --device cpu trains its 1-N recipe on the CPU
    assert main(["train", "kge", "--index", str(idx_dir), "--preset", "gpu", "--device", "cpu", *TINY]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["full_softmax"] is True and printed["batch_size"] == 100 and printed["reg"] == 0.1
    assert printed["device"] == "cpu" and printed["dim"] == 8


def test_cli_train_kge_errors(tmp_path, capsys):
    rc = main(
        ["train", "kge", "--dataset", "metaqa", "--data-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "kgrag train: error:" in err and "nope" in err
    rc = main(["train", "kge", "--dataset", "hotpotqa", "--out", str(tmp_path / "o")])
    assert rc == 2 and "--dataset must be metaqa" in capsys.readouterr().err
    rc = main(["train", "kge", "--index", str(tmp_path / "not-an-index")])
    assert rc == 2 and "not a kgrag index" in capsys.readouterr().err
    rc = main(["train", "hop-classifier"])
    assert rc == 2 and "needs --out" in capsys.readouterr().err


def _fake_metaqa(root):
    """A MetaQA-shaped data directory: 40 films over shared actors / directors / years."""
    rng = np.random.default_rng(0)
    actors = [f"Actor {i}" for i in range(25)]
    movies = []
    for i in range(40):
        cast = list(rng.choice(actors, size=3, replace=False))
        movies.append(
            (f"Film {i}", f"Director {i % 8}", cast, [f"Writer {i % 10}"], str(1990 + i % 6), ["Drama"], "English")
        )
    triples = movie_triples(movies)
    d = root / "metaqa"
    d.mkdir(parents=True)
    (root / "SOURCES.md").write_text("fake\n")
    (d / "kb.txt").write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples))
    rows = []
    for i, a in enumerate(actors):
        films = [m[0] for m in movies if a in m[2]]
        if films:
            q = {"id": f"q{i}", "question": f"what films did [{a}] act in", "answers": films, "topic_entity": a}
            rows.append(json.dumps({**q, "hops": 1}))
    (d / "questions_1hop.jsonl").write_text("\n".join(rows) + "\n")
    return triples


def test_metaqa_protocol_on_a_small_metaqa_directory(tmp_path):
    from kgrag_plugins.train.kge import train_kge_metaqa

    triples = _fake_metaqa(tmp_path / "data")
    rep = train_kge_metaqa(
        tmp_path / "model", data_dir=tmp_path / "data", questions=10, test_fraction=0.05, progress=False,
        dim=8, epochs=2, threads=1, batch_size=64, negatives=32,
    )  # fmt: skip
    distinct = len(set(triples))
    assert rep["num_triples"] == distinct and rep["num_questions"] == 10
    assert rep["num_train_triples"] + rep["num_test_triples"] + rep["num_answer_triples"] == distinct
    assert rep["num_answer_triples"] >= 10 and rep["num_test_triples"] == round(
        0.05 * (distinct - rep["num_answer_triples"])
    )
    for key in ("mrr", "hits@10", "auc_raw", "auc_relative", "auc_type_rank", "auc_verifier", "answer_auc"):
        assert 0.0 <= rep[key] <= 1.0, key
    assert rep["auc_verifier"] == rep[f"auc_{rep['verifier_method']}"]
    assert rep["answer_pairs"] > 0 and rep["classification_pairs"] > 0
    model = KGEModel.load(tmp_path / "model")
    # the held-out answer triples are not in the training split: the model saw fewer triples
    assert model.report["num_train_triples"] + model.report["num_valid_triples"] == rep["num_train_triples"]


@pytest.mark.slow
def test_metaqa_report_meets_the_floors(data_dir, tmp_path, capsys):
    """The acceptance command with the default settings (several minutes on 2 CPU cores)."""
    out, report = tmp_path / "kge", tmp_path / "kge.json"
    rc = main(
        ["train", "kge", "--dataset", "metaqa", "--data-dir", str(data_dir), "--out", str(out), "--report", str(report)]
    )
    assert rc == 0
    rep = json.loads(report.read_text())
    assert rep["auc_verifier"] >= 0.78 and rep["answer_auc"] >= 0.65, rep
    assert rep["train_seconds"] < 600 and rep["mrr"] > 0.1
    assert KGEModel.load(out).num_entities == rep["train"]["num_entities"] > 40_000
