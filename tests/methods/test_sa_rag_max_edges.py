"""SA-RAG's subgraph cap is a speed option, off by default (issue 13 item 13).

SA-RAG (§3; docs/methods.md §4(a) step 3) spreads over the whole directed h-hop closure of the
seeds: ``max_edges`` defaults to ``None``; a cap is opt-in, and when it cuts the trace says so.
"""

from __future__ import annotations

import numpy as np
import pytest

from kgrag_plugins.eval.bench import DATASET_AWARE, RETRIEVERS
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.sa_rag import SARAGRetriever
from kgrag_plugins.methods.sa_rag.retriever import SPEED_MAX_EDGES
from kgrag_plugins.types import Entity, Passage

Q = "Q?"


class _Lookup:
    """The query and entity ``A`` on axis 0, every other text on axis 7."""

    name = "test/lookup-max-edges"
    dim = 8

    def embed(self, texts, *, progress=None):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, 0 if t in (Q, "A") else 7] = 1.0
        return out


@pytest.fixture(scope="module")
def ring():
    """A -> B -> C -> D -> A: four triples, all within three directed hops of the seed A."""
    g = KnowledgeGraph()
    for e in "ABCD":
        g.add_entity(Entity(e, e))
    for h, t in ("AB", "BC", "CD", "DA"):
        g.add_triple(h, "to", t)
    return KnowledgeIndex.build([Passage("p", "river text")], None, embedder=_Lookup(), graph=g, progress=False)


def test_sa_rag_max_edges_default_is_the_papers_uncapped_subgraph(ring):
    r = SARAGRetriever(ring, k=1, hops=3)
    assert r.max_edges is None
    sub = r.acquire(Q).trace["subgraph"]
    assert (sub["edges"], sub["reachable_edges"], sub["capped"], sub["max_edges"]) == (4, 4, False, None)
    # the per-dataset paper settings keep the paper's subgraph too
    assert SARAGRetriever.for_dataset("musique", ring).max_edges is None
    assert SARAGRetriever.for_dataset("2wikimultihopqa", ring).max_edges is None


def test_sa_rag_max_edges_cut_is_flagged_in_the_trace(ring):
    trace = SARAGRetriever(ring, k=1, hops=3, max_edges=2).acquire(Q).trace
    assert trace["subgraph"]["capped"] is True and trace["subgraph"]["edges"] == 2
    assert trace["max_edges_cut"] == {"max_edges": 2, "kept_edges": 2, "reachable_edges": 4}
    # a cap that does not cut leaves no flag
    assert "max_edges_cut" not in SARAGRetriever(ring, k=1, hops=3, max_edges=4).acquire(Q).trace
    assert "max_edges_cut" not in SARAGRetriever(ring, k=1, hops=3).acquire(Q).trace


def test_sa_rag_max_edges_bench_entries_name_the_cap(ring):
    paper = RETRIEVERS["sa-rag"][0](ring, dataset="musique")
    assert paper.max_edges is None and paper.name == "sa-rag"
    capped = RETRIEVERS["sa-rag-cap2000"][0](ring, dataset="musique")
    assert capped.max_edges == SPEED_MAX_EDGES == 2000 and capped.name == "sa-rag-cap2000"
    assert (capped.k, capped.hops) == (paper.k, paper.hops) == (3, 4)
    assert {"sa-rag", "sa-rag-cap2000"} <= DATASET_AWARE
