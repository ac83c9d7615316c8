"""SA-RAG (docs/methods.md §4 and §6.3, paper ``sa_rag``) as a LangGraph app: spreading-activation retrieval with
the CoT reason/retrieve loop (LLM-free: one activation retrieval, no reasoning steps)."""

from __future__ import annotations

from typing import Any

from graphs._common import cached_graph, served


def _build(index: Any, llm: Any) -> Any:
    from kgrag_plugins.integrations.langgraph import sa_rag_graph

    return sa_rag_graph(index, llm)


def build_graph() -> Any:
    """The compiled graph (built once per process, from ``KGRAG_INDEX_DIR`` or the sample)."""
    return cached_graph("sa_rag", _build)


#: the factory ``langgraph.json`` names (async: the server's event loop must not block on loading)
graph = served(build_graph)
