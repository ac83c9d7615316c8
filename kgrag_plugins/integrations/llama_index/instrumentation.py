"""LlamaIndex ``instrumentation`` (the dispatcher that replaces the callbacks module) for our adapters.

Every kgrag retriever / query engine here runs inside LlamaIndex spans: ``BaseRetriever.retrieve``
(LlamaIndex's own span) encloses our ``<Class>._retrieve`` span, and under it one child span per
method step, ``kgrag.<method>.<step>``. Each step span carries a :class:`KGRAGStepEvent`
(``method``, ``step``, ``count``, ``ms``, ``data``); a :class:`KGRAGRetrievalEvent` closes the
retrieval (passages, facts, total ms). The steps come from the method's ``Evidence.trace`` after
the method ran (the methods themselves are framework-free), so the step spans are markers with
near-zero duration: the method's own timing of a step is the event's ``ms`` (``None`` when the
method does not time it). Steps:

==========  ===========================================  ===================================
step        count                                        methods
==========  ===========================================  ===================================
seed        seed entities (FRAG: topic entities)         activation, sa_rag, kg_infused, frag
spread      activated entities (``data["rounds"]``)      activation, sa_rag, kg_infused
route       1 (``data["route"]``, ``p_complex``)         frag
paths       candidate paths                              frag
translate   clues (``data["direction"]``, ``traced``)    translator
verify      turns (``data`` accepted / rejected ...)     know3 (after its base method's steps)
==========  ===========================================  ===================================

Any handler attached to the root dispatcher sees them (an OpenInference span handler, a
``BaseEventHandler``, LlamaIndex's ``SimpleSpanHandler``)::

    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    class Steps(BaseEventHandler):
        def handle(self, event, **kw):
            if isinstance(event, KGRAGStepEvent):
                print(event.method, event.step, event.count, event.ms)

    get_dispatcher().add_event_handler(Steps())
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span import active_span_id

from ...types import Evidence

__all__ = ["KGRAGRetrievalEvent", "KGRAGStepEvent", "dispatcher", "emit_evidence", "trace_steps"]

#: the dispatcher of our adapters (a child of LlamaIndex's root dispatcher: events propagate up)
dispatcher = get_dispatcher(__name__)

# trace timing keys (``timings_ms`` / ``timings``) summed into each step's ``ms``
_STEP_TIMINGS = {
    "seed": ("embed_and_seed_ms", "embed", "ner"),
    "spread": ("subgraph_ms", "edge_weights_ms", "spread_ms"),
    "route": ("link_route_ms",),
    "paths": ("subgraph_ms", "relations_ms", "search_ms", "rank_ms"),
    "translate": ("entity_translation", "relation_translation", "tracing", "bridge"),
    "verify": ("extract_verify",),
}


class KGRAGStepEvent(BaseEvent):
    """One step of a kgrag method's retrieval: ``step`` (seed / spread / route / paths / translate /
    verify), ``count`` (what the step produced), ``ms`` (the method's timing, or ``None``), ``data``."""

    method: str
    step: str
    count: int = 0
    ms: float | None = None
    data: dict[str, Any] = {}

    @classmethod
    def class_name(cls) -> str:
        return "KGRAGStepEvent"


class KGRAGRetrievalEvent(BaseEvent):
    """The end of one kgrag retrieval: ``passages`` / ``facts`` returned, ``ms`` the method's total."""

    method: str
    query: str = ""
    passages: int = 0
    facts: int = 0
    ms: float | None = None
    steps: list[str] = []

    @classmethod
    def class_name(cls) -> str:
        return "KGRAGRetrievalEvent"


def _timings(trace: dict[str, Any]) -> dict[str, float]:
    t = trace.get("timings_ms") or trace.get("timings") or {}
    return {k: float(v) for k, v in t.items() if isinstance(v, (int, float))} if isinstance(t, dict) else {}


def _ms(timings: dict[str, float], step: str) -> float | None:
    keys = _STEP_TIMINGS[step]
    hit = [timings[k] for k in keys if k in timings]
    return round(sum(hit), 3) if hit else None


def _size(v: Any) -> int:
    if isinstance(v, (list, dict, tuple, set)):
        return len(v)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def trace_steps(trace: dict[str, Any] | None, method: str = "") -> list[dict[str, Any]]:
    """The steps of one retrieval from its ``Evidence.trace``: ``[{"method", "step", "count", "ms",
    "data"}]`` (framework-free; see the module docstring). Know³ lists its base method's steps first
    (their ``method`` is the base method's)."""
    trace = trace or {}
    method = str(trace.get("retriever") or method)
    timings = _timings(trace)
    steps: list[dict[str, Any]] = []

    def add(step: str, count: int, **data: Any) -> None:
        steps.append({"method": method, "step": step, "count": int(count), "ms": _ms(timings, step), "data": data})

    if isinstance(trace.get("base_trace"), dict):  # Know³: the base method's steps
        steps += trace_steps(trace["base_trace"], str(trace.get("base") or ""))
    if "seeds" in trace:
        add("seed", _size(trace["seeds"]))
    elif "topic_entities" in trace:
        add("seed", _size(trace["topic_entities"]), linking=trace.get("linking"))
    if "activated" in trace:
        rounds = trace.get("activation_rounds", trace.get("rounds"))
        add("spread", _size(trace["activated"]), rounds=_size(rounds) if rounds is not None else None)
    if "route" in trace:
        add("route", 1, route=trace["route"], p_complex=trace.get("p_complex"))
    if "candidate_paths" in trace:
        add("paths", _size(trace["candidate_paths"]), answers=len(trace.get("answers") or []))
    if "clues" in trace:
        d = trace.get("direction") or []
        add(
            "translate",
            _size(trace["clues"]),
            direction=[d] if isinstance(d, str) else list(d),
            traced=_size(trace.get("traced") or []),
        )
    know3 = trace.get("know3")
    if isinstance(know3, dict):
        turns = know3.get("turns") or []
        decisions = [t.get("decision") for t in turns]
        add(
            "verify",
            len(turns),
            accepted=decisions.count("accept"),
            rejected=decisions.count("retrieve"),
            forced=decisions.count("forced"),
            decision=know3.get("decision"),
            references=len(know3.get("references") or []),
        )
    return steps


def _total_ms(trace: dict[str, Any]) -> float | None:
    t = _timings(trace)
    if "total_ms" in t:
        return t["total_ms"]
    return round(sum(t.values()), 3) if t else None


def emit_evidence(evidence: Evidence, method: str = "") -> list[dict[str, Any]]:
    """Emit ``evidence``'s steps on the dispatcher: one child span ``kgrag.<method>.<step>`` of the
    active span per step (Know³: its base method's steps first), each with its
    :class:`KGRAGStepEvent`, then a :class:`KGRAGRetrievalEvent`. Returns the steps. Cheap: the
    trace is only read (a few small objects per step; the method is not re-run or re-timed)."""
    trace = evidence.trace or {}
    method = str(trace.get("retriever") or method or "kgrag")
    steps = trace_steps(trace, method)
    parent = active_span_id.get()
    bound = inspect.signature(emit_evidence).bind(evidence, method)
    for s in steps:
        span_id = f"kgrag.{s['method']}.{s['step']}-{uuid.uuid4()}"
        token = active_span_id.set(span_id)
        try:
            dispatcher.span_enter(id_=span_id, bound_args=bound, parent_id=parent, tags={"kgrag.step": s["step"]})
            dispatcher.event(
                KGRAGStepEvent(method=s["method"], step=s["step"], count=s["count"], ms=s["ms"], data=s["data"])
            )
            dispatcher.span_exit(id_=span_id, bound_args=bound, result=s)
        finally:
            active_span_id.reset(token)
    dispatcher.event(
        KGRAGRetrievalEvent(
            method=method,
            query=str(evidence.query or ""),
            passages=len(evidence.passages),
            facts=len(evidence.facts),
            ms=_total_ms(trace),
            steps=[s["step"] for s in steps],
        )
    )
    return steps
