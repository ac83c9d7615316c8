"""Know³-RAG (paper ``know3-rag``; docs/methods.md §5): KG-verified adaptive retrieval.

:class:`Know3Retriever` (:mod:`.loop`) runs the verify -> retrieve-again loop around any corpus
retriever; its parts: :mod:`.extraction` (Fig. 9 / spaCy SVO triples linked to the KG),
:mod:`.scoring` (:class:`TripleVerifier`, the relative triple score of Eq. 2 and alternatives),
:mod:`.threshold` (θ_t schedules), :mod:`.query` (knowledge-enhanced query q^KG, App. A),
:mod:`.filter` (relevance + factual reference filter), :mod:`.prompts` (App. D) and
:mod:`.completion` (KG completion as evidence on KGQA) with :mod:`.relaxed` (the relaxed chain
walk that bridges a missing hop with a neighbouring relation). No module imports pykeen or trains
anything at import time.
"""

from __future__ import annotations

from ..._lazy import lazy_getattr
from .extraction import Extraction, LinkedTriple, TripleExtractor, chain_triples, path_triples
from .filter import ReferenceFilter
from .loop import Know3Retriever
from .query import EnhancedQuery, QueryEnhancer
from .threshold import PAPER_THETA0, ThresholdSchedule

__all__ = [
    "PAPER_THETA0",
    "EnhancedQuery",
    "Extraction",
    "Know3FRAGRetriever",
    "Know3Retriever",
    "LinkedTriple",
    "QueryEnhancer",
    "ReferenceFilter",
    "RelaxedWalker",
    "ThresholdSchedule",
    "TripleExtractor",
    "TripleVerifier",
    "Verification",
    "chain_triples",
    "path_triples",
]

_LAZY = {
    "TripleVerifier": ".scoring",
    "Verification": ".scoring",
    "TripleScore": ".scoring",
    "plausibility": ".scoring",
    "Know3FRAGRetriever": ".completion",
    "ChainCompleter": ".completion",
    "RelaxedWalker": ".relaxed",
}


#: Verifier and KGQA completion names, imported on first use.
__getattr__ = lazy_getattr(__name__, _LAZY)
