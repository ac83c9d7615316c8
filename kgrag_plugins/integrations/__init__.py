"""Framework adapters (LlamaIndex, LangGraph, LangChain): shape translation around the framework-free methods.

Each framework has its own module or package and optional extra; names are imported lazily, so
``import kgrag_plugins.integrations`` loads no framework::

    from kgrag_plugins.integrations import SpreadingActivationRetriever   # [llama-index]
    from kgrag_plugins.integrations import kg_infused_graph               # [langgraph]
    from kgrag_plugins.integrations import HopAwareRetriever, frag_graph  # FRAG (both frameworks)
    from kgrag_plugins.integrations import LangChainLLM                   # [langchain]
    from kgrag_plugins.integrations import KGRAGLangChainRetriever        # [langchain]
    from kgrag_plugins.integrations import build_index, as_retriever      # [llama-index]

Importing an adapter whose framework is not installed raises an ``ImportError`` that names the extra.
This package also recognises framework chat models for :func:`kgrag_plugins.models.llm.as_llm`
(:func:`framework_llm`), framework embedders for :func:`kgrag_plugins.models.embed.as_embedder`
(:func:`framework_embedder`): the core never imports this package, it finds these through
:mod:`kgrag_plugins.adapters` (:func:`register_adapters`, an entry point). It also points
``TIKTOKEN_CACHE_DIR`` at LlamaIndex's bundled tiktoken cache when the user has not set it (so token
counting works offline).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from .._lazy import lazy_dir, lazy_getattr

_EXPORTS = {
    # llama_index
    "HopAwareRetriever": "llama_index",
    "KGRetriever": "llama_index",
    "LlamaIndexLLM": "llama_index",
    "SpreadingActivationRetriever": "llama_index",
    "evidence_to_nodes": "llama_index",
    "ClueTranslationRetriever": "llama_index",
    "KGRAGEmbedding": "llama_index",
    "build_index": "llama_index",
    "as_retriever": "llama_index",
    "as_query_engine": "llama_index",
    # langchain
    "LangChainLLM": "langchain",
    "KGRAGChatModel": "langchain",
    "KGRAGLangChainRetriever": "langchain",
    "KGRAGEmbeddings": "langchain",
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
    "translator_graph": "langgraph",
    "make_translator_node": "langgraph",
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

__all__ = sorted([*_EXPORTS, "framework_embedder", "framework_llm", "register_adapters"])


__getattr__ = lazy_getattr(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})
__dir__ = lazy_dir(globals())


def _instance_of(obj: Any, module: str, cls: str) -> bool:
    """``isinstance(obj, module.cls)`` if ``module`` is already loaded (never imports a framework:
    an object of a framework's class means its framework is loaded)."""
    mod = sys.modules.get(module)
    klass = getattr(mod, cls, None) if mod is not None else None
    return isinstance(klass, type) and isinstance(obj, klass)


def framework_llm(obj: Any) -> Any | None:
    """The kgrag adapter for a LangChain chat model or a LlamaIndex LLM, else ``None``.

    Recognised by class (``BaseLanguageModel`` / ``BaseLLM``) or, for look-alikes, by shape
    (LangChain: ``invoke`` + ``bind``; LlamaIndex: ``chat`` + ``metadata``).
    """
    if _instance_of(obj, "langchain_core.language_models", "BaseLanguageModel") or (
        callable(getattr(obj, "invoke", None)) and callable(getattr(obj, "bind", None))
    ):
        from .langchain import LangChainLLM

        return LangChainLLM(obj)
    if _instance_of(obj, "llama_index.core.base.llms.base", "BaseLLM") or (
        callable(getattr(obj, "chat", None)) and hasattr(obj, "metadata")
    ):
        from .llama_index.llm import LlamaIndexLLM

        return LlamaIndexLLM(obj)
    return None


def framework_embedder(obj: Any) -> Any | None:
    """Our :class:`~kgrag_plugins.models.embed.Embedder` for a LlamaIndex ``BaseEmbedding`` or a
    LangChain ``Embeddings`` (recognised by shape: ``get_text_embedding_batch``; ``embed_documents``
    + ``embed_query``), else ``None``. One of ours wrapped for a framework is unwrapped."""
    inner = getattr(obj, "kgrag_embedder", None)
    if inner is not None:
        return inner
    if callable(getattr(obj, "get_text_embedding_batch", None)):
        from .llama_index.embeddings import LlamaIndexEmbedder

        return LlamaIndexEmbedder(obj)
    if callable(getattr(obj, "embed_documents", None)) and callable(getattr(obj, "embed_query", None)):
        from .langchain.embeddings import LangChainEmbedder

        return LangChainEmbedder(obj)
    return None


def _lazy(name: str) -> Any:
    """A hook calling this package's lazy export ``name`` (its framework loads on the first call)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(sys.modules[__name__], name)(*args, **kwargs)

    call.__name__ = name
    return call


def _graphs_load_runner(*args: Any, **kwargs: Any) -> Any:
    """Hook ``graphs_load_runner``: the coroutine of ``kgrag bench-load --graphs-dev``
    (:func:`.langgraph.load.run_graphs_dev`; LangGraph loads on the first call)."""
    from .langgraph.load import run_graphs_dev

    return run_graphs_dev(*args, **kwargs)


def register_adapters() -> None:
    """Register this package's hooks with :mod:`kgrag_plugins.adapters` (the entry point
    ``kgrag_plugins.adapters: frameworks``): ``llm``, ``embedder``, ``build_index``,
    ``as_retriever``, ``as_query_engine``, ``graphs_load_runner``. Imports no framework."""
    from ..adapters import register

    register("llm", framework_llm)
    register("embedder", framework_embedder)
    for name in ("build_index", "as_retriever", "as_query_engine"):
        register(name, _lazy(name))
    register("graphs_load_runner", _graphs_load_runner)


def _use_bundled_tiktoken_cache() -> None:
    """Point ``TIKTOKEN_CACHE_DIR`` at llama-index-core's bundled cache (cl100k_base) when unset."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    try:  # a top-level spec: found without importing the (namespace) package
        spec = importlib.util.find_spec("llama_index")
    except (ImportError, ValueError):
        return
    for root in (spec.submodule_search_locations or ()) if spec else ():
        cache = Path(root) / "core" / "_static" / "tiktoken_cache"
        if cache.is_dir():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
            return


_use_bundled_tiktoken_cache()
