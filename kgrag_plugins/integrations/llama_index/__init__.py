"""LlamaIndex adapters: kgrag retrievers as ``BaseRetriever`` s, evidence as nodes, LLM adapter.

Needs the ``llama-index`` extra (``pip install 'kgrag-plugins[llama-index]'``). Modules: ``retrievers``
(:class:`KGRetriever`, :class:`SpreadingActivationRetriever`, :class:`HopAwareRetriever`), ``nodes``
(``Evidence`` -> ``NodeWithScore``), ``llm`` (:class:`LlamaIndexLLM`, :class:`KGRAGLlamaLLM`),
``build`` (:func:`build_index`, :func:`as_retriever`, :func:`as_query_engine`), ``embeddings``
(:class:`KGRAGEmbedding`, :class:`LlamaIndexEmbedder`), ``graph_store`` (PropertyGraphStore import /
export), ``prompt_mixin`` (``get_prompts`` / ``update_prompts``), ``instrumentation`` (per-step spans and
events on LlamaIndex's instrumentation dispatcher). See docs/frameworks.md.

Example::

    from llama_index.core.query_engine import RetrieverQueryEngine
    from kgrag_plugins.integrations.llama_index import SpreadingActivationRetriever

    retriever = SpreadingActivationRetriever(index, variant="activation", similarity_top_k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llama_index_llm)
"""

from .._extras import require

require("llama-index", "llama_index.core", feature="kgrag_plugins.integrations.llama_index")

from .build import as_query_engine, as_retriever, build_index, nodes_to_passages  # noqa: E402
from .embeddings import KGRAGEmbedding, LlamaIndexEmbedder  # noqa: E402
from .graph_store import (  # noqa: E402
    graph_from_property_graph_store,
    graph_to_property_graph_store,
    passages_from_property_graph_store,
)
from .instrumentation import KGRAGRetrievalEvent, KGRAGStepEvent  # noqa: E402
from .know3 import KGEVerifierPostprocessor, Know3QueryEngine  # noqa: E402
from .llm import KGRAGLlamaLLM, LlamaIndexLLM  # noqa: E402
from .nodes import evidence_to_nodes, fact_to_node, passage_to_node  # noqa: E402
from .retrievers import VARIANTS, HopAwareRetriever, KGRetriever, SpreadingActivationRetriever  # noqa: E402
from .translator import ClueTranslationRetriever  # noqa: E402

__all__ = [
    "ClueTranslationRetriever",
    "HopAwareRetriever",
    "KGEVerifierPostprocessor",
    "KGRAGEmbedding",
    "KGRAGLlamaLLM",
    "KGRAGRetrievalEvent",
    "KGRAGStepEvent",
    "KGRetriever",
    "Know3QueryEngine",
    "LlamaIndexEmbedder",
    "LlamaIndexLLM",
    "SpreadingActivationRetriever",
    "VARIANTS",
    "as_query_engine",
    "as_retriever",
    "build_index",
    "evidence_to_nodes",
    "fact_to_node",
    "graph_from_property_graph_store",
    "graph_to_property_graph_store",
    "nodes_to_passages",
    "passage_to_node",
    "passages_from_property_graph_store",
]
