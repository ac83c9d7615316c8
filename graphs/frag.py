"""FRAG (docs/methods.md §2, paper ``frag``) as a LangGraph app: the hop router sends a question to BFS
(simple) or shortest-path (complex) path retrieval; ``answers`` holds the LLM-free candidates."""

from __future__ import annotations

from typing import Any

from graphs._common import cached_graph, served


def _build(index: Any, llm: Any) -> Any:
    from kgrag_plugins.integrations.langgraph import frag_graph

    return frag_graph(index, llm=llm)


def build_graph() -> Any:
    """The compiled graph (built once per process, from ``KGRAG_INDEX_DIR`` or the sample)."""
    return cached_graph("frag", _build)


#: the factory ``langgraph.json`` names (async: the server's event loop must not block on loading)
graph = served(build_graph)
