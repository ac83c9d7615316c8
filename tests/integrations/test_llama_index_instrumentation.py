"""LlamaIndex instrumentation (issue 37 item 1): one query per LLM-free method produces a span tree
``<Class>.retrieve`` -> ``<Class>._retrieve`` -> ``kgrag.<method>.<step>`` on the root dispatcher,
with a ``KGRAGStepEvent`` (count, ms) inside each step span. Handlers are removed after each test."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import HashEmbedder
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.integrations.llama_index import (
    ClueTranslationRetriever,
    HopAwareRetriever,
    KGEVerifierPostprocessor,
    KGRAGRetrievalEvent,
    KGRAGStepEvent,
    Know3QueryEngine,
    SpreadingActivationRetriever,
)
from kgrag_plugins.integrations.llama_index.instrumentation import trace_steps
from kgrag_plugins.types import Passage

Q = "Which city was Marie Curie born in?"

PASSAGES = [
    Passage("p1", "Marie Curie was born in Warsaw. Marie Curie won the Nobel Prize in Physics in 1903.", "Marie Curie"),
    Passage("p2", "Warsaw is the capital of Poland. Warsaw lies on the Vistula River.", "Warsaw"),
    Passage("p3", "Albert Einstein was born in Ulm. Albert Einstein developed relativity.", "Albert Einstein"),
    Passage("p4", "Ulm is a city in Germany on the Danube.", "Ulm"),
]
KGE = {"epochs": 2, "dim": 16, "negatives": 16, "batch_size": 64, "progress": False}


class _Events(BaseEventHandler):
    events: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "_Events"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def handlers():
    root = get_dispatcher()
    events, spans = _Events(events=[]), SimpleSpanHandler()
    root.add_event_handler(events)
    root.add_span_handler(spans)
    try:
        yield events, spans
    finally:
        root.event_handlers = [h for h in root.event_handlers if h is not events]
        root.span_handlers = [h for h in root.span_handlers if h is not spans]


def _name(span_id: str) -> str:
    return span_id.rsplit("-", 5)[0]  # "<Class>.<method>-<uuid4>" -> "<Class>.<method>"


def _check_tree(
    events: _Events, spans: SimpleSpanHandler, cls: str, method: str, steps: list[str], entry: str = "retrieve"
) -> dict:
    """The span tree ``cls.retrieve > cls._retrieve > kgrag.method.<step>`` and one step event per
    step span; returns {step: event}."""
    done = {s.id_: s for s in spans.completed_spans}
    assert not spans.dropped_spans
    retrieve = [s for s in done.values() if _name(s.id_) == f"{cls}.{entry}"]
    inner = [s for s in done.values() if _name(s.id_) == f"{cls}._{entry}"]
    assert len(retrieve) == 1 and len(inner) == 1
    assert inner[0].parent_id == retrieve[0].id_
    kids = sorted((s for s in done.values() if s.parent_id == inner[0].id_), key=lambda s: s.start_time)
    assert [_name(s.id_) for s in kids] == [f"kgrag.{method}.{st}" for st in steps]
    by_step = {e.step: e for e in events.events if isinstance(e, KGRAGStepEvent)}
    assert list(by_step) == steps
    for s in kids:  # each event was dispatched inside its step span
        assert by_step[_name(s.id_).rsplit(".", 1)[1]].span_id == s.id_
    (end,) = [e for e in events.events if isinstance(e, KGRAGRetrievalEvent)]
    assert end.method == method and end.steps == steps and end.span_id == inner[0].id_ and end.passages >= 1
    return by_step


def test_activation_in_a_query_engine(handlers, sample_index):
    events, spans = handlers
    retriever = SpreadingActivationRetriever(sample_index, variant="activation", similarity_top_k=3)
    RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(Q)
    ev = _check_tree(events, spans, "SpreadingActivationRetriever", "activation", ["seed", "spread"])
    assert ev["seed"].count == len(retriever.last_trace["seeds"]) >= 1
    assert ev["spread"].count == len(retriever.last_trace["activated"]) >= 1
    # the retriever spans sit under the query engine's query span
    done = {s.id_: s for s in spans.completed_spans}
    (ret,) = [s for s in done.values() if _name(s.id_) == "SpreadingActivationRetriever.retrieve"]
    chain, p = [], ret.parent_id
    while p is not None:
        chain.append(_name(p))
        p = done[p].parent_id
    assert "RetrieverQueryEngine.query" in chain


def test_async_retrieve_has_the_same_tree(handlers, sample_index):
    events, spans = handlers
    retriever = SpreadingActivationRetriever(sample_index, variant="activation", similarity_top_k=3)
    asyncio.run(retriever.aretrieve(Q))
    _check_tree(events, spans, "SpreadingActivationRetriever", "activation", ["seed", "spread"], entry="aretrieve")


@pytest.mark.parametrize("variant,method", [("sa_rag", "sa-rag"), ("kg_infused", "kg-infused")])
def test_spreading_variants(handlers, sample_index, variant, method):
    events, spans = handlers
    retriever = SpreadingActivationRetriever(sample_index, variant=variant, similarity_top_k=3)
    retriever.retrieve(Q)
    ev = _check_tree(events, spans, "SpreadingActivationRetriever", method, ["seed", "spread"])
    assert ev["seed"].count >= 1 and ev["spread"].count >= 1 and ev["spread"].data["rounds"] >= 1
    if method == "sa-rag":  # SA-RAG times its steps
        assert ev["seed"].ms is not None and ev["spread"].ms is not None


def test_frag_route(handlers, sample_index):
    events, spans = handlers
    retriever = HopAwareRetriever(sample_index, k=3)
    retriever.retrieve("Which city was [Marie Curie] born in?")
    ev = _check_tree(events, spans, "HopAwareRetriever", "frag", ["seed", "route", "paths"])
    assert ev["route"].data["route"] == retriever.last_route in ("simple", "complex")
    assert ev["seed"].count == len(retriever.last_trace["topic_entities"]) >= 1
    assert ev["paths"].count >= 1 and ev["route"].ms is not None


def test_translator_clues(handlers, sample_index, tmp_path):
    index = KnowledgeIndex.build(
        PASSAGES, tmp_path / "index", builder="parsekg", embedder=sample_index.embedder, progress=False
    )
    events, spans = handlers
    retriever = ClueTranslationRetriever(index, similarity_top_k=2)
    retriever.retrieve("Where was Marie Curie born?")
    ev = _check_tree(events, spans, "ClueTranslationRetriever", "translator", ["translate"])
    assert ev["translate"].count == len(retriever.last_clues) >= 1
    assert ev["translate"].data["direction"] == retriever.last_direction
    assert ev["translate"].ms is not None


def test_know3_verify(handlers):
    index = KnowledgeIndex.build(PASSAGES, None, embedder=HashEmbedder(dim=256), builder="mentions", progress=False)
    events, spans = handlers
    resp = Know3QueryEngine(index, k=2, theta0=-1e9, method="raw", kge_kwargs=KGE).query(Q)
    done = {s.id_: s for s in spans.completed_spans}
    (inner,) = [s for s in done.values() if _name(s.id_) == "Know3QueryEngine._query"]
    assert _name(inner.parent_id) == "Know3QueryEngine.query"
    kids = sorted((s for s in done.values() if s.parent_id == inner.id_), key=lambda s: s.start_time)
    assert [_name(s.id_) for s in kids] == ["kgrag.activation.seed", "kgrag.activation.spread", "kgrag.know3.verify"]
    steps = [(e.method, e.step) for e in events.events if isinstance(e, KGRAGStepEvent)]
    assert steps == [("activation", "seed"), ("activation", "spread"), ("know3", "verify")]
    (verify,) = [e for e in events.events if isinstance(e, KGRAGStepEvent) and e.step == "verify"]
    turns = resp.metadata["know3"]["turns"]
    assert verify.count == len(turns) and verify.data["rejected"] == len(turns) - 1  # nothing verifies: runs to T
    assert verify.data["forced"] == 1 and verify.ms is not None
    # the node postprocessor reports its own verify step (accept everything: θ = +inf)
    post = KGEVerifierPostprocessor(index, theta0=1e9, method="raw", kge_kwargs=KGE)
    kept = post.postprocess_nodes(resp.source_nodes, query_str=Q)
    (check,) = [e for e in events.events if isinstance(e, KGRAGStepEvent) and e.method == "kge-verifier"]
    assert check.step == "verify" and check.count == len(resp.source_nodes)
    assert check.data["accepted"] == len(kept) and check.data["rejected"] == 0


def test_trace_steps_is_framework_free_and_tolerant():
    assert trace_steps(None) == [] and trace_steps({"score_kind": "cosine"}) == []
    (seed,) = trace_steps({"seeds": ["a", "b"], "timings_ms": {"embed_and_seed_ms": 1.5}}, "m")
    assert seed == {"method": "m", "step": "seed", "count": 2, "ms": 1.5, "data": {}}
