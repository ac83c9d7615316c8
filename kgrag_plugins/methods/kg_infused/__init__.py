"""KG-Infused RAG (docs/methods.md §1, paper ``kg-infused-rag``): KG-guided spreading activation, query
expansion, dual retrieval and knowledge augmentation (:mod:`.retriever`), the paper's prompts
(:mod:`.prompts`) and the tolerant triple-reply parser (:mod:`.parsing`)."""

from .parsing import ParsedTriple, parse_triples
from .retriever import KGInfusedMemory, KGInfusedRetriever

__all__ = ["KGInfusedMemory", "KGInfusedRetriever", "ParsedTriple", "parse_triples"]
