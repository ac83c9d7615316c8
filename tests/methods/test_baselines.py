"""Baseline retrievers: dense, BM25, hybrid (RRF) on the bundled sample corpus."""

import asyncio

import pytest

from kgrag_plugins.methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever
from kgrag_plugins.types import Evidence


@pytest.mark.parametrize("cls", [DenseRetriever, BM25Retriever, HybridRetriever])
def test_contract(cls, sample_index):
    r = cls(sample_index)
    ev = r.retrieve("Which river flows through Warsaw?", 4)
    assert isinstance(ev, Evidence) and ev.query == "Which river flows through Warsaw?"
    assert 0 < len(ev.passages) <= 4 and ev.trace["retriever"] == r.name
    scores = [sp.score for sp in ev.passages]
    assert scores == sorted(scores, reverse=True)
    assert len(set(ev.passage_ids)) == len(ev.passage_ids)
    assert asyncio.run(r.aretrieve("Which river flows through Warsaw?", 4)).passage_ids == ev.passage_ids
    with pytest.raises(ValueError, match="non-empty"):
        r.retrieve("   ")
    with pytest.raises(ValueError, match="k must be"):
        r.retrieve("x", 0)


def test_dense_finds_the_passage_about_the_subject(sample_index):
    ev = DenseRetriever(sample_index).retrieve("Who wrote the libretto of The Magic Flute?", 1)
    assert ev.passages[0].passage.title == "The Magic Flute"
    assert -1.0 <= ev.passages[0].score <= 1.0


def test_hybrid_is_reciprocal_rank_fusion(sample_index):
    q = "composer born in Bonn who wrote a choral symphony"
    h = HybridRetriever(sample_index, rrf_k=60, candidates=20)
    dense = DenseRetriever(sample_index).retrieve(q, 20).passage_ids
    bm25 = BM25Retriever(sample_index).retrieve(q, 20).passage_ids
    expected = {}
    for ranking in (dense, bm25):
        for rank, pid in enumerate(ranking, 1):
            expected[pid] = expected.get(pid, 0.0) + 1 / (60 + rank)
    ev = h.retrieve(q, 5)
    for sp in ev.passages:
        assert sp.score == pytest.approx(expected[sp.passage.id])
    assert ev.passage_ids == sorted(expected, key=lambda p: -expected[p])[:5]


def test_sample_questions_are_answerable_by_retrieval(sample_index, sample_questions):
    """Every sample question has at least one gold passage in the hybrid top 3."""
    r = HybridRetriever(sample_index)
    for q in sample_questions:
        assert set(r.retrieve(q.question, 3).passage_ids) & set(q.supporting_passage_ids), q.question
