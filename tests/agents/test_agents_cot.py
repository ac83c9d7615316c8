"""CoT iterative retrieval with any retriever, the CoT-RAG baseline, SA-RAG + CoT, and query
decomposition: control flow, context merges, drifting and invalid replies, LLM-free paths."""

from __future__ import annotations

import json

import pytest
from agent_helpers import QUESTION, SpyRetriever

from kgrag_plugins.agents import build_agent, run_agent
from kgrag_plugins.agents.cot import parse_reasoning
from kgrag_plugins.agents.decompose import parse_decomposition
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.models.replies import InvalidReply


def reasoning(possible, follow="", summary="Marie Curie was born in Warsaw."):
    return json.dumps(
        {"provided_context": summary, "answer_possible": possible, "final_answer": "", "additional_question": follow}
    )


ANSWER = json.dumps({"reasoning": "Warsaw lies on the Vistula.", "final_answer": "Vistula"})
FOLLOW = "Which river flows through Warsaw?"


def test_parse_reasoning_drift():
    fenced = "Here you go:\n```json\n" + reasoning("yes") + "\n```\nHope it helps"
    assert parse_reasoning(fenced)["answer_possible"] is True
    assert parse_reasoning('{"x": 1, "answer_possible": "False"}')["answer_possible"] is False
    for bad in ("no json here", '{"answer_possible": "maybe"}', "[1, 2]", ""):
        with pytest.raises(InvalidReply):
            parse_reasoning(bad)


def test_cot_paper_format_with_any_retriever(dense):
    llm = ScriptedLLM([reasoning(False, FOLLOW), reasoning(True), ANSWER])
    ans = run_agent(build_agent("cot", dense, llm=llm), QUESTION)
    assert ans.text == "Vistula"
    assert ans.metadata["retrievals"] == 2
    kinds = [s["kind"] for s in ans.metadata["steps"]]
    assert kinds == ["retrieve", "reason", "retrieve", "reason"]
    assert ans.metadata["steps"][2]["query"] == FOLLOW  # the follow-up alone is retrieved
    ctx = llm.calls[1]["messages"][2]["content"]
    # SA-RAG's short-term memory merge: known information + additional facts
    assert ctx.startswith("# Known information\n<notes>\nMarie Curie was born in Warsaw.\n</notes>\n# Additional facts")
    assert "<passages>" in ctx and "Vistula" in ctx
    # the answering call sees the final context, then the question
    assert llm.calls[2]["messages"][1]["content"] == ctx
    assert llm.calls[2]["messages"][2]["content"].endswith(QUESTION)
    assert ans.metadata["llm_error"] == []


def test_cot_cap_and_skipped_steps(spy):
    # three follow-ups: 1 + 3 retrievals, then the answer (no fourth reasoning call)
    llm = ScriptedLLM([reasoning(False, "A?"), reasoning(False, "B?"), reasoning(False, "C?"), ANSWER])
    ans = run_agent(build_agent("cot", spy, llm=llm), QUESTION)
    assert ans.metadata["retrievals"] == 4 and spy.queries == [QUESTION, "A?", "B?", "C?"]
    assert ans.text == "Vistula" and len(llm.calls) == 4

    # an unreadable reasoning reply (twice) skips the step; the loop goes on with the same context
    llm = ScriptedLLM(["not json", "{broken", reasoning(True), ANSWER])
    ans = run_agent(build_agent("cot", SpyRetriever(), llm=llm), QUESTION)
    assert ans.text == "Vistula" and ans.metadata["retrievals"] == 1
    steps = [s for s in ans.metadata["steps"] if s["kind"] == "reason"]
    assert steps[0]["skipped"] is True and steps[1]["answer_possible"] is True
    assert [e["step"] for e in ans.metadata["llm_error"]] == ["reasoning"]


def test_cot_invalid_answer_is_not_passed_on(spy):
    bad = "The answer is probably Vistula"  # prose, not the JSON the prompt asks for
    llm = ScriptedLLM([reasoning(True), bad, bad])
    ans = run_agent(build_agent("cot", spy, llm=llm), QUESTION)
    assert ans.text == ""
    assert ans.metadata["llm_error"][-1]["step"] == "answer"


def test_cot_rag_baseline_merge_and_k(dense):
    llm = ScriptedLLM([reasoning(False, FOLLOW, summary="Curie: Warsaw."), reasoning(True), ANSWER])
    ans = run_agent(build_agent("cot-rag", dense, llm=llm), QUESTION)
    assert ans.text == "Vistula"
    first = [s for s in ans.metadata["steps"] if s["kind"] == "retrieve"]
    assert [len(s["passages"]) for s in first] == [5, 5]  # the baseline's top-5
    ctx = llm.calls[1]["messages"][2]["content"]
    assert ctx.startswith("### Context \n<passages>") and ctx.endswith("\n\n<notes>\nCurie: Warsaw.\n</notes>")


def test_sa_rag_cot_uses_acquire(sample_index, monkeypatch):
    from kgrag_plugins.methods.sa_rag import SARAGRetriever

    sa = SARAGRetriever(sample_index)
    queries: list[str] = []
    orig = SARAGRetriever.acquire

    def acquire(self, query):
        queries.append(query)
        return orig(self, query)

    monkeypatch.setattr(SARAGRetriever, "acquire", acquire)
    llm = ScriptedLLM([reasoning(False, FOLLOW), reasoning(True), ANSWER])
    ans = run_agent(build_agent("sa-rag+cot", sa, llm=llm), QUESTION)
    assert queries == [QUESTION, FOLLOW] and ans.metadata["retrievals"] == 2
    assert ans.text == "Vistula"
    assert llm.calls[0]["messages"][2]["content"].startswith("### Context \n<passages>")
    with pytest.raises(TypeError, match="SARAGRetriever"):
        build_agent("sa-rag+cot", SpyRetriever())


@pytest.mark.parametrize("name", ["cot", "cot-rag"])
def test_cot_llm_free(name, spy):
    ans = run_agent(build_agent(name, spy), QUESTION)
    assert ans.text == "" and ans.metadata["retrievals"] == 1 and spy.queries == [QUESTION]


# ---------------------------------------------------------------------- decomposition

DECOMP = json.dumps(
    {
        "original_question": QUESTION,
        "subquestions": [
            {"id": 1, "question": "Where was Marie Curie born?"},
            {"id": 2, "question": "Which river flows through that city?"},
        ],
    }
)


def test_parse_decomposition_drift():
    assert parse_decomposition("```json\n" + DECOMP + "\n```") == [
        "Where was Marie Curie born?",
        "Which river flows through that city?",
    ]
    assert parse_decomposition('Sure: {"questions": ["A?", "a?", "B?"]}') == ["A?", "B?"]
    assert len(parse_decomposition(json.dumps({"subquestions": [f"Q{i}?" for i in range(9)]}), limit=3)) == 3
    for bad in ("1. A? 2. B?", '{"subquestions": []}', '{"subquestions": "A?"}', '{"subquestions": [{"id": 1}]}'):
        with pytest.raises(InvalidReply):
            parse_decomposition(bad)


def test_decomposition_paper_format(spy):
    llm = ScriptedLLM([DECOMP, json.dumps({"final_answer": "Warsaw"}), json.dumps({"final_answer": "Vistula"}), ANSWER])
    ans = run_agent(build_agent("decomposition", spy, llm=llm), QUESTION)
    assert ans.text == "Vistula"
    assert ans.metadata["sub_questions"] == ["Where was Marie Curie born?", "Which river flows through that city?"]
    assert ans.metadata["intermediate_answers"] == ["Warsaw", "Vistula"]
    assert ans.metadata["retrievals"] == 3
    # hybrid agent: sub-question + previous Sub-question/Answer strings; then the question
    assert spy.queries == [
        "Where was Marie Curie born?",
        "Which river flows through that city?\nSub-question: Where was Marie Curie born?\nAnswer: Warsaw",
        QUESTION,
    ]
    final_ctx = llm.calls[3]["messages"][1]["content"]
    assert final_ctx.endswith(
        "**Answers to sub-questions**\n<sub_answers>\nSub-question: Where was Marie Curie born?\nAnswer: Warsaw\n"
        "Sub-question: Which river flows through that city?\nAnswer: Vistula\n</sub_answers>"
    )
    assert llm.calls[0]["temperature"] == 0.0


def test_decomposition_plain_baseline_and_fallbacks():
    spy = SpyRetriever()
    llm = ScriptedLLM([DECOMP, "no json", "no json", json.dumps({"final_answer": "Vistula"}), ANSWER])
    ans = run_agent(build_agent("decomposition", spy, llm=llm, with_previous=False), QUESTION)
    assert spy.queries == ["Where was Marie Curie born?", "Which river flows through that city?", QUESTION]
    assert ans.metadata["intermediate_answers"] == ["Unknown.", "Vistula"]  # the invalid sub-answer
    assert ans.text == "Vistula" and [e["step"] for e in ans.metadata["llm_error"]] == ["sub_answer"]

    # an unreadable decomposition (twice): no sub-questions, final retrieval + answer only
    spy = SpyRetriever()
    llm = ScriptedLLM(["1. Where? 2. What?", "still a list", ANSWER])
    ans = run_agent(build_agent("decomposition", spy, llm=llm), QUESTION)
    assert spy.queries == [QUESTION] and ans.metadata["sub_questions"] == [] and ans.text == "Vistula"
    assert ans.metadata["llm_error"][0]["step"] == "decompose"


def test_decomposition_llm_free(spy):
    ans = run_agent(build_agent("decomposition", spy), QUESTION)
    assert ans.text == "" and spy.queries == [QUESTION] and ans.metadata["retrievals"] == 1


def test_sa_rag_decomposition_uses_acquire(sample_index, monkeypatch):
    from kgrag_plugins.methods.sa_rag import SARAGRetriever

    queries: list[str] = []
    orig = SARAGRetriever.acquire

    def acquire(self, query):
        queries.append(query)
        return orig(self, query)

    monkeypatch.setattr(SARAGRetriever, "acquire", acquire)
    llm = ScriptedLLM([DECOMP, json.dumps({"final_answer": "Warsaw"}), json.dumps({"final_answer": "Vistula"}), ANSWER])
    ans = run_agent(build_agent("decomposition", SARAGRetriever(sample_index), llm=llm), QUESTION)
    assert ans.text == "Vistula" and ans.metadata["retrievals"] == 3
    assert queries[0] == "Where was Marie Curie born?" and queries[-1] == QUESTION
    assert llm.calls[1]["messages"][1]["content"].startswith("### Context \n<passages>")  # SA-RAG's context
