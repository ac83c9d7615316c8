"""KG-Translator plug-ins: LlamaIndex ``ClueTranslationRetriever`` and LangGraph ``translator_graph``
(issue 14 item 7) over a hand-made ParseKG index with known clues."""

from __future__ import annotations

import asyncio

import pytest

from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.types import Evidence, Fact, Passage, ScoredPassage

PASSAGES = [
    Passage("p1", "Marie Curie was born in Warsaw. Marie Curie won the Nobel Prize in Physics in 1903.", "Marie Curie"),
    Passage("p2", "Warsaw is the capital of Poland. Warsaw lies on the Vistula River.", "Warsaw"),
    Passage(
        "p3", "Albert Einstein developed the theory of relativity. Albert Einstein was born in Ulm.", "Albert Einstein"
    ),
    Passage("p4", "Ulm is a city in Germany on the Danube.", "Ulm"),
]


@pytest.fixture(scope="module")
def translator_index(tmp_path_factory, sample_index):
    path = tmp_path_factory.mktemp("translator-plugins") / "index"
    return KnowledgeIndex.build(PASSAGES, path, builder="parsekg", embedder=sample_index.embedder, progress=False)


class _StandIn(Retriever):
    """A tiny stand-in with the translator's output shape (clue facts + trace)."""

    name = "translator"

    def __init__(self, index):
        self.index = index

    def _retrieve(self, query: str, k: int) -> Evidence:
        p = self.index.passages.get("p1")
        fact = Fact(
            "Marie Curie @@ ## was born in ##.",
            kind="clue",
            score=0.5,
            data={
                "entity": "marie curie",
                "relation": "## was born in ##.",
                "direction": "forward",
                "sentences": ["Marie Curie was born in Warsaw."],
                "passage_ids": ["p1"],
            },
        )
        trace = {
            "clues": [{"entity": "marie curie", "relation": "## was born in ##.", "direction": "forward"}],
            "direction": ["forward"],
            "traced": [],
            "timings": {},
        }
        return Evidence(query, [ScoredPassage(p, 0.9)], [fact], trace)


def test_llama_index_clue_nodes_from_the_real_translator(translator_index):
    from kgrag_plugins.integrations import ClueTranslationRetriever

    r = ClueTranslationRetriever(translator_index, similarity_top_k=2)
    nodes = r.retrieve("Where was Marie Curie born?")
    passages = [n for n in nodes if n.node.metadata["kind"] == "passage"]
    clues = [n for n in nodes if n.node.metadata["kind"] == "clue"]
    assert passages[0].node.node_id == "p1" and len(passages) <= 2
    assert clues, "clues must come back as fact nodes"
    first = clues[0].node.metadata
    assert first["direction"] in ("forward", "reverse")
    assert "Marie Curie was born in Warsaw." in first["sentences"] and first["passage_ids"] == ["p1"]
    assert "born" in first["relation"]
    # metadata other than the title is hidden from the LLM and the embedder
    assert "sentences" in clues[0].node.excluded_llm_metadata_keys
    assert r.last_clues and r.last_clues[0]["entity"] == first["entity"]
    assert r.last_direction[0] == "forward"
    assert nodes.index(clues[0]) > nodes.index(passages[-1])  # passages first, then facts


def test_llama_index_async_matches_sync(translator_index):
    from kgrag_plugins.integrations import ClueTranslationRetriever

    r = ClueTranslationRetriever(translator_index, similarity_top_k=2)
    sync = [n.node.node_id for n in r.retrieve("Where was Albert Einstein born?")]
    got = asyncio.run(r.aretrieve("Where was Albert Einstein born?"))
    assert [n.node.node_id for n in got] == sync and sync[0] == "p3"


def test_llama_index_empty_result_keeps_the_reason(translator_index):
    from kgrag_plugins.integrations import ClueTranslationRetriever

    paper = ClueTranslationRetriever(translator_index, fusion=None)
    assert paper.retrieve("zzzz qqqq") == []
    assert "no entity" in paper.last_trace["reason"]
    # the default dense-first fusion keeps the dense ranking; the reason is still reported
    r = ClueTranslationRetriever(translator_index)
    nodes = r.retrieve("zzzz qqqq")
    assert nodes and "no entity" in r.last_trace["reason"] and r.last_trace["fusion"]["traced"] == 0


def test_llama_index_argument_errors(translator_index):
    from kgrag_plugins.integrations import ClueTranslationRetriever
    from kgrag_plugins.methods.translator import TranslatorRetriever

    with pytest.raises(TypeError, match="KnowledgeIndex"):
        ClueTranslationRetriever("not an index")
    ready = TranslatorRetriever(translator_index)
    with pytest.raises(ValueError, match="alpha"):
        ClueTranslationRetriever(ready, alpha=3)
    assert ClueTranslationRetriever(ready).retriever is ready
    r = ClueTranslationRetriever(translator_index, alpha=1, beta=1, dataset="musique")
    assert (r.retriever.alpha, r.retriever.beta) == (1, 1)


def test_llama_index_with_a_stand_in_retriever(translator_index):
    from kgrag_plugins.integrations import ClueTranslationRetriever

    r = ClueTranslationRetriever(_StandIn(translator_index))
    nodes = r.retrieve("anything")
    assert [n.node.metadata["kind"] for n in nodes] == ["passage", "clue"]
    assert nodes[1].node.metadata["sentences"] == ["Marie Curie was born in Warsaw."]


def test_langgraph_translator_graph_and_node(translator_index):
    from kgrag_plugins.integrations import make_translator_node, translator_graph

    g = translator_graph(translator_index, k=2)
    out = g.invoke({"question": "Where was Albert Einstein born?"})
    assert out["documents"][0].id == "p3"
    assert any("born" in f for f in out["facts"])
    tr = out["trace"]["translator"]
    assert {"clues", "direction", "traced", "timings"} <= set(tr)
    assert any(t["passage_id"] == "p3" for t in tr["traced"])
    assert "generation" not in out or out["generation"] is None
    # async node, query overrides question
    node = make_translator_node(_StandIn(translator_index), k=1)
    upd = asyncio.run(node.ainvoke({"question": "x", "query": "y"}))
    assert upd["facts"] == ["Marie Curie was born in Warsaw."]  # the masks filled from the traced sentence
    with pytest.raises(ValueError, match="TranslatorRetriever"):
        translator_graph(_StandIn(translator_index), alpha=3)


def test_langgraph_translator_graph_with_llm_generates(translator_index):
    from kgrag_plugins.integrations import translator_graph
    from kgrag_plugins.methods.translator import TranslatorRetriever
    from kgrag_plugins.models.llm import ScriptedLLM

    llm = ScriptedLLM(lambda messages: '{"Response": "Warsaw"}')
    g = translator_graph(TranslatorRetriever(translator_index), llm, k=2)
    out = g.invoke({"question": "Where was Marie Curie born?"})
    assert out["generation"] and "Warsaw" in out["generation"]
    assert out["documents"][0].id == "p1"


def test_translator_graph_as_subgraph_behind_the_hop_router(translator_index):
    from kgrag_plugins.integrations import make_hop_router, translator_graph
    from kgrag_plugins.methods.baselines import DenseRetriever

    router = make_hop_router(translator_graph(translator_index, k=2), DenseRetriever(translator_index), k=2)
    out = router.invoke({"question": "Where was Marie Curie born?"})
    assert out["route"] == "simple"
    assert out["documents"][0].id == "p1" and "translator" in out["trace"]
