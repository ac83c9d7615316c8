"""Token logprobs: OpenAI's two response shapes parsed from a real local HTTP server, robustness
of the parsers (hypothesis), ScriptedLLM completions and the validated logprob call."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.models.llm import LLMError, LLMResponseError, OpenAICompatibleLLM, ScriptedLLM
from kgrag_plugins.models.logprobs import (
    Completion,
    LogprobLLM,
    LogprobsFormatError,
    TokenLogprob,
    complete_logprobs_validated,
    parse_chat_logprobs,
    parse_completion_logprobs,
    supports_logprobs,
)
from kgrag_plugins.models.replies import InvalidReply

FAST = {"timeout": 2.0, "backoff": 0.01}

CHAT_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Relevant."},
            "logprobs": {
                "content": [
                    {
                        "token": "Relevant",
                        "logprob": -0.25,
                        "bytes": [82],
                        "top_logprobs": [
                            {"token": "Relevant", "logprob": -0.25, "bytes": [82]},
                            {"token": "Ir", "logprob": -1.6, "bytes": [73, 114]},
                        ],
                    },
                    {"token": ".", "logprob": -0.01, "bytes": [46], "top_logprobs": []},
                ]
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
}

COMPLETION_BODY = {
    "id": "cmpl-1",
    "object": "text_completion",
    "choices": [
        {
            "index": 0,
            "text": "[Relevant]Paris[Fully supported][Utility:5]",
            "logprobs": {
                "tokens": ["[Relevant]", "Paris", "[Fully supported]", "[Utility:5]"],
                "token_logprobs": [-0.1, -0.2, -0.3, -0.4],
                "top_logprobs": [
                    {"[Relevant]": -0.1, "[Irrelevant]": -2.4},
                    {"Paris": -0.2},
                    {"[Fully supported]": -0.3, "[Partially supported]": -1.5},
                    None,
                ],
                "text_offset": [0, 10, 15, 32],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
}


class LogprobServer:
    """A local OpenAI-compatible server answering scripted ``(status, body)`` pairs."""

    def __init__(self) -> None:
        self.replies: deque[tuple[int, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "body": json.loads(raw)})
                status, body = outer.replies.popleft() if outer.replies else (599, {"error": "unscripted"})
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    srv = LogprobServer()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def make_llm(server: LogprobServer, **kw: Any) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(base_url=server.base_url, model="m", **FAST, **kw)


# --------------------------------------------------------------------------- HTTP


def test_chat_logprobs_request_and_parse(server: LogprobServer) -> None:
    server.replies.append((200, CHAT_BODY))
    llm = make_llm(server)
    assert isinstance(llm, LogprobLLM) and supports_logprobs(llm)
    out = llm.complete_logprobs("Is it relevant?", top_logprobs=5, max_tokens=3)
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["logprobs"] is True and req["body"]["top_logprobs"] == 5
    assert req["body"]["messages"] == [{"role": "user", "content": "Is it relevant?"}]
    assert req["body"]["max_tokens"] == 3 and req["body"]["temperature"] == 0.0
    assert out.text == "Relevant."
    assert [t.token for t in out.tokens] == ["Relevant", "."]
    assert out.tokens[0].top == {"Relevant": -0.25, "Ir": -1.6}
    assert out.tokens[1].top == {".": -0.01}  # the chosen token is always among the alternatives
    assert out.mean_logprob() == pytest.approx((-0.25 - 0.01) / 2)
    assert out.tokens[0].prob("Ir") == pytest.approx(math.exp(-1.6))
    assert out.tokens[0].prob("absent") == pytest.approx(math.exp(-100))
    assert llm.usage["completion_tokens"] == 2 and llm.usage["calls"] == 1


def test_raw_completions_request_and_parse(server: LogprobServer) -> None:
    server.replies.append((200, COMPLETION_BODY))
    llm = make_llm(server, extra_body={"skip_special_tokens": False})
    out = llm.complete_logprobs("### Instruction:\nq\n\n### Response:\n", raw=True, top_logprobs=20)
    req = server.requests[0]
    assert req["path"] == "/v1/completions"
    assert req["body"]["prompt"].startswith("### Instruction:") and "messages" not in req["body"]
    assert req["body"]["logprobs"] == 20 and req["body"]["skip_special_tokens"] is False
    assert out.text.startswith("[Relevant]Paris")
    assert [t.token for t in out.tokens] == ["[Relevant]", "Paris", "[Fully supported]", "[Utility:5]"]
    assert out.tokens[0].top["[Irrelevant]"] == -2.4
    assert out.tokens[3].top == {"[Utility:5]": -0.4}  # a null top_logprobs entry
    assert out.mean_logprob() == pytest.approx(-0.25)


def test_no_logprobs_in_body_gives_plain_completion(server: LogprobServer) -> None:
    body = json.loads(json.dumps(CHAT_BODY))
    body["choices"][0]["logprobs"] = None
    server.replies.append((200, body))
    out = make_llm(server).complete_logprobs("q")
    assert out.text == "Relevant." and out.tokens == [] and out.mean_logprob() is None


def test_malformed_logprobs_are_retried_then_raise_a_clear_error(server: LogprobServer) -> None:
    bad = json.loads(json.dumps(COMPLETION_BODY))
    del bad["choices"][0]["logprobs"]["token_logprobs"]
    server.replies.extend([(200, bad), (200, bad), (200, bad)])
    llm = make_llm(server, max_retries=2)
    with pytest.raises(LLMResponseError, match=r"/v1/completions.*token_logprobs"):
        llm.complete_logprobs("p", raw=True)
    assert len(server.requests) == 3


def test_malformed_then_valid_is_retried(server: LogprobServer) -> None:
    bad = json.loads(json.dumps(CHAT_BODY))
    bad["choices"][0]["logprobs"]["content"][0]["logprob"] = "high"
    server.replies.extend([(200, bad), (200, CHAT_BODY)])
    out = make_llm(server).complete_logprobs("p")
    assert out.tokens[0].logprob == -0.25 and len(server.requests) == 2


def test_http_400_is_not_retried_and_names_the_endpoint(server: LogprobServer) -> None:
    server.replies.append((400, {"error": "logprobs not supported"}))
    with pytest.raises(LLMResponseError, match=r"/v1/completions.*HTTP 400.*not supported"):
        make_llm(server).complete_logprobs("p", raw=True)
    assert len(server.requests) == 1


def test_schema_is_enforced_on_logprob_requests(server: LogprobServer, caplog: pytest.LogCaptureFixture) -> None:
    """``complete_logprobs(..., schema=)``: vLLM's structured_outputs on chat and on /completions
    (Self-RAG's labels over a vLLM server); OpenAI mode puts response_format on chat only; a refusal
    is sent once more plain and remembered."""
    from kgrag_plugins.models.structured import choice_schema, json_schema

    labels = choice_schema("relevant", ["Relevant", "Irrelevant"])
    server.replies.extend([(200, CHAT_BODY), (200, COMPLETION_BODY)])
    llm = make_llm(server, structured="vllm")
    llm.complete_logprobs("Is it relevant?", schema=labels)
    llm.complete_logprobs("### Instruction:\nq\n\n### Response:\n", raw=True, schema=labels)
    bodies = [r["body"] for r in server.requests]
    assert [b["structured_outputs"] for b in bodies] == [{"choice": ["Relevant", "Irrelevant"]}] * 2
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in bodies)

    server.requests.clear()
    obj = json_schema("a", {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    server.replies.extend([(200, COMPLETION_BODY), (400, {"error": "no response_format"}), (200, CHAT_BODY)])
    llm = make_llm(server, structured="openai")
    llm.complete_logprobs("p", raw=True, schema=obj)  # /completions: nothing to send
    with caplog.at_level("WARNING"):
        assert llm.complete_logprobs("q", schema=obj).text == "Relevant."
    bodies = [r["body"] for r in server.requests]
    assert "response_format" not in bodies[0] and "structured_outputs" not in bodies[0]
    assert bodies[1]["response_format"]["json_schema"]["strict"] is True
    assert "response_format" not in bodies[2] and not llm.supports_schema
    assert "refused the structured-output request" in caplog.text


def test_raw_needs_a_prompt_string(server: LogprobServer) -> None:
    with pytest.raises(TypeError, match="prompt string"):
        make_llm(server).complete_logprobs([{"role": "user", "content": "x"}], raw=True)
    assert server.requests == []


# --------------------------------------------------------------------------- parser robustness


def test_parser_errors_name_the_field() -> None:
    with pytest.raises(LogprobsFormatError, match="choices"):
        parse_chat_logprobs({"nothing": 1})
    with pytest.raises(LogprobsFormatError, match=r"content\[0\]\.token"):
        parse_chat_logprobs({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"logprob": 0}]}}]})
    with pytest.raises(LogprobsFormatError, match="same length"):
        parse_completion_logprobs({"choices": [{"text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": []}}]})
    with pytest.raises(LogprobsFormatError, match="as long as"):
        body = {"choices": [{"text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": [0.0], "top_logprobs": []}}]}
        parse_completion_logprobs(body)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=12,
)
keys = st.sampled_from(
    ["choices", "message", "content", "logprobs", "token", "top_logprobs", "tokens", "token_logprobs", "text"]
)
shaped = st.recursive(
    st.none() | st.floats(allow_nan=True) | st.text(max_size=4) | st.integers(),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(keys, kids, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, shaped))
def test_parsers_never_crash_with_obscure_errors(data: Any) -> None:
    for parse in (parse_chat_logprobs, parse_completion_logprobs):
        try:
            out = parse(data)
        except LogprobsFormatError as exc:
            assert str(exc)
        else:
            assert isinstance(out, Completion) and isinstance(out.text, str)
            assert all(isinstance(t, TokenLogprob) and t.token in t.top for t in out.tokens)


token_st = st.tuples(
    st.text(min_size=1, max_size=6),
    st.floats(min_value=-50, max_value=0),
    st.dictionaries(st.text(min_size=1, max_size=6), st.floats(min_value=-50, max_value=0), max_size=4),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(token_st, max_size=6))
def test_valid_shapes_round_trip(tokens: list[tuple[str, float, dict[str, float]]]) -> None:
    text = "".join(t for t, _, _ in tokens)
    chat = {
        "choices": [
            {
                "message": {"content": text},
                "logprobs": {
                    "content": [
                        {"token": t, "logprob": lp, "top_logprobs": [{"token": a, "logprob": b} for a, b in tp.items()]}
                        for t, lp, tp in tokens
                    ]
                },
            }
        ]
    }
    raw = {
        "choices": [
            {
                "text": text,
                "logprobs": {
                    "tokens": [t for t, _, _ in tokens],
                    "token_logprobs": [lp for _, lp, _ in tokens],
                    "top_logprobs": [top for _, _, top in tokens],
                },
            }
        ]
    }
    for out in (parse_chat_logprobs(chat), parse_completion_logprobs(raw)):
        assert out.text == text
        assert [(t.token, t.logprob) for t in out.tokens] == [(t, lp) for t, lp, _ in tokens]
        for got, (tok, lp, top) in zip(out.tokens, tokens):
            assert got.top == {**top, tok: top.get(tok, lp)}


# --------------------------------------------------------------------------- ScriptedLLM and validation


def test_scripted_llm_scripts_completions() -> None:
    comp = Completion("Yes", [TokenLogprob("Yes", -0.1, {"Yes": -0.1, "No": -2.3})])
    llm = ScriptedLLM([comp, "plain", comp])
    assert supports_logprobs(llm)
    assert llm.complete_logprobs("q", raw=True, top_logprobs=7) is comp
    plain = llm.complete_logprobs("q")
    assert plain.text == "plain" and plain.tokens == []
    assert llm.complete("q") == "Yes"  # complete() returns a scripted completion's text
    assert llm.calls[0]["raw"] is True and llm.calls[0]["top_logprobs"] == 7
    assert "raw" not in llm.calls[2]


def test_complete_logprobs_validated_retry_then_fallback(caplog: pytest.LogCaptureFixture) -> None:
    def validate(c: Completion) -> str:
        if not c.text.startswith("Yes"):
            raise InvalidReply("no label")
        return c.text

    llm = ScriptedLLM(["Well...", "Yes"])
    errors: list[dict[str, Any]] = []
    assert complete_logprobs_validated(llm, "q", validate, step="s", errors=errors) == "Yes"
    assert errors == [] and len(llm.calls) == 2

    llm = ScriptedLLM(["Well...", "Hmm, maybe"])
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.models.logprobs"):
        out = complete_logprobs_validated(llm, "q", validate, step="s", errors=errors, context={"passage": 3})
    assert out is None and len(llm.calls) == 2
    assert errors[-1]["kind"] == "invalid_reply" and errors[-1]["reply"] == "Hmm, maybe"
    assert errors[-1]["passage"] == 3 and "fell back" in caplog.text

    llm = ScriptedLLM([LLMError("endpoint down")])
    assert complete_logprobs_validated(llm, "q", validate, step="s", errors=errors) is None
    assert errors[-1]["kind"] == "llm_error" and "endpoint down" in errors[-1]["error"]
