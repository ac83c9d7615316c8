"""LangGraph adapter: node factories, the three compiled graphs, subgraph embedding, LLM paths."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from kgrag_plugins.integrations.langgraph import (
    KGRAGState,
    activation_graph,
    documents_to_passages,
    evidence_to_documents,
    kg_infused_graph,
    make_generate_node,
    make_retrieve_node,
    sa_rag_graph,
    state_to_evidence,
)
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.methods.baselines import DenseRetriever
from kgrag_plugins.models.llm import LLMError, ScriptedLLM
from kgrag_plugins.types import Evidence, Fact, Passage, ScoredPassage

Q = "Which river flows through the city where Marie Curie was born?"


def _nodes(graph, state, **kw) -> tuple[list[str], dict[str, Any]]:
    """Stream ``updates``; return the node names in order and the merged final state."""
    names, final = [], dict(state)
    for chunk in graph.stream(state, stream_mode="updates", **kw):
        for name, update in chunk.items():
            names.append(name)
            final.update(update or {})
    return names, final


class _Spy(Retriever):
    name = "spy"

    def __init__(self, inner: Retriever):
        self.inner, self.calls = inner, []

    def _evidence(self, query: str, k: int) -> Evidence:
        ev = self.inner.retrieve(query, k)
        ev.facts = [Fact("Warsaw mentions Vistula", score=0.7)]
        return ev

    def _retrieve(self, query: str, k: int) -> Evidence:
        self.calls.append(("sync", query, k))
        return self._evidence(query, k)

    async def aretrieve(self, query: str, k: int = 5) -> Evidence:
        self.calls.append(("async", query, k))
        return self._evidence(query, k)


# --------------------------------------------------------------------------- shapes and generic nodes


def test_documents_round_trip():
    ev = Evidence("q", [ScoredPassage(Passage("p1", "text one", "T1", {"src": "a"}), 0.9)], [Fact("a b c")])
    docs = evidence_to_documents(ev, retriever="dense")
    assert isinstance(docs[0], Document) and docs[0].id == "p1" and docs[0].page_content == "text one"
    assert docs[0].metadata == {
        "src": "a",
        "id": "p1",
        "title": "T1",
        "score": 0.9,
        "kind": "passage",
        "retriever": "dense",
    }
    back = documents_to_passages(docs)
    assert back[0].passage == ev.passages[0].passage and back[0].score == 0.9
    as_dicts = documents_to_passages([{"id": "p2", "text": "t", "title": "T2", "score": 0.5}])
    assert as_dicts[0].passage.title == "T2" and as_dicts[0].score == 0.5
    rebuilt = state_to_evidence({"question": "q", "documents": docs, "facts": ["a b c"], "trace": {"x": 1}})
    assert rebuilt.passage_ids == ["p1"] and [f.text for f in rebuilt.facts] == ["a b c"] and rebuilt.trace == {"x": 1}


def test_retrieve_node_sync_and_async(sample_index):
    spy = _Spy(DenseRetriever(sample_index))
    node = make_retrieve_node(spy, k=3)
    out = node.invoke({"question": "Which river flows through Warsaw?", "trace": {"earlier": True}})
    assert [d.metadata["title"] for d in out["documents"]][0] == "Vistula" and len(out["documents"]) == 3
    assert out["facts"] == ["Warsaw mentions Vistula"]
    assert out["trace"] == {"earlier": True, "retrieve": {"retriever": "dense", "score_kind": "cosine"}}
    aout = asyncio.run(node.ainvoke({"question": "x", "query": "Which river flows through Warsaw?"}))
    assert spy.calls[-1] == ("async", "Which river flows through Warsaw?", 3)  # query wins over question
    assert [d.id for d in aout["documents"]] == [d.id for d in out["documents"]]
    with pytest.raises(ValueError, match="question"):
        node.invoke({})


def test_generate_node_takes_at_most_one_source():
    with pytest.raises(ValueError, match="at most one"):
        make_generate_node(ScriptedLLM(["x"]), method=object())
    # no source: the LLM comes from the graph's context; without one, the LLM-free answer
    node = make_generate_node()
    assert node.invoke({"question": Q, "answers": ["Vistula", "Oder"]}) == {"generation": "Vistula"}
    assert node.invoke({"question": Q}) == {"generation": None}
    with pytest.raises(TypeError, match="answer"):
        make_generate_node(method=object())


# --------------------------------------------------------------------------- activation graph


def test_activation_graph_retrieval_only(sample_index):
    from kgrag_plugins.methods.activation import ActivationRetriever

    graph = activation_graph(sample_index, k=3)
    names, final = _nodes(graph, {"question": Q})
    assert names == ["retrieve"]
    ev = ActivationRetriever(sample_index).retrieve(Q, 3)
    assert [d.id for d in final["documents"]] == ev.passage_ids
    assert final["facts"] == [f.text for f in ev.facts]
    assert final.get("generation") is None and final["trace"]["retrieve"]["retriever"] == ev.trace["retriever"]


def test_activation_graph_with_llm_generates(sample_index):
    llm = ScriptedLLM(["Vistula\nbecause ..."])
    graph = activation_graph(_Spy(DenseRetriever(sample_index)), llm, k=2)
    names, final = _nodes(graph, {"question": "Which river flows through Warsaw?"})
    assert names == ["retrieve", "generate"] and final["generation"] == "Vistula"
    prompt = llm.calls[0]["messages"][-1]["content"]
    for doc in final["documents"]:
        assert doc.page_content in prompt
    assert "- Warsaw mentions Vistula" in prompt and "Question: Which river flows through Warsaw?" in prompt


# --------------------------------------------------------------------------- KG-Infused RAG


def _kgi_replies(messages: list[dict[str, str]]) -> str:
    """Scripted KG-Infused LLM: picks the first candidate triple, fixed summary / query / note / answer."""
    prompt = messages[-1]["content"].rstrip()
    if prompt.endswith("Selected Triples:"):
        section = prompt.split("Retrieved Entity Triples:")[-1]
        found = re.findall(r"<[^<>]+>", section)
        return found[0] if found else "None"
    if prompt.endswith("Summary:"):
        return "Marie Curie was born in Warsaw."
    if prompt.endswith("New Query:"):
        return "river of Warsaw"
    if prompt.endswith("Note:"):
        return "PN - Curie was born in Warsaw; the Vistula flows through Warsaw."
    if prompt.endswith("Enhanced Passage:"):
        return "ENHANCED: Curie was born in Warsaw, on the Vistula."
    if prompt.endswith("Answer:"):
        return "Vistula"
    raise AssertionError(f"unexpected prompt: {prompt[-200:]}")


def test_kg_infused_graph_llm_free_matches_the_method(sample_index):
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever

    graph = kg_infused_graph(sample_index)
    names, final = _nodes(graph, {"question": Q})
    assert names == ["activate", "expand_query", "retrieve"]
    ev = KGInfusedRetriever(sample_index).retrieve(Q, 6)
    assert [d.id for d in final["documents"]] == ev.passage_ids
    assert final["facts"] == [f.text for f in ev.facts] and final["facts"]
    assert final["expanded_query"] == ev.trace["expanded_query"] and final["summary"] == ev.trace["summary"]
    assert final["trace"]["activation"]["seeds"] == ev.trace["seeds"]
    assert final.get("generation") is None and "note" not in final
    json.dumps(final["activation"])  # the memory snapshot in state is plain data


def test_kg_infused_graph_with_llm_equals_run(sample_index):
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever

    llm = ScriptedLLM(_kgi_replies)
    graph = kg_infused_graph(sample_index, llm, rounds=2)
    names, final = _nodes(graph, {"question": Q})
    assert names == ["activate", "expand_query", "retrieve", "write_note", "augment", "generate"]
    assert final["generation"] == "Vistula"
    assert final["summary"] == "Marie Curie was born in Warsaw." and final["expanded_query"] == "river of Warsaw"
    assert final["note"].startswith("ENHANCED") and final["trace"]["passage_note"].startswith("PN - Curie")
    graph_prompts = [c["messages"][-1]["content"] for c in llm.calls]
    assert "ENHANCED: Curie was born in Warsaw" in graph_prompts[-1]  # the answer reads the augmented note
    # the graph performs exactly the method's own pipeline
    ref_llm = ScriptedLLM(_kgi_replies)
    ans = KGInfusedRetriever(sample_index, llm=ref_llm, rounds=2).run(Q)
    assert ans.text == final["generation"]
    assert [c["messages"][-1]["content"] for c in ref_llm.calls] == graph_prompts
    assert ans.evidence.passage_ids == [d.id for d in final["documents"]]
    # async
    afinal = asyncio.run(graph.ainvoke({"question": Q}))
    assert afinal["generation"] == "Vistula" and len(llm.calls) == 2 * len(graph_prompts)


def test_kg_infused_graph_survives_a_failing_note(sample_index):
    def replies(messages):
        if messages[-1]["content"].rstrip().endswith("Note:"):
            raise LLMError("note model down")
        return _kgi_replies(messages)

    final = kg_infused_graph(sample_index, ScriptedLLM(replies)).invoke({"question": Q})
    assert final["note"] is None and final["generation"] == "Vistula"
    assert final["trace"]["llm_error"] == [{"step": "write_note", "error": "note model down"}]


def test_kg_infused_graph_llm_must_match_a_given_retriever(sample_index):
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever

    with pytest.raises(ValueError, match="KGInfusedRetriever"):
        kg_infused_graph(KGInfusedRetriever(sample_index), ScriptedLLM(["x"]))
    llm = ScriptedLLM(_kgi_replies)
    names, _ = _nodes(kg_infused_graph(KGInfusedRetriever(sample_index, llm=llm)), {"question": Q})
    assert names[-1] == "generate"


# --------------------------------------------------------------------------- SA-RAG (+ CoT)


def _reasoning(possible: bool, follow_up: str = "", summary: str = "Curie was born in Warsaw.") -> str:
    return json.dumps(
        {
            "provided_context": summary,
            "answer_possible": possible,
            "final_answer": "Vistula" if possible else "",
            "additional_question": follow_up,
        }
    )


ANSWER = json.dumps({"reasoning": "Warsaw lies on the Vistula.", "final_answer": "Vistula"})


def test_sa_rag_graph_retrieval_only(sample_index):
    from kgrag_plugins.methods.sa_rag import SARAGRetriever

    names, final = _nodes(sa_rag_graph(sample_index), {"question": Q})
    assert names == ["retrieve"] and final.get("generation") is None
    ev = SARAGRetriever(sample_index).acquire(Q)
    assert [d.id for d in final["documents"]] == ev.passage_ids
    assert final["context"] == SARAGRetriever.context(ev) and final["context"].startswith("### Context")
    assert final["trace"]["retrievals"][0]["query"] == Q


def test_sa_rag_cot_loops_on_a_follow_up_then_stops(sample_index):
    from kgrag_plugins.methods.sa_rag import SARAGCoT, SARAGRetriever

    script = [_reasoning(False, "Which river flows through Warsaw?"), _reasoning(True), ANSWER]
    llm = ScriptedLLM(list(script))
    names, final = _nodes(sa_rag_graph(sample_index, llm), {"question": Q})
    assert names == ["retrieve", "reason", "retrieve", "reason", "generate"]
    assert final["generation"] == "Vistula" and final["steps"] == 2 and llm.remaining == 0
    assert [r["query"] for r in final["trace"]["retrievals"]] == [Q, "Which river flows through Warsaw?"]
    known = "# Known information\n<notes>\nCurie was born in Warsaw.\n</notes>\n# Additional facts"
    assert final["context"].startswith(known)
    second_reasoning = llm.calls[1]["messages"]
    assert second_reasoning[1]["content"].endswith(Q) and second_reasoning[2]["content"] == final["context"]
    titles = [d.metadata["title"] for d in final["documents"]]
    assert "Marie Curie" in titles and "Vistula" in titles  # documents of both retrievals
    # same calls and answer as the method's own loop
    ref = ScriptedLLM(list(script))
    ans = SARAGCoT(SARAGRetriever(sample_index), ref).run(Q)
    assert ans.text == final["generation"] and ans.metadata["context"] == final["context"]
    assert [c["messages"] for c in ref.calls] == [c["messages"] for c in llm.calls]
    assert ans.evidence.passage_ids == [d.id for d in final["documents"]]


def test_sa_rag_cot_respects_max_steps_and_skips_failed_steps(sample_index):
    script = [
        "not json at all",  # step 1: unreadable, asked once more ...
        "still not json",  # ... still unreadable -> skipped, reason again
        _reasoning(False, "Where was Marie Curie born?"),  # step 2 -> retrieve
        ANSWER,
    ]
    llm = ScriptedLLM(list(script))
    # retry_policy=None: a failed step is skipped at once (the default policy first runs the
    # reason node again: tests/integrations/test_langgraph_conventions.py)
    names, final = _nodes(sa_rag_graph(sample_index, llm, max_steps=2, retry_policy=None), {"question": Q})
    assert names == ["retrieve", "reason", "reason", "retrieve", "generate"]
    assert final["steps"] == 2 and final["generation"] == "Vistula" and llm.remaining == 0
    assert final["trace"]["reasoning"][0] == {"error": "invalid reply: unparseable reply"}
    assert len(final["trace"]["retrievals"]) == 2


def test_sa_rag_cot_async(sample_index):
    llm = ScriptedLLM([_reasoning(True), ANSWER])
    final = asyncio.run(sa_rag_graph(sample_index, llm).ainvoke({"question": Q}))
    assert final["generation"] == "Vistula" and final["steps"] == 1


def test_checkpointed_thread_can_ask_again(sample_index):
    """With a checkpointer the state persists per thread; a second question starts a fresh CoT loop."""
    from langgraph.checkpoint.memory import InMemorySaver

    script = [_reasoning(False, "Which river flows through Warsaw?"), _reasoning(True), ANSWER]
    llm = ScriptedLLM(script + [_reasoning(True), ANSWER])
    graph = sa_rag_graph(sample_index, llm, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"question": Q}, cfg)
    assert first["steps"] == 2 and first["query"] is None
    second = graph.invoke({"question": "Where was Marie Curie born?"}, cfg)
    assert second["steps"] == 1 and second["generation"] == "Vistula" and llm.remaining == 0
    assert [r["query"] for r in second["trace"]["retrievals"]] == ["Where was Marie Curie born?"]
    assert second["context"].startswith("### Context")
    snapshot = graph.get_state(cfg).values
    assert isinstance(snapshot["documents"][0], Document)


# --------------------------------------------------------------------------- as a subgraph of a user's graph


class ParentState(TypedDict, total=False):
    user_input: str
    question: str
    documents: list[Document]
    generation: str | None
    log: list[str]


def _parent(subgraph):
    def prepare(state: ParentState) -> dict[str, Any]:
        return {"question": state["user_input"].strip(), "log": ["prepared"]}

    def report(state: ParentState) -> dict[str, Any]:
        titles = ", ".join(d.metadata["title"] for d in state["documents"])
        return {
            "log": [*state["log"], f"{len(state['documents'])} docs: {titles}", f"answer={state.get('generation')}"]
        }

    g = StateGraph(ParentState)
    g.add_node("prepare", prepare)
    g.add_node("kg", subgraph)
    g.add_node("report", report)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "kg")
    g.add_edge("kg", "report")
    g.add_edge("report", END)
    return g.compile()


def test_compiled_graph_as_a_subgraph_node(sample_index):
    parent = _parent(kg_infused_graph(sample_index, ScriptedLLM(_kgi_replies)))
    names, _ = _nodes(parent, {"user_input": f"  {Q} "})
    assert names == ["prepare", "kg", "report"]
    final = parent.invoke({"user_input": f"  {Q} "})
    assert final["user_input"] == f"  {Q} " and final["question"] == Q  # the parent's own key is untouched
    assert final["generation"] == "Vistula" and len(final["documents"]) == 6
    assert final["log"][0] == "prepared" and final["log"][-1] == "answer=Vistula"
    assert set(final) == set(ParentState.__annotations__)  # subgraph-only keys (trace, facts, ...) stay inside
    inner = [ns for ns, _ in parent.stream({"user_input": Q}, stream_mode="updates", subgraphs=True) if ns]
    assert inner and all(ns[0].startswith("kg:") for ns in inner)


def test_subgraph_async_and_llm_free(sample_index):
    parent = _parent(sa_rag_graph(sample_index))
    final = asyncio.run(parent.ainvoke({"user_input": Q}))
    assert final["documents"] and final["log"][-1] == "answer=None"


def test_state_schema_is_the_documented_one():
    keys = set(KGRAGState.__annotations__)
    assert {"question", "documents", "generation", "facts", "trace"} <= keys


def test_method_generate_node_reads_messages_and_appends_the_answer():
    from langchain_core.messages import AIMessage, HumanMessage

    from kgrag_plugins.types import Answer

    class Method:
        def answer(self, question, evidence, note=None):
            return Answer(question, f"answer to {question} ({len(evidence.passages)} docs, note={note})", evidence)

    node = make_generate_node(method=Method())
    out = node.invoke({"messages": [HumanMessage("hi"), AIMessage("hello"), HumanMessage(Q)], "documents": ["d"]})
    assert out["generation"] == f"answer to {Q} (1 docs, note=None)"
    assert [(type(m), m.content) for m in out["messages"]] == [(AIMessage, out["generation"])]
    assert node.invoke({"question": Q}) == {"generation": f"answer to {Q} (0 docs, note=None)"}  # no messages key
