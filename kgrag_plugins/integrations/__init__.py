"""Framework adapters (LlamaIndex, LangGraph): shape translation around the framework-free methods.

Names are imported lazily so ``import kgrag_plugins.integrations`` does not pull in either framework::

    from kgrag_plugins.integrations import SpreadingActivationRetriever   # llama_index
    from kgrag_plugins.integrations import kg_infused_graph               # langgraph
    from kgrag_plugins.integrations import HopAwareRetriever, frag_graph  # FRAG (both frameworks)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # llama_index
    "HopAwareRetriever": "llama_index",
    "KGRetriever": "llama_index",
    "SpreadingActivationRetriever": "llama_index",
    "evidence_to_nodes": "llama_index",
    # langgraph
    "KGRAGState": "langgraph",
    "activation_graph": "langgraph",
    "kg_infused_graph": "langgraph",
    "sa_rag_graph": "langgraph",
    "frag_graph": "langgraph",
    "make_hop_router": "langgraph",
    "make_route_node": "langgraph",
    "route_by_hops": "langgraph",
    "make_frag_node": "langgraph",
    "make_retrieve_node": "langgraph",
    "make_activation_node": "langgraph",
    "make_query_expansion_node": "langgraph",
    "make_dual_retrieve_node": "langgraph",
    "make_note_node": "langgraph",
    "make_augment_node": "langgraph",
    "make_generate_node": "langgraph",
    "make_sa_retrieve_node": "langgraph",
    "make_sa_reason_node": "langgraph",
    "evidence_to_documents": "langgraph",
    "documents_to_passages": "langgraph",
    "state_to_evidence": "langgraph",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
