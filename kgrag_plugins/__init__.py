"""kgrag-plugins: knowledge-graph RAG methods as LlamaIndex retrievers and LangGraph nodes.

Methods are framework-free; the LlamaIndex / LangGraph adapters (``SpreadingActivationRetriever``,
``KGRetriever``, ``HopAwareRetriever``, ``activation_graph``, ``kg_infused_graph``, ``sa_rag_graph``,
``frag_graph``, ``make_hop_router``) are imported on first use from :mod:`kgrag_plugins.integrations`
(each needs its extra), so ``import kgrag_plugins`` loads no framework.
"""

from . import integrations as _integrations  # noqa: F401 - framework-free; sets the tiktoken cache
from ._lazy import lazy_getattr
from ._version import __version__
from .index.graph import KnowledgeGraph
from .index.parsekg import ParseKG
from .index.store import KnowledgeIndex
from .methods.activation import ActivationRetriever
from .methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever
from .methods.frag import FRAGRetriever, HopClassifier
from .methods.kg_infused import KGInfusedRetriever
from .methods.sa_rag import SARAGCoT, SARAGRetriever
from .types import Answer, Entity, Evidence, Fact, Passage, Path, ScoredPassage, Triple

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


__getattr__ = lazy_getattr(__name__, dict.fromkeys(_ADAPTERS, ".integrations"))
