"""``--llm litellm:MODEL`` (issue 37 item 4): the LiteLLM adapter, against a stand-in ``litellm``
module (LiteLLM is not installed here: it is large and optional)."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections import deque
from typing import Any

import pytest

from kgrag_plugins.agents.common import json_answer
from kgrag_plugins.eval.qa_llm import resolve_llm
from kgrag_plugins.methods.sa_rag.prompts import ANSWER_SCHEMA
from kgrag_plugins.models.breaker import CircuitBreaker, LLMResponseError, LLMTimeoutError, LLMUnavailableError
from kgrag_plugins.models.litellm_llm import LiteLLMLLM, import_litellm
from kgrag_plugins.models.llm import as_llm

GOOD = json.dumps({"reasoning": "The passage says Paris is the capital", "final_answer": "Paris"})


class Timeout(Exception):  # LiteLLM's exception names are what the adapter reads
    pass


class BadRequestError(Exception):
    pass


class NotFoundError(Exception):
    pass


class FakeLiteLLM(types.ModuleType):
    """``litellm.completion`` answering from a script (text, or an exception to raise)."""

    def __init__(self) -> None:
        super().__init__("litellm")
        self.calls: list[dict[str, Any]] = []
        self.script: deque[Any] = deque()

    def completion(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        item = self.script.popleft() if self.script else "Paris"
        if isinstance(item, BaseException):
            raise item
        words = sum(len(m["content"].split()) for m in kwargs["messages"])
        usage = types.SimpleNamespace(prompt_tokens=words, completion_tokens=len(item.split()))
        message = types.SimpleNamespace(role="assistant", content=item)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)], usage=usage)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLiteLLM:
    monkeypatch.delenv("KGRAG_LLM_DEADLINE", raising=False)
    mod = FakeLiteLLM()
    monkeypatch.setitem(sys.modules, "litellm", mod)
    return mod


def test_missing_litellm_names_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)  # import litellm -> ImportError
    with pytest.raises(ImportError, match="pip install litellm"):
        import_litellm()
    with pytest.raises(ValueError, match="pip install litellm"):
        resolve_llm("litellm:ollama_chat/smollm2:135m")


def test_json_step_goes_as_response_format_and_parses(fake):
    fake.script.append(GOOD)
    llm, description, close = resolve_llm("litellm:ollama_chat/smollm2:135m", deadline=9)
    assert isinstance(llm, LiteLLMLLM) and description == "litellm:ollama_chat/smollm2:135m"
    assert as_llm(llm) is llm and llm.supports_schema
    assert json_answer(llm, "What is the capital of France?", "Paris is the capital of France.", []) == "Paris"
    (call,) = fake.calls
    assert call["model"] == "ollama_chat/smollm2:135m"
    assert call["response_format"] == ANSWER_SCHEMA.response_format()
    assert call["max_tokens"] == 192 and call["temperature"] == 0.0 and call["num_retries"] == 0
    assert 0 < call["timeout"] <= 9  # the time left of the call's deadline
    assert llm.usage["calls"] == 1 and llm.usage["completion_tokens"] == len(GOOD.split())
    close()


def test_timeouts_are_retried_within_the_deadline_then_raise(fake):
    fake.script.extend([Timeout("slow"), "Paris"])
    llm = LiteLLMLLM("openai/x", backoff=0.01)
    assert llm.complete("hi") == "Paris" and len(fake.calls) == 2
    fake.script.extend([Timeout("slow")] * 3)
    with pytest.raises(LLMTimeoutError, match="Timeout: slow"):
        LiteLLMLLM("openai/x", backoff=0.01, max_retries=2).complete("hi")


def test_a_refused_schema_is_dropped_once(fake, caplog):
    fake.script.extend([BadRequestError("response_format not supported"), GOOD])
    llm = LiteLLMLLM("ollama/x", backoff=0.01)
    assert llm.complete("q", schema=ANSWER_SCHEMA) == GOOD
    assert "response_format" in fake.calls[0] and "response_format" not in fake.calls[1]
    assert llm.supports_schema is False


def test_fatal_errors_are_not_retried_and_keys_are_redacted(fake):
    fake.script.append(NotFoundError("model x not found; api_key=sk-secret-abcdef123"))
    llm = LiteLLMLLM("openai/x", api_key="sk-secret-abcdef123")
    with pytest.raises(LLMResponseError) as info:
        llm.complete("hi")
    assert len(fake.calls) == 1 and "abcdef123" not in str(info.value)
    assert fake.calls[0]["api_key"] == "sk-secret-abcdef123"


def test_breaker_opens_on_a_dead_provider(fake):
    fake.script.extend([ConnectionError("refused")] * 3)
    llm = LiteLLMLLM("openai/x", backoff=0.01, breaker=CircuitBreaker(failures=3, cooldown=60))
    with pytest.raises(LLMResponseError, match="refused"):
        llm.complete("hi")
    with pytest.raises(LLMUnavailableError):
        llm.complete("hi")


def test_acomplete(fake):
    assert asyncio.run(LiteLLMLLM("openai/x").acomplete("hi", max_tokens=5)) == "Paris"
    assert fake.calls[0]["max_tokens"] == 5
