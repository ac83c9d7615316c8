"""docs/benchmarks.md is generated from docs/benchmarks/*.json by benchmarks/benchmarks_page.py."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _page():
    return load_script("benchmarks/benchmarks_page.py")


def test_benchmarks_page_is_in_sync_with_the_reports():
    page = _page()
    assert page.TARGET.read_text() == page.build(), "regenerate: python benchmarks/benchmarks_page.py"


def test_readme_benchmark_table_is_the_generated_one():
    page = _page()
    readme = page.README.read_text()
    assert page.readme_text(readme) == readme, "regenerate: python benchmarks/benchmarks_page.py"
    table = page.glance_table()
    assert table.startswith("| retriever |") and "| dense |" in table and "| activation |" in table


def _report(path: Path, dataset: str, results: dict) -> None:
    path.write_text(json.dumps({"dataset": dataset, "results": results}))


def _r(r5: float, p50: float, r2: float = 0.1) -> dict:
    return {"recall@2": r2, "recall@5": r5, "latency_ms": {"p50": p50, "p95": p50}, "index_seconds": 7.0}


def test_page_rows_deltas_ratios_and_disagreement(tmp_path):
    page = _page()
    _report(tmp_path / "a.json", "musique", {"dense": _r(0.5, 10.0), "x": _r(0.62, 25.0)})
    _report(tmp_path / "b.json", "musique", {"dense": _r(0.5, 99.0), "x": _r(0.61, 1.0), "y": _r(0.4, 5.0)})
    _report(tmp_path / "c.json", "popqa", {"translator[fusion=dense-first]": _r(0.7, 3.0)})
    (tmp_path / "broken.json").write_text("{not json")
    text = page.build(tmp_path)
    # latency and its ratio come from the first report where the retriever ran beside dense
    assert "| x | 0.100 | 0.620 | +12.0 | 25.0 | 2.50 | 7 | a.json |" in text
    assert "| y | 0.100 | 0.400 | -10.0 | 5.0 | 0.05 | 7 | b.json |" in text
    # recall disagreeing between reports is shown, not hidden
    assert "WARNING: x: R@5 0.62 in an earlier report, 0.61 in b.json" in text
    # no dense beside it: no ratio, no delta; the default option row is listed as the retriever
    assert "| translator[fusion=dense-first] | 0.100 | 0.700 | — | — | — | — | — |" in text
    assert "| translator | — | — | — | 0.700 |" in text


def test_kgqa_table_shows_the_kb_ceiling_when_the_report_has_it(tmp_path):
    page = _page()
    hop = {"1": {"hits@1": 0.9}, "2": {"hits@1": 0.8}}
    frag = {"hits@1": 0.85, "by_hops": hop, "latency_ms": {"p50": 40.0}}
    ceiling = {"overall": 0.99, "by_hops": {"1": 0.97, "2": 1.0}, "below_1": 3, "unlabelled": 0}
    (tmp_path / "new.json").write_text(
        json.dumps({"dataset": "metaqa", "results": {"frag": frag}, "hits@1_ceiling": ceiling})
    )
    (tmp_path / "old.json").write_text(json.dumps({"dataset": "metaqa", "results": {"frag": frag}}))
    text = page.build(tmp_path)
    assert text.count("| frag | 0.900 | 0.800 | 0.850 | 40.0 |") == 2
    assert text.count("| *KB ceiling* | 0.970 | 1.000 | 0.990 | |") == 1  # only the report that has it
    assert text.index("## metaqa (new.json)") < text.index("*KB ceiling*") < text.index("## metaqa (old.json)")


def test_kgqa_ceiling_counts_the_questions_no_chain_answers_as_misses(tmp_path):
    """On an incomplete KB the ceiling leaves out the questions no chain answers; the row counts
    them as misses per hop (and says so), or names them when the report predates the per-hop count."""
    page = _page()
    hop = {"1": {"hits@1": 0.6, "n": 10}, "2": {"hits@1": 0.5, "n": 20}}
    frag = {"hits@1": 0.53, "by_hops": hop, "latency_ms": {"p50": 40.0}}
    ceiling = {"overall": 0.9, "by_hops": {"1": 1.0, "2": 0.8}, "unlabelled": 12,
               "unlabelled_by_hops": {"1": 2, "2": 10}}  # fmt: skip
    (tmp_path / "half.json").write_text(
        json.dumps({"dataset": "metaqa", "results": {"frag": frag}, "hits@1_ceiling": ceiling})
    )
    text = page.build(tmp_path)
    # 1-hop: 1.0 x 8/10; 2-hop: 0.8 x 10/20; overall (8 + 8) / 30
    assert "| *KB ceiling (12 of 30 questions no chain answers: misses)* | 0.800 | 0.400 | 0.533 | |" in text
    del ceiling["unlabelled_by_hops"]
    (tmp_path / "half.json").write_text(
        json.dumps({"dataset": "metaqa", "results": {"frag": frag}, "hits@1_ceiling": ceiling})
    )
    assert "| *KB ceiling, 12 questions no chain answers left out* | 1.000 | 0.800 | 0.900 | |" in page.build(tmp_path)
