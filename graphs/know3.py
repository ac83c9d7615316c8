"""Know³-RAG (docs/methods.md §5, paper ``know3``) as a LangGraph app: retrieve -> [generate] -> KGE
verifier -> retrieve again with a KG-enhanced query while the answer's triples score as unreliable
(LLM-free: the verifier checks the retrieved passages; the KGE is trained on first use)."""

from __future__ import annotations

from typing import Any

from graphs._common import cached_graph, served


def _build(index: Any, llm: Any) -> Any:
    from kgrag_plugins.integrations.langgraph import know3_graph

    return know3_graph(index, llm=llm)


def build_graph() -> Any:
    """The compiled graph (built once per process, from ``KGRAG_INDEX_DIR`` or the sample)."""
    return cached_graph("know3", _build)


#: the factory ``langgraph.json`` names (async: the server's event loop must not block on loading)
graph = served(build_graph)
