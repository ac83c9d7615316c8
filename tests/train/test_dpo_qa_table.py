"""benchmarks/dpo_qa_table.py: base vs DPO-tuned ``full`` on the questions both QA journals finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script


def _script():
    return load_script("benchmarks/dpo_qa_table.py")


def _journal(path: Path, n: int, acc: list[float], fallback_at: int = -1, rerun: int = -1) -> Path:
    lines = [{"type": "header", "config": {"n_questions": n, "llm": "x"}}]
    for i in range(n):
        rec = {"type": "question", "row": "full", "i": i, "fallback": i == fallback_at,
               "scores": {"acc": acc[i], "em": 0.0, "f1": acc[i] / 2}}  # fmt: skip
        if i == rerun:  # a rerun question: its last row counts
            lines.append({**rec, "scores": {"acc": 1 - acc[i], "em": 0.0, "f1": 0.0}})
        lines.append(rec)
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_compares_the_first_questions_both_runs_finished(tmp_path, capsys):
    mod = _script()
    base = _journal(tmp_path / "b.jsonl", 4, [1, 0, 0, 1], fallback_at=1, rerun=2)
    tuned = _journal(tmp_path / "t.jsonl", 2, [1, 1])
    out = tmp_path / "qa.json"
    assert mod.main(["popqa", str(base), str(tuned), "--json", str(out)]) == 0
    row = json.loads(out.read_text())[0]
    assert row["questions"] == 2  # the tuned run's 2, not the base run's 4
    assert row["base"] == {"acc": 0.5, "em": 0.0, "f1": 0.25, "fallbacks": 1}
    assert row["dpo"] == {"acc": 1.0, "em": 0.0, "f1": 0.5, "fallbacks": 0}
    assert "| popqa | 2 | 0.50 | 1.00 | +50.0 |" in capsys.readouterr().out


def test_an_unfinished_question_is_a_clear_error(tmp_path):
    mod = _script()
    base = _journal(tmp_path / "b.jsonl", 3, [1, 0, 1])
    lines = base.read_text().splitlines()
    base.write_text("\n".join(lines[:-1]) + "\n")  # question 2 never finished
    tuned = _journal(tmp_path / "t.jsonl", 3, [1, 1, 1])
    with pytest.raises(ValueError, match="not finished"):
        mod.compare("popqa", base, tuned)
    row = mod.compare("popqa", base, tuned, partial=True)  # runs stopped early: the common questions
    assert row["questions"] == 2 and row["of_first"] == 3 and row["base"]["acc"] == 0.5


def test_a_run_extended_by_resume_counts_its_new_limit(tmp_path):
    """A journal whose run was resumed with a larger ``--limit`` (an ``extend`` line) is compared
    on its extended question count."""
    mod = _script()
    base = _journal(tmp_path / "b.jsonl", 4, [1, 0, 0, 1])
    tuned = _journal(tmp_path / "t.jsonl", 2, [1, 1])
    lines = tuned.read_text().splitlines()
    more = [{"type": "extend", "limit": 4, "n_questions": 4}] + [
        {"type": "question", "row": "full", "i": i, "fallback": False, "scores": {"acc": 0.0, "em": 0.0, "f1": 0.0}}
        for i in (2, 3)
    ]
    tuned.write_text("\n".join(lines + [json.dumps(x) for x in more]) + "\n")
    row = mod.compare("popqa", base, tuned)
    assert row["questions"] == row["of_first"] == 4 and row["dpo"]["acc"] == 0.5
