"""Helpers every LangGraph module builds on: a named node from a function (sync + async), the
FRAG routes and their checks, and how a graph builder takes an index or a ready method."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableLambda

from ...index.store import KnowledgeIndex


def runnable_node(
    name: str, func: Callable[[dict], dict], afunc: Callable[[dict], Any] | None = None
) -> RunnableLambda:
    return RunnableLambda(func, afunc=afunc, name=name)


def method_of(retriever_or_index: Any, build: Callable[[KnowledgeIndex], Any]) -> Any:
    return build(retriever_or_index) if isinstance(retriever_or_index, KnowledgeIndex) else retriever_or_index


def fact_texts(facts: Any, retriever: Any = None) -> list[str]:
    """The facts as the state's ``facts`` strings: entity names, never ``##`` masks (filled from the
    ``retriever``'s index when a node called a method step directly, not ``retrieve``)."""
    from ...methods.facts import readable_facts

    return [f.display for f in readable_facts(list(facts), getattr(retriever, "index", None))]


def same_llm(a: Any, b: Any) -> bool:
    inner = lambda x: getattr(x, "chat_model", None) or getattr(x, "llm", None) or x  # noqa: E731
    return a is b or (a is not None and inner(a) is inner(b))


ROUTES = ("simple", "complex")


def is_frag(obj: Any) -> bool:
    from ...methods.frag import FRAGRetriever

    return isinstance(obj, FRAGRetriever)


def check_route(route: Any, source: str) -> str:
    if route not in ROUTES:
        raise ValueError(f"{source} returned route {route!r}; expected 'simple' or 'complex'")
    return route
