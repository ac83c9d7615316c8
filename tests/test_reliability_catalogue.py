"""docs/reliability.md stays true: every test it names exists, and its case count matches its rows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
ROW = re.compile(r"^\| .* \| (tests/\S+\.py)::(\w+) \|$")


def _rows() -> list[tuple[str, str]]:
    return [m.groups() for line in DOC.read_text(encoding="utf-8").splitlines() if (m := ROW.match(line))]


def test_every_catalogued_test_exists():
    rows = _rows()
    assert len(rows) > 50
    missing = []
    for path, name in rows:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if name not in names:
            missing.append(f"{path}::{name}")
    assert missing == []


def test_the_case_count_matches_the_rows():
    m = re.search(r"\*\*(\d+) cases, (\d+) pass\*\*", DOC.read_text(encoding="utf-8"))
    assert m is not None
    assert int(m.group(1)) == int(m.group(2)) == len(_rows())
