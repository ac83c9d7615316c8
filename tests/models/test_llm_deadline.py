"""One total deadline per LLM call and a circuit breaker (issue 13 item 5), against real local
endpoints on 127.0.0.1: the FakeOpenAIServer of test_llm.py, a TCP socket that accepts and never
answers (a hang), and a closed port (a dead endpoint)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from conftest import HashEmbedder
from test_llm import FakeOpenAIServer

from kgrag_plugins.config import DEFAULT_LLM_DEADLINE
from kgrag_plugins.models.llm import (
    CircuitBreaker,
    LLMError,
    LLMTimeoutError,
    LLMUnavailableError,
    OpenAICompatibleLLM,
)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    for var in ("KGRAG_LLM_DEADLINE", "KGRAG_LLM_BREAKER_FAILURES", "KGRAG_LLM_BREAKER_COOLDOWN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """A socket that accepts connections (kernel backlog) and never sends a byte."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        s.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(s.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    finally:
        stop.set()
        t.join(1)
        for c in accepted:
            c.close()
        s.close()


@pytest.fixture
def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there


def _timed(fn, *args, **kwargs) -> tuple[BaseException | None, float]:
    t0 = time.perf_counter()
    try:
        fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - returned for the assertions
        return exc, time.perf_counter() - t0
    return None, time.perf_counter() - t0


def test_llm_default_deadline_is_30s_and_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_LLM_DEADLINE == 30.0
    llm = OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m")
    assert llm.deadline == 30.0 and llm.breaker.failures == 3 and llm.breaker.cooldown == 30.0
    monkeypatch.setenv("KGRAG_LLM_DEADLINE", "2.5")
    monkeypatch.setenv("KGRAG_LLM_BREAKER_FAILURES", "5")
    llm = OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m")
    assert llm.deadline == 2.5 and llm.breaker.failures == 5
    monkeypatch.setenv("KGRAG_LLM_DEADLINE", "soon")
    with pytest.raises(ValueError, match="KGRAG_LLM_DEADLINE='soon' is not a number"):
        OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ValueError, match="deadline must be > 0"):
        OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m", deadline=0)


def test_llm_hanging_endpoint_one_deadline_then_breaker_fails_fast(hanging_url: str) -> None:
    # timeout 60 s per attempt, 2 retries: without a total deadline this call would take minutes
    llm = OpenAICompatibleLLM(base_url=hanging_url, model="m", timeout=60.0, max_retries=2, deadline=1.0)
    exc, first = _timed(llm.complete, "q")
    assert isinstance(exc, LLMTimeoutError) and "1s deadline" in str(exc)
    assert 0.8 <= first < 1.1  # the 1 s deadline, plus scheduling noise on a loaded machine
    assert llm.breaker.state == "open"  # a call that used its whole deadline opens the breaker
    for _ in range(3):
        exc, t = _timed(llm.complete, "q")
        assert isinstance(exc, LLMUnavailableError) and "circuit breaker" in str(exc)
        assert t < 1.0


def test_llm_hanging_endpoint_async_respects_the_deadline(hanging_url: str) -> None:
    llm = OpenAICompatibleLLM(base_url=hanging_url, model="m", timeout=60.0, max_retries=2, deadline=1.0)
    exc, first = _timed(asyncio.run, llm.acomplete("q"))
    assert isinstance(exc, LLMTimeoutError) and 0.8 <= first < 1.1
    exc, t = _timed(asyncio.run, llm.acomplete("q"))
    assert isinstance(exc, LLMUnavailableError) and t < 1.0


def test_llm_dead_endpoint_fails_within_deadline_then_fast(dead_url: str) -> None:
    llm = OpenAICompatibleLLM(base_url=dead_url, model="m", timeout=5.0, backoff=0.05, deadline=2.0)
    exc, first = _timed(llm.complete, "q")
    assert isinstance(exc, LLMError) and "Connect" in str(exc) and first < 2.0
    assert llm.breaker.state == "open" and llm.breaker.consecutive == 3
    exc, t = _timed(llm.complete, "q")
    assert isinstance(exc, LLMUnavailableError) and t < 1.0


def test_llm_retries_and_backoff_stay_within_the_deadline(server: FakeOpenAIServer) -> None:
    server.script(*[("sleep", 0.8)] * 6)
    llm = OpenAICompatibleLLM(
        base_url=server.base_url, model="m", timeout=0.5, max_retries=5, backoff=0.3, deadline=1.2
    )
    exc, t = _timed(llm.complete, "q")
    # 6 attempts x 0.5 s + 9.3 s of backoff without the deadline
    assert isinstance(exc, LLMTimeoutError) and "deadline" in str(exc)
    assert t < 1.2 + 0.3
    assert len(server.requests) == 2  # 0.5 s + 0.3 s pause + the remaining 0.4 s


def test_llm_breaker_opens_after_n_failures_and_half_opens(server: FakeOpenAIServer) -> None:
    breaker = CircuitBreaker(failures=3, cooldown=0.4)
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m", timeout=1.0, backoff=0.01, breaker=breaker)
    server.script(("status", 503), ("status", 503), ("status", 503))
    with pytest.raises(LLMError, match="3 attempt"):
        llm.complete("q")
    assert breaker.state == "open"
    with pytest.raises(LLMUnavailableError):
        llm.complete("q")
    assert len(server.requests) == 3  # failing fast sends nothing
    time.sleep(0.45)
    server.script(("status", 503))  # the half-open trial fails: open again at once, no retry
    with pytest.raises(LLMError):
        llm.complete("q")
    assert len(server.requests) == 4 and breaker.state == "open"
    with pytest.raises(LLMUnavailableError):
        llm.complete("q")
    time.sleep(0.45)
    server.script(("ok", "back"), ("ok", "again"))
    assert llm.complete("q") == "back" and breaker.state == "closed"
    assert llm.complete("q") == "again"


def test_llm_breaker_counts_consecutive_failures_only(server: FakeOpenAIServer) -> None:
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m", timeout=1.0, backoff=0.01, max_retries=1)
    server.script(("status", 500), ("status", 500), ("ok", "x"))
    with pytest.raises(LLMError):
        llm.complete("q")  # 2 failures
    server.script(("ok", "y"))
    assert llm.complete("q") == "x"  # a reply resets the count
    assert llm.breaker.consecutive == 0 and llm.breaker.state == "closed"


def test_llm_cli_ask_generate_dead_endpoint_one_line_nonzero(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], dead_url: str
) -> None:
    from kgrag_plugins.cli import main
    from kgrag_plugins.index import store
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.types import Passage

    emb = HashEmbedder()
    passages = [Passage("p1", "Mozart was born in Salzburg.", "Mozart"), Passage("p2", "Paris is in France.", "Paris")]
    KnowledgeIndex.build(passages, tmp_path / "idx", embedder=emb, progress=False)
    monkeypatch.setattr(store, "default_embedder", lambda: emb)
    monkeypatch.setenv("KGRAG_LLM_BASE_URL", dead_url)
    monkeypatch.setenv("KGRAG_LLM_MODEL", "m")
    monkeypatch.setenv("KGRAG_LLM_DEADLINE", "2")
    t0 = time.perf_counter()
    rc = main(["ask", "--index", str(tmp_path / "idx"), "--retriever", "bm25", "--generate", "Where was Mozart born?"])
    elapsed = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert rc == 1 and elapsed < 10
    assert "Mozart was born" in out  # the LLM-free retrieval is still printed
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kgrag ask: error: no answer from the LLM:")
    assert "Traceback" not in err and "Connect" in lines[0]


def test_a_deadline_above_the_attempt_timeout_lifts_it_unless_a_timeout_is_given() -> None:
    url = "http://127.0.0.1:9/v1"
    assert OpenAICompatibleLLM(base_url=url, model="m").timeout == 60.0  # default deadline 30 s: attempts stay 60 s
    assert OpenAICompatibleLLM(base_url=url, model="m", deadline=10).timeout == 60.0
    assert OpenAICompatibleLLM(base_url=url, model="m", deadline=300).timeout == 300.0  # a slow server is waited for
    assert OpenAICompatibleLLM(base_url=url, model="m", deadline=300, timeout=5).timeout == 5.0  # explicit wins


def test_a_slow_reply_inside_a_long_deadline_is_waited_for_not_sent_again(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the 60 s attempt floor scaled down to 0.5 s: a 2 s deadline lifts the attempt to 2 s, so a reply
    # that takes 0.8 s is answered on its first request; an explicit 0.5 s attempt gives up on it
    import kgrag_plugins.models.llm as llm_module

    monkeypatch.setattr(llm_module, "DEFAULT_LLM_ATTEMPT_TIMEOUT", 0.5)
    server.script(("sleep", 0.8))
    lifted = OpenAICompatibleLLM(base_url=server.base_url, model="m", max_retries=2, backoff=0.01, deadline=2.0)
    assert lifted.timeout == 2.0
    assert lifted.complete("q") == "too late"
    assert len(server.requests) == 1
    server.script(*[("sleep", 0.8)] * 3)
    short = OpenAICompatibleLLM(
        base_url=server.base_url, model="m", timeout=0.5, max_retries=2, backoff=0.01, deadline=2.0
    )
    with pytest.raises(LLMError):
        short.complete("q")
    assert len(server.requests) >= 3  # each 0.5 s attempt gave up and the call was sent again
