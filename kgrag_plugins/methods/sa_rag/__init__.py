"""SA-RAG (docs/methods.md §4, paper ``sa-rag``): spreading activation over an entity graph with edge
vectors (:mod:`.retriever`), and SA-RAG + chain-of-thought (§6.3, :mod:`.cot`) with the paper's
prompts (:mod:`.prompts`)."""

from .cot import SARAGCoT, parse_json_object
from .retriever import CONTEXT_HEADER, DEFAULT_MAX_EDGES, RELATIONS_HEADER, SARAGRetriever

__all__ = ["CONTEXT_HEADER", "DEFAULT_MAX_EDGES", "RELATIONS_HEADER", "SARAGCoT", "SARAGRetriever", "parse_json_object"]
