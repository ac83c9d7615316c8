"""Bench plumbing for KG-Translator: registry entry, --retriever-opt sweeps, component table."""

from __future__ import annotations

import pytest

from kgrag_plugins.eval.bench import (
    DATASET_AWARE,
    RETRIEVERS,
    _opt_grid,
    markdown_table,
    parse_retriever_opts,
)
from kgrag_plugins.methods.translator import TranslatorRetriever


def test_translator_registered_with_parsekg_builder():
    factory, _parts, builder = RETRIEVERS["translator"]
    assert factory is TranslatorRetriever and builder == "parsekg"
    assert "translator" in DATASET_AWARE


def test_translator_retriever_opt_parsing_and_grid():
    opts = parse_retriever_opts(["translator.alpha=1,3,5", "translator.beta=1,3", "translator.bridge=true"])
    assert opts == {"translator": {"alpha": [1, 3, 5], "beta": [1, 3], "bridge": [True]}}
    grid = _opt_grid(opts["translator"])
    assert len(grid) == 6 and {"alpha": 5, "beta": 3, "bridge": True} in grid
    assert _opt_grid({}) == [{}]
    for bad in ["translator.alpha", "alpha=1", "translator.=1"]:
        with pytest.raises(ValueError, match="RETRIEVER.OPTION"):
            parse_retriever_opts([bad])


def test_translator_component_latency_table():
    r = {
        "recall@2": 0.5,
        "recall@5": 0.6,
        "answer_recall@5": 0.4,
        "latency_ms": {"p50": 10.0, "p95": 20.0},
        "index_seconds": 1.0,
    }
    report = {
        "dataset": "x",
        "n_questions": 2,
        "corpus_size": 3,
        "results": {"dense": r, "translator[alpha=1]": {**r, "component_ms": {"ner": 3.0, "tracing": 0.5}}},
    }
    md = markdown_table(report)
    assert "| retriever | ner | tracing |" in md and "| translator[alpha=1] | 3.0 | 0.5 |" in md
