"""The memory-mapped graph format (kgrag_plugins.index.graph_mmap; issue 19 item 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index import graph as graph_module
from kgrag_plugins.index import graph_mmap
from kgrag_plugins.index.graph import KnowledgeGraph, UnknownEntityError
from kgrag_plugins.types import Entity

N_ENTITIES = 2000


def _random_graph(seed: int = 0) -> KnowledgeGraph:
    """~2k entities with names, aliases (some non-ASCII), descriptions, types; power-law-ish
    triples, some with source passages (duplicates merged); entity-passage links."""
    rng = np.random.default_rng(seed)
    g = KnowledgeGraph()
    for i in range(N_ENTITIES):
        k = int(rng.integers(0, 4))
        aliases = [f"alias {i} {j}" for j in range(k)] + (["Zürich ünïcödé €"] if i % 97 == 0 else [])
        g.add_entity(
            Entity(
                f"Q{int(rng.integers(1, 10**7))}x{i}",
                f"Name {i % 1500}",  # repeated names: the name index's first-claim rule matters
                aliases,
                f"description of {i}" if i % 5 else "",
                "person" if i % 3 == 0 else "",
            )
        )
    ids = g.entity_ids
    heads = np.minimum(rng.zipf(1.5, size=9000), N_ENTITIES) - 1
    tails = rng.integers(0, N_ENTITIES, size=9000)
    for j, (h, t) in enumerate(zip(heads.tolist(), tails.tolist())):
        src = [f"p{j % 300}"] if j % 4 == 0 else []
        g.add_triple(ids[h], f"rel{j % 37}", ids[t], src)
    for i in range(0, N_ENTITIES, 3):
        g.link(ids[i], f"p{i % 300}")
        g.link(ids[i], f"p{(i * 7) % 311}")
    g.meta["note"] = "test"
    return g


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    g = _random_graph()
    d = tmp_path_factory.mktemp("mapped") / "graph"
    g.save(d, mapped=True)
    return g, KnowledgeGraph.load(d), d


def _same_csr(a, b) -> None:
    assert a.shape == b.shape
    for f in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


def test_every_read_api_matches_the_in_memory_graph(pair):
    g, m, _ = pair
    assert m.mapped and not g.mapped
    assert (m.num_entities, m.num_triples, len(m)) == (g.num_entities, g.num_triples, len(g))
    assert list(m.entity_ids) == g.entity_ids and m.entity_ids == g.entity_ids
    assert m.relations == g.relations and m.passage_ids == g.passage_ids and m.meta == g.meta
    assert [e.to_dict() for e in m.entities()] == [e.to_dict() for e in g.entities()]
    assert [t.to_dict() for t in m.triples()] == [t.to_dict() for t in g.triples()]
    assert m.names() == g.names()
    for x, y in zip(m.triple_arrays(), g.triple_arrays()):
        np.testing.assert_array_equal(x, y)
    for direction in ("out", "in"):
        _same_csr(m.adjacency(direction), g.adjacency(direction))
    lm, lg = m.link_matrix(), g.link_matrix()
    assert lm.shape == lg.shape and (lm != lg).nnz == 0
    for eid in g.entity_ids[::7]:
        assert m.entity(eid).to_dict() == g.entity(eid).to_dict()
        assert m.name_of(eid) == g.name_of(eid) and m.index_of(eid) == g.index_of(eid)
        assert m.passages_of(eid) == g.passages_of(eid)
        for direction in ("out", "in", "both"):
            assert m.neighbors(eid, direction) == g.neighbors(eid, direction)
    hubs = [g.entity_ids[0], g.entity_ids[1]]
    assert m.k_hop(hubs, 2) == g.k_hop(hubs, 2) and m.k_hop(hubs[:1], 1, "in") == g.k_hop(hubs[:1], 1, "in")
    for pid in g.passage_ids[::11]:
        assert sorted(m.entities_of(pid)) == sorted(g.entities_of(pid))
    assert m.entities_of("no such passage") == []
    seeds = {g.entity_ids[3]: 1.0, g.entity_ids[40]: 2.0}
    for directed in (False, True):
        np.testing.assert_array_equal(
            m.personalized_pagerank(seeds, directed=directed), g.personalized_pagerank(seeds, directed=directed)
        )
    sub = g.entity_ids[:30]
    sm, sg = m.subgraph(sub), g.subgraph(sub)
    assert sorted(sm.edges(keys=True)) == sorted(sg.edges(keys=True)) and dict(sm.nodes(data=True)) == dict(
        sg.nodes(data=True)
    )


def test_lookups_of_unknown_ids(pair):
    g, m, _ = pair
    for bad in ("Q0", "", "name 1", 17, None):
        assert (bad in m) is False
    with pytest.raises(UnknownEntityError):
        m.entity("not-an-id")
    with pytest.raises(UnknownEntityError):
        m.neighbors("Q0")
    assert m.entity_ids[-1] == g.entity_ids[-1] and m.entity_ids[5:8] == g.entity_ids[5:8]
    with pytest.raises(IndexError):
        m.entity_ids[N_ENTITIES]


def test_open_builds_no_per_entity_objects(tmp_path, monkeypatch):
    """Structural: at open, entity columns and the id index are mapped objects over the files
    (no lists, no dict), the arrays are views of memory maps, and no Entity is constructed."""
    g = _random_graph(1)
    g.save(tmp_path / "g", mapped=True)

    def no_entities(*a, **k):
        raise AssertionError("an Entity was built while opening the graph")

    monkeypatch.setattr(graph_module, "Entity", no_entities)
    m = KnowledgeGraph.load(tmp_path / "g")
    for col in (m._ids, m._names, m._descs, m._types):
        assert isinstance(col, graph_mmap.StringColumn)
    assert isinstance(m._aliases, graph_mmap.AliasColumn)
    assert isinstance(m._eidx, graph_mmap.RowIndex)
    assert isinstance(m._ent_passages, graph_mmap.MappedRows) and isinstance(m._triple_src, graph_mmap.MappedRows)
    assert not isinstance(m.entity_ids, list)

    def mapped(a: np.ndarray) -> bool:
        while a is not None and not isinstance(a, np.memmap):
            a = a.base if isinstance(a, np.ndarray) else None
        return a is not None

    for arr in (*m.triple_arrays(), m.adjacency("out").indices, m.adjacency("in").indptr, m.adjacency("out").data):
        assert mapped(arr)
    # reads work without Entity; entity() is what builds one (lazily)
    eid = g.entity_ids[10]
    assert m.name_of(eid) == g.name_of(eid) and m.neighbors(eid) == g.neighbors(eid)
    with pytest.raises(AssertionError, match="Entity was built"):
        m.entity(eid)


def test_mutation_copies_into_memory_and_leaves_files(pair, tmp_path):
    g0, _, d = pair
    m = KnowledgeGraph.load(d)
    g = KnowledgeGraph.load(d)
    a, b = g0.entity_ids[1], g0.entity_ids[2]
    m.add_triple(a, "new relation", b, ["p-new"])
    assert not m.mapped and isinstance(m._eidx, dict)
    m.add_entity(Entity("fresh", "Fresh"))
    m.link("fresh", "p-new")
    m.set_description(a, "changed")
    assert m.entity(a).description == "changed" and m.passages_of("fresh") == ["p-new"]
    assert [t.to_dict() for t in m.triples()][:-1] == [t.to_dict() for t in g0.triples()]
    assert m.triple(m.num_triples - 1).source_ids == ["p-new"]
    assert m.neighbors(b, "in")[-1] == (a, "new relation", "in")
    # the files are unchanged: a fresh open sees the original graph, still mapped
    assert g.mapped and g.num_triples == g0.num_triples and "fresh" not in KnowledgeGraph.load(d)
    # remove_passages on a mapped graph behaves as on the in-memory one
    r1 = KnowledgeGraph.load(d).remove_passages(["p0", "p3"])
    r2 = _random_graph().remove_passages(["p0", "p3"])
    assert r1.removed_entities == r2.removed_entities
    np.testing.assert_array_equal(r1.triple_keep, r2.triple_keep)
    # saving a changed (materialised) graph mapped again round-trips
    m.save(tmp_path / "again", mapped=True)
    back = KnowledgeGraph.load(tmp_path / "again")
    assert back.mapped and [t.to_dict() for t in back.triples()] == [t.to_dict() for t in m.triples()]
    assert [e.to_dict() for e in back.entities()] == [e.to_dict() for e in m.entities()]


def test_format_choice_and_old_format_still_loads(tmp_path, monkeypatch):
    g = _random_graph(2)
    g.save(tmp_path / "small")  # below MMAP_MIN_ENTITIES: the JSON + NPY format
    assert (tmp_path / "small" / "entities.jsonl").is_file()
    assert not (tmp_path / "small" / graph_mmap.FORMAT_FILE).exists()
    old = KnowledgeGraph.load(tmp_path / "small")
    assert not old.mapped and [t.to_dict() for t in old.triples()] == [t.to_dict() for t in g.triples()]
    monkeypatch.setattr(graph_module, "MMAP_MIN_ENTITIES", 1000)
    g.save(tmp_path / "big")
    assert (tmp_path / "big" / graph_mmap.FORMAT_FILE).is_file()
    assert not (tmp_path / "big" / "entities.jsonl").exists() and KnowledgeGraph.load(tmp_path / "big").mapped


def test_empty_graph_round_trip(tmp_path):
    KnowledgeGraph().save(tmp_path / "e", mapped=True)
    e = KnowledgeGraph.load(tmp_path / "e")
    assert e.mapped and len(e) == 0 and e.num_triples == 0 and e.k_hop([], 2) == {}
    assert e.adjacency().shape == (0, 0) and e.personalized_pagerank({}).shape == (0,)
    assert "x" not in e and list(e.entity_ids) == []


def test_damaged_mapped_graph_raises_value_error(pair, tmp_path):
    g, _, _ = pair
    g.save(tmp_path / "a", mapped=True)
    (tmp_path / "a" / "csr_in.indices.npy").unlink()
    with pytest.raises(ValueError, match="missing csr_in.indices.npy"):
        KnowledgeGraph.load(tmp_path / "a")
    g.save(tmp_path / "b", mapped=True)
    with open(tmp_path / "b" / "names.bin", "r+b") as f:
        f.truncate(10)
    with pytest.raises(ValueError, match="corrupt.*names.bin"):
        KnowledgeGraph.load(tmp_path / "b")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=40))
def test_string_store_and_row_index_round_trip(tmp_path_factory, strings):
    d = tmp_path_factory.mktemp("strings")
    graph_mmap._write_strings(d, "col", strings)
    col = graph_mmap._strings(d, "col", len(strings))
    assert list(col) == strings and len(col) == len(strings)
    if strings:
        assert col[-1] == strings[-1]
    uniq = list(dict.fromkeys(strings))
    keys = np.array([graph_mmap.id_hash(s) for s in uniq], dtype=np.uint64)
    order = np.argsort(keys, kind="stable")
    graph_mmap._write_strings(d, "ids", uniq)
    idx = graph_mmap.RowIndex(keys[order], order, graph_mmap._strings(d, "ids", len(uniq)))
    for row, s in enumerate(uniq):
        assert idx.get(s) == row and s in idx
    missing = "".join(uniq) + "\x00missing"
    assert idx.get(missing) is None and missing not in idx


def test_retrievers_identical_on_an_index_opened_mapped(sample_index, sample_corpus, sample_questions, tmp_path):
    """Activation and FRAG return the same Evidence whether the index's graph is in memory or mapped."""
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.activation import ActivationRetriever
    from kgrag_plugins.methods.frag import FRAGRetriever

    g = KnowledgeGraph.load(next(sample_index.path.glob("gen-*/graph")))
    assert not g.mapped  # the session fixture's graph is small: saved as JSON + NPY
    mdir = tmp_path / "mapped-graph"
    g.save(mdir, mapped=True)
    built = KnowledgeIndex.build(
        list(sample_corpus),
        tmp_path / "idx",
        embedder=sample_index.embedder,
        graph=KnowledgeGraph.load(mdir),
        vectors=sample_index.passages.vectors,
        progress=False,
    )
    built.close()
    opened = KnowledgeIndex.open(tmp_path / "idx", embedder=sample_index.embedder)
    assert opened.graph.mapped  # a mapped graph is saved mapped again
    questions = [q.question for q in sample_questions][:3]
    for make in (ActivationRetriever, lambda i: FRAGRetriever(i, mode="simple")):
        a, b = make(sample_index), make(opened)
        if isinstance(a, FRAGRetriever):  # same embedder: share chain-text vectors (saves time only)
            b._cache = a._cache
        for q in questions:
            ea, eb = a.retrieve(q, 5), b.retrieve(q, 5)
            assert [(p.passage.id, p.score) for p in ea.passages] == [(p.passage.id, p.score) for p in eb.passages]
            assert [f.to_dict() for f in ea.facts] == [f.to_dict() for f in eb.facts]
    frag = FRAGRetriever(opened, mode="simple")
    assert any(frag.retrieve(q, 5).facts for q in questions)  # the comparison above was not vacuous


def test_row_index_resolves_hash_collisions(tmp_path, monkeypatch):
    """With a deliberately weak hash (3 buckets) every lookup walks a run of equal keys."""
    monkeypatch.setattr(graph_mmap, "id_hash", lambda s: len(s) % 3)
    g = KnowledgeGraph()
    for i in range(40):
        g.add_entity(Entity(f"id{i}", f"n{i}"))
    g.add_triple("id1", "r", "id22")
    g.save(tmp_path / "g", mapped=True)
    m = KnowledgeGraph.load(tmp_path / "g")
    assert [m.index_of(e) for e in g.entity_ids] == list(range(40))
    assert "id40" not in m and "id7" in m and m.neighbors("id22") == [("id1", "r", "in")]


def test_column_iteration_across_blocks(pair, monkeypatch):
    """Mapped columns are iterated in blocks of offsets: small blocks give the same entities."""
    g, m, _ = pair
    monkeypatch.setattr(graph_mmap, "_CHUNK", 7)
    assert [e.to_dict() for e in m.entities()] == [e.to_dict() for e in g.entities()]
    assert list(m._aliases) == [m._aliases[i] for i in range(len(m))] and m.names() == g.names()
