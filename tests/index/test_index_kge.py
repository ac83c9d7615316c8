"""The KGE of an index generation (index/kge.py): trained on the index graph, stored in the live
generation, loaded again, invalidated by a graph change (Know³-RAG §3.2; docs/kge.md)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from kgrag_plugins.index import kge as index_kge
from kgrag_plugins.index.kge import KGE_DIR, kge_for_index
from kgrag_plugins.models.kge import KGEModel


def _hand_set_model() -> KGEModel:
    """A DistMult with hand-set vectors and no graph fingerprint (trained on no index graph)."""
    E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]], dtype=np.float32)
    R = np.array([[1.0, 2.0], [0.5, 0.5], [3.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    return KGEModel("distmult", ["a", "b", "c", "d"], ["likes", "knows"], E, R, directions="tail")


@pytest.fixture(scope="module")
def built_index(tmp_path_factory):
    """One saved mentions-graph index over the small corpus (HashEmbedder), copied per test."""
    from conftest import HashEmbedder
    from small_corpus import SMALL

    from kgrag_plugins.index.store import KnowledgeIndex

    d = tmp_path_factory.mktemp("kge_index") / "idx"
    KnowledgeIndex.build(SMALL, d, embedder=HashEmbedder(), builder="mentions", progress=False).close()
    return d


def _index(built_index, tmp_path):
    import shutil

    from conftest import HashEmbedder

    from kgrag_plugins.index.store import KnowledgeIndex

    shutil.copytree(built_index, tmp_path / "idx")
    return KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())


FAST = {"dim": 8, "epochs": 2, "progress": False, "threads": 1, "negatives": 16, "batch_size": 32}


def test_kge_for_index_trains_saves_loads_and_invalidates(built_index, tmp_path, caplog, monkeypatch):
    from conftest import HashEmbedder
    from small_corpus import REUNIFICATION

    from kgrag_plugins.index.store import KnowledgeIndex

    idx = _index(built_index, tmp_path)
    with caplog.at_level(logging.INFO, logger="kgrag_plugins.index.kge"):
        m = kge_for_index(idx, **FAST)
    assert m is not None and "training a KGE" in caplog.text
    assert m.canonicalize  # a mentions graph has free-text relations
    assert m.config["pool_below"] == index_kge.CORPUS_POOL_BELOW  # rare labels share mixed batches
    gen_kge = idx.derived_path(KGE_DIR)
    assert (gen_kge / "kge.json").is_file() and gen_kge.parent.name == idx.manifest["generation"]
    assert kge_for_index(idx) is m  # cached per generation
    # a fresh open loads the stored model instead of training
    calls = []
    monkeypatch.setattr(index_kge, "train_kge", lambda *a, **k: calls.append(1))
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    loaded = kge_for_index(again)
    assert not calls and loaded is not None
    trip = [(t.head, t.relation, t.tail) for t in again.graph.triples()][:5]
    assert np.array_equal(loaded.score_many(trip), m.score_many(trip))
    # a graph change makes a new generation: no KGE there until trained again
    again.add_passages([REUNIFICATION], progress=False)
    assert again.derived_path(KGE_DIR) != gen_kge
    assert kge_for_index(again, train=False) is None
    monkeypatch.undo()
    fresh = kge_for_index(again, **FAST)
    assert fresh is not None and (again.derived_path(KGE_DIR) / "kge.json").is_file()
    assert fresh.fingerprint != m.fingerprint


def test_kge_keeps_its_held_out_triples_and_retrains_a_format_1_model(built_index, tmp_path, caplog):
    """The validation split is stored (θ_0 is calibrated on it, Know³); a model saved before it
    was (format 1) still loads, but ``kge_for_index`` trains again rather than use it."""
    idx = _index(built_index, tmp_path)
    m = kge_for_index(idx, **FAST)
    n_valid = m.report["num_valid_triples"]
    assert n_valid > 0 and m.valid_rows.shape == (n_valid, 3)
    assert m.valid_rows.min() >= 0 and m.valid_rows[:, 0].max() < m.num_entities
    assert m.valid_rows[:, 1].max() < m.num_relations
    path = idx.derived_path(KGE_DIR)
    back = KGEModel.load(path)
    assert np.array_equal(back.valid_rows, m.valid_rows)
    # rewrite it as format 1 (no "valid" tensor): loads with valid_rows None
    raw = torch.load(path / "weights.pt", weights_only=True)
    torch.save({"entity": raw["entity"], "relation": raw["relation"]}, path / "weights.pt")
    meta = json.loads((path / "kge.json").read_text())
    (path / "kge.json").write_text(json.dumps({**meta, "format_version": 1}))
    assert KGEModel.load(path).valid_rows is None
    from conftest import HashEmbedder

    from kgrag_plugins.index.store import KnowledgeIndex

    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    with caplog.at_level(logging.INFO, logger="kgrag_plugins.index.kge"):
        fresh = kge_for_index(again, **FAST)
    assert "predates stored held-out triples" in caplog.text and "training a KGE" in caplog.text
    assert fresh.valid_rows is not None and KGEModel.load(path).valid_rows is not None
    meta["format_version"] = 99
    (path / "kge.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="format 99"):
        KGEModel.load(path)


def test_kge_for_index_ignores_a_stale_model(built_index, tmp_path):
    idx = _index(built_index, tmp_path)
    path = idx.derived_path(KGE_DIR)
    _hand_set_model().save(path)  # fingerprint None: trained on another graph
    assert kge_for_index(idx, train=False) is None
    m = kge_for_index(idx, **FAST)
    assert m is not None and KGEModel.load(path).fingerprint == m.fingerprint
