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
    assert len(rows) >= 7
    for line in rows:
        assert line in doc, line


def test_reports_differ_only_in_the_embedder():
    paired = 0
    for ds in script.BENCH_DATASETS:
        files = [REPO / script.BENCH_REPORTS.format(variant=v, dataset=ds) for v in ("-torch", "")]
        assert files[1].is_file(), files[1]  # the default's report exists for every set
        if not files[0].is_file():
            continue
        paired += 1
        torch_r, int8_r = (json.loads(f.read_text()) for f in files)
        assert torch_r["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert int8_r["embedder"] == "sentence-transformers/all-MiniLM-L6-v2+onnx-int8-v2"
        assert torch_r["n_questions"] == int8_r["n_questions"] and torch_r["corpus_size"] == int8_r["corpus_size"]
        assert set(torch_r["results"]) == set(int8_r["results"])
    assert paired >= 2
