"""A real `vllm serve` killed mid-call (issue 34 item 3, "servers that die"), `make test-vllm` only.

The default suite kills a stand-in OpenAI-compatible server (tests/reliability/test_servers_die.py);
this one kills vLLM itself, serving SmolLM2-135M-Instruct (`kgrag models prepare smollm2`) from
.venv-vllm: SIGKILL to its process group while a long generation is in flight, then the same
client on the same port after a restart."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from kgrag_plugins.models.breaker import CircuitBreaker
from kgrag_plugins.models.llm import LLMResponseError, LLMUnavailableError
from kgrag_plugins.models.vllm import VLLMServer, find_vllm

pytestmark = pytest.mark.vllm
log = logging.getLogger(__name__)


def test_vllm_killed_mid_generation_then_same_client_recovers(tmp_path):
    if find_vllm() is None:
        pytest.fail("no vllm executable: run `make .venv-vllm`")
    srv = VLLMServer("smollm2", max_model_len=2048, log_file=tmp_path / "vllm.log", startup_timeout=900)
    srv.start()
    try:
        llm = srv.client(breaker=CircuitBreaker(cooldown=2.0), default_max_tokens=8)
        assert llm.complete([{"role": "user", "content": "What is the capital of France?"}])
        client = llm._client
        failed: list[BaseException] = []
        at: list[float] = []

        def long_call() -> None:
            try:
                llm.complete([{"role": "user", "content": "Write a long story about a lighthouse."}], max_tokens=1500)
            except BaseException as e:  # noqa: BLE001 - reported to the test
                failed.append(e)
                at.append(time.monotonic())

        t = threading.Thread(target=long_call, daemon=True)
        t.start()
        time.sleep(1.0)  # the generation is under way
        killed = time.monotonic()
        os.killpg(srv.process.pid, signal.SIGKILL)
        srv.process.wait(30)
        t.join(60)
        assert failed and isinstance(failed[0], LLMResponseError), failed
        text = str(failed[0])
        assert "\n" not in text and srv.base_url.rsplit("/v1", 1)[0] in text and "Start it again" in text
        assert at[0] - killed < 30
        with pytest.raises(LLMUnavailableError):  # the breaker is open: fails fast
            llm.complete("hello")
        srv.process = None
        srv.start()  # same port (VLLMServer keeps it)
        back = time.monotonic()
        while True:
            try:
                reply = llm.complete([{"role": "user", "content": "What is the capital of France?"}])
                break
            except LLMUnavailableError:
                assert time.monotonic() - back < 30
                time.sleep(0.1)
        assert reply and llm._client is client  # the same client, reconnected
        log.info("vllm: error %.2f s after SIGKILL; first good call %.2f s after the restart", at[0] - killed,
                 time.monotonic() - back)  # fmt: skip
    finally:
        srv.stop()
