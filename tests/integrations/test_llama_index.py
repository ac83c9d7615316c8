"""LlamaIndex adapter: kgrag retrievers as ``BaseRetriever`` s, inside a query engine and a fusion retriever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import PrivateAttr

from kgrag_plugins.integrations.llama_index import (
    VARIANTS,
    KGRetriever,
    LlamaIndexLLM,
    SpreadingActivationRetriever,
    evidence_to_nodes,
)
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.methods.baselines import DenseRetriever, PPRRetriever
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.types import Evidence, Fact, Passage, ScoredPassage

Q = "Which river flows through Warsaw?"


class ScriptedLlamaLLM(CustomLLM):
    """A LlamaIndex LLM that returns scripted replies (cycling the last one) and records prompts."""

    replies: list[str] = ["scripted answer"]
    _prompts: list[str] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=8192, num_output=256, model_name="scripted")

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        i = min(len(self._prompts), len(self.replies)) - 1
        return CompletionResponse(text=self.replies[i])

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self.complete(prompt, formatted=formatted).text
        yield CompletionResponse(text=text, delta=text)


class _FactsRetriever(Retriever):
    """Dense passages plus two fixed facts (to test fact nodes independently of any method)."""

    name = "dense+facts"

    def __init__(self, index):
        self.dense = DenseRetriever(index)

    def _retrieve(self, query: str, k: int) -> Evidence:
        ev = self.dense.retrieve(query, k)
        ev.facts = [
            Fact("Warsaw lies on Vistula", "fact", 0.9, {"head": "Warsaw", "relation": "lies on", "sources": ["s-5"]}),
            Fact("Warsaw -> capital of -> Poland", "path", 0.4),
        ]
        ev.trace["seeds"] = ["Warsaw"]
        return ev


class _SpyRetriever(Retriever):
    """Records whether the async path was used."""

    name = "spy"

    def __init__(self, inner: Retriever):
        self.inner, self.calls = inner, []

    def _retrieve(self, query: str, k: int) -> Evidence:
        self.calls.append(("sync", query, k))
        return self.inner.retrieve(query, k)

    async def aretrieve(self, query: str, k: int = 5) -> Evidence:
        self.calls.append(("async", query, k))
        return self.inner.retrieve(query, k)


# --------------------------------------------------------------------------- shape translation


def test_passages_become_scored_text_nodes(sample_index):
    r = KGRetriever(DenseRetriever(sample_index), similarity_top_k=3)
    nodes = r.retrieve(Q)
    ev = DenseRetriever(sample_index).retrieve(Q, 3)
    assert [n.node.node_id for n in nodes] == ev.passage_ids
    assert [n.node.get_content() for n in nodes] == [sp.passage.text for sp in ev.passages]
    assert [n.score for n in nodes] == pytest.approx([sp.score for sp in ev.passages])
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= s <= 1.0 for s in scores)
    top = nodes[0].node
    assert top.metadata["title"] == "Vistula" and top.metadata["kind"] == "passage"
    assert top.metadata["retriever"] == "dense" and top.metadata["rank"] == 1
    # only the title reaches the LLM / the embedder
    llm_text = top.get_content(metadata_mode=MetadataMode.LLM)
    assert llm_text.startswith("title: Vistula") and "kind" not in llm_text and "rank" not in llm_text
    assert "retriever" not in top.get_content(metadata_mode=MetadataMode.EMBED)
    assert r.last_trace == {"retriever": "dense"} and r.last_evidence.passage_ids == ev.passage_ids


def test_include_facts_on_and_off(sample_index):
    with_facts = KGRetriever(_FactsRetriever(sample_index), similarity_top_k=2).retrieve(Q)
    assert [n.node.metadata["kind"] for n in with_facts] == ["passage", "passage", "fact", "path"]
    fact = with_facts[2]
    assert fact.node.get_content() == "Warsaw lies on Vistula" and fact.score == pytest.approx(0.9)
    assert fact.node.metadata["relation"] == "lies on" and fact.node.metadata["sources"] == ["s-5"]
    assert fact.node.get_content(metadata_mode=MetadataMode.LLM) == "Warsaw lies on Vistula"
    assert fact.node.node_id.startswith("fact:") and with_facts[3].node.node_id.startswith("path:")
    # stable ids (fusion and de-duplication rely on them)
    again = KGRetriever(_FactsRetriever(sample_index), similarity_top_k=2).retrieve(Q)
    assert [n.node.node_id for n in again] == [n.node.node_id for n in with_facts]

    without = KGRetriever(_FactsRetriever(sample_index), similarity_top_k=2, include_facts=False).retrieve(Q)
    assert [n.node.metadata["kind"] for n in without] == ["passage", "passage"]
    capped = KGRetriever(_FactsRetriever(sample_index), similarity_top_k=2, max_facts=1).retrieve(Q)
    assert [n.node.metadata["kind"] for n in capped] == ["passage", "passage", "fact"]


def test_evidence_to_nodes_keeps_metadata_small():
    p = Passage("p1", "text", "T", {"source": "doc.txt", "tags": ["a", "b"], "blob": {"nested": 1}})
    ev = Evidence("q", [ScoredPassage(p, 0.5)], [Fact("a b c", data={"path": {"x": 1}})], {"big": list(range(1000))})
    nodes = evidence_to_nodes(ev)
    assert nodes[0].node.metadata == {
        "source": "doc.txt",
        "tags": ["a", "b"],
        "title": "T",
        "kind": "passage",
        "passage_id": "p1",
        "rank": 1,
    }
    assert nodes[1].node.metadata == {"kind": "fact"}
    assert all("big" not in n.node.metadata for n in nodes)


def test_sync_and_async_retrieve(sample_index):
    spy = _SpyRetriever(DenseRetriever(sample_index))
    r = KGRetriever(spy, similarity_top_k=4)
    sync_nodes = r.retrieve(QueryBundle(Q))
    async_nodes = asyncio.run(r.aretrieve(Q))
    assert [c[0] for c in spy.calls] == ["sync", "async"]  # _aretrieve awaits the method's aretrieve
    assert spy.calls[1][1:] == (Q, 4)
    assert [n.node.node_id for n in async_nodes] == [n.node.node_id for n in sync_nodes]
    assert len(sync_nodes) == 4


def test_graph_baseline_through_the_adapter(sample_index):
    nodes = KGRetriever(PPRRetriever(sample_index), similarity_top_k=3).retrieve(
        "Which river flows through the city where Marie Curie was born?"
    )
    assert 0 < len(nodes) <= 3 and all(n.node.metadata["retriever"] == "ppr" for n in nodes)
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)


def test_rejects_bad_arguments(sample_index):
    with pytest.raises(ValueError, match="similarity_top_k"):
        KGRetriever(DenseRetriever(sample_index), similarity_top_k=0)
    with pytest.raises(TypeError, match="retrieve"):
        KGRetriever(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'activation', 'sa_rag', 'kg_infused'"):
        SpreadingActivationRetriever(sample_index, variant="pagerank")
    with pytest.raises(ValueError, match="LLM-free"):
        SpreadingActivationRetriever(sample_index, variant="activation", llm=ScriptedLLM(["x"]))
    with pytest.raises(ValueError, match="sa_rag_graph"):
        SpreadingActivationRetriever(sample_index, variant="sa_rag", llm=ScriptedLLM(["x"]))


# --------------------------------------------------------------------------- inside LlamaIndex components


def test_in_a_retriever_query_engine(sample_index):
    llm = ScriptedLlamaLLM(replies=["The Vistula."])
    retriever = KGRetriever(_FactsRetriever(sample_index), similarity_top_k=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    response = engine.query(Q)
    assert str(response) == "The Vistula."
    assert len(llm.prompts) == 1
    prompt = llm.prompts[0]
    top = retriever.last_evidence.passages[0].passage
    assert top.title == "Vistula" and top.text in prompt and f"title: {top.title}" in prompt
    assert "Warsaw lies on Vistula" in prompt and Q in prompt
    assert [n.node.node_id for n in response.source_nodes][:2] == retriever.last_evidence.passage_ids
    # async query path
    response = asyncio.run(engine.aquery(Q))
    assert str(response) == "The Vistula." and len(llm.prompts) == 2


def test_in_a_query_fusion_retriever(sample_index):
    dense = KGRetriever(DenseRetriever(sample_index), similarity_top_k=3)
    graph = KGRetriever(PPRRetriever(sample_index), similarity_top_k=3)
    fusion = QueryFusionRetriever(
        [dense, graph], llm=ScriptedLlamaLLM(), num_queries=1, mode="reciprocal_rerank", similarity_top_k=4
    )
    fused = fusion.retrieve("Which river flows through the city where Marie Curie was born?")
    ids = [n.node.node_id for n in fused]
    assert 0 < len(ids) <= 4 and len(set(ids)) == len(ids)
    both = set(dense.last_evidence.passage_ids) | set(graph.last_evidence.passage_ids)
    assert set(ids) <= both
    assert [n.score for n in fused] == sorted((n.score for n in fused), reverse=True)


def test_fusion_with_generated_queries(sample_index):
    """num_queries=2: the (scripted) LLM writes one extra query, which reaches our retriever."""
    llm = ScriptedLlamaLLM(replies=["Where was Marie Curie born?"])
    spy = _SpyRetriever(DenseRetriever(sample_index))
    fusion = QueryFusionRetriever(
        [KGRetriever(spy, similarity_top_k=3)], llm=llm, num_queries=2, mode="relative_score", use_async=False
    )
    fused = asyncio.run(fusion.aretrieve("Which river flows through Marie Curie's birthplace?"))
    assert "Generate 1 search queries" in llm.prompts[0]
    assert {c[1] for c in spy.calls} == {
        "Which river flows through Marie Curie's birthplace?",
        "Where was Marie Curie born?",
    }
    assert all(c[0] == "async" for c in spy.calls)
    assert 0 < len(fused) <= 6 and all(isinstance(n, NodeWithScore) for n in fused)


# --------------------------------------------------------------------------- the spreading-activation variants


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_spreading_activation_variants(sample_index, variant):
    r = SpreadingActivationRetriever(sample_index, variant=variant, similarity_top_k=3)
    nodes = r.retrieve("Which river flows through the city where Marie Curie was born?")
    passages = [n for n in nodes if n.node.metadata["kind"] == "passage"]
    facts = [n for n in nodes if n.node.metadata["kind"] != "passage"]
    assert 0 < len(passages) <= 3
    assert nodes[: len(passages)] == passages  # facts come after passages
    assert [n.score for n in passages] == sorted((n.score for n in passages), reverse=True)
    assert all(n.node.metadata["kind"] in ("fact", "path", "clue") for n in facts)
    assert len(facts) == len({f.text for f in r.last_evidence.facts})
    assert r.last_trace and r.last_trace is r.last_evidence.trace
    assert r.variant == variant and all(n.node.metadata["retriever"] == r.retriever.name for n in nodes)
    no_facts = SpreadingActivationRetriever(sample_index, variant=variant, similarity_top_k=3, include_facts=False)
    assert all(n.node.metadata["kind"] == "passage" for n in no_facts.retrieve("Where was Marie Curie born?"))
    anodes = asyncio.run(r.aretrieve("Which river flows through the city where Marie Curie was born?"))
    assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]


def test_llms_of_any_framework_are_accepted(sample_index):
    li = ScriptedLlamaLLM()
    r = SpreadingActivationRetriever(sample_index, variant="kg_infused", llm=li, k_entities=2, rounds=1)
    assert isinstance(r.retriever.llm, LlamaIndexLLM) and r.retriever.llm.llm is li
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from kgrag_plugins.integrations.langchain import LangChainLLM

    lc = FakeListChatModel(responses=["x"])
    r = SpreadingActivationRetriever(sample_index, variant="kg_infused", llm=lc)
    assert isinstance(r.retriever.llm, LangChainLLM) and r.retriever.llm.chat_model is lc
    ours = ScriptedLLM(["x"])
    assert SpreadingActivationRetriever(sample_index, variant="kg_infused", llm=ours).retriever.llm is ours
