"""LangChain adapter: kgrag retrievers as ``BaseRetriever`` s, embeddings and chat models both ways."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings.fake import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import create_retriever_tool
from pydantic import PrivateAttr

from kgrag_plugins.index.store import IndexMismatchError, KnowledgeIndex
from kgrag_plugins.integrations.langchain import (
    KGRAGEmbeddings,
    KGRAGLangChainRetriever,
    LangChainEmbedder,
    LangChainLLM,
)
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.methods.baselines import DenseRetriever
from kgrag_plugins.models.embed import as_embedder
from kgrag_plugins.models.llm import as_llm
from kgrag_plugins.models.prompting import DATA_NOTICE
from kgrag_plugins.types import Passage

Q = "Which river flows through the city where Marie Curie was born?"


class ScriptedChatModel(BaseChatModel):
    """A tool-calling chat model that replies with scripted ``AIMessage`` s and records its inputs."""

    replies: list[AIMessage]
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    @property
    def seen(self) -> list[list[BaseMessage]]:
        return self._seen

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        self._seen.append(list(messages))
        reply = self.replies[min(len(self._seen), len(self.replies)) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])


class _SpyRetriever(Retriever):
    """Records which path (sync / async) ran."""

    name = "spy"

    def __init__(self, index: KnowledgeIndex):
        self.index = index
        self.inner = DenseRetriever(index)
        self.calls: list[tuple[str, str, int]] = []

    def _retrieve(self, query: str, k: int):
        self.calls.append(("sync", query, k))
        return self.inner.retrieve(query, k)

    async def aretrieve(self, query: str, k: int = 5):
        self.calls.append(("async", query, k))
        await asyncio.sleep(0)
        return self.inner.retrieve(query, k)


# --------------------------------------------------------------------------- the retriever


def test_invoke_returns_documents_with_scores_and_kinds(sample_index):
    r = KGRAGLangChainRetriever.from_index(sample_index, "activation", k=3)
    docs = r.invoke(Q)
    ev = r.last_evidence()
    passages = [d for d in docs if d.metadata["kind"] == "passage"]
    facts = [d for d in docs if d.metadata["kind"] != "passage"]
    assert [d.id for d in passages] == ev.passage_ids and 0 < len(passages) <= 3
    assert docs[: len(passages)] == passages  # passages first, in the method's order
    assert [d.metadata["passage_id"] for d in passages] == ev.passage_ids
    assert [d.metadata["title"] for d in passages] == [sp.passage.title for sp in ev.passages]
    assert [d.page_content for d in passages] == [sp.passage.text for sp in ev.passages]
    assert [d.metadata["method_score"] for d in passages] == pytest.approx([sp.score for sp in ev.passages])
    # the score is the cosine of the query and the stored passage vector, clipped to [0, 1]
    q = sample_index.embed_query(Q)
    store = sample_index.passages
    want = [max(0.0, float(q @ store.vectors[store.position(d.id)])) for d in passages]
    assert [d.metadata["score"] for d in passages] == pytest.approx(want, abs=1e-4)
    # facts: capped at 5 by default, kinds from the method, scores in [0, 1]
    assert 0 < len(facts) <= 5 and {d.metadata["kind"] for d in facts} <= {"fact", "path", "clue"}
    assert all(0.0 <= d.metadata["score"] <= 1.0 for d in docs)
    assert len({d.id for d in docs}) == len(docs)

    none = KGRAGLangChainRetriever.from_index(sample_index, "activation", k=3, include_facts=False).invoke(Q)
    assert [d.metadata["kind"] for d in none] == ["passage"] * len(passages)
    raw = KGRAGLangChainRetriever.from_index(sample_index, "activation", k=3, score="method", max_facts=1).invoke(Q)
    assert [d.metadata["score"] for d in raw[: len(passages)]] == pytest.approx([sp.score for sp in ev.passages])
    assert len(raw) == len(passages) + 1


def test_ainvoke_is_really_async_and_batch_works(sample_index):
    spy = _SpyRetriever(sample_index)
    r = KGRAGLangChainRetriever(retriever=spy, k=2)
    docs = asyncio.run(r.ainvoke("Where was Marie Curie born?"))
    assert spy.calls == [("async", "Where was Marie Curie born?", 2)]
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    out = r.batch(["Where was Marie Curie born?", "Which river flows through Warsaw?"])
    assert [len(x) for x in out] == [2, 2]
    assert out[0][0].id == docs[0].id and out[1][0].metadata["title"] == "Vistula"
    assert sorted(c[0] for c in spy.calls[1:]) == ["sync", "sync"]


def test_k_at_invoke_time_overrides_the_field_for_one_call(sample_index):
    spy = _SpyRetriever(sample_index)
    r = KGRAGLangChainRetriever(retriever=spy, k=2)
    assert len(r.invoke("Where was Marie Curie born?", k=3)) == 3
    assert len(asyncio.run(r.ainvoke("Where was Marie Curie born?", k=1))) == 1
    assert len(r.invoke("Where was Marie Curie born?", verbose=False)) == 2  # LangChain's own option passes
    assert [c[0::2] for c in spy.calls] == [("sync", 3), ("async", 1), ("sync", 2)]
    with pytest.raises(TypeError, match="top_k"):
        r.invoke("Where was Marie Curie born?", top_k=3)
    with pytest.raises(ValueError, match="k must be >= 1"):
        r.invoke("Where was Marie Curie born?", k=0)


def test_concurrent_calls_keep_their_own_evidence(sample_index):
    r = KGRAGLangChainRetriever(retriever=_SpyRetriever(sample_index), k=2)
    questions = [
        "Where was Marie Curie born?",
        "Which river flows through Warsaw?",
        "Which city lies on the Vistula in the south of Poland?",
    ]

    async def one(q: str):
        docs = await r.ainvoke(q)
        await asyncio.sleep(0)  # let the other calls run in between
        return q, docs, r.last_evidence()

    async def main():
        return await asyncio.gather(*(one(q) for q in questions))

    for q, docs, ev in asyncio.run(main()):
        assert ev.query == q and [d.id for d in docs] == ev.passage_ids


def test_rejects_bad_arguments(sample_index):
    with pytest.raises(TypeError, match="retrieve"):
        KGRAGLangChainRetriever(retriever=object())
    with pytest.raises(ValueError, match="score"):
        KGRAGLangChainRetriever(retriever=DenseRetriever(sample_index), score="raw")
    with pytest.raises(ValueError, match="unknown method"):
        KGRAGLangChainRetriever.from_index(sample_index, "pagerank")
    with pytest.raises(ValueError, match="LLM-free"):
        KGRAGLangChainRetriever.from_index(sample_index, "activation", llm=ScriptedChatModel(replies=[]))


def test_retriever_tool_in_a_tool_calling_agent(sample_index, sample_questions):
    from langgraph.prebuilt import create_react_agent

    q = next(x for x in sample_questions if x.id == "sq-01")
    retriever = KGRAGLangChainRetriever.from_index(sample_index, "activation", k=3)
    tool = create_retriever_tool(retriever, "search_kg", "Search the corpus through its knowledge graph.")
    model = ScriptedChatModel(
        replies=[
            AIMessage(content="", tool_calls=[{"name": "search_kg", "args": {"query": q.question}, "id": "call-1"}]),
            AIMessage(content="The Vistula."),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(model, [tool])
    out = agent.invoke({"messages": [HumanMessage(q.question)]})

    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1 and tool_messages[0].name == "search_kg"
    gold = [sample_index.passages.get(pid).text for pid in q.supporting_passage_ids]
    assert any(text in tool_messages[0].content for text in gold)
    # the model saw the tool output on its second turn, then answered
    assert len(model.seen) == 2 and isinstance(model.seen[1][-1], ToolMessage)
    assert out["messages"][-1].content == "The Vistula."


# --------------------------------------------------------------------------- embeddings and chat models


def test_our_embedder_as_langchain_embeddings(sample_index):
    emb = KGRAGEmbeddings(sample_index.embedder)
    texts = ["Warsaw", "the Vistula river"]
    assert np.allclose(emb.embed_documents(texts), sample_index.embedder.embed(texts), atol=1e-5)
    assert np.allclose(emb.embed_query("Warsaw"), sample_index.embed_query("Warsaw"), atol=1e-5)
    assert as_embedder(emb) is sample_index.embedder  # unwrapped, so index manifests keep our name


def test_langchain_embeddings_as_our_embedder(tmp_path):
    fake = DeterministicFakeEmbedding(size=16)
    emb = as_embedder(fake)
    assert isinstance(emb, LangChainEmbedder) and emb.dim == 16 and emb.name == "langchain/DeterministicFakeEmbedding"
    vecs = emb.embed(["a", "b"])
    assert vecs.shape == (2, 16) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    passages = [Passage("p1", "Warsaw lies on the Vistula.", "Warsaw"), Passage("p2", "Paris is in France.", "Paris")]
    index = KnowledgeIndex.build(passages, tmp_path / "idx", embedder=fake, progress=False)
    assert index.manifest["embedder"] == {"name": "langchain/DeterministicFakeEmbedding", "dim": 16}
    # the fake embeds a text deterministically: the query equal to a passage's text finds it
    assert DenseRetriever(index).retrieve("Warsaw\nWarsaw lies on the Vistula.", 1).passage_ids == ["p1"]
    index.close()
    KnowledgeIndex.open(tmp_path / "idx", embedder=fake).close()
    with pytest.raises(IndexMismatchError):
        KnowledgeIndex.open(tmp_path / "idx", embedder=DeterministicFakeEmbedding(size=8))
    with pytest.raises(TypeError, match="embedder"):
        as_embedder(object())


def test_chat_model_as_our_llm_drives_a_method(sample_index):
    chat = ScriptedChatModel(replies=[AIMessage(content="Marie Curie place of birth")])
    llm = as_llm(chat)
    assert isinstance(llm, LangChainLLM) and llm.chat_model is chat
    assert llm.complete("Say hi") == "Marie Curie place of birth"
    r = KGRAGLangChainRetriever.from_index(sample_index, "kg_infused", llm=chat, k=2, rounds=1, k_entities=2)
    docs = r.invoke(Q)
    assert r.retriever.llm.chat_model is chat and len(chat.seen) > 1  # the method's LLM steps ran
    prompts = [m[-1].content for m in chat.seen[1:]]
    assert all(isinstance(m[-1], HumanMessage) for m in chat.seen[1:])
    assert any(DATA_NOTICE in p and "<triples>" in p and Q in p for p in prompts)  # delimited KG data
    assert 0 < len([d for d in docs if d.metadata["kind"] == "passage"]) <= 2


def test_lazy_exports_and_old_import_path():
    import kgrag_plugins.integrations as integrations
    from kgrag_plugins.integrations.langchain import LangChainLLM as Old

    assert integrations.LangChainLLM is Old
    assert integrations.KGRAGLangChainRetriever is KGRAGLangChainRetriever
    assert integrations.KGRAGEmbeddings is KGRAGEmbeddings
    from kgrag_plugins.integrations.llama_index import as_retriever, build_index

    assert integrations.build_index is build_index and integrations.as_retriever is as_retriever
