"""The pluggable retrieve step: every accepted kind of retriever becomes ``query, k -> Evidence``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from langgraph.graph import END, START, StateGraph
from llama_index.core.base.base_retriever import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from typing_extensions import TypedDict

from kgrag_plugins.agents.retrieve import RetrieveStep, as_retrieve_step, to_evidence
from kgrag_plugins.types import Evidence, Fact, Passage, ScoredPassage

TEXTS = [
    ("a", "Warsaw", "Warsaw lies on the Vistula."),
    ("b", "Marie Curie", "Marie Curie was born in Warsaw."),
    ("c", "Paris", "Paris lies on the Seine."),
]


class UserLCRetriever(LCBaseRetriever):
    """A LangChain retriever as a user would write it."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [
            Document(page_content=t, id=i, metadata={"title": ti, "score": 1.0 - n / 10})
            for n, (i, ti, t) in enumerate(TEXTS)
        ]


class UserLIRetriever(LIBaseRetriever):
    """A LlamaIndex retriever as a user would write it (plus one fact node)."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        out = [
            NodeWithScore(node=TextNode(id_=i, text=t, metadata={"title": ti}), score=0.9 - n / 10)
            for n, (i, ti, t) in enumerate(TEXTS)
        ]
        out.append(NodeWithScore(node=TextNode(text="Warsaw capital_of Poland", metadata={"kind": "fact"}), score=0.5))
        return out


class S(TypedDict, total=False):
    question: str
    query: str
    documents: list[Document]
    facts: list[str]


def _node_graph():
    def node(state: S) -> dict[str, Any]:
        docs = [Document(page_content=t, id=i, metadata={"title": ti}) for i, ti, t in TEXTS]
        return {"documents": docs, "facts": [f"about {state['query']}"]}

    g = StateGraph(S)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile()


def _check(ev: Evidence, k: int) -> None:
    assert isinstance(ev, Evidence)
    assert ev.passage_ids == ["a", "b", "c"][:k]
    assert ev.passages[0].passage.title == "Warsaw"
    assert ev.passages[0].passage.text == "Warsaw lies on the Vistula."


@pytest.mark.parametrize(
    "make,kind",
    [
        (UserLCRetriever, "langchain"),
        (UserLIRetriever, "llama_index"),
        (_node_graph, "node"),
    ],
)
def test_framework_retrievers_become_steps(make, kind):
    step = as_retrieve_step(make(), k=2)
    assert step.kind == kind and step.k == 2
    _check(step("where?"), 2)
    _check(step("where?", k=3), 3)
    _check(asyncio.run(step.acall("where?")), 2)
    assert step.calls == 3


def test_llama_index_fact_nodes_become_facts():
    ev = as_retrieve_step(UserLIRetriever(), k=2)("q")
    assert [f.text for f in ev.facts] == ["Warsaw capital_of Poland"]
    assert ev.passages[0].score == pytest.approx(0.9)


def test_langgraph_node_facts_and_scores():
    ev = as_retrieve_step(_node_graph(), k=5)("the river")
    assert [f.text for f in ev.facts] == ["about the river"]


def test_kgrag_retriever_step(dense):
    step = as_retrieve_step(dense, k=4)
    assert step.kind == "kgrag" and step.name == dense.name
    ev = step("Where was Marie Curie born?")
    assert len(ev.passages) == 4 and ev.passages[0].passage.title == "Marie Curie"
    assert asyncio.run(step.acall("Where was Marie Curie born?", 2)).passage_ids == ev.passage_ids[:2]


def test_plain_callables():
    seen: list[tuple] = []

    def by_query(query):
        seen.append((query,))
        return ["Warsaw lies on the Vistula.", "Paris lies on the Seine."]

    def with_k(query, k):
        seen.append((query, k))
        return [ScoredPassage(Passage(str(i), f"text {i}"), 1.0) for i in range(k + 3)]

    def state_node(state):
        return {"documents": [{"id": "x", "text": state["question"], "title": "T", "score": 0.3}]}

    def to_ev(query: str) -> Evidence:
        return Evidence(query, [ScoredPassage(Passage("e", "E"), 1.0)], [Fact("f")])

    ev = as_retrieve_step(by_query, k=1)("q1")
    assert len(ev.passages) == 1 and ev.passages[0].passage.id.startswith("txt-")
    assert as_retrieve_step(with_k, k=2)("q2").passage_ids == ["0", "1"]
    assert seen[-1] == ("q2", 2)
    ev = as_retrieve_step(state_node)("hello")
    assert ev.passages[0].passage.text == "hello" and ev.passages[0].passage.title == "T"
    ev = as_retrieve_step(to_ev)("q")
    assert ev.passage_ids == ["e"] and ev.facts[0].text == "f"
    # same text -> same id (dedup works across retrievals)
    assert as_retrieve_step(by_query)("a").passage_ids == as_retrieve_step(by_query)("b").passage_ids


def test_async_callable():
    async def fetch(query):
        return [query.upper()]

    step = as_retrieve_step(fetch)
    assert asyncio.run(step.acall("abc")).passages[0].passage.text == "ABC"
    assert step("abc").passages[0].passage.text == "ABC"  # sync call: run to completion

    async def inside_loop():
        return step("abc")

    with pytest.raises(TypeError, match="event loop is running"):
        asyncio.run(inside_loop())


def test_step_passthrough_and_errors():
    step = as_retrieve_step(lambda q: [q])
    assert as_retrieve_step(step) is step
    with pytest.raises(TypeError, match="LlamaIndex BaseRetriever"):
        as_retrieve_step(42)
    with pytest.raises(ValueError):
        as_retrieve_step(lambda q: [q], k=0)
    with pytest.raises(ValueError):
        step("   ")
    with pytest.raises(TypeError, match="returned"):
        as_retrieve_step(lambda q: 3.5)("q")
    with pytest.raises(TypeError, match="returned a int"):
        to_evidence("q", [1])
    assert isinstance(step, RetrieveStep)
