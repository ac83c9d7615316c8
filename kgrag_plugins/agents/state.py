"""The state every agent graph shares (:class:`AgentState`) and the helpers that update it.

Keys are compatible with :class:`~kgrag_plugins.integrations.langgraph.state.KGRAGState`
(``question``, ``documents``, ``facts``, ``generation``, ``trace``), so an agent graph can be a
subgraph of any kgrag graph and the other way round. The final state of every agent graph has
``generation`` (``""`` when no valid answer came or no LLM was given), ``documents`` (the union of
all retrievals, first occurrence first), ``facts``, ``trace`` (with an ``llm_error`` list when a
reply could not be used) and ``retrievals`` (how many times the retrieve step ran).
"""

from __future__ import annotations

from typing import Any

from ..integrations._extras import require

require("langgraph", "langgraph", "langchain_core", feature="kgrag_plugins.agents")

from langchain_core.documents import Document  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from ..integrations.langgraph.state import (  # noqa: E402
    check_state,
    documents_to_passages,
    evidence_to_documents,
    question_of,
    state_to_evidence,
)
from ..types import Answer, Evidence  # noqa: E402

__all__ = [
    "AgentState",
    "add_evidence",
    "add_llm_errors",
    "agent_question",
    "final_update",
    "run_agent",
    "state_evidence",
]


class AgentState(TypedDict, total=False):
    """Graph state of every agent (all keys optional; start with ``{"question": ...}``)."""

    # shared with KGRAGState
    question: str
    documents: list[Document]
    facts: list[str]
    generation: str
    trace: dict[str, Any]
    query: str
    context: str
    route: str
    # agent keys
    steps: list[dict[str, Any]]  # one record per step (follow-up, retrieval, reasoning, ...)
    sub_questions: list[str]
    intermediate_answers: list[str]
    retrievals: int
    scratchpad: str  # Self-Ask: the transcript so far
    finished: bool  # the loop has ended (answer found, cap reached or unusable reply)
    summary: str  # CoT: the model's summary of known information
    follow_up: str  # the question the next retrieval is for
    note: str | None


#: Agent keys whose types differ from (or are not in) :class:`KGRAGState`'s.
_AGENT_KEY_TYPES: dict[str, tuple[type, ...]] = {"steps": (list, tuple), "follow_up": (str,)}


def agent_question(state: dict[str, Any]) -> str:
    """The question an agent's first node reads: ``state["question"]``, checked (a one-line
    ``ValueError`` for a missing, blank, over-long or non-string question, or a state key of the
    wrong type: :func:`~kgrag_plugins.integrations.langgraph.state.question_of`; an agent's
    ``steps`` is a list of records, ``follow_up`` a string)."""
    check_state(state, _AGENT_KEY_TYPES)
    return question_of(state)


def add_evidence(state: dict[str, Any], ev: Evidence, *, retriever: str = "") -> dict[str, Any]:
    """State update adding one retrieval: ``documents`` (union, first occurrence kept),
    ``facts`` (union by text) and ``retrievals`` + 1."""
    docs = list(state.get("documents") or [])
    seen = {getattr(d, "id", None) or (getattr(d, "metadata", None) or {}).get("id") for d in docs}
    for d in evidence_to_documents(ev, retriever=retriever):
        if d.id not in seen:
            seen.add(d.id)
            docs.append(d)
    facts = list(state.get("facts") or [])
    known = set(facts)
    for f in ev.facts:
        if f.display not in known:
            known.add(f.display)
            facts.append(f.display)
    return {"documents": docs, "facts": facts, "retrievals": int(state.get("retrievals") or 0) + 1}


def add_llm_errors(state: dict[str, Any], errors: list[dict[str, Any]], **entries: Any) -> dict[str, Any]:
    """``state["trace"]`` with ``errors`` appended to its ``llm_error`` list and ``entries`` set."""
    trace = dict(state.get("trace") or {})
    if errors:
        trace["llm_error"] = [*trace.get("llm_error", []), *errors]
    trace.update(entries)
    return trace


def final_update(state: dict[str, Any], generation: str | None, **trace_entries: Any) -> dict[str, Any]:
    """The keys every final state has: ``generation`` (``""`` for none), ``documents``,
    ``facts``, ``retrievals`` and ``trace`` (with ``trace_entries`` merged in)."""
    return {
        "generation": generation or "",
        "documents": list(state.get("documents") or []),
        "facts": list(state.get("facts") or []),
        "retrievals": int(state.get("retrievals") or 0),
        "trace": add_llm_errors(state, [], **trace_entries),
    }


def state_evidence(state: dict[str, Any]) -> Evidence:
    """The union evidence of a (final) agent state."""
    return state_to_evidence(state)


def run_agent(graph: Any, question: str, *, config: dict[str, Any] | None = None) -> Answer:
    """Run a compiled agent graph on ``question`` and return an :class:`~kgrag_plugins.types.Answer`:
    ``text`` = ``generation`` (``""`` when none), ``evidence`` = the union of every retrieval,
    ``metadata`` = ``{"trace", "steps", "retrievals", "llm_error", "sub_questions",
    "intermediate_answers", "route"}`` (``llm_error``: ``[]`` when every reply was usable)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    out = graph.invoke({"question": question}, config=config)
    return _answer_of(question, out)


async def arun_agent(graph: Any, question: str, *, config: dict[str, Any] | None = None) -> Answer:
    """Async :func:`run_agent` (``graph.ainvoke``)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    out = await graph.ainvoke({"question": question}, config=config)
    return _answer_of(question, out)


def _answer_of(question: str, out: dict[str, Any]) -> Answer:
    trace = dict(out.get("trace") or {})
    evidence = Evidence(question, documents_to_passages(out.get("documents")), state_to_evidence(out).facts, trace)
    metadata = {
        "trace": trace,
        "steps": list(out.get("steps") or []),
        "retrievals": int(out.get("retrievals") or 0),
        "llm_error": list(trace.get("llm_error") or []),
        "sub_questions": list(out.get("sub_questions") or []),
        "intermediate_answers": list(out.get("intermediate_answers") or []),
        "route": out.get("route"),
    }
    return Answer(question, out.get("generation") or "", evidence, metadata)
