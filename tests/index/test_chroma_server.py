"""Chroma server mode as a tested path (issue 19 item 3).

A real ``chroma run`` server on 127.0.0.1 (free port, started by the fixture, stopped by PID)
holds the passage vectors; the same index is built embedded, and every step (build, query,
add, delete, reopen) must give the same passage ids and scores (within 1e-5) in both modes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kgrag_plugins.index.errors import ChromaServerError
from kgrag_plugins.index.passages import chroma_client
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.baselines import DenseRetriever
from kgrag_plugins.types import Passage

NEW = [
    Passage("new-1", "The Vistula flows through Krakow and Warsaw to the Baltic Sea.", "Vistula (river)"),
    Passage("new-2", "Marie Curie's laboratory in Paris studied radium and polonium.", "Curie laboratory"),
    Passage("new-3", "The Magic Flute is an opera that premiered in Vienna in 1791.", "Magic Flute premiere"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory):
    """``chroma run`` on 127.0.0.1 at a free port; waits for the heartbeat; SIGTERM by PID after."""
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    assert Path(exe).exists(), "the chroma CLI (installed with chromadb) is missing"
    root = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log_path = root / "chroma.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [exe, "run", "--path", str(root / "data"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, f"chroma server exited early: {log_path.read_text(errors='replace')}"
            assert time.monotonic() < deadline, "chroma server did not answer its heartbeat in 60 s"
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def _dense(index: KnowledgeIndex, questions) -> list[list[tuple[str, float]]]:
    out = []
    for q in questions:
        ev = DenseRetriever(index).retrieve(q, 5)
        out.append([(sp.passage.id, sp.score) for sp in ev.passages])
    return out


def _same(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]]) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert [i for i, _ in ra] == [i for i, _ in rb]
        for (_, sa), (_, sb) in zip(ra, rb):
            assert abs(sa - sb) <= 1e-5


def _collections(url: str) -> set[str]:
    return {c.name for c in chroma_client(url=url).list_collections()}


def test_server_mode_matches_embedded(
    chroma_url, tmp_path, monkeypatch, sample_corpus, sample_graph, sample_questions, sample_index
):
    monkeypatch.delenv("KGRAG_CHROMA_URL", raising=False)  # the explicit parameter is the only route
    questions = [q.question for q in sample_questions] + ["Which river flows through Warsaw?", "radium"]
    vecs = sample_index.passages.vectors  # the bundled sample's MiniLM vectors: embed once per session
    opts = dict(graph=sample_graph, progress=False, vectors=vecs, embedder=sample_index.embedder)
    emb = KnowledgeIndex.build(sample_corpus, tmp_path / "emb", **opts)
    srv = KnowledgeIndex.build(sample_corpus, tmp_path / "srv", chroma_url=chroma_url, **opts)
    info = srv.manifest["chroma"]
    assert info["mode"] == "http" and info["url"] == chroma_url
    assert emb.manifest["chroma"]["mode"] == "embedded"
    gdir = tmp_path / "srv" / srv.manifest["generation"] / "passages"
    assert not (gdir / "chroma").exists(), "server mode must not write an embedded Chroma database"
    assert chroma_client(url=chroma_url).get_collection(info["collection"]).count() == len(sample_corpus)
    # the server really answers the queries (not the numpy vectors): its collection is queried
    assert type(srv.passages._collection).__module__.startswith("chromadb")
    base = _dense(emb, questions)
    _same(_dense(srv, questions), base)
    assert all(len(r) == 5 for r in base)

    # add: both modes take the same new passages; a new server collection replaces the old one
    assert emb.add_passages(NEW, progress=False)["passages"] == 3
    assert srv.add_passages(NEW, progress=False)["passages"] == 3
    added = _dense(emb, questions)
    _same(_dense(srv, questions), added)
    assert any(pid.startswith("new-") for r in added for pid, _ in r), "new passages must be retrievable"
    info_added = srv.manifest["chroma"]
    assert info_added["collection"] != info["collection"]
    assert chroma_client(url=chroma_url).get_collection(info_added["collection"]).count() == len(sample_corpus) + 3
    assert info["collection"] not in _collections(chroma_url), "the replaced collection is dropped"

    # delete: a new passage and an original one
    gone = ["new-2", sample_corpus[0].id]
    emb.delete_passages(gone)
    srv.delete_passages(gone)
    deleted = _dense(emb, questions)
    _same(_dense(srv, questions), deleted)
    assert not {pid for r in deleted for pid, _ in r} & set(gone)
    assert chroma_client(url=chroma_url).get_collection(srv.manifest["chroma"]["collection"]).count() == len(
        sample_corpus
    ) + 3 - len(gone)

    # reopen both from disk: the server index finds its collection by the URL in the manifest
    emb.close(), srv.close()
    emb2 = KnowledgeIndex.open(tmp_path / "emb", embedder=sample_index.embedder)
    srv2 = KnowledgeIndex.open(tmp_path / "srv", embedder=sample_index.embedder)
    assert srv2.manifest["chroma"]["mode"] == "http"
    _same(_dense(srv2, questions), deleted)
    _same(_dense(emb2, questions), deleted)
    assert srv2.counts == emb2.counts


def test_server_collections_are_per_index(chroma_url, tmp_path, monkeypatch, sample_corpus):
    """Two indexes on one server get their own collections; dropping one leaves the other intact."""
    monkeypatch.delenv("KGRAG_CHROMA_URL", raising=False)
    a = KnowledgeIndex.build(sample_corpus[:5], tmp_path / "a", progress=False, chroma_url=chroma_url)
    b = KnowledgeIndex.build(sample_corpus[5:9], tmp_path / "b", progress=False, chroma_url=chroma_url)
    ca, cb = a.manifest["chroma"]["collection"], b.manifest["chroma"]["collection"]
    assert ca != cb and {ca, cb} <= _collections(chroma_url)
    q = a.embed_query(sample_corpus[6].text)
    assert {p.id for p, _ in b.passages.dense_search(q, 10)} == {p.id for p in sample_corpus[5:9]}
    assert {p.id for p, _ in a.passages.dense_search(q, 10)} == {p.id for p in sample_corpus[:5]}
    a.passages.drop_collection()
    assert ca not in _collections(chroma_url) and cb in _collections(chroma_url)
    with pytest.raises(ValueError, match="not found"):
        KnowledgeIndex.open(tmp_path / "a")
    assert len(KnowledgeIndex.open(tmp_path / "b").passages) == 4


def test_unreachable_server_is_a_clear_error(tmp_path, monkeypatch, sample_corpus):
    monkeypatch.delenv("KGRAG_CHROMA_URL", raising=False)
    port = _free_port()
    where = re.escape(f"cannot reach the Chroma server at http://127.0.0.1:{port} ")
    with pytest.raises(ChromaServerError, match=where) as err:
        KnowledgeIndex.build(sample_corpus[:3], tmp_path / "x", progress=False, chroma_url=f"127.0.0.1:{port}")
    assert isinstance(err.value, ConnectionError) and isinstance(err.value, ValueError)  # the CLI: one line, rc 2
    assert "ConnectionRefusedError" in str(err.value) and "KGRAG_CHROMA_URL" in str(err.value)  # cause and fix
    assert not any((tmp_path / "x").glob("gen-*")), "a failed server build leaves no generation behind"
