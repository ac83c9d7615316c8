"""Per-step events for ``graph.stream(..., stream_mode="custom")``.

Nodes hand their step's trace to :func:`emit_trace`, which writes small JSON-able dicts to
LangGraph's stream writer (``langgraph.config.get_stream_writer``). Every event has ``"event"``
(its kind) and ``"node"`` (the node's name in the running graph, e.g. ``"simple"`` for a hop
router's branch):

- ``retrieve``: ``method`` (the retriever's name), ``passages`` (count), ``ms`` (the step's wall
  time), ``query``, ``retriever``, ``documents`` (ids), ``scores``, ``facts`` (count); FRAG's nodes
  add ``paths`` (count)
- ``generate``: ``ms``, ``fallback`` (the LLM failed: the LLM-free answer; ``make_generate_node(llm)``)
- ``retry``: ``attempt``, ``max_attempts``, ``error`` (the type): a node with an LLM-free fallback
  raises a retryable error so that its ``RetryPolicy`` runs it again (:mod:`.retry`)
- ``seeds``: ``seeds`` (``[{"id", "name", "score"}]``; spreading activation / KG-Infused RAG)
- ``activation_round``: one per activation round (``round``, ``frontier``, ``selected``,
  ``activated``, ``next_frontier``, ...; KG-Infused RAG, docs/methods.md §1)
- ``activated``: the activated entities and their values (spreading activation, KG-Infused RAG)
- ``route``: ``route``, ``p_complex``, ``by`` (FRAG's hop router, docs/methods.md §2)
- ``paths``: ``paths`` (verbalised, best first), ``answers`` (FRAG's node)
- ``clues``: ``clues`` (KG-Translator, docs/methods.md §3)
- ``reasoning``: one SA-RAG CoT step (``answer_possible``, ``additional_question`` or ``error``)
- ``verification``: ``score``, ``threshold``, ``turn``, ``decision`` (Know³, docs/methods.md §5)

Outside a graph run (a node invoked on its own) nothing is written. Without ``"custom"`` among the
stream modes LangGraph's writer is a no-op, so the events cost nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["emit", "emit_trace"]


def emit(event: dict[str, Any]) -> None:
    """Write ``event`` to the running graph's custom stream (no-op outside a graph run). ``node``
    becomes the name the node has in the running graph (``langgraph_node``) when there is one."""
    try:
        from langgraph.config import get_config, get_stream_writer

        writer = get_stream_writer()
        node = (get_config().get("metadata") or {}).get("langgraph_node")
    except (ImportError, RuntimeError, KeyError, AttributeError):  # no graph run (a node invoked on its own)
        return
    writer({**event, "node": node} if node else event)


def trace_events(node: str, trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The events one step's ``trace`` describes (see the module docstring)."""
    out: list[dict[str, Any]] = []
    if trace.get("seeds"):
        out.append({"event": "seeds", "node": node, "seeds": list(trace["seeds"])})
    for i, r in enumerate(trace.get("rounds") or (), 1):
        out.append({"event": "activation_round", "node": node, "round": i, **(r if isinstance(r, dict) else {})})
    if trace.get("activated"):
        out.append({"event": "activated", "node": node, "activated": trace["activated"]})
    route = trace.get("route")
    if isinstance(route, dict) and route.get("route"):
        out.append({"event": "route", "node": node, **route})
    elif isinstance(route, str) and route:
        out.append({"event": "route", "node": node, "route": route, "p_complex": trace.get("p_complex")})
    if trace.get("clues"):
        out.append({"event": "clues", "node": node, "clues": list(trace["clues"])})
    if "score" in trace and "decision" in trace:
        keys = ("score", "threshold", "turn", "decision", "source", "reason")
        out.append({"event": "verification", "node": node, **{k: trace.get(k) for k in keys}})
    return out


def emit_trace(node: str, trace: dict[str, Any] | None, **head: Any) -> None:
    """Emit ``head`` (when given: ``{"event": head.pop("event"), "node": node, **head}``) and then
    the events of ``trace``."""
    if head:
        emit({"event": head.pop("event", node), "node": node, **head})
    for event in trace_events(node, trace or {}):
        emit(event)
