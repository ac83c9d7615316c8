"""SA-RAG (+ CoT, docs/methods.md §4, §6.3) as nodes and a graph:
``retrieve -> [reason <-> retrieve -> generate]``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from ...models.llm import as_llm
from ...models.replies import step_error
from .common import fact_texts, method_of, runnable_node
from .events import emit, emit_trace
from .nodes import make_generate_node
from .retry import DEFAULT, resolve_policy, retry_or_fallback
from .state import (
    KGRAGContext,
    KGRAGState,
    check_state,
    context_setting,
    evidence_to_documents,
    query_of,
    question_of,
    with_trace,
)

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph


def _merge_documents(old: list[Any], new: list[Document]) -> list[Any]:
    seen = {getattr(d, "id", None) or (d.get("id") if isinstance(d, dict) else None) for d in old}
    return list(old) + [d for d in new if d.id not in seen]


def make_sa_retrieve_node(retriever: Any, cot: Any = None, k: int | None = None) -> RunnableLambda:
    """SA-RAG knowledge acquisition: writes ``documents``, ``facts``, ``context`` (the SA-RAG context
    string) and appends to ``trace["retrievals"]``.

    A follow-up (``query`` set by the reason node, with a ``reasoning`` in state) retrieves for the
    follow-up question alone; the context becomes ``cot.merge_context(provided_context, new)``,
    documents/facts accumulate and ``query`` is consumed (reset to ``None``). Otherwise it is a fresh
    run for ``question``: ``steps`` / ``reasoning`` / the SA trace lists are reset (so a checkpointed
    thread can ask a new question). ``k=None`` uses the method's uncapped ``acquire``; an int caps
    the passages via ``retrieve`` (the context setting ``k``, when given, overrides ``k``).
    """

    def sa_retrieve(state: dict[str, Any]) -> dict[str, Any]:
        check_state(state)
        reasoning = state.get("reasoning") or {}
        follow_up = bool(state.get("query")) and cot is not None and reasoning.get("provided_context") is not None
        query = query_of(state) if follow_up else question_of(state)
        n, t0 = context_setting("k", k), time.perf_counter()
        ev = retriever.acquire(query) if n is None else retriever.retrieve(query, n)
        facts = fact_texts(ev.facts, retriever)  # names filled in (in place) before the context is built
        context = retriever.context(ev)
        docs = evidence_to_documents(ev, retriever=getattr(retriever, "name", ""))
        record = {"query": query, **ev.trace}
        emit_trace(
            "retrieve",
            ev.trace,
            event="retrieve",
            method=getattr(retriever, "name", "sa_rag"),
            passages=len(ev.passages),
            ms=round((time.perf_counter() - t0) * 1000, 1),
            query=query,
            follow_up=follow_up,
            documents=[sp.passage.id for sp in ev.passages],
            scores=[round(float(sp.score), 6) for sp in ev.passages],
            facts=len(ev.facts),
        )
        if follow_up:
            context = cot.merge_context(reasoning["provided_context"], context)
            docs = _merge_documents(state.get("documents") or [], docs)
            facts = list(dict.fromkeys([*(state.get("facts") or []), *facts]))
            trace = with_trace(state, retrievals=[*(state.get("trace") or {}).get("retrievals", []), record])
            return {"documents": docs, "facts": facts, "context": context, "query": None, "trace": trace}
        trace = with_trace(state, retrievals=[record], reasoning=[])
        update = {"documents": docs, "facts": facts, "context": context, "trace": trace}
        if cot is not None:
            update.update(steps=0, reasoning=None, query=None)
        return update

    return runnable_node("retrieve", sa_retrieve)


def make_sa_reason_node(cot: Any, *, retry_policy: Any = None) -> RunnableLambda:
    """One SA-RAG CoT reasoning step over ``context``: writes ``reasoning`` (``None`` when the call
    failed), ``steps`` (+1), ``query`` (the follow-up question) and appends to ``trace["reasoning"]``
    (``{"error": why}`` for a failed step).

    The reply is JSON; one that stays unreadable after the CoT's own retry is a retryable
    :class:`~kgrag_plugins.models.replies.RepliesStayedInvalid` (a timeout: ``LLMTimeoutError``),
    raised while ``retry_policy`` (the policy the node is added with) has attempts left; on the last
    attempt, or with ``None``, the step is recorded as failed as above."""
    policy = resolve_policy(retry_policy)

    def reason(state: dict[str, Any]) -> dict[str, Any]:
        out, failure = cot.reason_step(question_of(state), state.get("context") or "")
        if failure is not None:
            retry_or_fallback(policy, step_error(failure))
        entry = out if out is not None else {"error": (failure or {}).get("error")}
        emit({"event": "reasoning", "node": "reason", **entry})
        update: dict[str, Any] = {
            "reasoning": out,
            "steps": int(state.get("steps") or 0) + 1,
            "trace": with_trace(state, reasoning=[*(state.get("trace") or {}).get("reasoning", []), entry]),
        }
        if out and not out.get("answer_possible") and out.get("additional_question"):
            update["query"] = str(out["additional_question"])
        return update

    return runnable_node("reason", reason)


def sa_route_after_reason(max_steps: int, *, done: str = "generate") -> Callable[[dict[str, Any]], str]:
    """Router after ``reason``: ``done`` when answerable (or no follow-up, or a failed call at the
    step cap), ``"reason"`` again after a failed call, ``"retrieve"`` for a follow-up question.
    The context setting ``max_steps`` overrides ``max_steps``."""

    def route(state: dict[str, Any]) -> str:
        out = state.get("reasoning")
        if out is None:
            return "reason" if int(state.get("steps") or 0) < context_setting("max_steps", max_steps) else done
        if out.get("answer_possible") or not out.get("additional_question"):
            return done
        return "retrieve"

    return route


def sa_route_after_retrieve(max_steps: int, *, done: str = "generate") -> Callable[[dict[str, Any]], str]:
    """Router after ``retrieve``: ``"reason"`` while fewer than ``max_steps`` (the context setting
    ``max_steps``, else this argument) reasoning steps ran."""

    def route(state: dict[str, Any]) -> str:
        return "reason" if int(state.get("steps") or 0) < context_setting("max_steps", max_steps) else done

    return route


def sa_rag_graph(
    retriever_or_index: Any,
    llm: Any = None,
    *,
    max_steps: int | None = None,
    k: int | None = None,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **kw: Any,
) -> CompiledStateGraph:
    """SA-RAG (+ CoT): ``retrieve -> [reason <-> retrieve -> generate]``.

    From an index, builds ``SARAGRetriever(index, **kw)``; ``llm`` may also be a ready ``SARAGCoT``.
    With an LLM the CoT loop runs at most ``max_steps`` reasoning steps (default: the CoT's
    ``max_steps``, 3), retrieving again for each follow-up question, then answers from the merged
    context. Without one the graph ends after retrieval. Context settings: ``k``, ``max_steps``
    (:class:`KGRAGContext`). Every node is added with ``retry_policy`` (default
    :func:`~.retry.default_retry_policy`, ``None``: no retries).
    """
    from ...methods.sa_rag import SARAGCoT, SARAGRetriever

    policy = resolve_policy(retry_policy)
    retriever = method_of(retriever_or_index, lambda index: SARAGRetriever(index, **kw))
    g = StateGraph(KGRAGState, context_schema=KGRAGContext)
    if llm is None:
        g.add_node("retrieve", make_sa_retrieve_node(retriever, k=k), retry_policy=policy)
        g.add_edge(START, "retrieve")
        g.add_edge("retrieve", END)
        return g.compile(checkpointer=checkpointer, name="sa_rag")
    if isinstance(llm, SARAGCoT):
        cot = llm
    else:
        cot = SARAGCoT(retriever, as_llm(llm), **({} if max_steps is None else {"max_steps": max_steps}))
    steps = max_steps if max_steps is not None else cot.max_steps
    g.add_node("retrieve", make_sa_retrieve_node(retriever, cot, k=k), retry_policy=policy)
    g.add_node("reason", make_sa_reason_node(cot, retry_policy=policy), retry_policy=policy)
    g.add_node("generate", make_generate_node(method=cot), retry_policy=policy)
    g.add_edge(START, "retrieve")
    g.add_conditional_edges("retrieve", sa_route_after_retrieve(steps), ["reason", "generate"])
    g.add_conditional_edges("reason", sa_route_after_reason(steps), ["reason", "retrieve", "generate"])
    g.add_edge("generate", END)
    return g.compile(checkpointer=checkpointer, name="sa_rag")
