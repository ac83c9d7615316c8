"""FRAG's retrieval and answer steps (docs/methods.md §2(a) steps 3-8) as LangGraph nodes; the graph
that routes between them is :func:`~.frag.frag_graph`."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda

from ...types import Evidence, Fact
from .common import ROUTES, fact_texts, is_frag, runnable_node
from .events import emit, emit_trace
from .state import (
    add_llm_errors,
    answer_update,
    context_setting,
    documents_to_passages,
    evidence_to_documents,
    query_of,
    question_of,
    with_trace,
)

if TYPE_CHECKING:  # pragma: no cover
    from ...methods.frag import FRAGRetriever


def make_frag_node(retriever: FRAGRetriever, route: str | None = None, k: int = 5) -> RunnableLambda:
    """FRAG path retrieval (docs/methods.md §2(a) steps 3-7) as a node: ``retriever.evidence(query, k, route=...)``.

    ``route`` forces FRAG's simple or complex pipeline; ``None`` uses ``state["route"]`` when set, else
    the retriever routes itself. ``state["topic_entities"]`` (entity ids), when given, replaces the
    question's entity linking. Writes ``facts`` (the verbalised paths, best first), ``documents``
    (passages linked to path entities; empty for a KG without passages), ``answers`` (LLM-free: end
    entities of the top paths), ``route`` and ``trace["frag"]`` (FRAG's trace: topic entities, sizes,
    timings; ``error`` when no topic entity was found). ``ainvoke`` runs it in a worker thread.
    Context settings (:class:`~.state.KGRAGContext`): ``k`` overrides ``k``; ``route`` forces a
    pipeline on a node made with ``route=None``. Emits ``route``, ``paths`` and ``retrieve``
    (``method``, ``passages``, ``paths``, ``ms``) custom-stream events.
    """
    if route is not None and route not in ROUTES:
        raise ValueError(f"route must be None, 'simple' or 'complex', got {route!r}")
    if not is_frag(retriever):
        raise TypeError(f"make_frag_node needs a FRAGRetriever, got {type(retriever).__name__}")

    def args(state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        chosen = route or context_setting("route", None) or (state["route"] if state.get("route") in ROUTES else None)
        q = query_of(state)
        topics = state.get("topic_entities")
        if isinstance(topics, str):  # one entity id
            topics = [topics]
        if topics is not None and not all(isinstance(t, str) for t in topics):
            raise ValueError(f"graph state key 'topic_entities' must hold entity id strings, got {topics!r:.200}")
        return q, {"route": chosen, "topic_entities": topics, "k": context_setting("k", k)}

    node_name = f"frag_{route}" if route else "frag"

    def update(state: dict[str, Any], ev: Evidence, t0: float) -> dict[str, Any]:
        facts = fact_texts(ev.facts, retriever)
        emit_trace(node_name, {"route": ev.trace.get("route")})
        emit({"event": "paths", "node": node_name, "paths": facts, "answers": list(ev.trace.get("answers") or [])})
        ms = round((time.perf_counter() - t0) * 1000, 1)
        emit(
            {
                "event": "retrieve",
                "node": node_name,
                "method": retriever.name,
                "passages": len(ev.passages),
                "paths": len(facts),
                "ms": ms,
            }
        )
        return {
            "documents": evidence_to_documents(ev, retriever=retriever.name),
            "facts": facts,
            "answers": list(ev.trace.get("answers") or []),
            "route": ev.trace.get("route"),
            "trace": with_trace(state, frag=ev.trace),
        }

    def frag(state: dict[str, Any]) -> dict[str, Any]:
        q, kw = args(state)
        t0 = time.perf_counter()
        return update(state, retriever.evidence(q, kw.pop("k"), **kw), t0)

    async def afrag(state: dict[str, Any]) -> dict[str, Any]:
        q, kw = args(state)
        t0 = time.perf_counter()
        return update(state, await asyncio.to_thread(retriever.evidence, q, kw.pop("k"), **kw), t0)

    return runnable_node(node_name, frag, afrag)


def frag_generate_node(frag: FRAGRetriever) -> RunnableLambda:
    """FRAG's answer step (§2 step 8) over the paths in ``facts`` and the ``answers`` in state."""

    def generate(state: dict[str, Any]) -> dict[str, Any]:
        q = question_of(state)
        frag_trace = dict((state.get("trace") or {}).get("frag") or {})
        frag_trace["answers"] = list(state.get("answers") or frag_trace.get("answers") or [])
        facts = [f if isinstance(f, Fact) else Fact(str(f), kind="path") for f in state.get("facts") or ()]
        ev = Evidence(q, documents_to_passages(state.get("documents")), facts, frag_trace)
        ans = frag.answer(q, evidence=ev)
        if ans.metadata.get("llm_error"):  # logged at WARNING by the method
            errors = [{"step": "answer", "error": ans.metadata["llm_error"]}]
            return answer_update(state, ans.text, trace=add_llm_errors(state, errors))
        return answer_update(state, ans.text)

    return runnable_node("generate", generate)
