"""``kgrag bench`` registry entries for Know³ (``know3`` wraps activation, ``know3:<base>`` any corpus
retriever) and the turn distribution (paper Table 5) in the report and its markdown."""

from __future__ import annotations

from test_know3_loop import CORPUS, KGE, _index

from kgrag_plugins.datasets.loaders import Dataset, Question
from kgrag_plugins.eval.bench import DATASET_AWARE, RETRIEVERS, evaluate_retriever, markdown_table
from kgrag_plugins.methods.know3 import Know3Retriever


def test_registry_has_know3_for_every_corpus_retriever() -> None:
    # every LLM-free corpus retriever (translator-llm / -untuned run an LM translator: not wrapped)
    bases = [n for n in RETRIEVERS if not n.startswith(("know3", "translator-llm"))]
    assert "know3:translator-llm" not in RETRIEVERS
    assert {"dense", "bm25", "activation", "frag", "translator"} <= set(bases)  # the loop below checks them
    for b in bases:
        factory, parts, builder = RETRIEVERS[f"know3:{b}"]
        assert builder is not None and "graph_s" in parts and f"know3:{b}" in DATASET_AWARE
    assert RETRIEVERS["know3"][2] == "mentions"


def test_bench_factory_and_turn_distribution() -> None:
    idx = _index()
    know3 = RETRIEVERS["know3"][0](idx, dataset="2wikimultihopqa", theta0=-1e9, kge_kwargs=KGE)
    frag3 = RETRIEVERS["know3:dense"][0](idx, dataset="2wikimultihopqa", kge_kwargs=KGE)
    assert isinstance(know3, Know3Retriever) and know3.name == "know3" and know3.base.name == "activation"
    assert frag3.name == "know3:dense" and frag3.base.name == "dense"
    info = know3.prepare()
    assert info["kge"]["model"] and info["schedule"]["thetas"] == [-1e9] * 3
    qs = [
        Question("q1", "Where was the director of Jaws born?", ["Cincinnati"], ["spielberg"]),
        Question("q2", "Who starred in E.T.?", ["Henry Thomas"], ["thomas", "et"]),
    ]
    res = evaluate_retriever(know3, Dataset("toy", qs, CORPUS), progress=False)
    assert res["turns"] == {"t=0": 0.0, "t=1": 0.0, "t=2": 1.0} and res["turn_counts"]["t=2"] == 2
    assert set(res["component_ms"]) >= {"base", "extract_verify", "query", "knowledge", "filter"}
    md = markdown_table(
        {
            "dataset": "toy",
            "n_questions": 2,
            "corpus_size": len(CORPUS),
            "results": {"know3": {**res, "index_seconds": 0}},
        }
    )
    assert "| retriever | t=0 | t=1 | t=2 |" in md and "| know3 | 0.000 | 0.000 | 1.000 |" in md
