"""FRAG (docs/methods.md §2, paper ``frag``): hop-aware routing between a simple and a complex path pipeline.

Parts, one module each:

- :mod:`.hop_classifier` -- the router: :class:`HopClassifier` (MiniLM + query statistics, logistic
  regression; §2 step 2) and the LLM-free :func:`heuristic_route`;
- :mod:`.path_ranker` -- :class:`PathRanker`, a weakly supervised relation-chain ranker (the PRM
  substitute);
- :mod:`.paths` -- the graph view the pipelines walk (both-direction CSR, k-hop, path candidates);
- :mod:`.retriever` -- :class:`FRAGRetriever`, the simple/complex pipelines (§2 steps 3-10);
- :mod:`.prompts` -- the reasoning and hop-estimation prompts.
"""

from .hop_classifier import (
    COMPLEX,
    SIMPLE,
    TOPIC_MARK,
    HopClassifier,
    RouteName,
    count_hops,
    heuristic_route,
    strip_topic_marks,
)
from .path_ranker import PathRanker
from .retriever import FRAGRetriever

__all__ = [
    "COMPLEX",
    "FRAGRetriever",
    "HopClassifier",
    "PathRanker",
    "RouteName",
    "SIMPLE",
    "TOPIC_MARK",
    "count_hops",
    "heuristic_route",
    "strip_topic_marks",
]
