"""KG-Infused RAG (docs/methods.md §1, paper ``kg_infused``) as a LangGraph app: spreading activation over
the KG, query expansion, dual retrieval, KG-augmented notes (LLM steps fall back to templates)."""

from __future__ import annotations

from typing import Any

from graphs._common import cached_graph, served


def _build(index: Any, llm: Any) -> Any:
    from kgrag_plugins.integrations.langgraph import kg_infused_graph

    return kg_infused_graph(index, llm)


def build_graph() -> Any:
    """The compiled graph (built once per process, from ``KGRAG_INDEX_DIR`` or the sample)."""
    return cached_graph("kg_infused", _build)


#: the factory ``langgraph.json`` names (async: the server's event loop must not block on loading)
graph = served(build_graph)
