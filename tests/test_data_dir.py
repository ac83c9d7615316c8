"""The benchmark data directory: a user cache location by default, one clear line when missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kgrag_plugins.config import data_dir


def test_default_is_the_user_cache_not_the_working_directory(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KGRAG_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert data_dir() == tmp_path / "home" / ".cache" / "kgrag" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "kgrag" / "data"
    monkeypatch.setenv("KGRAG_DATA_DIR", str(tmp_path / "mine"))
    assert data_dir() == tmp_path / "mine"


def test_bench_without_data_says_where_to_put_it_in_one_line(tmp_path: Path) -> None:
    """From any directory, with no KGRAG_DATA_DIR and no --data-dir: exit 2, one line naming the path."""
    sub = tmp_path / "some" / "where"
    sub.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "kgrag_plugins.cli", "bench", "--dataset", "musique", "--limit", "2"]
    r = subprocess.run(cmd, cwd=sub, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    expected = tmp_path / "home" / ".cache" / "kgrag" / "data"
    assert str(expected) in lines[0] and "KGRAG_DATA_DIR" in lines[0] and "--data-dir" in lines[0]
    assert "docs/data.md" in lines[0] and "Traceback" not in r.stderr
