"""The headline numbers the docs print, recomputed by the default run (issue 31).

``docs/benchmarks/headline-2wikimultihopqa.json`` is written by one command (every value in it
measured)::

    KGRAG_DATA_DIR=../shared/data kgrag bench --dataset 2wikimultihopqa --limit 25 --slice-corpus \\
        --retrievers dense,activation,sa-rag-cap2000,kg-infused,frag,translator,know3 \\
        --out docs/benchmarks/headline-2wikimultihopqa.json

a fixed slice: the first :data:`SLICE` 2WikiMultihopQA questions and their candidate paragraphs (the
split's own corpus construction at a smaller size, so the indexes build in seconds). The report
carries per-question rows (question id, retrieved passage ids, recall). Each test below runs one
method, LLM-free, on the same slice (indexes built in a temporary directory), computes Recall@5
itself from the retrieved ids and the gold ids, and compares it with the committed rows for the
same questions, recomputed the same way: it fails if the figure moves by more than one point. A
second test ties the committed aggregates to their rows and to the table docs/benchmarks.md prints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kgrag_plugins.datasets.indexes import dataset_index
from kgrag_plugins.datasets.loaders import load_dataset
from kgrag_plugins.eval.bench import DATASET_AWARE, RETRIEVERS

REPO = Path(__file__).resolve().parents[1]
DATASET = "2wikimultihopqa"
REPORT = REPO / "docs" / "benchmarks" / f"headline-{DATASET}.json"
DOC = REPO / "docs" / "benchmarks.md"
SLICE = 25
K = 5
TOLERANCE = 0.01  # one point of Recall@5
#: one per method: activation (KG-Infused / SA-RAG's spreading activation), SA-RAG, KG-Infused RAG,
#: FRAG, KG-Translator, Know³ (its LLM-free KG-verified loop around activation)
METHODS = ("activation", "sa-rag-cap2000", "kg-infused", "frag", "translator", "know3")


def _recall(retrieved: list[str], gold: set[str]) -> float:
    """Recall@K written out here, not imported: the share of gold passages in the first K ids."""
    return len(set(retrieved[:K]) & gold) / len(gold)


@pytest.fixture(scope="module")
def report() -> dict:
    return json.loads(REPORT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def the_slice(data_dir, headline_cache):
    """The slice's questions and corpus; one index per graph builder, built once for the session in
    a temporary directory (conftest's ``headline_cache``)."""
    ds = load_dataset(DATASET, data_dir=data_dir, limit=SLICE, slice_corpus=True)
    cache = headline_cache
    built: dict = {}

    def index_for(builder):
        if builder not in built:
            built[builder], _ = dataset_index(ds, cache_dir=cache, builder=builder, progress=False)
        return built[builder]

    return ds, index_for


def test_the_committed_report_is_the_slice_and_its_aggregates_come_from_its_rows(report, the_slice):
    ds, _ = the_slice
    gold = {q.id: set(q.supporting_passage_ids) for q in ds.questions if q.supporting_passage_ids}
    assert report["dataset"] == DATASET and report["n_questions"] == SLICE == len(ds.questions)
    assert report["corpus_size"] == len(ds.corpus) and report["corpus"] != "whole split"
    doc = DOC.read_text(encoding="utf-8")
    start = doc.index(f"## Recomputed by `make test`: {DATASET}")
    table = doc[start : doc.find("\n## ", start + 1) if "\n## " in doc[start + 1 :] else len(doc)]
    for name in ("dense", *METHODS):
        result = report["results"][name]
        rows = result["per_question"]
        assert [r["id"] for r in rows] == [q.id for q in ds.questions], name
        recalls = [_recall(r["retrieved"], gold[r["id"]]) for r in rows if r["id"] in gold]
        assert len(recalls) == result["n_scored"]
        assert sum(recalls) / len(recalls) == pytest.approx(result["recall@5"], abs=1e-4), name
        # docs/benchmarks.md prints this figure in its "Recomputed by make test" table (R@5 column)
        line = re.search(rf"^\| {re.escape(name)} \|.*$", table, re.M)
        assert line, f"docs/benchmarks.md has no row for {name} in the slice's table"
        assert line.group(0).split("|")[3].strip() == f"{result['recall@5']:.3f}", (name, line.group(0))


@pytest.mark.parametrize("name", METHODS)
def test_a_method_reproduces_its_committed_recall_on_a_fixed_slice(name, the_slice, report):
    ds, index_for = the_slice
    factory, _, builder = RETRIEVERS[name]
    kw = {"dataset": ds.name} if name in DATASET_AWARE else {}
    retriever = factory(index_for(builder), **kw)
    if callable(getattr(retriever, "prepare", None)):
        retriever.prepare()
    committed = {r["id"]: r for r in report["results"][name]["per_question"]}
    ours, theirs, moved = [], [], []
    for q in ds.questions:
        if not q.supporting_passage_ids:
            continue
        gold = set(q.supporting_passage_ids)
        ids = retriever.retrieve(q.question, K).passage_ids
        row = committed[q.id]
        ours.append(_recall(ids, gold))
        theirs.append(_recall(row["retrieved"], gold))
        if ours[-1] != theirs[-1]:
            moved.append((q.id, ids[:K], row["retrieved"]))
    assert len(ours) == SLICE  # every 2Wiki question has gold passages
    now, then = sum(ours) / len(ours), sum(theirs) / len(theirs)
    assert abs(now - then) <= TOLERANCE + 1e-9, (
        f"{name}: Recall@5 on the first {SLICE} {DATASET} questions is {now:.3f}, the committed rows give "
        f"{then:.3f}; questions that moved (id, now, committed): {moved[:5]}"
    )
