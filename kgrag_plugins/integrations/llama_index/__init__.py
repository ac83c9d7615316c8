"""LlamaIndex adapters: kgrag retrievers as ``BaseRetriever`` s, evidence as nodes, LLM adapter.

Needs the ``llama-index`` extra (``pip install 'kgrag-plugins[llama-index]'``). Modules: ``retrievers``
(:class:`KGRetriever`, :class:`SpreadingActivationRetriever`, :class:`HopAwareRetriever`), ``nodes``
(``Evidence`` -> ``NodeWithScore``), ``llm`` (:class:`LlamaIndexLLM`).

Example::

    from llama_index.core.query_engine import RetrieverQueryEngine
    from kgrag_plugins.integrations.llama_index import SpreadingActivationRetriever

    retriever = SpreadingActivationRetriever(index, variant="activation", similarity_top_k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llama_index_llm)
"""

from .._extras import require

require("llama-index", "llama_index.core", feature="kgrag_plugins.integrations.llama_index")

from .know3 import KGEVerifierPostprocessor, Know3QueryEngine  # noqa: E402
from .llm import LlamaIndexLLM  # noqa: E402
from .nodes import evidence_to_nodes, fact_to_node, passage_to_node  # noqa: E402
from .retrievers import VARIANTS, HopAwareRetriever, KGRetriever, SpreadingActivationRetriever  # noqa: E402
from .translator import ClueTranslationRetriever  # noqa: E402

__all__ = [
    "ClueTranslationRetriever",
    "HopAwareRetriever",
    "KGEVerifierPostprocessor",
    "KGRetriever",
    "Know3QueryEngine",
    "LlamaIndexLLM",
    "SpreadingActivationRetriever",
    "VARIANTS",
    "evidence_to_nodes",
    "fact_to_node",
    "passage_to_node",
]
