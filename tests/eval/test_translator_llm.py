"""``translator-llm`` in the bench (issue 32 item 2): an LM clue translator inside TranslatorRetriever,
with the share of emitted entities and relations that exist in the KG measured per row. A tiny
random-weight Llama stands in for the trained model (pure plumbing); constrained decoding must be
100 % KG-valid whatever the weights, unconstrained decoding of the same model is not."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_llm import tiny_llama

from kgrag_plugins.eval.bench import RETRIEVERS, run_bench
from kgrag_plugins.eval.translator_llm import KGValidityMeter
from kgrag_plugins.methods.translator.constraints import ConstraintIndex
from kgrag_plugins.methods.translator.decoding import HFConstrainedBackend, clue_prompt


@pytest.fixture(scope="module")
def parsekg_index(tmp_path_factory, sample_corpus):
    from kgrag_plugins.index.store import KnowledgeIndex

    return KnowledgeIndex.build(sample_corpus, tmp_path_factory.mktemp("pkg") / "i", builder="parsekg", progress=False)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, sample_corpus, sample_questions):
    texts = [p.text for p in sample_corpus] + [clue_prompt(q.question) for q in sample_questions]
    model, tok = tiny_llama(texts, vocab_size=500, hidden_size=64, num_heads=1, head_dim=64, max_positions=1024)
    out = tmp_path_factory.mktemp("tiny-translator")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def backends(parsekg_index, tiny_model_dir):
    constrained = HFConstrainedBackend(str(tiny_model_dir), index=parsekg_index, constrained=True)
    free = HFConstrainedBackend(str(tiny_model_dir), index=parsekg_index, constrained=False)
    return constrained, free


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.text(min_size=1, max_size=60))
def test_constrained_output_is_always_in_the_kg(backends, question):
    """Property: whatever the question, every emitted entity is a ParseKG name and every relation
    a substring of one of that entity's hyperrelations."""
    constrained, _ = backends
    meter = KGValidityMeter(constrained, constrained.constraints)
    for name in meter.entities(question, 2):
        meter.relations(question, name, 2)
    report = meter.report()
    assert report["kg_valid_share"] in (None, 1.0), report  # None: nothing emitted
    assert meter.entities_emitted == meter.entities_valid and meter.relations_emitted == meter.relations_valid


def test_unconstrained_decoding_of_the_same_model_is_measured_invalid(backends, sample_questions):
    _, free = backends
    meter = KGValidityMeter(free, free.constraints)
    for q in sample_questions[:4]:
        for name in meter.entities(q.question, 2):
            meter.relations(q.question, name, 2)
    report = meter.report()
    assert meter.entities_emitted > 0 and report["kg_valid_share"] < 1.0  # random weights, no constraint
    assert report["decode_ms"]["p50"] > 0 and report["decode_ms"]["p95"] >= report["decode_ms"]["p50"]


def test_translator_llm_rows_in_a_bench_run(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "cache"))
    assert {"translator-llm", "translator-llm-untuned"} <= set(RETRIEVERS)
    assert not [r for r in RETRIEVERS if r.startswith("know3:translator-llm")]
    out = tmp_path / "r.json"
    report = run_bench(
        "sample",
        ["translator-llm"],
        retriever_opts=[f"translator-llm.model={tiny_model_dir}", "translator-llm.constrained=true,false"],
        cache_dir=tmp_path / "cache",
        progress=False,
        out=out,
    )
    rows = report["results"]
    on, off = (
        rows[f"translator-llm[model={tiny_model_dir},constrained=True]"],
        rows[f"translator-llm[model={tiny_model_dir},constrained=False]"],
    )
    assert on["kg_valid_share"] == 1.0 and on["kg_valid"]["entities"][1] > 0
    assert off["kg_valid_share"] < 1.0
    assert on["builder"] == "parsekg" and len(on["per_question"]) == report["n_questions"]
    assert json.loads(out.read_text()) == report


def test_translator_llm_needs_a_model(parsekg_index):
    with pytest.raises(ValueError, match="translator-llm needs model=.*kgrag train translator"):
        RETRIEVERS["translator-llm"][0](parsekg_index, dataset="sample")
    with pytest.raises(ValueError, match="backend must be hf or vllm"):
        RETRIEVERS["translator-llm-untuned"][0](parsekg_index, dataset="sample", model="x", backend="tgi")
    with pytest.raises(ValueError, match="constrained must be true or false"):
        RETRIEVERS["translator-llm-untuned"][0](parsekg_index, dataset="sample", model="x", constrained="maybe")


def test_meter_counts_against_the_constraint_index(parsekg_index, tiny_model_dir):
    """A scripted backend: one KG name + a valid relation, one invented name + an invented relation."""
    from transformers import AutoTokenizer

    ci = ConstraintIndex.from_index(parsekg_index, AutoTokenizer.from_pretrained(str(tiny_model_dir)))
    name = next(iter(ci.names_by_entity("forward")))
    rel = ci.hyperrelations(name)[0].split()[0]

    class Scripted:
        def entities(self, question, alpha, direction="forward"):
            return [name, "Not An Entity 123"]

        def relations(self, question, entity, beta, direction="forward"):
            return [rel, "made up relation"] if entity == name else ["x"]

    meter = KGValidityMeter(Scripted(), ci)
    for e in meter.entities("q", 2):
        meter.relations("q", e, 2)
    assert meter.report()["kg_valid"] == {"entities": [1, 2], "relations": [1, 3]}
    assert meter.report()["kg_valid_share"] == pytest.approx(2 / 5)
    meter.reset()  # what the bench does after its warm-up question
    assert meter.report() == {
        "kg_valid_share": None,
        "kg_valid": {"entities": [0, 0], "relations": [0, 0]},
        "decode_ms": None,
    }
