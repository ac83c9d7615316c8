"""PassageStore: Chroma embedded and server modes, BM25."""

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kgrag_plugins.index.passages import PassageStore, chroma_client
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.baselines import DenseRetriever


def test_chroma_search_matches_exact_cosine(sample_index, sample_questions):
    store = sample_index.passages
    for q in sample_questions:
        v = sample_index.embed_query(q.question)
        chroma = store.dense_search(v, 5)
        exact = store.exact_dense_search(v, 5)
        assert [p.id for p, _ in chroma] == [p.id for p, _ in exact]
        for (_, s1), (_, s2) in zip(chroma, exact):
            assert s1 == pytest.approx(s2, abs=1e-4)


def test_dense_search_edge_cases(sample_index):
    v = sample_index.embed_query("anything")
    assert len(sample_index.passages.dense_search(v, 10_000)) == len(sample_index.passages)


def test_bm25_behaviour(sample_index):
    store = sample_index.passages
    hits = store.bm25_search("Vistula river", 3)
    assert hits and "Vistula" in (hits[0][0].title + hits[0][0].text)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert store.bm25_search("the of and", 5) == []  # stopwords only
    assert store.bm25_search("zzyzx qwertyuiop", 5) == []  # unknown words only
    # stemming: "premiered" matches "premiere"
    assert any("Magic Flute" in p.title for p, _ in store.bm25_search("premiered", 5))


def test_store_rejects_mismatched_vectors(sample_corpus):
    import numpy as np

    with pytest.raises(ValueError, match="3 passages but 2 vectors"):
        PassageStore.create(sample_corpus[:3], np.zeros((2, 4), np.float32))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path):
    """A real `chroma run` server on 127.0.0.1, stopped by PID after the test."""
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    assert Path(exe).exists(), "the chroma CLI (installed with chromadb) is missing"
    port = _free_port()
    log = open(tmp_path / "chroma.log", "wb")
    proc = subprocess.Popen(
        [exe, "run", "--path", str(tmp_path / "srv"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, f"chroma server exited: {(tmp_path / 'chroma.log').read_text()}"
            assert time.time() < deadline, "chroma server did not come up in 30 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_chroma_server_mode(chroma_server, tmp_path, monkeypatch, sample_corpus, sample_questions, sample_index):
    monkeypatch.setenv("KGRAG_CHROMA_URL", chroma_server)
    served = KnowledgeIndex.build(sample_corpus, tmp_path / "idx", progress=False)
    info = served.manifest["chroma"]
    assert info["mode"] == "http" and info["url"] == chroma_server
    assert not (tmp_path / "idx" / served.manifest["generation"] / "passages" / "chroma").exists()
    client = chroma_client(url=chroma_server)
    assert client.get_collection(info["collection"]).count() == len(sample_corpus)

    monkeypatch.delenv("KGRAG_CHROMA_URL")  # reopening uses the URL recorded in the manifest
    reopened = KnowledgeIndex.open(tmp_path / "idx")
    for q in sample_questions:
        a = DenseRetriever(reopened).retrieve(q.question, 5).passage_ids
        b = DenseRetriever(sample_index).retrieve(q.question, 5).passage_ids
        assert a == b

    # rebuilding replaces the server collection and drops the old one (once no reader holds it)
    served.close(), reopened.close()
    monkeypatch.setenv("KGRAG_CHROMA_URL", chroma_server)
    rebuilt = KnowledgeIndex.build(sample_corpus[:7], tmp_path / "idx", progress=False)
    names = {c.name for c in client.list_collections()}
    assert rebuilt.manifest["chroma"]["collection"] in names and info["collection"] not in names


def test_missing_server_collection_is_a_clear_error(chroma_server, tmp_path, monkeypatch, sample_corpus):
    monkeypatch.setenv("KGRAG_CHROMA_URL", chroma_server)
    idx = KnowledgeIndex.build(sample_corpus[:4], tmp_path / "idx", progress=False)
    chroma_client(url=chroma_server).delete_collection(idx.manifest["chroma"]["collection"])
    with pytest.raises(ValueError, match="not found"):
        KnowledgeIndex.open(tmp_path / "idx")
