"""kgrag-plugins: knowledge-graph RAG methods as LlamaIndex retrievers and LangGraph nodes.

Methods are framework-free; the LlamaIndex / LangGraph adapters (``SpreadingActivationRetriever``,
``KGRetriever``, ``HopAwareRetriever``, ``activation_graph``, ``kg_infused_graph``, ``sa_rag_graph``,
``frag_graph``, ``make_hop_router``) are imported on first use so ``import kgrag_plugins`` does not
load either framework.
"""

from typing import Any

__version__ = "0.1.0"

from .index.graph import KnowledgeGraph  # noqa: E402
from .index.parsekg import ParseKG  # noqa: E402
from .index.store import KnowledgeIndex  # noqa: E402
from .methods.activation import ActivationRetriever  # noqa: E402
from .methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever  # noqa: E402
from .methods.frag import FRAGRetriever  # noqa: E402
from .methods.hop_classifier import HopClassifier  # noqa: E402
from .methods.kg_infused import KGInfusedRetriever  # noqa: E402
from .methods.sa_rag import SARAGCoT, SARAGRetriever  # noqa: E402
from .types import Answer, Entity, Evidence, Fact, Passage, Path, ScoredPassage, Triple  # noqa: E402

_ADAPTERS = {
    "HopAwareRetriever",
    "KGRetriever",
    "SpreadingActivationRetriever",
    "activation_graph",
    "kg_infused_graph",
    "sa_rag_graph",
    "frag_graph",
    "make_hop_router",
}

__all__ = [
    "__version__",
    "ActivationRetriever",
    "Answer",
    "BM25Retriever",
    "DenseRetriever",
    "Entity",
    "Evidence",
    "Fact",
    "FRAGRetriever",
    "HopClassifier",
    "HybridRetriever",
    "KGInfusedRetriever",
    "KnowledgeGraph",
    "KnowledgeIndex",
    "ParseKG",
    "Passage",
    "Path",
    "PPRRetriever",
    "SARAGCoT",
    "SARAGRetriever",
    "ScoredPassage",
    "Triple",
    *sorted(_ADAPTERS),
]


def __getattr__(name: str) -> Any:
    if name in _ADAPTERS:
        from . import integrations

        return getattr(integrations, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
