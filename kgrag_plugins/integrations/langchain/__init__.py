"""LangChain adapters: retrievers, embeddings and chat models across the boundary.

Needs the ``langchain`` extra (``pip install 'kgrag-plugins[langchain]'``; ``langchain-core`` only).
Modules: ``retriever`` (:class:`KGRAGLangChainRetriever`: any kgrag retriever as a ``BaseRetriever``,
usable with ``create_retriever_tool``), ``embeddings`` (:class:`KGRAGEmbeddings` ours -> LangChain,
:class:`LangChainEmbedder` LangChain -> ours), ``llm`` (:class:`LangChainLLM`: a chat model as our
LLM; :func:`~kgrag_plugins.models.llm.as_llm` applies it; :class:`KGRAGChatModel`: ours as a chat
model, with token usage in ``AIMessage.usage_metadata``). See docs/frameworks.md.
"""

from .._extras import require

require("langchain", "langchain_core", feature="kgrag_plugins.integrations.langchain")

from .embeddings import KGRAGEmbeddings, LangChainEmbedder  # noqa: E402
from .llm import KGRAGChatModel, LangChainLLM, langchain_text  # noqa: E402
from .retriever import KGRAGLangChainRetriever, evidence_to_documents  # noqa: E402

__all__ = [
    "KGRAGChatModel",
    "KGRAGEmbeddings",
    "KGRAGLangChainRetriever",
    "LangChainEmbedder",
    "LangChainLLM",
    "evidence_to_documents",
    "langchain_text",
]
