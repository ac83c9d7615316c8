"""docs/embeddings.md's per-retriever table (issue 36 item 1) is the one the paired reports give.

The eight reports are ``kgrag bench`` runs, one per dataset and embedder (torch and the default
int8); ``benchmarks/default_embedder.py --bench-table`` prints the table from them. This test reads
the committed reports, recomputes the table and checks each row stands in the doc, and that the
reports really differ only in the embedder.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import load_script

REPO = Path(__file__).resolve().parents[1]
script = load_script("benchmarks/default_embedder.py")


def test_doc_table_matches_the_reports():
    table = script.bench_table(REPO)
    doc = (REPO / "docs" / "embeddings.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "→" in line]
    moves = [line for line in table.splitlines() if line.startswith("| ") and "↑" in line]
    assert len(rows) >= 7 and len(moves) == len(rows)
    for line in rows + moves:
        assert line in doc, line


def test_moves_count_the_per_question_changes(tmp_path):
    """The second table counts questions whose R@5 rose / fell, with the sign test."""
    folder = tmp_path / Path(script.BENCH_REPORTS).parent
    folder.mkdir(parents=True)

    def report(r5: list[float]) -> dict:
        rows = [{"id": str(i), "recall@5": v} for i, v in enumerate(r5)]
        return {"results": {"dense": {"recall@5": sum(r5) / len(r5), "per_question": rows}}}

    for ds in script.BENCH_DATASETS[:1]:
        for variant, r5 in (("-torch", [0.5, 1.0, 0.0, 0.5]), ("", [1.0, 1.0, 0.5, 0.0])):
            path = tmp_path / script.BENCH_REPORTS.format(variant=variant, dataset=ds)
            path.write_text(json.dumps(report(r5)))
    table = script.bench_table(tmp_path)
    assert "| dense | 0.500 → 0.625 (+12.5) |" in table
    assert "| dense | 2 ↑ 1 ↓ (p 1.00) |" in table


def _assert_same_run_but_the_embedder(files: list[Path]) -> None:
    torch_r, int8_r = (json.loads(f.read_text()) for f in files)
    assert torch_r["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert int8_r["embedder"] == "sentence-transformers/all-MiniLM-L6-v2+onnx-int8-v2"
    assert torch_r["n_questions"] == int8_r["n_questions"] and torch_r["corpus_size"] == int8_r["corpus_size"]
    assert set(torch_r["results"]) == set(int8_r["results"])


def test_reports_differ_only_in_the_embedder():
    paired = 0
    for ds in script.BENCH_DATASETS:
        kg = [REPO / script.BENCH_KG_REPORTS.format(variant=v, dataset=ds) for v in ("-torch", "")]
        if all(f.is_file() for f in kg):  # SA-RAG, FRAG and Know³: the same embedders, the same questions
            _assert_same_run_but_the_embedder(kg)
        files = [REPO / script.BENCH_REPORTS.format(variant=v, dataset=ds) for v in ("-torch", "")]
        assert files[1].is_file(), files[1]  # the default's report exists for every set
        if not files[0].is_file():
            continue
        paired += 1
        _assert_same_run_but_the_embedder(files)
    assert paired >= 2


def test_first_difference_names_the_first_stage_that_parts():
    base = {"seeds": ["a", "b"], "rounds": [["t1"], ["t2"]], "question_top3": ["p1"], "expanded_top6": ["p2"]}
    assert script._first_difference(base, dict(base)) == "same"
    assert script._first_difference(base, {**base, "seeds": ["a", "c"], "rounds": []}) == "seeds"
    assert script._first_difference(base, {**base, "rounds": [["t1"], ["t3"]]}) == "round 1"
    assert script._first_difference(base, {**base, "rounds": [["t1"]]}) == "round 1"  # one run stopped early
    assert script._first_difference(base, {**base, "expanded_top6": ["p3"]}) == "expanded_top6"


def test_kg_infused_paths_report_is_consistent_with_the_paired_reports():
    """The committed path report lists exactly the questions whose kg-infused R@5 moved."""
    paths = json.loads((REPO / "docs/benchmarks/default-embedder-bench/kg-infused-paths.json").read_text())
    for ds, r in paths["datasets"].items():
        before, after = (
            {q["id"]: q["recall@5"] for q in json.loads(f.read_text())["results"]["kg-infused"]["per_question"]}
            for f in (REPO / script.BENCH_REPORTS.format(variant=v, dataset=ds) for v in ("-torch", ""))
        )
        moved = {i for i in before if before[i] != after[i]}
        assert {m["id"] for m in r["moved"]} == moved, ds
        assert sum(r["first_difference"].values()) == r["questions"] == len(before)
