"""Query decomposition with any retriever (SA-RAG ``hybrid_agent.py``; docs/methods.md §6.3, §4(c)).

1. **Decompose** (temperature 0): :data:`~.prompts.DECOMPOSE_SYSTEM`, reply JSON
   ``{"original_question", "subquestions": [{"id", "question"}]}`` (a plain list of strings is
   accepted too); at most ``max_sub_questions`` (5) are kept, duplicates dropped.
2. For each sub-question i: retrieval on the sub-question plus the previous ``"Sub-question: ...
   / Answer: ..."`` strings (``with_previous=True``, the hybrid agent; ``False``: the
   sub-question alone, the plain decomposition baseline — the paper's App. A and code disagree,
   docs/methods.md §6.3), then SA-RAG's answering call on that context.
3. Retrieval for the original question and the final answering call over its context plus
   ``**Answers to sub-questions**`` (the list sits in a ``<sub_answers>`` data block).

With an ``SARAGRetriever`` step the retrievals are SA-RAG's (``acquire`` + ``context``: SA-RAG +
decomposition); otherwise top-``k`` passages laid out like SA-RAG's context.

**Unusable replies**: a decomposition reply without a readable sub-question list is asked once
more, then the agent goes on without sub-questions (final retrieval + answer only); a
sub-question whose answer stays invalid gets ``"Unknown."``; an invalid final answer leaves
``generation`` ``""``. Each case logs a WARNING and adds to ``trace["llm_error"]``.

**LLM-free**: no decomposition (it needs an LLM): one retrieval for the question, its context in
``state["context"]``, ``generation`` ``""``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..integrations._extras import require

require("langgraph", "langgraph", "langchain_core", feature="kgrag_plugins.agents")

from langgraph.graph import END, START, StateGraph  # noqa: E402

from ..methods.sa_rag.cot import _as_text, parse_json_object  # noqa: E402
from ..models.prompting import data_block  # noqa: E402
from ..models.replies import InvalidReply, check_text, complete_validated  # noqa: E402
from .common import MAX_SUB_ANSWER_CHARS, context_retrieval, evidence_record, json_answer, llm_of, resolve_step  # noqa: E402
from .prompts import DECOMPOSE_SCHEMA, DECOMPOSE_SYSTEM  # noqa: E402
from .state import AgentState, add_evidence, add_llm_errors, agent_question, final_update  # noqa: E402

__all__ = ["decomposition_graph", "parse_decomposition"]

logger = logging.getLogger("kgrag_plugins.agents.decompose")

MAX_SUB_QUESTIONS = 5
UNKNOWN = "Unknown."
ANSWERS_HEADER = "**Answers to sub-questions**"


def parse_decomposition(reply: str, *, limit: int = MAX_SUB_QUESTIONS) -> list[str]:
    """The sub-questions of a decomposition reply, in order, de-duplicated, at most ``limit``.

    Accepts ``{"subquestions": [{"id", "question"}, ...]}`` (also ``sub_questions`` /
    ``questions`` keys, and plain strings as items), code fences and prose around the object.
    :class:`InvalidReply` when no non-empty list of readable questions is found."""
    obj = parse_json_object(reply)
    if obj is None:
        raise InvalidReply("no JSON object in the decomposition reply")
    items = next((obj[key] for key in ("subquestions", "sub_questions", "questions") if key in obj), None)
    if not isinstance(items, list) or not items:
        raise InvalidReply("the decomposition reply has no 'subquestions' list")
    out: list[str] = []
    seen: set[str] = set()
    for it in items:
        text = _as_text(it.get("question") if isinstance(it, dict) else it)
        if not text:
            continue
        text = check_text(text, single_line=True, max_chars=MAX_SUB_ANSWER_CHARS)
        if text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    if not out:
        raise InvalidReply("the decomposition reply lists no readable sub-question")
    return out[:limit]


def decomposition_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    k: int = 6,
    with_previous: bool = True,
    max_sub_questions: int = MAX_SUB_QUESTIONS,
    checkpointer: Any = None,
) -> Any:
    """Query decomposition (SA-RAG ``hybrid_agent``) over any retrieve step (``k`` passages per
    retrieval); see the module docstring."""
    if max_sub_questions < 1:
        raise ValueError(f"max_sub_questions must be >= 1, got {max_sub_questions}")
    step = resolve_step(retrieve, k)
    llm = llm_of(llm)
    acquire = context_retrieval(step)

    def decompose(state: dict[str, Any]) -> dict[str, Any]:
        messages = [
            {"role": "system", "content": DECOMPOSE_SYSTEM},
            {"role": "user", "content": f"Question: {agent_question(state)}"},
        ]
        errors: list[dict[str, Any]] = []
        subs = complete_validated(
            llm,
            messages,
            lambda r: parse_decomposition(r, limit=max_sub_questions),
            step="decompose",
            errors=errors,
            log=logger,
            schema=DECOMPOSE_SCHEMA,
            temperature=0.0,
        )
        rec: dict[str, Any] = {"kind": "decompose", "sub_questions": subs or []}
        if subs is None:
            rec["error"] = errors[-1]["error"] if errors else "no reply"
        return {
            "sub_questions": subs or [],
            "intermediate_answers": [],
            "steps": [*(state.get("steps") or []), rec],
            "trace": add_llm_errors(state, errors),
        }

    def previous_lines(state: dict[str, Any]) -> list[str]:
        subs, answers = state.get("sub_questions") or [], state.get("intermediate_answers") or []
        return [f"Sub-question: {q}\nAnswer: {a}" for q, a in zip(subs, answers)]

    def sub_question(state: dict[str, Any]) -> dict[str, Any]:
        i = len(state.get("intermediate_answers") or [])
        sq = state["sub_questions"][i]
        query = "\n".join([sq, *previous_lines(state)]) if with_previous else sq
        ev, context = acquire(query)
        errors: list[dict[str, Any]] = []
        ans = json_answer(llm, sq, context, errors, step="sub_answer")
        ans = " ".join(ans.split()) if ans else UNKNOWN
        rec = {"kind": "sub_question", "index": i, "question": sq, **evidence_record(ev), "answer": ans}
        return {
            **add_evidence(state, ev, retriever=step.name),
            "intermediate_answers": [*(state.get("intermediate_answers") or []), ans],
            "steps": [*(state.get("steps") or []), rec],
            "trace": add_llm_errors(state, errors),
        }

    def final(state: dict[str, Any]) -> dict[str, Any]:
        ev, context = acquire(agent_question(state))
        new = {**state, **add_evidence(state, ev, retriever=step.name)}
        lines = previous_lines(state)
        if lines:
            context += f"\n{ANSWERS_HEADER}\n" + data_block("sub_answers", "\n".join(lines))
        steps = [*(state.get("steps") or []), {"kind": "final_retrieve", **evidence_record(ev)}]
        errors: list[dict[str, Any]] = []
        gen = json_answer(llm, state["question"], context, errors) if llm is not None else ""
        out = final_update(new, gen, agent="decomposition", mode="llm" if llm is not None else "llm-free")
        out["trace"] = add_llm_errors({"trace": out["trace"]}, errors)
        return {**out, "context": context, "steps": steps}

    def next_node(state: dict[str, Any]) -> str:
        pending = len(state.get("sub_questions") or []) > len(state.get("intermediate_answers") or [])
        return "sub_question" if pending else "final"

    g = StateGraph(AgentState)
    g.add_node("final", final)
    if llm is None:
        g.add_edge(START, "final")
    else:
        g.add_node("decompose", decompose)
        g.add_node("sub_question", sub_question)
        g.add_edge(START, "decompose")
        g.add_conditional_edges("decompose", next_node, {"sub_question": "sub_question", "final": "final"})
        g.add_conditional_edges("sub_question", next_node, {"sub_question": "sub_question", "final": "final"})
    g.add_edge("final", END)
    return g.compile(checkpointer=checkpointer, name="decomposition")
