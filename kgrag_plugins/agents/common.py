"""Helpers the agent graphs share: resolving the retrieve step, the validated answer calls
(a short RAG answer for a sub-question, SA-RAG's JSON answering call) and step records."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from ..methods.sa_rag.cot import MAX_ANSWER_CHARS, _as_text, parse_json_object
from ..methods.sa_rag.prompts import ANSWER_SCHEMA, ANSWERING_SYSTEM, QUESTION_PREFIX
from ..models.llm import as_llm
from ..models.replies import InvalidReply, check_text, complete_validated, first_line
from ..types import Evidence
from .prompts import SUB_ANSWER_SYSTEM, format_context, sub_answer_messages
from .retrieve import RetrieveStep, as_retrieve_step

logger = logging.getLogger("kgrag_plugins.agents")

#: Longest accepted intermediate / sub-question answer (characters).
MAX_SUB_ANSWER_CHARS = 300
#: Tokens of a sub-question answer (one short sentence; free text, no schema).
SUB_ANSWER_MAX_TOKENS = 64

#: Self-Ask markers a model-written answer must not smuggle into the transcript.
_MARKERS = re.compile(
    r"(?:\*|_|#)*\s*(?:follow[\s-]*up\s*:|intermediate\s+answer\s*:|so\s+the\s+final\s+answer\s+is\s*:?|"
    r"final\s+answer\s*:|are\s+follow[\s-]*up\s+questions\s+needed\s+here\s*:?)",
    re.I,
)
_ANSWER_PREFIX = re.compile(r"^\W*answer\s*:\s*", re.I)


def resolve_step(retrieve: Any, k: int) -> RetrieveStep:
    """``retrieve`` as a :class:`RetrieveStep` with default ``k``; a ``KnowledgeIndex`` becomes
    its dense top-k retriever (the papers' vector-search baseline)."""
    from ..index.store import KnowledgeIndex

    if isinstance(retrieve, KnowledgeIndex):
        from ..methods.baselines import DenseRetriever

        retrieve = DenseRetriever(retrieve)
    if isinstance(retrieve, RetrieveStep) and retrieve.k != k:
        return RetrieveStep(
            retrieve._fn, afn=retrieve._afn, name=retrieve.name, k=k, kind=retrieve.kind, source=retrieve.source
        )
    return as_retrieve_step(retrieve, k)


def llm_of(llm: Any) -> Any:
    """:func:`~kgrag_plugins.models.llm.as_llm` (``None`` stays ``None``)."""
    return as_llm(llm)


def strip_markers(text: str) -> str:
    """``text`` on one line with Self-Ask markers removed (a model-written answer cannot add a
    follow-up or a final answer to the transcript)."""
    return " ".join(_MARKERS.sub(" ", text or "").split())


def _sub_answer(reply: str) -> str:
    line = _ANSWER_PREFIX.sub("", first_line(reply))
    line = strip_markers(line).strip()
    return check_text(line, single_line=True, max_chars=MAX_SUB_ANSWER_CHARS, instructions=SUB_ANSWER_SYSTEM)


def answer_sub_question(
    llm: Any, question: str, evidence: Evidence, errors: list[dict[str, Any]], *, step: str, max_passages: int = 6
) -> str | None:
    """One validated RAG call answering ``question`` from ``evidence`` in one short sentence
    (first line; an ``Answer:`` prefix and Self-Ask markers removed); ``None`` after an invalid
    reply and its retry or a failed call (``errors`` gets the trace entry, a WARNING is logged)."""
    return complete_validated(
        llm,
        sub_answer_messages(question, evidence, max_passages=max_passages),
        _sub_answer,
        step=step,
        errors=errors,
        log=logger,
        temperature=0.0,
        max_tokens=SUB_ANSWER_MAX_TOKENS,
    )


def _json_answer(reply: str) -> str:
    obj = parse_json_object(reply)
    if obj is None or obj.get("final_answer") is None:
        raise InvalidReply("no JSON object with a final_answer")
    return check_text(_as_text(obj["final_answer"]), max_chars=MAX_ANSWER_CHARS)


def json_answer(
    llm: Any, question: str, context: str, errors: list[dict[str, Any]], *, step: str = "answer"
) -> str | None:
    """SA-RAG's answering call (docs/methods.md §6.3 step 3): system = the answering prompt, user =
    the context, user = ``"**Question:  **" + question``; reply JSON ``{reasoning, final_answer}``.
    ``final_answer`` (non-empty, not a refusal, at most 1,000 characters) or ``None`` after an
    invalid reply and its retry or a failed call (``errors`` gets the trace entry)."""
    messages = [
        {"role": "system", "content": ANSWERING_SYSTEM},
        {"role": "user", "content": context},
        {"role": "user", "content": QUESTION_PREFIX + question},
    ]
    return complete_validated(
        llm, messages, _json_answer, step=step, errors=errors, log=logger, temperature=0.0, schema=ANSWER_SCHEMA
    )


def context_retrieval(step: RetrieveStep) -> Callable[[str], tuple[Evidence, str]]:
    """``query -> (evidence, context string)`` for a step: an ``SARAGRetriever`` step uses its own
    ``acquire`` (no top-k) and ``context``; any other step its top-``k`` laid out by
    :func:`~.prompts.format_context`."""
    from ..methods.sa_rag import SARAGRetriever

    sa = step.source if isinstance(step.source, SARAGRetriever) else None

    def acquire(query: str) -> tuple[Evidence, str]:
        if sa is not None:
            ev = sa.acquire(query)
            step.calls += 1
            return ev, sa.context(ev)
        ev = step(query)
        return ev, format_context(ev)

    return acquire


def evidence_record(ev: Evidence) -> dict[str, Any]:
    """The JSON-able part of a retrieval kept in a step record."""
    return {"query": ev.query, "passages": ev.passage_ids, "facts": len(ev.facts)}
