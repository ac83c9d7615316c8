"""Several writers and readers on one index directory (issue 13 items 1 and 2).

Writers and the killed writer are separate OS processes (``subprocess``: never fork a process
that has loaded Chroma/torch); they use ``HashEmbedder`` to stay fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT, HashEmbedder

from kgrag_plugins.index.errors import IndexLockedError
from kgrag_plugins.index.lock import WriterLock
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.types import Passage

TREES = ["alder", "birch", "cedar", "dogwood", "elm", "fir"]
BASE = [Passage(f"base{i}", f"Base passage on the {w} near rivers.", f"Base {w}") for i, w in enumerate(TREES)]


def _build(path: Path) -> KnowledgeIndex:
    return KnowledgeIndex.build(BASE, path, embedder=HashEmbedder(), progress=False)


def _spawn(script: str, **env: str) -> subprocess.Popen:
    code = "import sys; sys.path.insert(0, 'tests')\n" + textwrap.dedent(script)
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


WRITER = """
    import json
    from conftest import HashEmbedder
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.types import Passage
    path, wid, n, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    index = KnowledgeIndex.open(path, embedder=HashEmbedder())  # opened once: goes stale at once
    with open(log, "a") as acks:
        for i in range(n):
            pid = f"{wid}-{i}"
            new = Passage(pid, f"writer {wid} passage {i} words mark{wid}n{i}", f"T {pid}")
            index.add_passages([new], progress=False)
            acks.write(pid + "\\n")  # acknowledged: add_passages returned
            acks.flush()
"""


def _writers(path: Path, tmp: Path, writers: int, adds: int) -> tuple[list[subprocess.Popen], list[Path]]:
    procs, logs = [], []
    for w in range(writers):
        log = tmp / f"acks-{w}.txt"
        logs.append(log)
        code = "import sys; sys.path.insert(0, 'tests')\n" + textwrap.dedent(WRITER)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code, str(path), f"w{w}", str(adds), str(log)],
                cwd=REPO_ROOT,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs, logs


def _finish(procs: list[subprocess.Popen], timeout: float = 240) -> None:
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-2000:]


def _acked(logs: list[Path]) -> list[str]:
    return [line for log in logs if log.exists() for line in log.read_text().split()]


def _gens(path: Path) -> list[str]:
    return sorted(d.name for d in path.glob("gen-*"))


def test_four_concurrent_writers_lose_no_acknowledged_add(tmp_path):
    """4 processes x 25 adds, each on an index object opened before the others wrote."""
    path = tmp_path / "idx"
    _build(path)
    procs, logs = _writers(path, tmp_path, writers=4, adds=25)
    _finish(procs)
    acked = _acked(logs)
    assert len(acked) == 100
    final = KnowledgeIndex.open(path, embedder=HashEmbedder())
    ids = final.passages.ids
    assert sorted(ids) == sorted([p.id for p in BASE] + acked)  # 0 lost, none duplicated
    assert final.manifest["counts"]["passages"] == len(final.passages.vectors) == 106
    # every passage is searchable in Chroma, BM25 and the numpy vectors of the final generation
    q = final.embed_query("writer w3 passage 24 words")
    assert final.passages.dense_search(q, 1)[0][0].id == "w3-24"
    assert final.passages.bm25_search("markw2n7", 1)[0][0].id == "w2-7"
    row = final.passages.vectors[final.passages.position("w1-0")]
    np.testing.assert_allclose(row, final.embedder.embed([final.passages.get("w1-0").embed_text])[0], atol=1e-6)
    final.close()
    assert _gens(path) == [final.manifest["generation"]]  # superseded generations were deleted


def _reader_loop(path: Path, writer: subprocess.Popen, min_opens: int) -> dict[str, int]:
    """Open the index again and again while ``writer`` runs; check each open is consistent."""
    emb = HashEmbedder()
    stats = {"opens": 0, "opens_during_writes": 0, "failures": 0, "generations": 0}
    seen: set[str] = set()
    held = None
    errors = []
    while writer.poll() is None or stats["opens"] < min_opens:
        stats["opens_during_writes"] += writer.poll() is None
        try:
            idx = KnowledgeIndex.open(path, embedder=emb)
            assert idx.manifest["counts"]["passages"] == len(idx.passages) == len(idx.passages.vectors)
            assert [p.id for p in BASE] == idx.passages.ids[: len(BASE)]
            seen.add(idx.manifest["generation"])
            if held is not None:  # the previous open still holds its generation, and it answers
                assert (held.path / held.manifest["generation"]).is_dir()
                last = held.passages.at(len(held.passages) - 1)
                hit = held.passages.dense_search(held.embedder.embed([last.embed_text])[0], 1)
                assert hit[0][1] > 0.999  # Chroma of the held generation still answers
                held.close()
            held = idx
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            stats["failures"] += 1
            errors.append(f"{type(e).__name__}: {e}")
        stats["opens"] += 1
    if held is not None:
        held.close()
    stats["generations"] = len(seen)
    assert not errors, f"{len(errors)} of {stats['opens']} opens failed, e.g. {errors[:3]}"
    return stats


def test_readers_opening_during_writes_never_fail(tmp_path):
    """A reader loop beside a writer loop: every open succeeds and is internally consistent."""
    path = tmp_path / "idx"
    _build(path)
    min_opens = int(os.environ.get("KGRAG_TEST_READER_OPENS", "300"))
    procs, logs = _writers(path, tmp_path, writers=1, adds=int(os.environ.get("KGRAG_TEST_READER_ADDS", "40")))
    stats = _reader_loop(path, procs[0], min_opens)
    _finish(procs)
    print(f"reader stats: {json.dumps(stats)}")
    assert stats["failures"] == 0 and stats["opens"] >= min_opens
    assert stats["generations"] > 3  # the reader really saw the writer's generations switch
    assert len(KnowledgeIndex.open(path, embedder=HashEmbedder()).passages) == len(BASE) + len(_acked(logs))


def test_stale_index_objects_merge_their_adds_and_deletes(tmp_path):
    path = tmp_path / "idx"
    _build(path)
    a = KnowledgeIndex.open(path, embedder=HashEmbedder())
    b = KnowledgeIndex.open(path, embedder=HashEmbedder())
    a.add_passages([Passage("x", "Xylophones in Oslo.", "X")], progress=False)
    b.add_passages([Passage("y", "Yaks in Lhasa.", "Y")], progress=False)  # b was opened before a's add
    assert b.passages.ids == [p.id for p in BASE] + ["x", "y"]  # b now shows the merged state
    a.delete_passages(["base0"], progress=False)  # a is stale too: y survives
    final = KnowledgeIndex.open(path, embedder=HashEmbedder())
    assert final.passages.ids == [p.id for p in BASE[1:]] + ["x", "y"]
    assert a.passages.ids == final.passages.ids
    with pytest.raises(ValueError, match=r"already in the index: \['x'\]"):  # checked against the newest state
        b.add_passages([Passage("x", "Another x.", "X2")], progress=False)
    for idx in (a, b, final):
        idx.close()


def test_a_reader_keeps_its_generation_until_it_closes(tmp_path):
    path = tmp_path / "idx"
    writer = _build(path)
    reader = KnowledgeIndex.open(path, embedder=HashEmbedder())
    old = reader.manifest["generation"]
    writer.add_passages([Passage("x", "Xylophones in Oslo.", "X")], progress=False)
    assert _gens(path) == sorted([old, writer.manifest["generation"]])  # still leased by reader
    hit = reader.passages.dense_search(reader.embedder.embed([BASE[2].embed_text])[0], 1)[0]
    assert hit[1] > 0.999  # its Chroma still answers
    reader.close()
    writer.add_passages([Passage("y", "Yaks in Lhasa.", "Y")], progress=False)
    assert _gens(path) == [writer.manifest["generation"]]  # released: removed by the next write


HOLDER = """
    import time
    from conftest import HashEmbedder
    from kgrag_plugins.index import passages as passages_mod
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.types import Passage
    real = passages_mod.PassageStore.create.__func__
    def slow_create(cls, *a, **k):
        store = real(cls, *a, **k)
        print("writing", flush=True)  # holds the writer lock, new generation half written
        time.sleep(120)
        return store
    passages_mod.PassageStore.create = classmethod(slow_create)
    index = KnowledgeIndex.open(sys.argv[1], embedder=HashEmbedder())
    index.add_passages([Passage("doomed", "never acknowledged", "D")], progress=False)
"""


def test_a_writer_killed_while_holding_the_lock_does_not_block_the_next(tmp_path):
    path = tmp_path / "idx"
    _build(path).close()
    manifest = (path / "manifest.json").read_text()
    code = "import sys; sys.path.insert(0, 'tests')\n" + textwrap.dedent(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    try:
        assert holder.stdout.readline().strip() == "writing", holder.stderr.read()[-2000:]
        index = KnowledgeIndex.open(path, embedder=HashEmbedder())  # readers are not blocked
        # while it lives, a second writer waits, then gets a one-line error naming the lock and holder
        with pytest.raises(IndexLockedError) as err:
            with WriterLock(path, timeout=0.5):
                pass
        msg = str(err.value)
        assert str(path / ".lock") in msg and f"process {holder.pid}" in msg and "\n" not in msg
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    assert len(_gens(path)) == 2  # the killed writer's half-written generation
    assert (path / "manifest.json").read_text() == manifest
    t0 = time.monotonic()
    with WriterLock(path, timeout=5):
        pass
    assert time.monotonic() - t0 < 2  # the kernel released the dead writer's flock
    index.add_passages([Passage("x", "Xylophones in Oslo.", "X")], progress=False)
    assert KnowledgeIndex.open(path, embedder=HashEmbedder()).passages.ids == [p.id for p in BASE] + ["x"]
    index.close()
    assert _gens(path) == [index.manifest["generation"]]  # the debris is gone


def test_lock_timeout_error_is_raised_by_add_passages(tmp_path, monkeypatch):
    path = tmp_path / "idx"
    index = _build(path)
    before = index.passages.ids
    monkeypatch.setenv("KGRAG_LOCK_TIMEOUT", "0.3")
    holder = _spawn(
        """
        from kgrag_plugins.index.lock import WriterLock
        with WriterLock(%r):
            print("locked", flush=True)
            sys.stdin.readline()
        """
        % str(path)
    )
    try:
        assert holder.stdout.readline().strip() == "locked", holder.stderr.read()[-2000:]
        with pytest.raises(IndexLockedError, match=r"being written by another writer.*KGRAG_LOCK_TIMEOUT"):
            index.add_passages([Passage("x", "Xylophones in Oslo.", "X")], progress=False)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert index.passages.ids == before
    assert KnowledgeIndex.open(path, embedder=HashEmbedder()).passages.ids == before
