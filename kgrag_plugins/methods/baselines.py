"""Baseline passage retrievers: dense (MiniLM over Chroma), BM25, and their RRF hybrid."""

from __future__ import annotations

from ..index.store import KnowledgeIndex
from ..types import Evidence, ScoredPassage
from .base import Retriever


class DenseRetriever(Retriever):
    """Cosine similarity between the query and ``title + "\\n" + text`` vectors, via Chroma."""

    name = "dense"

    def __init__(self, index: KnowledgeIndex, *, exact: bool = False):
        self.index = index
        self.exact = exact

    def _retrieve(self, query: str, k: int) -> Evidence:
        q = self.index.embed_query(query)
        search = self.index.passages.exact_dense_search if self.exact else self.index.passages.dense_search
        hits = search(q, k)
        return Evidence(query, [ScoredPassage(p, s) for p, s in hits], trace={"retriever": self.name})


class BM25Retriever(Retriever):
    """Okapi BM25 (bm25s, English stopwords, Snowball stemming) over ``title + text``."""

    name = "bm25"

    def __init__(self, index: KnowledgeIndex):
        self.index = index

    def _retrieve(self, query: str, k: int) -> Evidence:
        hits = self.index.passages.bm25_search(query, k)
        return Evidence(query, [ScoredPassage(p, s) for p, s in hits], trace={"retriever": self.name})


class HybridRetriever(Retriever):
    """Reciprocal-rank fusion of dense and BM25 rankings (Cormack et al., 2009).

    ``score(p) = sum over rankings of 1 / (rrf_k + rank(p))`` with ranks from 1, over the top
    ``candidates`` of each ranking. Ties keep the dense order.
    """

    name = "hybrid"

    def __init__(self, index: KnowledgeIndex, *, rrf_k: int = 60, candidates: int = 50):
        self.index = index
        self.rrf_k = rrf_k
        self.candidates = candidates
        self._dense = DenseRetriever(index)
        self._bm25 = BM25Retriever(index)

    def _retrieve(self, query: str, k: int) -> Evidence:
        n = max(k, self.candidates)
        rankings = [self._dense.retrieve(query, n).passages, self._bm25.retrieve(query, n).passages]
        fused: dict[str, float] = {}
        first: dict[str, ScoredPassage] = {}
        for ranking in rankings:
            for rank, sp in enumerate(ranking, 1):
                fused[sp.passage.id] = fused.get(sp.passage.id, 0.0) + 1.0 / (self.rrf_k + rank)
                first.setdefault(sp.passage.id, sp)
        order = sorted(fused, key=lambda pid: -fused[pid])[:k]
        passages = [ScoredPassage(first[pid].passage, fused[pid]) for pid in order]
        return Evidence(query, passages, trace={"retriever": self.name, "rrf_k": self.rrf_k})
