"""The LLM-free ``activation`` retriever (docs/methods.md §10: personalized PageRank over entities and
passages, the project's spreading activation) as a LangGraph app: ``retrieve`` (passages + activated
facts) ``-> [generate]``."""

from __future__ import annotations

from typing import Any

from graphs._common import cached_graph, served


def _build(index: Any, llm: Any) -> Any:
    from kgrag_plugins.integrations.langgraph import activation_graph

    return activation_graph(index, llm)


def build_graph() -> Any:
    """The compiled graph (built once per process, from ``KGRAG_INDEX_DIR`` or the sample)."""
    return cached_graph("activation", _build)


#: the factory ``langgraph.json`` names (async: the server's event loop must not block on loading)
graph = served(build_graph)
