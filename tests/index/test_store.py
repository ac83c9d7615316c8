"""KnowledgeIndex: build/save/open round trips, mismatch errors, atomic writes."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import REPO_ROOT, HashEmbedder

from kgrag_plugins.config import INDEX_FORMAT_VERSION
from kgrag_plugins.index.store import IndexMismatchError, KnowledgeIndex
from kgrag_plugins.methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever
from kgrag_plugins.types import Passage


def _results(index, questions):
    out = []
    for cls in (DenseRetriever, BM25Retriever, HybridRetriever):
        r = cls(index)
        for q in questions:
            ev = r.retrieve(q.question, 5)
            out.append([(sp.passage.id, round(sp.score, 5)) for sp in ev.passages])
    return out


def test_manifest_describes_the_index(sample_index, sample_corpus, sample_graph):
    m = json.loads((sample_index.path / "manifest.json").read_text())
    assert m["format_version"] == INDEX_FORMAT_VERSION
    assert m["embedder"] == {"name": "sentence-transformers/all-MiniLM-L6-v2+onnx-int8-v2", "dim": 384}
    assert m["counts"] == {
        "passages": len(sample_corpus),
        "entities": sample_graph.num_entities,
        "triples": sample_graph.num_triples,
        "relations": 1,
    }
    assert {"embed_passages_s", "chroma_s", "bm25_s", "embed_entities_s"} <= set(m["timings"])
    assert m["chroma"]["mode"] == "embedded" and (sample_index.path / m["generation"]).is_dir()


def test_save_open_roundtrip_gives_identical_results(sample_index, sample_questions):
    reopened = KnowledgeIndex.open(sample_index.path)
    assert _results(reopened, sample_questions) == _results(sample_index, sample_questions)
    assert [p.to_dict() for p in reopened.passages] == [p.to_dict() for p in sample_index.passages]
    np.testing.assert_array_equal(reopened.passages.vectors, sample_index.passages.vectors)
    np.testing.assert_array_equal(reopened.entity_vectors, sample_index.entity_vectors)
    np.testing.assert_array_equal(reopened.relation_vectors, sample_index.relation_vectors)
    assert [t.to_dict() for t in reopened.graph.triples()] == [t.to_dict() for t in sample_index.graph.triples()]


def test_in_memory_index_saves_and_reopens(tmp_path, sample_corpus, sample_questions):
    mem = KnowledgeIndex.build(sample_corpus[:20], progress=False)
    assert mem.path is None and mem.manifest["chroma"]["mode"] == "memory"
    saved = mem.save(tmp_path / "idx")
    again = KnowledgeIndex.open(tmp_path / "idx")
    assert (
        _results(again, sample_questions[:3])
        == _results(mem, sample_questions[:3])
        == _results(saved, sample_questions[:3])
    )


def test_opening_with_another_embedder_fails_clearly(sample_index):
    with pytest.raises(IndexMismatchError, match="all-MiniLM-L6-v2.*test/hash-bow"):
        KnowledgeIndex.open(sample_index.path, embedder=HashEmbedder())


def test_format_version_mismatch_and_missing_manifest(tmp_path, sample_corpus):
    emb = HashEmbedder()
    KnowledgeIndex.build(sample_corpus[:5], tmp_path / "idx", embedder=emb, progress=False)
    mpath = tmp_path / "idx" / "manifest.json"
    m = json.loads(mpath.read_text())
    m["format_version"] = 999
    mpath.write_text(json.dumps(m))
    with pytest.raises(IndexMismatchError, match="format version 999"):
        KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    mpath.write_text("{broken")
    with pytest.raises(ValueError, match="corrupt"):
        KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    with pytest.raises(FileNotFoundError, match="not a kgrag index"):
        KnowledgeIndex.open(tmp_path / "nothing-here", embedder=emb)


def test_bad_corpora_are_rejected(tmp_path):
    emb = HashEmbedder()
    with pytest.raises(ValueError, match="empty corpus"):
        KnowledgeIndex.build([], tmp_path / "a", embedder=emb)
    with pytest.raises(ValueError, match="duplicate passage id 'x'"):
        KnowledgeIndex.build([Passage("x", "one"), Passage("x", "two")], tmp_path / "b", embedder=emb, progress=False)
    assert not (tmp_path / "b" / "manifest.json").exists()
    assert not list((tmp_path / "b").glob("gen-*"))


def test_failed_build_leaves_previous_index_intact(tmp_path, sample_corpus, monkeypatch):
    emb = HashEmbedder()
    old = KnowledgeIndex.build(sample_corpus[:10], tmp_path / "idx", embedder=emb, progress=False)
    before = _results(old, [type("Q", (), {"question": "Mozart opera"})()])

    from kgrag_plugins.index import graph as graph_mod

    def explode(self, directory):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(graph_mod.KnowledgeGraph, "save", explode)
    with pytest.raises(OSError, match="disk full"):
        KnowledgeIndex.build(sample_corpus, tmp_path / "idx", embedder=emb, progress=False)
    monkeypatch.undo()
    reopened = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    assert len(reopened.passages) == 10
    assert _results(reopened, [type("Q", (), {"question": "Mozart opera"})()]) == before
    assert [d.name for d in (tmp_path / "idx").glob("gen-*")] == [old.manifest["generation"]]


def test_killed_build_leaves_previous_index_intact(tmp_path, sample_corpus):
    """A build process killed (SIGKILL) midway through writing a new generation."""
    emb = HashEmbedder()
    KnowledgeIndex.build(sample_corpus[:10], tmp_path / "idx", embedder=emb, progress=False)
    manifest_before = (tmp_path / "idx" / "manifest.json").read_text()
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
        from conftest import HashEmbedder
        from kgrag_plugins.demo import sample_corpus
        from kgrag_plugins.index import graph as graph_mod
        from kgrag_plugins.index.store import KnowledgeIndex
        real_save = graph_mod.KnowledgeGraph.save
        def save_then_die(self, d):
            real_save(self, d)  # passages + Chroma already written, manifest not yet
            os.kill(os.getpid(), signal.SIGKILL)
        graph_mod.KnowledgeGraph.save = save_then_die
        KnowledgeIndex.build(sample_corpus(), {str(tmp_path / "idx")!r}, embedder=HashEmbedder(), progress=False)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=dict(os.environ), timeout=300)
    assert proc.returncode == -9
    assert len(list((tmp_path / "idx").glob("gen-*"))) == 2  # the debris of the killed build
    assert (tmp_path / "idx" / "manifest.json").read_text() == manifest_before
    reopened = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    assert len(reopened.passages) == 10
    reopened.close()  # an open reader keeps its generation alive (see index/lock.py)
    # the next successful build cleans the debris up
    KnowledgeIndex.build(sample_corpus[:12], tmp_path / "idx", embedder=emb, progress=False)
    assert len(list((tmp_path / "idx").glob("gen-*"))) == 1
    assert len(KnowledgeIndex.open(tmp_path / "idx", embedder=emb).passages) == 12


def test_open_uses_the_embedder_the_manifest_names(sample_corpus, tmp_path, monkeypatch):
    """An index reopens with the MiniLM variant it was built with, whatever the default for new
    indexes is now; an index built with a custom embedder must be given it again."""
    from kgrag_plugins.models.embed import resolve_embedder

    passages = sample_corpus[:6]
    monkeypatch.setenv("KGRAG_EMBEDDER", "torch")
    torch_idx = KnowledgeIndex.build(passages, tmp_path / "t", progress=False)
    monkeypatch.setenv("KGRAG_EMBEDDER", "onnx-int8")
    opened = KnowledgeIndex.open(tmp_path / "t")  # the default is int8 now; the index stays torch
    assert opened.embedder is resolve_embedder("torch")
    np.testing.assert_allclose(opened.embed_query("Warsaw"), torch_idx.embed_query("Warsaw"), atol=1e-6)
    assert KnowledgeIndex.build(passages, tmp_path / "i", progress=False).embedder is resolve_embedder("onnx-int8")
    assert KnowledgeIndex.open(tmp_path / "i").embedder is resolve_embedder("onnx-int8")
    with pytest.raises(IndexMismatchError, match="built with embedder 'sentence-transformers/all-MiniLM-L6-v2'"):
        KnowledgeIndex.open(tmp_path / "t", embedder="onnx-int8")

    class Custom:
        name, dim = "my-remote-embedder", 384

        def embed(self, texts, *, progress=None):
            return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)

    KnowledgeIndex.build(passages, tmp_path / "c", embedder=Custom(), progress=False)
    with pytest.raises(IndexMismatchError, match="'my-remote-embedder', not a bundled MiniLM variant"):
        KnowledgeIndex.open(tmp_path / "c")
    assert KnowledgeIndex.open(tmp_path / "c", embedder=Custom()).embedder.name == "my-remote-embedder"
