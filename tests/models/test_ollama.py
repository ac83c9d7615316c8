"""Ollama as a backend (issue 37 item 4): :class:`OllamaLLM` on Ollama's native ``/api/chat``,
against the stand-in server of ``tests/reliability/ollama_stub.py`` (no Ollama binary here)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from conftest import REPO_ROOT, load_script

from kgrag_plugins.agents.common import json_answer
from kgrag_plugins.eval.qa_llm import resolve_llm
from kgrag_plugins.methods.know3 import prompts as know3
from kgrag_plugins.methods.sa_rag.prompts import ANSWER_SCHEMA
from kgrag_plugins.models.breaker import CircuitBreaker
from kgrag_plugins.models.llm import LLMResponseError, LLMTimeoutError, LLMUnavailableError, as_llm
from kgrag_plugins.models.logprobs import supports_logprobs
from kgrag_plugins.models.ollama import DEFAULT_OLLAMA_URL, OllamaLLM, ollama_host, parse_ollama_spec
from kgrag_plugins.models.replies import complete_validated

stub_mod = load_script("tests/reliability/ollama_stub.py")
MODEL = "smollm2:135m"
GOOD = json.dumps({"reasoning": "The passage says Paris is the capital", "final_answer": "Paris"})


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    for var in ("KGRAG_LLM_DEADLINE", "KGRAG_LLM_BREAKER_FAILURES", "KGRAG_LLM_BREAKER_COOLDOWN", "OLLAMA_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def stub() -> Iterator[object]:
    with stub_mod.OllamaStub(models=[MODEL, "qwen3:0.6b"]) as srv:
        yield srv


def _llm(stub: object, **kw: object) -> OllamaLLM:
    kw.setdefault("backoff", 0.01)
    return OllamaLLM(MODEL, stub.url, **kw)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- structured steps


def test_json_step_sends_its_schema_as_format_without_thinking_and_parses_the_reply(stub):
    stub.script(GOOD)
    llm = _llm(stub)
    errors: list[dict] = []
    answer = json_answer(llm, "What is the capital of France?", "Paris is the capital of France.", errors)
    assert answer == "Paris" and errors == []
    (body,) = stub.bodies()
    assert body["format"] == dict(ANSWER_SCHEMA.json)  # the step's JSON schema, as Ollama's `format`
    assert body["think"] is False
    assert body["keep_alive"] == "5m"
    assert body["stream"] is False
    assert body["options"]["num_predict"] == ANSWER_SCHEMA.max_tokens == 192  # bounded by the schema
    assert body["options"]["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]
    assert "response_format" not in body and "max_tokens" not in body  # native API, not OpenAI's fields
    # Ollama's prompt_eval_count / eval_count are the usage tokens
    prompt_words = sum(len(m["content"].split()) for m in body["messages"])
    assert llm.usage == {"prompt_tokens": prompt_words, "completion_tokens": len(GOOD.split()), "calls": 1}


def test_invalid_reply_is_retried_once_then_falls_back_with_warning_and_trace(stub, caplog):
    stub.script("I think the answer is Paris", '{"reasoning": "no final answer"}')
    errors: list[dict] = []
    with caplog.at_level(logging.WARNING):
        answer = json_answer(_llm(stub), "What is the capital of France?", "Paris is in France.", errors)
    assert answer is None
    assert len(stub.bodies()) == 2  # one retry, each constrained
    assert all(b["format"] == dict(ANSWER_SCHEMA.json) and b["think"] is False for b in stub.bodies())
    (entry,) = errors
    assert entry["kind"] == "invalid_reply" and entry["attempts"] == 2 and entry["step"] == "answer"
    assert any("fell back to the LLM-free path" in r.getMessage() for r in caplog.records)


def test_regex_step_goes_unconstrained_but_still_without_thinking(stub):
    stub.script("Paris is in France. The answer is Paris.")
    llm = _llm(stub)
    value = complete_validated(
        llm, know3.qa_prompt("Where is Paris?", ["Paris is in France."]), know3.parse_answer, step="answer",
        schema=know3.ANSWER_SCHEMA,
    )  # fmt: skip
    assert value == "Paris"
    (body,) = stub.bodies()
    assert "format" not in body  # a regex has no Ollama form: validation only
    assert body["think"] is False
    assert body["options"]["num_predict"] == know3.ANSWER_SCHEMA.max_tokens


def test_free_text_steps_send_think_as_constructed(stub):
    _llm(stub).complete("hi", max_tokens=7, stop=["\n"])
    _llm(stub, think=None, keep_alive=None).complete("hi")
    _llm(stub, think="low", keep_alive=-1, options={"num_ctx": 4096}).complete("hi")
    a, b, c = stub.bodies()
    assert a["think"] is False and a["options"] == {"num_predict": 7, "temperature": 0.0, "stop": ["\n"]}
    assert "think" not in b and "keep_alive" not in b  # the model's and the server's defaults
    assert c["think"] == "low" and c["keep_alive"] == -1 and c["options"]["num_ctx"] == 4096
    assert "format" not in a


def test_sampling_options_in_extra_body_go_into_options(stub):
    _llm(stub, extra_body={"top_p": 0.9, "seed": 1, "raw": False}).complete("hi")
    (body,) = stub.bodies()
    assert body["options"]["top_p"] == 0.9 and body["options"]["seed"] == 1
    assert "top_p" not in body and body["raw"] is False


def test_structured_off_sends_no_format(stub):
    llm = _llm(stub, structured=False)
    assert llm.supports_schema is False
    stub.script(GOOD)
    assert json_answer(llm, "What is the capital of France?", "Paris is the capital.", []) == "Paris"
    (body,) = stub.bodies()
    assert "format" not in body and body["think"] is False


def test_a_server_refusing_format_is_asked_again_plain_once(stub, caplog):
    stub.script(("status", 400, {"error": "invalid format"}), GOOD, GOOD)
    llm = _llm(stub)
    with caplog.at_level(logging.WARNING):
        assert llm.complete("q", schema=ANSWER_SCHEMA) == GOOD
    assert llm.supports_schema is False
    llm.complete("q", schema=ANSWER_SCHEMA)
    first, second, third = stub.bodies()
    assert "format" in first and "format" not in second and "format" not in third
    assert sum("refused the structured-output request" in r.getMessage() for r in caplog.records) == 1


# --------------------------------------------------------------------------- failures


def test_a_stalled_server_hits_the_deadline(stub):
    stub.script(("sleep", 10))
    llm = _llm(stub, deadline=0.6, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="deadline|timed out"):
        llm.complete("hi")
    assert time.monotonic() - t0 < 2.0


def test_a_stalled_server_through_a_step_is_an_llm_error_trace(stub):
    stub.script(("sleep", 10))
    errors: list[dict] = []
    answer = json_answer(_llm(stub, deadline=0.5, max_retries=0), "Q?", "ctx", errors)
    assert answer is None and errors[0]["kind"] == "llm_error" and errors[0]["type"] == "LLMTimeoutError"


def test_a_missing_model_names_ollama_pull_in_one_line_and_is_not_retried(stub):
    llm = OllamaLLM("llama3.2:1b", stub.url, backoff=0.01)
    with pytest.raises(LLMResponseError) as info:
        llm.complete("hi")
    msg = str(info.value)
    assert "ollama pull llama3.2:1b" in msg and "\n" not in msg
    assert len(stub.bodies()) == 1  # a 404 is not retried
    assert not llm.breaker.is_open  # the server is up


def test_a_server_that_is_not_ollama_says_so(stub):
    llm = OllamaLLM(MODEL, stub.url + "/elsewhere", backoff=0.01)
    with pytest.raises(LLMResponseError, match="is .* an Ollama server"):
        llm.complete("hi")


def test_5xx_and_garbage_are_retried(stub):
    stub.script(("status", 500, {"error": "runner crashed"}), ("raw", b"not json"), "Paris")
    llm = _llm(stub)
    assert llm.complete("hi") == "Paris"
    assert len(stub.bodies()) == 3 and llm.usage["calls"] == 1


def test_a_dead_server_names_ollama_serve_and_opens_the_breaker():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OllamaLLM(MODEL, f"http://127.0.0.1:{port}", backoff=0.01, breaker=CircuitBreaker(failures=3, cooldown=60))
    with pytest.raises(LLMResponseError, match="ollama serve"):
        llm.complete("hi")
    with pytest.raises(LLMUnavailableError):
        llm.complete("hi")


def test_acomplete_uses_the_same_request(stub):
    stub.script(GOOD)
    llm = _llm(stub)
    assert asyncio.run(llm.acomplete("q", schema=ANSWER_SCHEMA)) == GOOD
    (body,) = stub.bodies()
    assert body["format"] == dict(ANSWER_SCHEMA.json) and body["think"] is False
    assert llm.usage["calls"] == 1


# --------------------------------------------------------------------------- secrets, server, protocol


def test_credentials_go_in_headers_and_stay_out_of_urls_reprs_and_errors(stub):
    port = stub.url.rsplit(":", 1)[1]
    llm = OllamaLLM("nope:1b", f"http://user:hunter2-secret@127.0.0.1:{port}", backoff=0.01)
    assert "hunter2" not in repr(llm) and "hunter2" not in llm.url
    with pytest.raises(LLMResponseError) as info:
        llm.complete("hi")
    assert "hunter2" not in str(info.value)
    keyed = OllamaLLM(MODEL, stub.url, api_key="sk-ollama-0123456789")
    assert "0123456789" not in repr(keyed)
    keyed.complete("hi")


def test_kgrag_llm_api_key_is_not_sent_to_ollama(stub, monkeypatch):
    monkeypatch.setenv("KGRAG_LLM_API_KEY", "sk-for-another-server-123")
    assert _llm(stub).api_key is None
    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-cloud-key-123")
    assert _llm(stub).api_key == "ollama-cloud-key-123"


def test_tags_list_the_pulled_models(stub):
    llm = _llm(stub)
    assert llm.available_models() == [MODEL, "qwen3:0.6b"]
    assert llm.has_model()
    assert not OllamaLLM("smollm2", stub.url).has_model()  # a bare name is its :latest tag


def test_protocol_fits(stub):
    llm = _llm(stub)
    assert as_llm(llm) is llm
    assert llm.supports_schema is True
    assert not supports_logprobs(llm)  # Self-RAG takes its prompted path
    assert "keep_alive='5m'" in repr(llm) and llm.url.endswith("/api/chat")


# --------------------------------------------------------------------------- --llm ollama:...


@pytest.mark.parametrize(
    "spec, model, url",
    [
        ("ollama:smollm2:135m", "smollm2:135m", None),
        ("ollama:smollm2:135m@http://10.0.0.2:11434", "smollm2:135m", "http://10.0.0.2:11434"),
        ("ollama:hf.co/org/repo:Q4_K_M@https://u:p@host/", "hf.co/org/repo:Q4_K_M", "https://u:p@host/"),
        ("ollama:qwen3", "qwen3", None),
    ],
)
def test_spec_parses(spec, model, url):
    assert parse_ollama_spec(spec) == (model, url)


@pytest.mark.parametrize("spec", ["ollama:", "ollama:a b", "ollama:m@ftp://x"])
def test_bad_specs_say_what_is_expected(spec):
    with pytest.raises(ValueError, match="ollama:MODEL"):
        resolve_llm(spec)


def test_resolve_llm_builds_the_client(stub):
    llm, description, close = resolve_llm(f"ollama:{MODEL}@{stub.url}/v1", deadline=5, max_tokens=33)
    try:
        assert isinstance(llm, OllamaLLM) and llm.base_url == stub.url  # /v1 dropped: the native API
        assert llm.deadline == 5 and llm.model == MODEL
        assert description == f"ollama:{MODEL} at {stub.url}"
        assert llm.complete("hi") == "Paris"
        assert stub.bodies()[0]["options"]["num_predict"] == 33
    finally:
        close()
    default, _, _ = resolve_llm("ollama:smollm2:135m")
    assert default.base_url == DEFAULT_OLLAMA_URL


@pytest.mark.parametrize(
    "host, url",
    [
        ("", DEFAULT_OLLAMA_URL),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:8080", "http://127.0.0.1:8080"),
        ("gpu-box", "http://gpu-box:11434"),
        ("https://ollama.example.org:443", "https://ollama.example.org:443"),
        (":9999", "http://127.0.0.1:9999"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(monkeypatch, host, url):
    monkeypatch.setenv("OLLAMA_HOST", host)
    assert ollama_host() == url


def test_the_stub_runs_as_its_own_process():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = REPO_ROOT / "tests/reliability/ollama_stub.py"
    argv = [sys.executable, str(script), "--port", str(port), "--model", "tiny:1m", "--reply", "Rome"]
    proc = subprocess.Popen(argv)
    try:
        for _ in range(100):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=0.5).text == "Ollama is running":
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        llm = OllamaLLM("tiny:1m", f"http://127.0.0.1:{port}")
        assert llm.complete("Capital of Italy?") == "Rome"
        assert llm.usage["completion_tokens"] == 1
    finally:
        proc.kill()
        proc.wait(5)
