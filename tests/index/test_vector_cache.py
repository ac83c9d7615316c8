"""Entity / triple / translator vectors persisted in the index generation (index/vector_cache.py,
issue 36 item 4): reused by the next open, keyed by the texts' fingerprint, carried over updates,
kept in memory in a read-only directory, recomputed when damaged."""

from __future__ import annotations

import json
import logging
import os
import stat

import numpy as np
import pytest
from conftest import HashEmbedder
from small_corpus import CASH, OBAMA, SNOW

from kgrag_plugins.index import vector_cache as vc
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.translator.relations import VECTORS_FILE, RelationTranslator
from kgrag_plugins.types import Passage

TUBB = Passage(
    "tubb", "Ernest Tubb recorded with Hank Snow in Nashville. Tubb was born in Crisp, Texas.", "Ernest Tubb"
)


class Counting(HashEmbedder):
    """HashEmbedder that records what it embeds (``calls``: batch sizes, ``texts``: every text)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.texts: list[str] = []

    def embed(self, texts, *, progress=None):
        self.calls.append(len(texts))
        self.texts += list(texts)
        return super().embed(texts, progress=progress)


def _build(path, builder="mentions", **kw):
    return KnowledgeIndex.build(
        [CASH, SNOW, OBAMA], path, embedder=HashEmbedder(), builder=builder, progress=False, **kw
    )


def _gdir(idx):
    return idx.path / idx.manifest["generation"]


def _stored(idx, stem):
    return sorted(_gdir(idx).glob(f"{stem}.*.npy"))


def test_second_open_reuses_persisted_vectors(tmp_path):
    idx = _build(tmp_path / "idx")
    tv, ev = idx.triple_vectors, idx.entity_vectors
    assert tv.shape == (idx.graph.num_triples, 64) and ev.shape == (idx.graph.num_entities, 64)
    assert len(_stored(idx, "triple_vectors")) == 1 and len(_stored(idx, "entity_vectors")) == 1
    report = json.loads(_stored(idx, "triple_vectors")[0].with_suffix(".json").read_text())
    assert report["rows"] == idx.graph.num_triples and report["seconds"] >= 0
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    np.testing.assert_array_equal(again.triple_vectors, tv)
    np.testing.assert_array_equal(again.entity_vectors, ev)
    assert emb.calls == []  # nothing embedded: both read from the generation


def test_precompute_at_build_then_first_query_embeds_nothing(tmp_path):
    idx = _build(tmp_path / "idx", precompute=("triples", "entities"))
    assert {"precompute_triples_s", "precompute_entities_s"} <= set(idx.manifest["timings"])
    assert _stored(idx, "triple_vectors") and _stored(idx, "entity_vectors")
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    from kgrag_plugins.methods.sa_rag import SARAGRetriever

    SARAGRetriever(again, k=1).retrieve("Hank Snow country singer", 2)
    graph_texts = set(vc.triple_texts(again.graph)) | set(vc.entity_texts(again.graph))
    assert emb.calls and not graph_texts & set(emb.texts)  # the query's texts only
    with pytest.raises(ValueError, match="unknown precompute"):
        _build(tmp_path / "other", precompute=("tripels",))


def test_precompute_relations_stores_the_vocabulary_for_the_next_open(tmp_path):
    """``relations``: the relation vocabulary's vectors (FRAG's chain scores and pruning) embedded
    once and read back by the next open, which then embeds no relation."""
    idx = _build(tmp_path / "idx")
    assert vc.precompute(idx, ["relations"]).keys() == {"relations"}
    assert idx.has_relation_vectors and (_gdir(idx) / "relation_vectors.npy").is_file()
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    assert again.has_relation_vectors
    np.testing.assert_array_equal(again.relation_vectors, idx.relation_vectors)
    assert emb.calls == []


def test_fingerprint_mismatch_recomputes(tmp_path):
    idx = _build(tmp_path / "idx")
    idx.triple_vectors
    (old,) = _stored(idx, "triple_vectors")
    # the same row count but other texts: the fingerprint (the file name) does not match
    texts = vc.triple_texts(idx.graph)
    assert vc.load(_gdir(idx) / vc.TRIPLES, vc.fingerprint(idx.embedder, texts), len(texts)) is not None
    assert vc.load(_gdir(idx) / vc.TRIPLES, vc.fingerprint(idx.embedder, texts[::-1]), len(texts)) is None
    # another embedder (name or dim): another fingerprint
    assert vc.fingerprint(HashEmbedder(name="test/other"), texts) != vc.fingerprint(idx.embedder, texts)
    assert vc.fingerprint(HashEmbedder(dim=32), texts) != vc.fingerprint(idx.embedder, texts)
    # the stored vectors are wrong for these texts (e.g. a changed verbaliser): recomputed, old file gone
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    again.graph.names = lambda: {e: n.upper() + "!" for e, n in idx.graph.names().items()}  # other texts
    tv = again.triple_vectors
    assert emb.calls == [idx.graph.num_triples]
    (new,) = _stored(again, "triple_vectors")
    assert new != old and not old.exists()
    np.testing.assert_allclose(tv, emb.embed(vc.triple_texts(again.graph)), atol=1e-6)


def test_add_and_delete_carry_vectors_of_unchanged_texts(tmp_path):
    idx = _build(tmp_path / "idx")
    idx.triple_vectors, idx.entity_vectors
    emb = Counting()
    idx = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    old_gen = idx.manifest["generation"]
    idx.add_passages([TUBB], progress=False)
    assert idx.manifest["generation"] != old_gen
    fresh_t, fresh_e = emb.embed(vc.triple_texts(idx.graph)), emb.embed(vc.entity_texts(idx.graph))
    emb.calls.clear()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    np.testing.assert_allclose(again.triple_vectors, fresh_t, atol=1e-6)  # old rows carried, new ones embedded
    np.testing.assert_allclose(again.entity_vectors, fresh_e, atol=1e-6)
    assert emb.calls == []  # stored by the update
    # the update embedded only texts that were new or changed
    emb2 = Counting()
    idx2 = KnowledgeIndex.open(tmp_path / "idx", embedder=emb2)
    before = idx2.graph.num_triples
    idx2.delete_passages(["tubb"])
    assert sum(emb2.calls) < before  # a delete embeds at most the descriptions it changed
    check = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=check)
    np.testing.assert_allclose(again.triple_vectors, emb.embed(vc.triple_texts(again.graph)), atol=1e-6)
    np.testing.assert_allclose(again.entity_vectors, emb.embed(vc.entity_texts(again.graph)), atol=1e-6)
    assert check.calls == []


def test_update_embeds_only_new_texts(tmp_path):
    idx = _build(tmp_path / "idx", precompute=("triples", "entities"))
    emb = Counting()
    idx = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    old = set(vc.triple_texts(idx.graph)) | set(vc.entity_texts(idx.graph))
    idx.add_passages([TUBB], progress=False)
    new = set(vc.triple_texts(idx.graph)) | set(vc.entity_texts(idx.graph))
    graph_texts = [t for t in emb.texts if t in new]
    assert graph_texts and set(graph_texts) <= new - old  # only the new or changed texts
    assert len(graph_texts) < len(new)


def test_read_only_directory_keeps_vectors_in_memory(tmp_path, caplog):
    idx = _build(tmp_path / "idx")
    gdir = _gdir(idx)
    mode = gdir.stat().st_mode
    os.chmod(gdir, stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(gdir, os.W_OK):
            pytest.skip("running as a user that writes into read-only directories (root)")
        again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
        with caplog.at_level(logging.DEBUG, logger="kgrag_plugins.index.vector_cache"):
            tv = again.triple_vectors
        assert tv.shape == (again.graph.num_triples, 64) and again.triple_vectors is tv
        assert not _stored(again, "triple_vectors")
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("kept in memory" in r.getMessage() for r in caplog.records)
    finally:
        os.chmod(gdir, mode)


def test_read_only_save_is_a_debug_message(tmp_path, caplog, monkeypatch):
    """The same as above where root ignores permissions: os.replace failing with EROFS."""
    import errno

    idx = _build(tmp_path / "idx")

    def refuse(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(vc.os, "replace", refuse)
    with caplog.at_level(logging.DEBUG, logger="kgrag_plugins.index.vector_cache"):
        tv = idx.triple_vectors
    assert tv.shape == (idx.graph.num_triples, 64) and idx.triple_vectors is tv
    assert not _stored(idx, "triple_vectors") and not list(_gdir(idx).glob(".*tmp*"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("kept in memory" in r.getMessage() for r in caplog.records)


def test_corrupt_file_is_recomputed_with_a_warning(tmp_path, caplog):
    idx = _build(tmp_path / "idx")
    tv = idx.triple_vectors
    (path,) = _stored(idx, "triple_vectors")
    path.write_bytes(b"\x93NUMPY garbage")
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.index.vector_cache"):
        np.testing.assert_allclose(again.triple_vectors, tv, atol=1e-6)
    assert emb.calls == [again.graph.num_triples]
    assert any("damaged" in r.getMessage() and path.name in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(np.load(path), tv, atol=1e-6)  # repaired in place
    # a wrong shape too
    np.save(path, np.zeros((1, 64), np.float32))
    third = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    np.testing.assert_allclose(third.triple_vectors, tv, atol=1e-6)


def test_legacy_unfingerprinted_file_is_used_when_rows_fit(tmp_path):
    idx = _build(tmp_path / "idx")
    tv = idx.triple_vectors
    (path,) = _stored(idx, "triple_vectors")
    os.replace(path, _gdir(idx) / vc.TRIPLES)  # as written before fingerprints
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    np.testing.assert_array_equal(again.triple_vectors, tv)
    assert emb.calls == []


def test_translator_windows_persist_under_their_fingerprint(tmp_path):
    idx = _build(tmp_path / "idx", builder="parsekg", precompute=("translator",))
    assert _stored(idx, VECTORS_FILE.removesuffix(".npy"))
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    RelationTranslator(again).ensure()
    assert emb.calls == []
    # other windows (another window size): other texts, recomputed
    RelationTranslator(again, window=3, stride=2).ensure()
    assert len(emb.calls) == 1


def test_in_memory_index_needs_no_directory():
    idx = KnowledgeIndex.build([CASH, SNOW], embedder=HashEmbedder(), builder="mentions", progress=False)
    assert idx.triple_vectors.shape == (idx.graph.num_triples, 64)
    idx.add_passages([TUBB], progress=False)
    assert idx._triple_vectors is not None and len(idx._triple_vectors) == idx.graph.num_triples
    np.testing.assert_allclose(idx._triple_vectors, idx.embedder.embed(vc.triple_texts(idx.graph)), atol=1e-6)


def test_cli_index_precompute(tmp_path, monkeypatch, capsys):
    from kgrag_plugins.cli import main
    from kgrag_plugins.index import store

    monkeypatch.setattr(store, "default_embedder", HashEmbedder)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in (CASH, SNOW, OBAMA)))
    assert main(["index", "--corpus", str(corpus), "--precompute", "tripels", "--out", str(tmp_path / "x")]) == 2
    assert "unknown precompute" in capsys.readouterr().err and not (tmp_path / "x").exists()  # before the build
    args = ["index", "--corpus", str(corpus), "--builder", "mentions", "--precompute", "triples,entities"]
    assert main([*args, "--out", str(tmp_path / "idx")]) == 0
    timings = json.loads(capsys.readouterr().out)["timings"]
    assert {"precompute_triples_s", "precompute_entities_s"} <= set(timings)
    emb = Counting()
    idx = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    assert idx.triple_vectors.shape == (idx.graph.num_triples, 64) and idx._entity_vectors is not None
    assert emb.calls == []


def test_threads_asking_at_once_embed_the_graph_once(tmp_path):
    """Concurrent first reads (a QA run's or the DPO builder's worker threads) compute the triple,
    entity and relation vectors once; the others wait and get the same arrays."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    _build(tmp_path / "idx")

    class Slow(Counting):
        def __init__(self) -> None:
            super().__init__()
            self.guard = threading.Lock()

        def embed(self, texts, *, progress=None):
            time.sleep(0.05)  # a slow model: the window where a second thread would start again
            with self.guard:
                return super().embed(texts, progress=progress)

    for stale in _gdir(KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())).glob("*_vectors.*"):
        stale.unlink()  # nothing stored: the first read must embed
    emb = Slow()
    idx = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda _: (idx.triple_vectors, idx.entity_vectors, idx.relation_vectors), range(6)))
    graph_texts = [vc.triple_texts(idx.graph), vc.entity_texts(idx.graph), list(idx.graph.relations)]
    assert sorted(emb.calls) == sorted(len(t) for t in graph_texts)  # one embedding per kind
    assert all(a is b for row in got for a, b in zip(row, got[0]))


def _rows(idx):
    return sorted(_gdir(idx).glob("relation_rows.*.npz"))


@pytest.fixture
def on_demand(monkeypatch):
    """Row by row even for these short test vocabularies (``ON_DEMAND_MIN_ROWS`` embeds a short list whole)."""
    monkeypatch.setattr(vc, "ON_DEMAND_MIN_ROWS", 0)


def test_a_short_relation_list_is_embedded_whole_on_first_use(tmp_path):
    """Below ``ON_DEMAND_MIN_ROWS`` texts, the first miss embeds every relation in one call and the
    full table is stored at once (no rows file); later rows are free, in this process and the next."""
    idx = _build(tmp_path / "idx")
    n = len(idx.graph.relations)
    assert 1 < n < vc.ON_DEMAND_MIN_ROWS
    full = HashEmbedder().embed(idx.graph.relations)
    emb = Counting()
    first = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    np.testing.assert_allclose(first.relation_vectors_of(np.array([1])), full[[1]], atol=1e-6)
    assert emb.calls == [n] and sorted(emb.texts) == sorted(idx.graph.relations)  # all of them, in one call
    assert first.has_relation_vectors and (_gdir(first) / "relation_vectors.npy").is_file() and not _rows(first)
    np.testing.assert_allclose(first.relation_vectors_of(np.arange(n)), full, atol=1e-6)
    emb2 = Counting()
    second = KnowledgeIndex.open(tmp_path / "idx", embedder=emb2)
    np.testing.assert_allclose(second.relation_vectors_of(np.array([0, n - 1])), full[[0, n - 1]], atol=1e-6)
    assert emb.calls == [n] and emb2.calls == []


def test_relation_rows_embedded_on_demand_persist_for_the_next_process(on_demand, tmp_path):
    """``relation_vectors_of``: only the asked rows are embedded, stored in the generation after
    use, read back by the next open (which embeds only rows nobody embedded yet), equal to the full
    table's rows; once every row is embedded the full table is stored and the rows file removed."""
    idx = _build(tmp_path / "idx")
    n = len(idx.graph.relations)
    assert n >= 4
    full = HashEmbedder().embed(idx.graph.relations)
    emb = Counting()
    first = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    np.testing.assert_allclose(first.relation_vectors_of(np.array([1, 0, 1])), full[[1, 0, 1]], atol=1e-6)
    assert emb.texts == [idx.graph.relations[0], idx.graph.relations[1]] and not first.has_relation_vectors
    (rows_file,) = _rows(first)
    assert vc.fingerprint(emb, idx.graph.relations) in rows_file.name
    assert vc.stored(_gdir(first))[rows_file.name]["rows"] == 2
    np.testing.assert_allclose(first.relation_vectors_of(np.array([0])), full[[0]], atol=1e-6)
    assert len(emb.texts) == 2  # in memory: nothing embedded again
    emb2 = Counting()
    second = KnowledgeIndex.open(tmp_path / "idx", embedder=emb2)
    np.testing.assert_allclose(second.relation_vectors_of(np.array([2, 0])), full[[2, 0]], atol=1e-6)
    assert emb2.texts == [idx.graph.relations[2]]  # rows 0 and 1 came from the file
    everything = second.relation_vectors_of(np.arange(n))
    np.testing.assert_allclose(everything, full, atol=1e-6)
    assert emb2.calls == [1, n - 3] and second.has_relation_vectors
    assert (_gdir(idx) / "relation_vectors.npy").is_file() and not _rows(second)
    emb3 = Counting()
    third = KnowledgeIndex.open(tmp_path / "idx", embedder=emb3)
    assert third.has_relation_vectors and emb3.calls == []
    np.testing.assert_allclose(third.relation_vectors_of(np.array([3])), full[[3]], atol=1e-6)


def test_relation_rows_of_two_writers_are_merged(on_demand, tmp_path):
    """Two processes (here: two opens of one generation) embedding different rows: the second
    writer keeps the first one's rows (it merges the file before replacing it)."""
    _build(tmp_path / "idx")
    a = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    b = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    assert b.relation_vectors_of(np.array([], dtype=np.int64)).shape == (0, 64)  # b has read the (absent) file
    a.relation_vectors_of(np.array([0, 1]))
    b.relation_vectors_of(np.array([2]))
    with np.load(_rows(b)[0]) as z:
        assert z["rows"].tolist() == [0, 1, 2]
    emb = Counting()
    KnowledgeIndex.open(tmp_path / "idx", embedder=emb).relation_vectors_of(np.array([0, 1, 2]))
    assert emb.calls == []


def test_damaged_relation_rows_are_embedded_again_with_a_warning(on_demand, tmp_path, caplog):
    idx = _build(tmp_path / "idx")
    idx.relation_vectors_of(np.array([0, 1]))
    (path,) = _rows(idx)
    full = HashEmbedder().embed(idx.graph.relations)
    for damage in (b"PK garbage", None):
        if damage is None:  # a well-formed file whose rows point past the vocabulary
            with open(path, "wb") as fh:
                np.savez(fh, rows=np.array([0, 10_000]), vecs=np.zeros((2, 64), np.float32))
        else:
            path.write_bytes(damage)
        emb = Counting()
        again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kgrag_plugins.index.vector_cache"):
            np.testing.assert_allclose(again.relation_vectors_of(np.array([0, 1])), full[[0, 1]], atol=1e-6)
        assert emb.calls == [2]
        assert any("damaged" in r.getMessage() and path.name in r.getMessage() for r in caplog.records)
    with np.load(path) as z:  # repaired by the last write
        assert z["rows"].tolist() == [0, 1]


def test_relation_rows_in_a_read_only_generation_stay_in_memory(on_demand, tmp_path, caplog, monkeypatch):
    import errno

    _build(tmp_path / "idx")

    def refuse(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(vc.os, "replace", refuse)
    emb = Counting()
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    with caplog.at_level(logging.DEBUG, logger="kgrag_plugins.index.vector_cache"):
        again.relation_vectors_of(np.array([0, 1]))
        again.relation_vectors_of(np.array([1]))
    assert emb.calls == [2] and not _rows(again) and not list(_gdir(again).glob(".*tmp*"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("kept in memory" in r.getMessage() for r in caplog.records)


def test_relation_rows_follow_an_update_of_the_graph(on_demand, tmp_path):
    """After ``add_passages`` the relation vocabulary (and generation) changes: rows are looked up
    in the new vocabulary, never read by position from the old one."""
    idx = _build(tmp_path / "idx")
    idx.relation_vectors_of(np.array([0]))
    idx.add_passages([TUBB], progress=False)
    rels = idx.graph.relations
    got = idx.relation_vectors_of(np.arange(len(rels)))
    np.testing.assert_allclose(got, HashEmbedder().embed(rels), atol=1e-6)


def test_in_memory_index_embeds_relation_rows_on_demand(on_demand):
    idx = KnowledgeIndex.build([CASH, SNOW], None, embedder=HashEmbedder(), builder="mentions", progress=False)
    got = idx.relation_vectors_of(np.array([1]))
    np.testing.assert_allclose(got, HashEmbedder().embed(idx.graph.relations[1:2]), atol=1e-6)
    assert not idx.has_relation_vectors
