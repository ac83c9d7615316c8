"""kgrag-plugins: knowledge-graph RAG methods as LlamaIndex retrievers and LangGraph nodes."""

__version__ = "0.1.0"

from .index.graph import KnowledgeGraph  # noqa: E402
from .index.parsekg import ParseKG  # noqa: E402
from .index.store import KnowledgeIndex  # noqa: E402
from .methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever  # noqa: E402
from .types import Answer, Entity, Evidence, Fact, Passage, Path, ScoredPassage, Triple  # noqa: E402

__all__ = [
    "__version__",
    "Answer",
    "BM25Retriever",
    "DenseRetriever",
    "Entity",
    "Evidence",
    "Fact",
    "HybridRetriever",
    "KnowledgeGraph",
    "KnowledgeIndex",
    "ParseKG",
    "Passage",
    "Path",
    "PPRRetriever",
    "ScoredPassage",
    "Triple",
]
