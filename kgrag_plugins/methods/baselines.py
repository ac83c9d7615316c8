"""Baseline passage retrievers: dense (MiniLM over Chroma), BM25, their RRF hybrid, and a PPR graph baseline."""

from __future__ import annotations

import numpy as np

from ..index.store import KnowledgeIndex
from ..types import Evidence, ScoredPassage, note_fallback
from .base import Retriever


class DenseRetriever(Retriever):
    """Cosine similarity between the query and ``title + "\\n" + text`` vectors, via Chroma."""

    name = "dense"
    score_kind = "cosine"

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
    score_kind = "BM25"

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
    score_kind = "fusion rank (RRF)"

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


class PPRRetriever(Retriever):
    """Graph baseline in the style of HippoRAG: personalized PageRank from question entities.

    Question entities are linked by :func:`~kgrag_plugins.index.builders.linking.link_question`
    (NER + name n-grams against the graph). PPR (damping 0.5, HippoRAG's setting, undirected)
    runs from them; a passage scores the PPR mass of the entities it mentions
    (``link_matrix.T @ ppr``). Questions that link to no entity fall back to dense retrieval
    (``trace["fallback"]``, cosine scores).
    Needs a graph linked to the passages (``builder="mentions"`` or ``"parsekg"``).
    """

    name = "ppr"
    score_kind = "PPR mass"

    def __init__(self, index: KnowledgeIndex, *, damping: float = 0.5):
        if index.graph.num_entities == 0:
            raise ValueError("PPRRetriever needs an index with a knowledge graph (build with builder='mentions')")
        self.index = index
        self.damping = damping
        self._dense = DenseRetriever(index)
        self._refresh()

    def _refresh(self) -> None:
        """(Re)build the name index and the passage-entity links from the index's current graph."""
        from ..index.builders.linking import NameIndex

        graph = self.index.graph
        self._names = NameIndex.from_graph(graph)
        self._links = graph.link_matrix().T.tocsr()
        self._pids = graph.passage_ids
        self._pos = self.index.graph_passage_positions()

    def _retrieve(self, query: str, k: int) -> Evidence:
        from ..index.builders.linking import link_question

        seeds = link_question(self.index.graph, query, names=self._names)
        if not seeds:
            ev = self._dense.retrieve(query, k)
            ev.trace.update(retriever=self.name, seeds=[], score_kind=DenseRetriever.score_kind)
            note_fallback(ev.trace, "dense", "no entity found")
            return ev
        ppr = self.index.graph.personalized_pagerank({s: 1.0 for s in seeds}, damping=self.damping)
        scores = self._links @ ppr
        order = [i for i in np.argsort(-scores, kind="stable")[: k * 2] if scores[i] > 0 and self._pos[i] >= 0][:k]
        passages = [ScoredPassage(self.index.passages.get(self._pids[i]), float(scores[i])) for i in order]
        return Evidence(query, passages, trace={"retriever": self.name, "seeds": seeds})
