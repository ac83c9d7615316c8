"""Tests for kgrag_plugins.models.llm against a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kgrag_plugins.integrations.langchain import LangChainLLM
from kgrag_plugins.integrations.llama_index import LlamaIndexLLM
from kgrag_plugins.models.llm import (
    LLM,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    OpenAICompatibleLLM,
    ScriptedLLM,
    as_llm,
)
from kgrag_plugins.models.messages import to_messages, truncate_at_stop

FAST = {"timeout": 0.3, "backoff": 0.01}


# --------------------------------------------------------------------------- fake server


class FakeOpenAIServer:
    """A tiny OpenAI-compatible server whose responses follow a per-test script."""

    def __init__(self) -> None:
        self.behaviours: deque[tuple[Any, ...]] = deque()
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body"}
        self.owner = ""  # GET /v1/models answers with this owned_by when set
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_GET(self) -> None:
                if self.path == "/v1/models" and outer.owner:
                    self._send(200, json.dumps({"data": [{"id": "test-model", "owned_by": outer.owner}]}).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer._lock:
                    outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)})
                    behaviour = outer.behaviours.popleft() if outer.behaviours else ("unscripted",)
                if self.path != "/v1/chat/completions":
                    self._send(404, b'{"error": "not found"}')
                    return
                kind = behaviour[0]
                if kind == "sleep":
                    time.sleep(behaviour[1])
                    behaviour = ("ok", "too late")
                    kind = "ok"
                if kind == "ok":
                    body = {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": behaviour[1]},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                    }
                    self._send(200, json.dumps(body).encode())
                elif kind == "status":
                    body = behaviour[2] if len(behaviour) > 2 else b'{"error": "boom"}'
                    self._send(behaviour[1], body)
                elif kind == "garbage":
                    self._send(200, behaviour[1], "text/plain")
                elif kind == "nocontent":
                    message = {"role": "assistant", "content": None}
                    body = {"choices": [{"index": 0, "message": message}]}
                    self._send(200, json.dumps(body).encode())
                else:
                    self._send(599, b'{"error": "no scripted behaviour left"}')

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def script(self, *behaviours: tuple[Any, ...]) -> None:
        self.behaviours.extend(behaviours)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    srv = FakeOpenAIServer()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def make_llm(server: FakeOpenAIServer, **kwargs: Any) -> OpenAICompatibleLLM:
    params = {"base_url": server.base_url, "model": "test-model", **FAST, **kwargs}
    return OpenAICompatibleLLM(**params)


# --------------------------------------------------------------------------- OpenAI client


def test_success_sends_request_and_counts_usage(server: FakeOpenAIServer) -> None:
    server.script(("ok", "Paris"), ("ok", "Berlin"))
    llm = make_llm(server)
    assert isinstance(llm, LLM)
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Capital of France?"},
    ]
    out = llm.complete(messages, stop=["\n"], max_tokens=16, temperature=0.7)
    assert out == "Paris"
    body = server.bodies[0]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "test-model"
    assert body["messages"] == messages
    assert body["stop"] == ["\n"]
    assert body["max_tokens"] == 16
    assert body["temperature"] == 0.7
    assert llm.usage == {"prompt_tokens": 7, "completion_tokens": 3, "calls": 1}

    # defaults: string prompt = one user message, default max_tokens/temperature, no stop
    assert llm.complete("Capital of Germany?") == "Berlin"
    body = server.bodies[1]
    assert body["messages"] == [{"role": "user", "content": "Capital of Germany?"}]
    assert body["max_tokens"] == 512
    assert body["temperature"] == 0.0
    assert "stop" not in body
    assert llm.usage == {"prompt_tokens": 14, "completion_tokens": 6, "calls": 2}
    llm.close()


def test_extra_body_is_merged(server: FakeOpenAIServer) -> None:
    server.script(("ok", "x"))
    llm = make_llm(server, extra_body={"top_p": 0.5}, default_max_tokens=None)
    assert llm.complete("q") == "x"
    assert server.bodies[0]["top_p"] == 0.5
    assert "max_tokens" not in server.bodies[0]


def test_500_is_retried(server: FakeOpenAIServer) -> None:
    server.script(("status", 500), ("ok", "recovered"))
    llm = make_llm(server)
    assert llm.complete("q") == "recovered"
    assert len(server.requests) == 2
    assert llm.usage["calls"] == 1


def test_429_is_retried(server: FakeOpenAIServer) -> None:
    server.script(("status", 429), ("ok", "after rate limit"))
    assert make_llm(server).complete("q") == "after rate limit"
    assert len(server.requests) == 2


def test_timeout_then_success(server: FakeOpenAIServer) -> None:
    server.script(("sleep", 1.0), ("ok", "fast now"))
    llm = make_llm(server)
    assert llm.complete("q") == "fast now"  # not "too late": the slow attempt was abandoned
    assert len(server.requests) == 2


def test_all_timeouts_raise_timeout_error(server: FakeOpenAIServer) -> None:
    server.script(("sleep", 1.0), ("sleep", 1.0), ("sleep", 1.0), ("ok", "never reached"))
    llm = make_llm(server, max_retries=2)
    with pytest.raises(LLMTimeoutError) as info:
        llm.complete("q")
    assert len(server.requests) == 3
    msg = str(info.value)
    assert f"{server.base_url}/chat/completions" in msg
    assert "test-model" in msg
    assert "3 attempt" in msg
    assert "timed out" in msg
    assert isinstance(info.value, LLMError)
    assert llm.usage["calls"] == 0


def test_garbage_every_time_raises_response_error(server: FakeOpenAIServer) -> None:
    server.script(*[("garbage", b"not json")] * 3)
    llm = make_llm(server, max_retries=2)
    with pytest.raises(LLMResponseError) as info:
        llm.complete("q")
    assert len(server.requests) == 3
    assert "non-JSON" in str(info.value)
    assert "not json" in str(info.value)
    assert not isinstance(info.value, LLMTimeoutError)


def test_garbage_then_success(server: FakeOpenAIServer) -> None:
    server.script(("garbage", b"<html>oops</html>"), ("nocontent",), ("ok", "fine"))
    assert make_llm(server).complete("q") == "fine"
    assert len(server.requests) == 3


def test_none_content_is_garbage(server: FakeOpenAIServer) -> None:
    server.script(("nocontent",), ("nocontent",))
    with pytest.raises(LLMResponseError, match="content"):
        make_llm(server, max_retries=1).complete("q")
    assert len(server.requests) == 2


def test_timeout_then_5xx_reports_last_cause(server: FakeOpenAIServer) -> None:
    server.script(("sleep", 1.0), ("status", 503, b"overloaded"))
    with pytest.raises(LLMResponseError) as info:
        make_llm(server, max_retries=1).complete("q")
    assert not isinstance(info.value, LLMTimeoutError)
    assert "HTTP 503" in str(info.value) and "overloaded" in str(info.value)


def test_400_fails_immediately_with_body_snippet(server: FakeOpenAIServer) -> None:
    server.script(("status", 400, b'{"error": "maximum context length exceeded"}'), ("ok", "no"))
    llm = make_llm(server, max_retries=3)
    with pytest.raises(LLMResponseError) as info:
        llm.complete("q")
    assert len(server.requests) == 1
    msg = str(info.value)
    assert "400" in msg
    assert "maximum context length exceeded" in msg
    assert server.base_url in msg


def test_connection_error_is_retried_then_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bind then close a socket to get a port with nothing listening.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAICompatibleLLM(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, **FAST)
    with pytest.raises(LLMResponseError) as info:
        llm.complete("q")
    assert "2 attempt" in str(info.value)
    assert "Connect" in str(info.value)


def test_acomplete_success_and_retry(server: FakeOpenAIServer) -> None:
    server.script(("ok", "async hi"), ("status", 502), ("sleep", 1.0), ("ok", "async retried"))
    llm = make_llm(server)

    async def run() -> tuple[str, str]:
        first = await llm.acomplete("hello", stop=["END"], max_tokens=5)
        second = await llm.acomplete([{"role": "user", "content": "again"}])
        return first, second

    first, second = asyncio.run(run())
    assert first == "async hi"
    assert second == "async retried"
    assert len(server.requests) == 4
    assert server.bodies[0]["stop"] == ["END"]
    assert server.bodies[0]["max_tokens"] == 5
    assert llm.usage == {"prompt_tokens": 14, "completion_tokens": 6, "calls": 2}


def test_acomplete_all_timeouts(server: FakeOpenAIServer) -> None:
    server.script(("sleep", 1.0), ("sleep", 1.0))
    llm = make_llm(server, max_retries=1)
    with pytest.raises(LLMTimeoutError, match="2 attempt"):
        asyncio.run(llm.acomplete("q"))
    assert len(server.requests) == 2


def test_env_configuration(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGRAG_LLM_BASE_URL", server.base_url + "/")
    monkeypatch.setenv("KGRAG_LLM_MODEL", "env-model")
    monkeypatch.delenv("KGRAG_LLM_API_KEY", raising=False)
    server.script(("ok", "from env"), ("ok", "again"))
    llm = OpenAICompatibleLLM.from_env(**FAST)
    assert llm.base_url == server.base_url  # trailing slash stripped
    assert llm.model == "env-model"
    assert llm.complete("q") == "from env"
    assert server.bodies[0]["model"] == "env-model"
    assert "authorization" not in {k.lower() for k in server.requests[0]["headers"]}
    # explicit arguments win over env
    assert OpenAICompatibleLLM(model="explicit", **FAST).model == "explicit"


def test_missing_config_raises_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGRAG_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("KGRAG_LLM_MODEL", raising=False)
    with pytest.raises(ValueError, match="KGRAG_LLM_BASE_URL"):
        OpenAICompatibleLLM(model="m")
    with pytest.raises(ValueError, match="KGRAG_LLM_MODEL"):
        OpenAICompatibleLLM(base_url="http://localhost:1/v1")
    monkeypatch.setenv("KGRAG_LLM_BASE_URL", "")  # empty counts as unset
    with pytest.raises(ValueError, match="KGRAG_LLM_BASE_URL"):
        OpenAICompatibleLLM.from_env(model="m")


def test_api_key_header_and_repr(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.script(("ok", "authed"), ("ok", "env authed"))
    llm = make_llm(server, api_key="sk-secret-123")
    assert llm.complete("q") == "authed"
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert headers["authorization"] == "Bearer sk-secret-123"
    text = repr(llm)
    assert "sk-secret-123" not in text
    assert "test-model" in text and server.base_url in text

    monkeypatch.setenv("KGRAG_LLM_API_KEY", "sk-from-env")
    llm2 = make_llm(server)
    assert llm2.complete("q") == "env authed"
    headers = {k.lower(): v for k, v in server.requests[1]["headers"].items()}
    assert headers["authorization"] == "Bearer sk-from-env"
    assert "sk-from-env" not in repr(llm2)


# --------------------------------------------------------------------------- helpers


def test_to_messages_and_truncate() -> None:
    assert to_messages("hi") == [{"role": "user", "content": "hi"}]
    msgs = [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]
    assert to_messages(msgs) == msgs
    with pytest.raises(ValueError, match="unknown role"):
        to_messages([{"role": "robot", "content": "x"}])
    with pytest.raises(TypeError):
        to_messages([{"content": "x"}])
    with pytest.raises(TypeError):
        to_messages(42)  # type: ignore[arg-type]
    assert truncate_at_stop("a\nb END c", ["END", "\n"]) == "a"
    assert truncate_at_stop("abc END", ["END"]) == "abc "
    assert truncate_at_stop("abc", None) == "abc"
    assert truncate_at_stop("abc", ["", "zz"]) == "abc"


# --------------------------------------------------------------------------- ScriptedLLM


def test_scripted_llm_order_stop_and_calls() -> None:
    llm = ScriptedLLM(["first", "second line\nmore", ValueError("boom"), "last"])
    assert isinstance(llm, LLM)
    assert llm.complete("q1") == "first"
    assert llm.complete("q2", stop=["\n"], max_tokens=9, temperature=0.1) == "second line"
    with pytest.raises(ValueError, match="boom"):
        llm.complete("q3")
    assert asyncio.run(llm.acomplete([{"role": "user", "content": "q4"}])) == "last"
    assert llm.remaining == 0
    with pytest.raises(LLMError, match="ran out of replies"):
        llm.complete("q5")
    assert len(llm.calls) == 5
    assert llm.calls[0] == {
        "messages": [{"role": "user", "content": "q1"}],
        "stop": None,
        "max_tokens": None,
        "temperature": None,
    }
    assert llm.calls[1]["stop"] == ["\n"]
    assert llm.calls[1]["max_tokens"] == 9
    assert llm.calls[1]["temperature"] == 0.1
    assert llm.calls[3]["messages"] == [{"role": "user", "content": "q4"}]


def test_scripted_llm_callable() -> None:
    llm = ScriptedLLM(lambda msgs: msgs[-1]["content"].upper() + " STOP tail")
    assert llm.complete("echo me", stop=[" STOP"]) == "ECHO ME"
    assert llm.complete("again") == "AGAIN STOP tail"
    assert len(llm.calls) == 2


# --------------------------------------------------------------------------- framework adapters


def _recording_chat_model():
    from langchain_core.language_models.chat_models import SimpleChatModel

    class Recorder(SimpleChatModel):
        seen: list = []

        @property
        def _llm_type(self) -> str:
            return "recorder"

        def _call(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
            self.seen.append({"types": [m.type for m in messages], "stop": stop})
            return " | ".join(f"{m.type}:{m.content}" for m in messages) + " ###tail"

    return Recorder(seen=[])


def test_langchain_adapter_with_fake_list_model() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    chat = FakeListChatModel(responses=["alpha", "beta\nignored"])
    llm = as_llm(chat)
    assert isinstance(llm, LangChainLLM)
    assert isinstance(llm, LLM)
    assert llm.complete("q") == "alpha"
    assert asyncio.run(llm.acomplete("q", stop=["\n"])) == "beta"


def test_langchain_adapter_maps_roles_and_stop() -> None:
    chat = _recording_chat_model()
    llm = LangChainLLM(chat)
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "U2"},
    ]
    out = llm.complete(msgs, stop=["###"])
    assert out == "system:S | human:U | ai:A | human:U2 "
    assert chat.seen[-1] == {"types": ["system", "human", "ai", "human"], "stop": ["###"]}
    out = asyncio.run(llm.acomplete("just me"))
    assert out == "human:just me ###tail"
    assert chat.seen[-1]["stop"] is None


def test_llamaindex_adapter_with_mock_llm() -> None:
    from llama_index.core.llms import MockLLM

    llm = as_llm(MockLLM())
    assert isinstance(llm, LlamaIndexLLM)
    assert isinstance(llm, LLM)
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
    assert llm.complete(msgs) == "system: sys\nuser: hello\nassistant: "
    assert llm.complete(msgs, stop=["\n"]) == "system: sys"
    assert asyncio.run(llm.acomplete("hi", stop=["assistant"])) == "user: hi\n"


# --------------------------------------------------------------------------- as_llm


def test_as_llm_dispatch(server: FakeOpenAIServer) -> None:
    assert as_llm(None) is None
    scripted = ScriptedLLM(["x"])
    assert as_llm(scripted) is scripted
    client = make_llm(server)
    assert as_llm(client) is client

    class DuckLLM:
        def complete(self, prompt, **kw):
            return "duck"

        async def acomplete(self, prompt, **kw):
            return "duck"

    duck = DuckLLM()
    assert as_llm(duck) is duck

    with pytest.raises(TypeError, match="cannot use .*str as an LLM"):
        as_llm("gpt-4")
    with pytest.raises(TypeError, match="complete"):
        as_llm(object())


# --------------------------------------------------------------------------- structured outputs


def _answer_schema():
    from kgrag_plugins.models.structured import json_schema

    return json_schema("answer", {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})


def test_structured_vllm_body_and_thinking_off(server: FakeOpenAIServer) -> None:
    from kgrag_plugins.models.structured import choice_schema, regex_schema

    server.script(("ok", '{"a": "x"}'), ("ok", "yes"), ("ok", "7"))
    llm = make_llm(server, structured="vllm")
    assert llm.supports_schema
    llm.complete("q", schema=_answer_schema())
    llm.complete("q", schema=choice_schema("yn", ["yes", "no"]))
    llm.complete("q", schema=regex_schema("num", r"\d+"))
    so = [b["structured_outputs"] for b in server.bodies]
    # a JSON schema goes as the compact regex the in-process backend enforces (one optional space)
    assert so[0] == {"regex": _answer_schema().to_regex()} and "[ ]?" in so[0]["regex"]
    assert re.fullmatch(so[0]["regex"], '{"a": "x"}') and not re.fullmatch(so[0]["regex"], '{\n\n"a":"x"}')
    assert so[1] == {"choice": ["yes", "no"]} and so[2] == {"regex": r"\d+"}
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in server.bodies)
    assert all("response_format" not in b for b in server.bodies)


def test_structured_openai_response_format_and_plain_calls(server: FakeOpenAIServer) -> None:
    from kgrag_plugins.models.structured import choice_schema

    server.script(("ok", '{"a": "x"}'), ("ok", "yes"), ("ok", "free"))
    llm = make_llm(server)  # structured="auto": response_format for JSON schemas
    llm.complete("q", schema=_answer_schema())
    llm.complete("q", schema=choice_schema("yn", ["yes", "no"]))  # not expressible: sent plain
    llm.complete("q")
    rf = server.bodies[0]["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["name"] == "answer" and rf["json_schema"]["schema"]["required"] == ["a"]
    assert "response_format" not in server.bodies[1] and "structured_outputs" not in server.bodies[1]
    assert "response_format" not in server.bodies[2]


def test_structured_refused_is_retried_plain_once_and_remembered(server: FakeOpenAIServer, caplog) -> None:
    server.script(("status", 400, b'{"error": "response_format is not supported"}'), ("ok", '{"a": "1"}'), ("ok", "2"))
    llm = make_llm(server)
    with caplog.at_level("WARNING"):
        assert llm.complete("q", schema=_answer_schema()) == '{"a": "1"}'
    assert "response_format" in server.bodies[0] and "response_format" not in server.bodies[1]
    assert not llm.supports_schema and "refused the structured-output request" in caplog.text
    llm.complete("q", schema=_answer_schema())
    assert "response_format" not in server.bodies[2]


def test_structured_off_sends_nothing_and_plain_400_still_raises(server: FakeOpenAIServer) -> None:
    server.script(("status", 400, b'{"error": "bad"}'))
    llm = make_llm(server, structured="off")
    assert not llm.supports_schema
    with pytest.raises(LLMResponseError):
        llm.complete("q", schema=_answer_schema())
    assert len(server.requests) == 1 and "response_format" not in server.bodies[0]
    with pytest.raises(ValueError, match="structured must be"):
        make_llm(server, structured="maybe")


def test_structured_async_path(server: FakeOpenAIServer) -> None:
    server.script(("ok", '{"a": "x"}'))
    llm = make_llm(server, structured="vllm")
    assert asyncio.run(llm.acomplete("q", schema=_answer_schema())) == '{"a": "x"}'
    assert server.bodies[0]["structured_outputs"] == {"regex": _answer_schema().to_regex()}


def test_structured_vllm_json_without_outlines_core_goes_as_json(server: FakeOpenAIServer, monkeypatch) -> None:
    """Without outlines_core (no ``local`` extra) a JSON schema reaches vLLM as JSON, unchanged."""
    import sys

    monkeypatch.setitem(sys.modules, "outlines_core", None)  # import fails
    monkeypatch.setitem(sys.modules, "outlines_core.json_schema", None)
    server.script(("ok", '{"a": "x"}'))
    llm = make_llm(server, structured="vllm")
    llm.complete("q", schema=_answer_schema())
    assert server.bodies[0]["structured_outputs"] == {"json": dict(_answer_schema().json)}


def test_structured_auto_detects_a_vllm_server(server: FakeOpenAIServer) -> None:
    from kgrag_plugins.models.structured import choice_schema

    server.owner = "vllm"
    server.script(("ok", "yes"), ("ok", "no"))
    llm = make_llm(server)  # "auto"
    llm.complete("q", schema=choice_schema("yn", ["yes", "no"]))
    llm.complete("q", schema=choice_schema("yn", ["yes", "no"]))
    assert [b["structured_outputs"] for b in server.bodies] == [{"choice": ["yes", "no"]}] * 2
