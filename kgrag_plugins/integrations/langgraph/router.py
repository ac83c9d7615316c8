"""FRAG's hop-aware router (docs/methods.md §2(a) step 2) as a node, and :func:`make_hop_router`: routing
in front of any two branches."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import END, START, StateGraph

from .common import check_route, is_frag, runnable_node
from .events import emit_trace
from .frag_nodes import make_frag_node
from .nodes import make_retrieve_node
from .retry import DEFAULT, resolve_policy
from .state import KGRAGContext, KGRAGState, context_setting, query_of, with_trace

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

    from ...models.embed import Embedder


_RouteFn = Callable[[str], "tuple[str, float | None, str]"]


def _hop_router(classifier: Any, embedder: Embedder | None = None) -> _RouteFn:
    """``question -> (route, p_complex | None, by)`` for any accepted ``classifier`` (see make_route_node)."""
    from ...methods.frag import heuristic_route
    from ...methods.frag.hop_classifier import HopClassifier, strip_topic_marks

    if classifier is None:
        return lambda q: (heuristic_route(q), None, "heuristic")
    if isinstance(classifier, (str, os.PathLike)):
        classifier = HopClassifier.load(classifier, embedder=embedder)
    if is_frag(classifier):
        frag = classifier
        by = "mode" if frag.mode != "auto" else ("classifier" if frag.classifier is not None else "heuristic")
        return lambda q: (*frag.route(q), by)
    plain = strip_topic_marks  # as FRAGRetriever.route feeds its classifier
    if callable(getattr(classifier, "predict_proba", None)):

        def by_proba(q: str) -> tuple[str, float | None, str]:
            p = float(np.ravel(classifier.predict_proba([plain(q)]))[0])
            return ("complex" if p >= 0.5 else "simple"), p, "classifier"

        return by_proba
    if callable(getattr(classifier, "route", None)) or callable(classifier):
        fn = classifier.route if callable(getattr(classifier, "route", None)) else classifier

        def by_route(q: str) -> tuple[str, float | None, str]:
            out = fn(plain(q))
            route, p = out if isinstance(out, tuple) else (out, None)
            return route, (None if p is None else float(p)), "classifier"

        return by_route
    raise TypeError(
        "classifier must be None, a HopClassifier (or its saved path), a FRAGRetriever, an object with "
        f"predict_proba()/route(), or a callable question -> route; got {type(classifier).__name__}"
    )


def make_route_node(classifier: Any = None, *, embedder: Embedder | None = None) -> RunnableLambda:
    """FRAG's hop-aware router (docs/methods.md §2(a) step 2, paper ``frag``) as a node: writes ``route``
    (``"simple"``: at most 2 hops; ``"complex"``) and ``trace["route"] = {"route", "p_complex", "by"}``.

    ``classifier``: a trained :class:`~kgrag_plugins.methods.frag.hop_classifier.HopClassifier`, the path
    of a saved one (loaded with ``embedder``, default MiniLM), a ``FRAGRetriever`` (its own
    ``route``: classifier, heuristic or forced ``mode``), any object with ``predict_proba`` (P(complex))
    or ``route``, a callable ``question -> route`` (these three get the question with its ``[ ]`` topic
    markers removed, as ``FRAGRetriever.route`` feeds its classifier), or ``None``: the LLM-free
    :func:`~kgrag_plugins.methods.frag.heuristic_route`. ``by`` is ``"classifier"``, ``"heuristic"``
    or ``"mode"``. The route is always recomputed from ``state["query"]`` or ``state["question"]``
    (a ``route`` already in the state is overwritten), so a checkpointed thread re-routes each question.
    The context setting ``route`` (:class:`KGRAGContext`) forces the route (``by="context"``).
    """
    router = _hop_router(classifier, embedder)

    def route(state: dict[str, Any]) -> dict[str, Any]:
        forced = context_setting("route", None)
        r, p, by = (forced, None, "context") if forced else router(query_of(state))
        r = check_route(r, "the hop classifier")
        emit_trace("router", {"route": {"route": r, "p_complex": p, "by": by}})
        return {"route": r, "trace": with_trace(state, route={"route": r, "p_complex": p, "by": by})}

    return runnable_node("router", route)


def route_by_hops(state: dict[str, Any]) -> Literal["simple", "complex"]:
    """Conditional-edge function after :func:`make_route_node`: ``state["route"]``."""
    return check_route(state.get("route"), "state['route']")  # type: ignore[return-value]


def _is_kgrag(node: Any) -> bool:
    from ...methods.base import Retriever

    return is_frag(node) or isinstance(node, Retriever)


def _branch(node: Any, route: str, k: int) -> Any:
    from ...methods.base import Retriever

    if is_frag(node):
        return make_frag_node(node, route, k)
    if isinstance(node, Retriever):
        return make_retrieve_node(node, k)
    if isinstance(node, Runnable) or callable(node):
        return node
    raise TypeError(
        f"the {route} branch must be a kgrag Retriever, a Runnable / compiled graph or a callable node, "
        f"got {type(node).__name__}"
    )


def make_hop_router(
    simple: Any,
    complex: Any,
    *,
    classifier: Any = None,
    k: int = 5,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
) -> CompiledStateGraph:
    """FRAG's hop-aware routing (docs/methods.md §2, paper ``frag``) in front of any two branches:
    ``START -> router -> simple | complex -> END``.

    ``router`` is :func:`make_route_node` (``classifier`` as there; ``None``: the heuristic) and
    :func:`route_by_hops` picks the node named ``"simple"`` or ``"complex"``. Each branch may be a
    kgrag ``Retriever`` (a :func:`make_retrieve_node` with ``k``; a ``FRAGRetriever`` becomes a
    :func:`make_frag_node` forced to that branch's pipeline), a LangChain ``Runnable`` or compiled
    LangGraph graph (added as a subgraph node as is; shared state keys flow both ways), or a plain
    callable node ``state -> dict``. (The router node is not called ``route``: older LangGraph
    releases reject a node named like a state key.) A kgrag ``Retriever`` branch is added with
    ``retry_policy`` (default :func:`~.retry.default_retry_policy`, ``None``: no retries; a user's
    Runnable or subgraph keeps its own); context settings: ``k`` (kgrag branches), ``route``.
    """
    policy = resolve_policy(retry_policy)
    g = StateGraph(KGRAGState, context_schema=KGRAGContext)
    g.add_node("router", make_route_node(classifier))
    for route, branch in (("simple", simple), ("complex", complex)):
        g.add_node(route, _branch(branch, route, k), retry_policy=policy if _is_kgrag(branch) else None)
    g.add_edge(START, "router")
    g.add_conditional_edges("router", route_by_hops, {"simple": "simple", "complex": "complex"})
    g.add_edge("simple", END)
    g.add_edge("complex", END)
    return g.compile(checkpointer=checkpointer, name="hop_router")
