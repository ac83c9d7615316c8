"""KnowledgeIndex with graph builders: build/save/open, lazy entity vectors, add/delete passages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder
from small_corpus import CASH, OBAMA, SNOW

from kgrag_plugins.index import graph as graph_mod
from kgrag_plugins.index.builders.linking import name_key
from kgrag_plugins.index.builders.mentions import build_mentions_graph
from kgrag_plugins.index.builders.parsekg import build_parsekg
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.types import Entity, Passage

MERKEL = Passage(
    "merkel", "Angela Merkel was elected by the Bundestag in 2005. She led Germany for sixteen years.", "Angela Merkel"
)
BASE = [CASH, SNOW, OBAMA, MERKEL]
TUBB = Passage(
    "tubb", "Ernest Tubb recorded with Hank Snow in Nashville. Tubb was born in Crisp, Texas.", "Ernest Tubb"
)
QUOKKA = Passage(
    "quokka", "The quokka is a small marsupial found on Rottnest Island. Quokkas are herbivores.", "Quokka"
)
QUERIES = ["Hank Snow country singer", "born in Honolulu", "Kingsland Arkansas", "quokka marsupial Rottnest Island"]
BUILDERS = ["mentions", "parsekg"]


def _build(passages, path=None, builder="mentions", **kw):
    return KnowledgeIndex.build(passages, path, embedder=HashEmbedder(), builder=builder, progress=False, **kw)


def _search(idx, query, k=10):
    bm25 = [(p.id, round(s, 5)) for p, s in idx.passages.bm25_search(query, k)]
    dense = [(p.id, round(s, 5)) for p, s in idx.passages.dense_search(idx.embed_query(query), k)]
    return bm25, dense


def _parsekg_dump(idx):
    kg = idx.parsekg
    if kg is None:
        return None
    return {
        "counts": kg.counts(),
        "sentences": [
            (kg.sentence(s), kg.passage_of(s), kg.heads_of(s), kg.tails_of(s), kg.hyperrelation(kg._sent_hyper[s]))
            for s in range(kg.num_sentences)
        ],
        "roles": {e: (kg.out_hyperrelations(e), kg.in_hyperrelations(e)) for e in idx.graph.entity_ids},
    }


def _state(idx, queries=QUERIES):
    """Everything a reader sees (without triggering lazy vectors)."""
    g = idx.graph
    ev = idx._entity_vectors
    return {
        "passages": [p.to_dict() for p in idx.passages],
        "vectors": idx.passages.vectors.tolist(),
        "entities": [e.to_dict() for e in g.entities()],
        "triples": [t.to_dict() for t in g.triples()],
        "links": {e: g.passages_of(e) for e in g.entity_ids},
        "passage_ids": g.passage_ids,
        "parsekg": _parsekg_dump(idx),
        "counts": idx.counts,
        "search": [_search(idx, q) for q in queries],
        "entity_vectors": None if ev is None else ev.tolist(),
    }


def _fresh_entity_vectors(idx):
    texts = [f"{e.name}: {e.description}" if e.description else e.name for e in idx.graph.entities()]
    return idx.embedder.embed(texts)


def _gens(path):
    return sorted(d.name for d in path.glob("gen-*"))


def _triple_set(g):
    return {(t.head, t.relation, t.tail, tuple(sorted(t.source_ids))) for t in g.triples()}


# --------------------------------------------------------------------------- build / open


@pytest.mark.parametrize("builder", BUILDERS)
def test_build_with_builder_saves_and_reopens(tmp_path, sample_corpus, sample_questions, builder):
    idx = _build(sample_corpus, tmp_path / "idx", builder)
    m = idx.manifest
    assert m["builder"] == builder
    stats = m["build_stats"]
    assert stats["builder"] == builder and stats["passages"] == len(sample_corpus)
    assert stats["entities"] == idx.graph.num_entities and stats["triples"] == idx.graph.num_triples
    assert {"graph_s", "embed_passages_s"} <= set(m["timings"])
    assert m["counts"]["passages"] == len(sample_corpus) and m["counts"]["entities"] == idx.graph.num_entities
    if builder == "parsekg":
        assert idx.parsekg is not None and idx.parsekg.num_sentences > len(sample_corpus)
        assert m["counts"]["sentences"] == idx.parsekg.num_sentences == stats["sentences"]
        assert m["counts"]["hyperrelations"] == idx.parsekg.num_hyperrelations
        assert (tmp_path / "idx" / m["generation"] / "parsekg").is_dir()
    else:
        assert idx.parsekg is None and "sentences" not in m["counts"]
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text()) == json.loads(json.dumps(m))
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    queries = [q.question for q in sample_questions]
    assert _state(again, queries) == _state(idx, queries)
    assert again.manifest == json.loads(json.dumps(m))


def test_entity_vectors_are_lazy_and_persisted(tmp_path):
    idx = _build(BASE, tmp_path / "idx")
    gdir = tmp_path / "idx" / idx.manifest["generation"]
    assert idx._entity_vectors is None and not list(gdir.glob("entity_vectors*.npy"))
    assert "embed_entities_s" not in idx.manifest["timings"]
    ev = idx.entity_vectors
    assert ev.shape == (idx.graph.num_entities, idx.embedder.dim)
    np.testing.assert_allclose(ev, _fresh_entity_vectors(idx), atol=1e-6)
    (stored,) = gdir.glob("entity_vectors.*.npy")  # entity_vectors.<fingerprint>.npy (index/vector_cache.py)
    np.testing.assert_array_equal(np.load(stored), ev)
    assert idx.entity_vectors is ev  # cached

    class NoEmbed(HashEmbedder):
        def embed(self, texts, *, progress=None):
            raise AssertionError("entity vectors should be read from disk")

    again = KnowledgeIndex.open(tmp_path / "idx", embedder=NoEmbed())
    assert again._entity_vectors is not None
    np.testing.assert_array_equal(again.entity_vectors, ev)
    # relation vectors are lazy too
    rv = idx.relation_vectors
    assert rv.shape == (len(idx.graph.relations), idx.embedder.dim) and (gdir / "relation_vectors.npy").is_file()


def test_entity_vectors_at_build_time(tmp_path):
    idx = _build(BASE, tmp_path / "idx", "parsekg", entity_vectors=True)
    assert "embed_entities_s" in idx.manifest["timings"]
    assert list((tmp_path / "idx" / idx.manifest["generation"]).glob("entity_vectors.*.npy"))
    np.testing.assert_allclose(idx._entity_vectors, _fresh_entity_vectors(idx), atol=1e-6)


def test_in_memory_index_entity_vectors():
    idx = _build([OBAMA])
    assert idx.path is None and idx._entity_vectors is None
    assert idx.entity_vectors.shape == (idx.graph.num_entities, idx.embedder.dim)


def test_build_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="builder 'llm' needs an LLM"):
        _build(BASE, tmp_path / "llm", "llm")
    assert not (tmp_path / "llm" / "manifest.json").exists()
    with pytest.raises(ValueError, match="unknown builder 'magic'"):
        _build(BASE, tmp_path / "magic", "magic")
    with pytest.raises(ValueError, match="either builder= or graph="):
        _build(BASE, tmp_path / "both", "mentions", graph=graph_mod.KnowledgeGraph())
    with pytest.raises(ValueError, match="duplicate passage id 'cash'"):
        _build([CASH, SNOW, CASH], tmp_path / "dup")
    with pytest.raises(ValueError, match="empty corpus"):
        _build([], tmp_path / "empty")
    with pytest.raises(ValueError, match="empty id"):
        _build([Passage("", "text")], tmp_path / "noid")
    for d in ("llm", "magic", "both", "dup", "empty", "noid"):
        assert not (tmp_path / d / "manifest.json").exists() and not _gens(tmp_path / d)


# --------------------------------------------------------------------------- add_passages


@pytest.mark.parametrize("builder", BUILDERS)
def test_add_passages(tmp_path, builder):
    idx = _build(BASE, tmp_path / "idx", builder)
    ev_before = idx.entity_vectors.copy()
    ents_before = idx.graph.entity_ids
    sent_before = idx.parsekg.num_sentences if idx.parsekg else 0
    out = idx.add_passages([TUBB, QUOKKA], progress=False)
    g = idx.graph
    assert out["passages"] == 2
    assert out["entities"] == g.num_entities - len(ents_before) > 0
    assert idx.passages.ids == [p.id for p in BASE] + ["tubb", "quokka"]
    assert idx.counts["passages"] == idx.manifest["counts"]["passages"] == 6
    # existing entities keep their rows; the new passage links to the existing "Hank Snow"
    assert g.entity_ids[: len(ents_before)] == ents_before
    assert [e for e in g.entity_ids if name_key(e) == "hank snow"] == ["hank snow"]
    assert g.passages_of("hank snow") == ["cash", "snow", "tubb"]
    assert g.passages_of("ernest tubb") == ["tubb"] and "nashville" in g.entities_of("tubb")
    assert any(t.source_ids == ["tubb"] and t.head == "ernest tubb" for t in g.triples())
    if builder == "parsekg":
        assert idx.parsekg.num_sentences == sent_before + 4
        assert idx.manifest["counts"]["sentences"] == idx.parsekg.num_sentences
        assert "tubb" in {idx.parsekg.passage_of(s) for s in range(idx.parsekg.num_sentences)}
    # entity vectors were extended, rows aligned with graph.index_of
    ev = idx._entity_vectors
    assert ev.shape == (g.num_entities, idx.embedder.dim)
    np.testing.assert_array_equal(ev[: len(ents_before)], ev_before)
    fresh = _fresh_entity_vectors(idx)
    for e in ("hank snow", "ernest tubb", "nashville", "barack obama"):
        np.testing.assert_allclose(ev[g.index_of(e)], fresh[g.index_of(e)], atol=1e-6)
    np.testing.assert_allclose(ev, fresh, atol=1e-6)
    # new passages are searchable
    bm25, dense = _search(idx, "quokka marsupial Rottnest Island", 3)
    assert bm25[0][0] == "quokka" and dense[0][0] == "quokka"
    assert idx.passages.bm25_search("Ernest Tubb Nashville", 1)[0][0].id == "tubb"
    # same graph as building everything at once
    if builder == "mentions":
        full, _ = build_mentions_graph(BASE + [TUBB, QUOKKA], progress=False)
    else:
        full, full_kg, _ = build_parsekg(BASE + [TUBB, QUOKKA], progress=False)
        assert full_kg.num_sentences == idx.parsekg.num_sentences
    assert g.entity_ids == full.entity_ids and _triple_set(g) == _triple_set(full)
    # on disk: one live generation that reopens to the same state
    assert _gens(tmp_path / "idx") == [idx.manifest["generation"]]
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    assert _state(again) == _state(idx)


def test_add_passages_rejects_bad_input(tmp_path):
    idx = _build(BASE, tmp_path / "idx")
    before, manifest = _state(idx), (tmp_path / "idx" / "manifest.json").read_text()
    with pytest.raises(ValueError, match=r"already in the index: \['cash'\]"):
        idx.add_passages([TUBB, Passage("cash", "Another text.", "Other")], progress=False)
    with pytest.raises(ValueError, match="duplicate passage id 'tubb'"):
        idx.add_passages([TUBB, TUBB], progress=False)
    with pytest.raises(ValueError, match="empty"):
        idx.add_passages([], progress=False)
    assert _state(idx) == before
    assert (tmp_path / "idx" / "manifest.json").read_text() == manifest


@pytest.mark.parametrize("stage", ["embed", "save"])
def test_failed_add_leaves_index_unchanged(tmp_path, monkeypatch, stage):
    idx = _build(BASE, tmp_path / "idx", "parsekg")
    idx.entity_vectors  # noqa: B018 - computed and persisted
    before = _state(idx)
    manifest = (tmp_path / "idx" / "manifest.json").read_text()
    gens = _gens(tmp_path / "idx")

    def boom(*args, **kwargs):
        raise RuntimeError("simulated failure")

    if stage == "embed":
        monkeypatch.setattr(idx.embedder, "embed", boom)
    else:
        monkeypatch.setattr(graph_mod.KnowledgeGraph, "save", boom)
    with pytest.raises(RuntimeError, match="simulated failure"):
        idx.add_passages([TUBB], progress=False)
    monkeypatch.undo()
    assert _state(idx) == before
    assert (tmp_path / "idx" / "manifest.json").read_text() == manifest
    assert _gens(tmp_path / "idx") == gens
    assert _state(KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())) == before


# --------------------------------------------------------------------------- delete_passages


@pytest.mark.parametrize("builder", BUILDERS)
def test_delete_passages(tmp_path, builder):
    idx = _build(BASE, tmp_path / "idx", builder)
    idx.entity_vectors  # noqa: B018
    n_ent, n_tri = idx.graph.num_entities, idx.graph.num_triples
    assert {"kingsland", "arkansas", "elvis presley", "johnny cash"} <= set(idx.graph.entity_ids)
    out = idx.delete_passages(["cash", "cash"])
    g = idx.graph
    assert out == {"passages": 1, "entities": n_ent - g.num_entities, "triples": n_tri - g.num_triples}
    assert out["entities"] > 0 and out["triples"] > 0
    assert idx.passages.ids == ["snow", "obama", "merkel"] and "cash" not in idx.passages
    assert idx.counts["passages"] == idx.manifest["counts"]["passages"] == 3
    # gone from every search
    assert all(p.id != "cash" for p, _ in idx.passages.bm25_search("Kingsland Arkansas Johnny Cash", 10))
    assert all(p.id != "cash" for p, _ in idx.passages.dense_search(idx.embed_query(CASH.text), 10))
    # entities only CASH mentioned are gone, shared ones stay
    for e in ("kingsland", "arkansas", "elvis presley", "johnny cash"):
        assert e not in g
    assert g.passages_of("hank snow") == ["snow"]
    assert g.passage_ids == ["snow", "obama", "merkel"]
    assert all("cash" not in t.source_ids and t.source_ids for t in g.triples())
    if builder == "parsekg":
        kg = idx.parsekg
        assert all(kg.passage_of(s) != "cash" for s in range(kg.num_sentences))
        assert kg.in_hyperrelations("hank snow") == [] and kg.out_hyperrelations("hank snow")
        assert idx.manifest["counts"]["sentences"] == kg.num_sentences
    # vectors compacted with the entity table
    ev = idx._entity_vectors
    assert ev.shape == (g.num_entities, idx.embedder.dim)
    fresh = _fresh_entity_vectors(idx)
    for e in ("hank snow", "liverpool", "barack obama", "angela merkel"):
        np.testing.assert_allclose(ev[g.index_of(e)], fresh[g.index_of(e)], atol=1e-6)
    np.testing.assert_allclose(ev, fresh, atol=1e-6)
    # same graph as building without the passage
    if builder == "mentions":
        rest, _ = build_mentions_graph([SNOW, OBAMA, MERKEL], progress=False)
    else:
        rest, _, _ = build_parsekg([SNOW, OBAMA, MERKEL], progress=False)
    assert set(g.entity_ids) == set(rest.entity_ids) and _triple_set(g) == _triple_set(rest)
    assert _gens(tmp_path / "idx") == [idx.manifest["generation"]]
    assert _state(KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())) == _state(idx)


def test_delete_errors_leave_index_unchanged(tmp_path):
    idx = _build(BASE, tmp_path / "idx")
    before, manifest = _state(idx), (tmp_path / "idx" / "manifest.json").read_text()
    with pytest.raises(KeyError, match="unknown passage id"):
        idx.delete_passages(["snow", "nope"])
    with pytest.raises(ValueError, match="cannot delete every passage"):
        idx.delete_passages([p.id for p in BASE])
    assert _state(idx) == before
    assert (tmp_path / "idx" / "manifest.json").read_text() == manifest


def test_add_then_delete_round_trip(tmp_path):
    idx = _build(BASE, tmp_path / "idx", "parsekg")
    idx.add_passages([TUBB], progress=False)
    idx.delete_passages(["tubb"])
    ref = _build(BASE, tmp_path / "ref", "parsekg")
    assert set(idx.graph.entity_ids) == set(ref.graph.entity_ids)
    assert _triple_set(idx.graph) == _triple_set(ref.graph)
    assert idx.graph.passages_of("hank snow") == ["cash", "snow"]
    assert _search(idx, "Hank Snow country singer") == _search(ref, "Hank Snow country singer")


def test_in_memory_add_and_delete():
    idx = _build(BASE, None, "parsekg")
    assert idx.path is None
    out = idx.add_passages([QUOKKA], progress=False)
    assert out["passages"] == 1 and idx.path is None and idx.manifest["chroma"]["mode"] == "memory"
    assert "generation" not in idx.manifest
    assert _search(idx, "quokka marsupial", 1)[0][0][0] == "quokka"
    assert idx.graph.passages_of("rottnest island") == ["quokka"]
    idx.delete_passages(["quokka", "merkel"])
    assert idx.passages.ids == ["cash", "snow", "obama"]
    assert "rottnest island" not in idx.graph and "angela merkel" not in idx.graph
    assert all(p.id != "quokka" for p, _ in idx.passages.bm25_search("quokka marsupial", 5))
    assert idx.counts == idx.manifest["counts"]
    assert idx.manifest["counts"]["sentences"] == idx.parsekg.num_sentences


# --------------------------------------------------------------------------- LLM builder through the index


def test_llm_build_killed_midway_keeps_old_index_and_resumes_without_repeat_calls(tmp_path):
    """builder='llm' caches per chunk under DIR/llm_cache: a crashed rebuild leaves the live index
    untouched, and the next build only calls the LLM for chunks that never finished."""
    import json as _json

    from kgrag_plugins.models.llm import ScriptedLLM

    class Killed(Exception):
        pass

    passages = [Passage(f"p{i}", f"Person{i} lives in Townville.", title=f"Person{i}") for i in range(1, 6)]

    def reply(messages, fail_on=()):
        text = messages[-1]["content"]
        who = next(p.title for p in passages if p.title in text)
        if who in fail_on:
            raise Killed(who)
        if "named_entities:" in text:
            return _json.dumps({"triples": [[who, "lives in", "Townville"]]})
        return _json.dumps(
            [
                {"name": who, "type": "PERSON", "aliases": [], "entity_information": f"{who} is a person."},
                {"name": "Townville", "type": "GPE", "aliases": [], "entity_information": "A town."},
            ]
        )

    emb = HashEmbedder()
    path = tmp_path / "idx"
    old = KnowledgeIndex.build(passages[:2], path, embedder=emb, builder="mentions", progress=False)
    old_manifest = (path / "manifest.json").read_text()

    crashing = ScriptedLLM(lambda m: reply(m, fail_on={"Person4", "Person5"}))
    with pytest.raises(Killed):
        KnowledgeIndex.build(
            passages,
            path,
            embedder=emb,
            builder="llm",
            llm=crashing,
            progress=False,
            builder_options={"concurrency": 1},
        )
    assert (path / "manifest.json").read_text() == old_manifest  # the live index is untouched
    again = KnowledgeIndex.open(path, embedder=emb)
    assert again.counts == old.counts and again.manifest["builder"] == "mentions"
    assert len(list((path / "llm_cache").glob("*.json"))) == 3  # Person1..3 finished

    llm = ScriptedLLM(reply)
    idx = KnowledgeIndex.build(passages, path, embedder=emb, builder="llm", llm=llm, progress=False)
    called = {next(p.title for p in passages if p.title in c["messages"][-1]["content"]) for c in llm.calls}
    assert called == {"Person4", "Person5"} and len(llm.calls) == 4  # NER + RE for the two missing chunks
    assert idx.manifest["builder"] == "llm" and idx.manifest["build_stats"]["cached"] == 3
    assert {t.relation for t in idx.graph.triples()} == {"lives in"} and idx.graph.num_triples == 5
    assert set(idx.graph.passages_of(idx.graph.entity_ids[0])) <= {p.id for p in passages}


# --------------------------------------------------------------------------- Chroma reuse on add/delete


def _collection_rows(idx):
    """(ids, embeddings) stored in the live generation's Chroma collection, sorted by id."""
    got = idx.passages._collection.get(include=["embeddings"])
    order = np.argsort(got["ids"])
    return [got["ids"][i] for i in order], np.asarray(got["embeddings"])[order]


def test_add_and_delete_copy_the_chroma_collection_instead_of_reinserting(tmp_path, monkeypatch):
    """An add/delete on a saved index copies the live Chroma files and applies only the change
    (issue 19 item 2): the vectors inserted are exactly the new ones; the result matches a full build."""
    from kgrag_plugins.index import passages as passages_mod

    idx = _build(BASE, tmp_path / "idx")
    old_gen, old_name = idx.manifest["generation"], idx.manifest["chroma"]["collection"]
    reader = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())  # holds the old generation
    inserted = []
    real_add = passages_mod._add_batched

    def counting(client, collection, passages, vectors, progress):
        inserted.extend(p.id for p in passages)
        return real_add(client, collection, passages, vectors, progress)

    monkeypatch.setattr(passages_mod, "_add_batched", counting)
    idx.add_passages([TUBB, QUOKKA], progress=False)
    assert inserted == ["tubb", "quokka"]  # not the four old passages again
    assert idx.manifest["timings"]["chroma_reused"] == 1.0
    assert idx.manifest["generation"] != old_gen and idx.manifest["chroma"]["collection"] == old_name
    ref = _build(BASE + [TUBB, QUOKKA], tmp_path / "ref")
    ids, emb = _collection_rows(idx)
    ref_ids, ref_emb = _collection_rows(ref)
    assert ids == ref_ids == sorted(p.id for p in BASE + [TUBB, QUOKKA])
    np.testing.assert_allclose(emb, ref_emb, atol=1e-6)
    for q in QUERIES:
        assert _search(idx, q) == _search(ref, q)
    # the reader's generation was copied, not changed
    assert reader.passages._collection.count() == len(BASE)
    assert _search(reader, "quokka marsupial Rottnest Island")[1][0][0] != "quokka"
    # delete: copy again, remove only the gone ids
    inserted.clear()
    idx.delete_passages(["cash"])
    assert inserted == [] and idx.manifest["timings"]["chroma_reused"] == 1.0
    ids, _ = _collection_rows(idx)
    assert ids == sorted(["snow", "obama", "merkel", "tubb", "quokka"])
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    assert _state(again) == _state(idx)
    reader.close()


def test_chroma_reuse_falls_back_to_a_full_insert_when_the_copy_is_wrong(tmp_path, monkeypatch, caplog):
    """A copied collection whose count does not match is dropped and every vector inserted (WARNING)."""
    idx = _build(BASE, tmp_path / "idx")
    live = idx.passages.directory / "chroma"
    real_copy = __import__("shutil").copytree

    def lossy_copy(src, dst, *a, **kw):  # a copy that lost a row: the count check must catch it
        out = real_copy(src, dst, *a, **kw)
        if Path(src) == live:  # the top-level call (copytree recurses through the patched name)
            from kgrag_plugins.index.passages import chroma_client

            chroma_client(dst).get_collection(idx.manifest["chroma"]["collection"]).delete(ids=["snow"])
        return out

    monkeypatch.setattr("kgrag_plugins.index.passages.shutil.copytree", lossy_copy)
    with caplog.at_level("WARNING", logger="kgrag_plugins.index.passages"):
        idx.add_passages([QUOKKA], progress=False)
    assert "inserting every vector" in caplog.text and str(live) in caplog.text
    assert "chroma_reused" not in idx.passages.build_timings
    ids, _ = _collection_rows(idx)
    assert ids == sorted(p.id for p in BASE + [QUOKKA])
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    assert again.passages._collection.count() == len(BASE) + 1
    assert _search(again, "Hank Snow country singer") == _search(idx, "Hank Snow country singer")


def test_add_and_delete_on_a_memory_mapped_graph(tmp_path, monkeypatch):
    """Graphs of MMAP_MIN_ENTITIES or more are saved memory-mapped; an add/delete deep-copies the
    graph it extends, which must work on the mapped form (it raised 'cannot pickle mmap.mmap'
    at 100k passages) and leave the reader's mapped graph untouched."""
    import copy

    monkeypatch.setattr(graph_mod, "MMAP_MIN_ENTITIES", 1)
    _build(BASE, tmp_path / "idx")
    idx = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    assert idx.graph.mapped
    twin = copy.deepcopy(idx.graph)
    assert not twin.mapped and idx.graph.mapped
    assert twin.entity_ids == idx.graph.entity_ids and _triple_set(twin) == _triple_set(idx.graph)
    twin.add_entity(Entity("zz", "Zz"))
    assert "zz" not in idx.graph  # the copy owns its columns
    reader = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    idx.add_passages([TUBB, QUOKKA], progress=False)
    ref = _build(BASE + [TUBB, QUOKKA], tmp_path / "ref")
    assert idx.graph.entity_ids == ref.graph.entity_ids and _triple_set(idx.graph) == _triple_set(ref.graph)
    assert reader.graph.mapped and "ernest tubb" not in reader.graph
    again = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder())
    assert again.graph.mapped and _state(again) == _state(idx)
    again.delete_passages(["tubb"])
    assert "ernest tubb" not in again.graph and again.counts["passages"] == len(BASE) + 1
