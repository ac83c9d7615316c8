"""KG-Translator (docs/methods.md §3, paper ``translator``) as a LangGraph app: the question translated
into (entity, relation) clues constrained to the ParseKG, traced to passages (LLM-free: embedding-
constrained translation)."""

from __future__ import annotations

from typing import Any

from graphs._common import cached_graph, served


def _build(index: Any, llm: Any) -> Any:
    from kgrag_plugins.integrations.langgraph import translator_graph

    return translator_graph(index, llm)


def build_graph() -> Any:
    """The compiled graph (built once per process, from ``KGRAG_INDEX_DIR`` or the sample)."""
    return cached_graph("translator", _build)


#: the factory ``langgraph.json`` names (async: the server's event loop must not block on loading)
graph = served(build_graph)
