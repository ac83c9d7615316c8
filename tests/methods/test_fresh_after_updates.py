"""Retrievers stay valid after ``add_passages`` / ``delete_passages`` on the same index object.

Every retriever of the package is created on a mentions-graph index, then the index gains a
passage only it can answer and loses one that was being returned: the new passage must be
retrieved, the deleted one never (nor facts read only from it), and nothing may crash.
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import HashEmbedder, require_extra

from kgrag_plugins.demo import sample_corpus
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.activation import ActivationRetriever
from kgrag_plugins.methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever
from kgrag_plugins.methods.frag.retriever import FRAGRetriever
from kgrag_plugins.methods.kg_infused.retriever import KGInfusedRetriever
from kgrag_plugins.methods.sa_rag.retriever import SARAGRetriever
from kgrag_plugins.types import Passage

OLD_Q = "Where was Marie Curie born and what did she research?"
NEW_Q = "Which observatory did Zorblax Quintavian found?"
DELETED = "s-001"  # "Marie Curie": every retriever returns it for OLD_Q before the update
NEW = Passage(
    id="new-1",
    title="Zorblax Quintavian",
    text="Zorblax Quintavian was a Polish astronomer born in Warsaw. He founded the Glimmerdorf "
    "Observatory and knew Marie Curie.",
)
NEW_ENTITY = "zorblax quintavian"

FACTORIES = {
    "dense": DenseRetriever,
    "bm25": BM25Retriever,
    "hybrid": HybridRetriever,
    "ppr": PPRRetriever,
    "activation": ActivationRetriever,
    # thresholds for the hash embedder's lower cosines (the paper's suit bge-large)
    "sa-rag": lambda idx: SARAGRetriever(idx, c=0.2, document_threshold=0.2),
    "kg-infused": KGInfusedRetriever,
    "frag": FRAGRetriever,
}


def _build(path=None) -> KnowledgeIndex:
    return KnowledgeIndex.build(
        sample_corpus()[:12], path, embedder=HashEmbedder(dim=256), builder="mentions", progress=False, overlap=False
    )


@pytest.fixture(scope="module")
def updated():
    """One index, every retriever created on it and used once, then one add and one delete."""
    idx = _build()
    retrievers = {name: make(idx) for name, make in FACTORIES.items()}
    before = {name: r.retrieve(OLD_Q, 3).passage_ids for name, r in retrievers.items()}
    idx.add_passages([NEW], progress=False)
    idx.delete_passages([DELETED])
    return idx, retrievers, before


def _assert_clean(idx: KnowledgeIndex, ev) -> None:
    """No deleted passage, no fact read only from it, no path through a removed entity."""
    assert DELETED not in ev.passage_ids
    for f in ev.facts:
        assert DELETED not in f.data.get("sources", [])
        assert all(node in idx.graph for node in f.data.get("nodes", []))


@pytest.mark.parametrize("name", list(FACTORIES))
def test_fresh_retriever_sees_added_and_never_deleted_passages(updated, name):
    idx, retrievers, before = updated
    r = retrievers[name]
    assert DELETED in before[name]  # it was being returned
    ev = r.retrieve(NEW_Q, 3)
    assert NEW.id in ev.passage_ids
    _assert_clean(idx, ev)
    for q in (OLD_Q, "Marie Curie radioactivity Nobel Prize Warsaw"):
        _assert_clean(idx, r.retrieve(q, 5))
    aev = asyncio.run(r.aretrieve(NEW_Q, 3))
    assert NEW.id in aev.passage_ids and DELETED not in aev.passage_ids


def test_fresh_graph_state_follows_the_index(updated):
    """Graph methods link the new entity and reach it through the graph, not only by text."""
    idx, retrievers, _ = updated
    act = retrievers["activation"].retrieve(NEW_Q, 3)
    assert NEW_ENTITY in [s["id"] for s in act.trace["seeds"]]
    assert retrievers["ppr"].retrieve(NEW_Q, 3).trace["seeds"]
    assert NEW_ENTITY in retrievers["ppr"].retrieve(NEW_Q, 3).trace["seeds"]
    frag = retrievers["frag"].retrieve(NEW_Q, 3)
    assert frag.facts and all(f.data["nodes"][0] == NEW_ENTITY for f in frag.facts)
    kg = retrievers["kg-infused"].retrieve(NEW_Q, 3)
    assert any(NEW.id in f.data["sources"] for f in kg.facts)


def test_fresh_public_steps_refresh_too(updated):
    """Entry points the LangGraph nodes call directly (FRAG ``evidence`` with given topic
    entities, KG-Infused ``seed``) see the new graph as well."""
    idx, retrievers, _ = updated
    ev = retrievers["frag"].evidence(NEW_Q, 3, route="simple", topic_entities=[NEW_ENTITY])
    assert ev.facts and NEW.id in ev.passage_ids
    memory = retrievers["kg-infused"].seed(NEW_Q)
    assert memory.graph is idx.graph


def test_fresh_refresh_runs_once_per_index_change(monkeypatch):
    idx = _build()
    assert idx.revision == 0
    r = PPRRetriever(idx)
    calls = []
    original = PPRRetriever._refresh
    monkeypatch.setattr(PPRRetriever, "_refresh", lambda self: (calls.append(1), original(self))[1])
    r.retrieve(OLD_Q, 2)
    assert calls == []  # nothing changed: no rebuild
    idx.add_passages([NEW], progress=False)
    assert idx.revision == 1
    for _ in range(3):
        assert NEW.id in r.retrieve(NEW_Q, 2).passage_ids
    assert calls == [1]
    with pytest.raises(KeyError):
        idx.delete_passages(["no-such-id"])  # a refused update changes nothing
    assert idx.revision == 1


def test_fresh_saved_index_across_several_updates(tmp_path):
    """With a path every update writes a new generation; retrievers follow each of them."""
    idx = _build(tmp_path / "idx")
    r = ActivationRetriever(idx)
    frag = FRAGRetriever(idx)
    assert DELETED in r.retrieve(OLD_Q, 3).passage_ids
    idx.add_passages([NEW], progress=False)
    assert NEW.id in r.retrieve(NEW_Q, 3).passage_ids
    assert NEW.id in frag.retrieve(NEW_Q, 3).passage_ids
    idx.delete_passages([DELETED, NEW.id])
    for q in (OLD_Q, NEW_Q):
        for ev in (r.retrieve(q, 5), frag.retrieve(q, 5)):
            assert not {DELETED, NEW.id} & set(ev.passage_ids)
            _assert_clean(idx, ev)
    reopened = KnowledgeIndex.open(tmp_path / "idx", embedder=HashEmbedder(dim=256))
    assert len(reopened.passages) == len(idx.passages) == 11


def test_fresh_llama_index_adapter_after_update(updated):
    require_extra("llama_index.core", "llama-index")
    from kgrag_plugins.integrations.llama_index.retrievers import KGRetriever

    idx, retrievers, _ = updated
    nodes = KGRetriever(retrievers["activation"], similarity_top_k=3).retrieve(NEW_Q)
    ids = [n.node.node_id for n in nodes]
    assert NEW.id in ids and DELETED not in ids
