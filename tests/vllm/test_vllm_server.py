"""`vllm serve` (CPU build, .venv-vllm) behind VLLMServer, driven by our OpenAICompatibleLLM (issue 18).

Runs only with `make test-vllm` (marker `vllm`); the server is the session fixture of tests/vllm_lane.py
(a random-weight tiny Llama built in seconds, served with the translator logits processor and a LoRA
adapter loaded)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import time

import pytest
from vllm_lane import model_shape, served_vllm_version, server_settings

pytestmark = pytest.mark.vllm


@pytest.fixture
def server(vllm_server):
    """The session's one server (tests/vllm_lane.py); test_stop_leaves_no_process stops it, and this
    module runs last (alphabetical order)."""
    return vllm_server


def test_chat_and_completion(server):
    llm = server.client(default_max_tokens=8)
    reply = llm.complete([{"role": "user", "content": "What is the capital of France?"}])
    assert isinstance(reply, str) and reply
    assert llm.usage["completion_tokens"] >= 1
    comp = llm.complete_logprobs("Paris is the", max_tokens=5, raw=True)
    assert comp.text


def test_logprobs_chat_and_raw(server):
    llm = server.client()
    for raw, prompt in ((False, [{"role": "user", "content": "Berlin is"}]), (True, "Berlin is the capital")):
        comp = llm.complete_logprobs(prompt, max_tokens=6, top_logprobs=3, raw=raw)
        assert comp.tokens, raw
        for t in comp.tokens:
            assert t.logprob <= 0.0
            assert t.top and all(v <= 0.0 for v in t.top.values())


def test_throughput(server, tiny_model, vllm_report_dir):
    """tokens/s and requests/s at concurrency 1/8/32 (max_tokens 32, ignore_eos), written to a JSON
    report in pytest's temp dir: every figure measured in this run, the version from the server."""
    max_tokens = 32
    llm = server.client(default_max_tokens=max_tokens, default_temperature=0.0, deadline=120, timeout=120)
    llm.extra_body["ignore_eos"] = True

    async def batch(n: int) -> tuple[float, list[str]]:
        start = time.perf_counter()
        replies = await asyncio.gather(*(llm.acomplete(f"Question {i}: capital of France?") for i in range(n)))
        return time.perf_counter() - start, replies

    results = {}
    for conc in (1, 8, 32):
        before = dict(llm.usage)
        secs, replies = asyncio.run(batch(conc))
        after = dict(llm.usage)
        toks = after.get("completion_tokens", 0) - before.get("completion_tokens", 0)
        assert len(replies) == conc and all(isinstance(r, str) for r in replies)
        assert toks == conc * max_tokens, (conc, toks)  # ignore_eos: every request generates max_tokens
        results[str(conc)] = {
            "requests": len(replies),
            "seconds": round(secs, 3),
            "completion_tokens": toks,
            "tokens_per_s": round(toks / secs, 1),
            "requests_per_s": round(len(replies) / secs, 2),
        }
    out = vllm_report_dir / "vllm-cpu-tiny.json"
    body = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} CPU cores",
        "vllm_version": served_vllm_version(server),
        "server": server_settings(server),
        "model": model_shape(tiny_model[0]),
        "max_tokens": max_tokens,
        "concurrency": results,
    }
    out.write_text(json.dumps(body, indent=2) + "\n")
    assert json.loads(out.read_text())["concurrency"] == results


def test_stop_leaves_no_process(server):
    pid = server.pid
    assert pid and server.running()
    server.stop()
    assert not server.running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
