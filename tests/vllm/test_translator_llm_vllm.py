"""``translator-llm`` with ``backend=vllm`` (issue 32 item 5): the bench retriever starts its own
managed ``vllm serve`` with our KG-Translator logits processor, every emitted entity and relation is
in the KG (the meter says 1.0), decoding is timed per question, and ``close()`` stops the server
it started. Marker ``vllm`` (make test-vllm); the random tiny Llama of tests/vllm_lane.py."""

from __future__ import annotations

import os

import pytest

from kgrag_plugins.eval.translator_llm import translator_llm

pytestmark = pytest.mark.vllm


def test_translator_llm_on_vllm_is_kg_valid_and_stops_its_server(kg_index, tiny_model, question_templates):
    path, _tok = tiny_model
    retriever = translator_llm(kg_index, model=str(path), backend="vllm", constrained="true", alpha=2, beta=2)
    server = retriever.close.__self__  # the managed server this retriever started
    pid = server.pid
    try:
        assert server.running() and pid is not None
        names = [kg_index.graph.name_of(e) for e in kg_index.parsekg.head_entities()][:3]
        for i, name in enumerate(names):
            retriever.retrieve(question_templates[i % len(question_templates)].format(name), k=3)
        report = retriever.bench_extras()
        ents, rels = report["kg_valid"]["entities"], report["kg_valid"]["relations"]
        assert ents[1] > 0, "the constrained decoder emitted no entity at all"
        assert ents[0] == ents[1] and rels[0] == rels[1] and report["kg_valid_share"] == 1.0
        assert report["decode_ms"]["p50"] > 0 and report["decode_ms"]["p95"] >= report["decode_ms"]["p50"]
    finally:
        retriever.close()
    assert not server.running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
