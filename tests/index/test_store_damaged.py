"""Damaged index files and a full disk (issue 13 item 7, index-file cases).

Each damaged file gives a one-line :class:`IndexCorruptError` (a ``ValueError``, so the CLI
prints it as one line with rc 2) naming the file or field and the fix; a full disk during a
save gives :class:`IndexWriteError` and leaves the previous generation live and clean.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder

from kgrag_plugins.cli import main
from kgrag_plugins.index import passages as passages_mod
from kgrag_plugins.index.store import IndexCorruptError, IndexWriteError, KnowledgeIndex
from kgrag_plugins.types import Passage

WORDS = ["alder", "birch", "cedar", "dogwood", "elm", "fir", "ginkgo", "hazel"]
CORPUS = [Passage(f"p{i}", f"A passage about the {w} tree.", w.title()) for i, w in enumerate(WORDS)]


@pytest.fixture
def index_dir(tmp_path) -> Path:
    KnowledgeIndex.build(CORPUS, tmp_path / "idx", embedder=HashEmbedder(), progress=False).close()
    return tmp_path / "idx"


def _gen(root: Path) -> Path:
    return root / json.loads((root / "manifest.json").read_text())["generation"]


def _edit_manifest(root: Path, change) -> None:
    m = json.loads((root / "manifest.json").read_text())
    change(m)
    (root / "manifest.json").write_text(json.dumps(m))


DAMAGE = {
    "manifest is []": (
        lambda r: (r / "manifest.json").write_text("[]"),
        r"manifest\.json is corrupt: expected a JSON object",
    ),
    "manifest lacks generation": (
        lambda r: _edit_manifest(r, lambda m: m.pop("generation")),
        r"manifest\.json.*'generation'",
    ),
    "manifest generation escapes": (
        lambda r: _edit_manifest(r, lambda m: m.update(generation="../../etc")),
        r"manifest\.json.*'generation' must name a gen-<hex> directory, found '\.\./\.\./etc'",
    ),
    "manifest embedder not an object": (
        lambda r: _edit_manifest(r, lambda m: m.update(embedder="hash")),
        r"manifest\.json.*'embedder'",
    ),
    "manifest lacks chroma": (lambda r: _edit_manifest(r, lambda m: m.pop("chroma")), r"manifest\.json.*'chroma'"),
    "generation directory missing": (
        lambda r: os.rename(_gen(r), r / "moved-away"),
        r"generation directory gen-[0-9a-f]+ named by manifest\.json is missing",
    ),
    "garbage chroma.sqlite3": (
        lambda r: (_gen(r) / "passages" / "chroma" / "chroma.sqlite3").write_bytes(b"not sqlite " * 200),
        r"chroma\.sqlite3 is not a readable Chroma database",
    ),
    "chroma.sqlite3 missing": (
        lambda r: (_gen(r) / "passages" / "chroma" / "chroma.sqlite3").unlink(),
        r"chroma\.sqlite3 is missing",
    ),
    "vectors.npy has too few rows": (
        lambda r: np.save(_gen(r) / "passages" / "vectors.npy", np.zeros((3, 64), np.float32)),
        r"vectors\.npy has shape \(3, 64\).*holds 8 passages",
    ),
    "vectors.npy has the wrong dim": (
        lambda r: np.save(_gen(r) / "passages" / "vectors.npy", np.zeros((8, 32), np.float32)),
        r"vectors\.npy has 32 columns but the embedder 'test/hash-bow' has dim 64",
    ),
    "vectors.npy is junk": (
        lambda r: (_gen(r) / "passages" / "vectors.npy").write_bytes(b"\x00junk" * 10),
        r"vectors\.npy is not a valid \.npy array",
    ),
    "passages.jsonl has a broken line": (
        lambda r: (_gen(r) / "passages" / "passages.jsonl").open("a").write('{"id": "p9", "text": \n'),
        r"passages\.jsonl line 9 is not a passage record",
    ),
    "passages.jsonl missing": (
        lambda r: (_gen(r) / "passages" / "passages.jsonl").unlink(),
        r"passages\.jsonl is missing",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_index_gives_a_one_line_error_naming_the_file(index_dir, case):
    damage, pattern = DAMAGE[case]
    damage(index_dir)
    with pytest.raises(IndexCorruptError, match=pattern) as err:
        KnowledgeIndex.open(index_dir, embedder=HashEmbedder())
    msg = str(err.value)
    assert isinstance(err.value, ValueError) and "\n" not in msg and len(msg) < 400
    assert "rebuild the index with `kgrag index`" in msg


def test_cli_reports_a_damaged_manifest_in_one_line(index_dir, capsys):
    (index_dir / "manifest.json").write_text("[]")
    assert main(["ask", "--index", str(index_dir), "Which tree?"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kgrag ask: error: ") and "manifest.json is corrupt" in err and "\n" not in err


# --------------------------------------------------------------------------- disk full


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device")


def _fail_vectors_save(monkeypatch):
    real = np.save

    def save(file, arr, *a, **k):
        if str(file).endswith("vectors.npy"):
            _enospc()
        return real(file, arr, *a, **k)

    monkeypatch.setattr(np, "save", save)


def _fail_chroma_add(monkeypatch):
    from chromadb.errors import InternalError

    def add(*_a, **_k):  # what Chroma's Rust/SQLite layer raises on a full disk
        raise InternalError("Database error: error returned from database: (code: 13) database or disk is full")

    monkeypatch.setattr(passages_mod, "_add_batched", add)


def _fail_manifest_fsync(monkeypatch):
    real = os.fsync

    def fsync(fd):
        if ".manifest.json." in os.readlink(f"/proc/self/fd/{fd}"):
            _enospc()
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


FULL_AT = {"vectors.npy": _fail_vectors_save, "chroma add": _fail_chroma_add, "manifest": _fail_manifest_fsync}


@pytest.mark.parametrize("where", list(FULL_AT))
@pytest.mark.parametrize("op", ["add_passages", "build"])
def test_disk_full_keeps_the_previous_generation_live_and_clean(index_dir, monkeypatch, where, op):
    live = KnowledgeIndex.open(index_dir, embedder=HashEmbedder())
    manifest = (index_dir / "manifest.json").read_text()
    entries = sorted(os.listdir(index_dir))
    FULL_AT[where](monkeypatch)
    new = Passage("x", "A passage about the yew tree.", "Yew")
    with pytest.raises(IndexWriteError) as err:
        if op == "add_passages":
            live.add_passages([new], progress=False)
        else:
            KnowledgeIndex.build(CORPUS + [new], index_dir, embedder=HashEmbedder(), progress=False)
    monkeypatch.undo()
    e = err.value
    assert e.errno == errno.ENOSPC and isinstance(e, OSError) and isinstance(e, ValueError)
    assert "no space left" in str(e) and "free disk space and retry" in str(e) and "\n" not in str(e)
    # nothing changed: same manifest, same entries (no half-written generation or temp file)
    assert (index_dir / "manifest.json").read_text() == manifest
    assert sorted(os.listdir(index_dir)) == entries
    assert live.passages.ids == [p.id for p in CORPUS]
    again = KnowledgeIndex.open(index_dir, embedder=HashEmbedder())
    assert again.passages.ids == [p.id for p in CORPUS]
    hit = again.passages.dense_search(again.embedder.embed([CORPUS[3].embed_text])[0], 1)[0]
    assert hit[0].id == "p3" and hit[1] > 0.999
    # once space is back the same write succeeds
    live.add_passages([new], progress=False)
    assert KnowledgeIndex.open(index_dir, embedder=HashEmbedder()).passages.ids[-1] == "x"
