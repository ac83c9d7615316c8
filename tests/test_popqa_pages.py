"""benchmarks/popqa_pages.py: which PopQA gold page each retriever finds, and the reader's Acc split
by whether activation adds the answer page (docs/activation.md)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import load_script

script = load_script("benchmarks/popqa_pages.py")


def _q(i: str) -> SimpleNamespace:
    return SimpleNamespace(id=i, supporting_passage_ids=[f"subj-{i}", f"ans-{i}"])


QUESTIONS = [_q("a"), _q("b"), _q("c"), _q("d")]
TOPS = {
    # dense: the subject page first on a, b, c; on d only in place 4; never the answer page
    "dense": {
        "a": ["subj-a", "x", "y"],
        "b": ["subj-b", "x"],
        "c": ["subj-c"],
        "d": ["x", "y", "z", "subj-d"],
    },
    # activation: adds the answer page on a and b, not on c or d
    "activation": {
        "a": ["subj-a", "ans-a"],
        "b": ["subj-b", "x", "ans-b"],
        "c": ["subj-c", "x"],
        "d": ["subj-d"],
    },
}


def test_page_table_counts_each_page():
    table = script.page_table(QUESTIONS, TOPS)
    assert "| dense | 0.750 | 1.000 | 0.000 |" in table
    assert "| activation | 1.000 | 1.000 | 0.500 |" in table


def _journal(tmp_path, dense: dict[str, float], act: dict[str, float]):
    path = tmp_path / "j.jsonl"
    lines = [{"type": "header"}]
    for row, accs in (("vanilla-rag", dense), ("vanilla-rag:activation", act)):
        lines += [{"type": "question", "row": row, "id": i, "scores": {"acc": a}} for i, a in accs.items()]
    lines.append({"type": "question", "row": "no-retrieval", "id": "a", "scores": {"acc": 1.0}})  # another row: ignored
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_reader_table_splits_by_the_added_answer_page(tmp_path):
    journal = _journal(tmp_path, {"a": 0.0, "b": 1.0, "c": 0.0, "d": 1.0}, {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0})
    table = script.reader_table(QUESTIONS, TOPS, journal)
    # a, b gain the answer page: dense 0.5, activation 1.0, one better (a), none worse
    assert "| activation's top 6 adds the answer page | 2 | 0.50 | 1.00 | 1 / 0 (1.00) |" in table
    # c, d: dense 0.5, activation 0.5, c better, d worse
    assert "| the rest | 2 | 0.50 | 0.50 | 1 / 1 (1.00) |" in table


def test_reader_table_needs_both_rows(tmp_path):
    journal = _journal(tmp_path, {"a": 1.0}, {})
    with pytest.raises(SystemExit, match="no question has both rows"):
        script.reader_table(QUESTIONS, TOPS, journal)
