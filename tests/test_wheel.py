"""The wheel and sdist carry what ``kgrag demo`` needs (issue 37): the bundled sample corpus, questions,
KG and benchmark summary, ``py.typed`` and the entry points. Built offline with ``--no-isolation`` (the
dev venv's setuptools) into a temp dir, about 3 s. The install-in-a-fresh-venv check is in docs/setup.md."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("build")

ROOT = Path(__file__).resolve().parents[1]
DATA = sorted(p.name for p in (ROOT / "kgrag_plugins" / "data").iterdir() if p.is_file())


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (ROOT / "build").exists()  # the wheel is built from the unpacked sdist, not in-tree
    return out


def test_the_wheel_carries_the_bundled_data_and_entry_points(dist):
    (wheel,) = dist.glob("kgrag_plugins-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert DATA and {f"kgrag_plugins/data/{n}" for n in DATA} <= names
    assert "kgrag_plugins/py.typed" in names
    assert "kgrag = kgrag_plugins.cli:main" in entry_points
    assert "[kgrag_plugins.adapters]" in entry_points
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "docs/"))]


def test_the_sdist_carries_the_bundled_data(dist):
    (sdist,) = dist.glob("kgrag_plugins-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {f"kgrag_plugins/data/{n}" for n in DATA} <= names


def test_twine_check_passes(dist):
    pytest.importorskip("twine")
    files = [str(p) for p in sorted(dist.iterdir())]
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
