"""LLM clients: one small protocol plus an OpenAI-compatible HTTP client and adapters.

Every method in the package talks to an :class:`LLM`: ``complete(prompt) -> str``, where
``prompt`` is a string (one user message) or a list of ``{"role", "content"}`` messages.

* :class:`OpenAICompatibleLLM` - ``POST {base_url}/chat/completions`` via ``httpx`` (works with
  ``vllm serve``, Ollama's ``/v1``, OpenAI), with bounded retries and usage counting.
* :class:`LangChainLLM` / :class:`LlamaIndexLLM` - wrap framework chat models.
* :class:`ScriptedLLM` - deterministic replies for tests.
* :func:`as_llm` - turn any of the above (or a framework model) into an :class:`LLM`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx

from kgrag_plugins.config import env

if TYPE_CHECKING:  # pragma: no cover - typing only
    from langchain_core.language_models import BaseChatModel
    from llama_index.core.llms import LLM as LlamaIndexBaseLLM

__all__ = [
    "LLM",
    "LLMError",
    "LLMResponseError",
    "LLMTimeoutError",
    "LangChainLLM",
    "LlamaIndexLLM",
    "Message",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "as_llm",
]

#: A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict[str, str]

_ROLES = ("system", "user", "assistant")
_SNIPPET_CHARS = 300


@runtime_checkable
class LLM(Protocol):
    """Anything that completes a prompt to a string (sync and async).

    A string ``prompt`` means a single user message. ``stop``, ``max_tokens`` and
    ``temperature`` left as ``None`` use the implementation's defaults.
    """

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str: ...

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str: ...


class LLMError(RuntimeError):
    """An LLM call failed."""


class LLMTimeoutError(LLMError):
    """The LLM did not answer in time (after all retries)."""


class LLMResponseError(LLMError):
    """The LLM answered with an HTTP error or a malformed / empty response."""


# --------------------------------------------------------------------------- helpers


def _to_messages(prompt: str | list[Message]) -> list[Message]:
    """Normalise a prompt to a list of chat messages (a string is one user message)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)):
        raise TypeError(f"prompt must be a str or a list of messages, got {type(prompt).__name__}")
    messages: list[Message] = []
    for i, msg in enumerate(prompt):
        if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
            raise TypeError(f"message {i} must be a dict with 'role' and 'content', got {msg!r}")
        role, content = msg["role"], msg["content"]
        if role not in _ROLES:
            raise ValueError(f"message {i}: unknown role {role!r} (expected one of {_ROLES})")
        if not isinstance(content, str):
            raise TypeError(f"message {i}: content must be a str, got {type(content).__name__}")
        messages.append({"role": role, "content": content})
    return messages


def _truncate_at_stop(text: str, stop: list[str] | None) -> str:
    """Cut ``text`` at the earliest occurrence of any (non-empty) stop string."""
    if not stop:
        return text
    cut = len(text)
    for s in stop:
        if s:
            idx = text.find(s)
            if idx != -1:
                cut = min(cut, idx)
    return text[:cut]


def _snippet(text: str) -> str:
    text = text.strip().replace("\n", " ")
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "..."


class _RetryableFailure(Exception):
    """Internal: a failure worth retrying (timeout, connection, 429/5xx, garbage)."""

    def __init__(self, description: str, *, timeout: bool = False) -> None:
        super().__init__(description)
        self.timeout = timeout


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAICompatibleLLM:
    """Client for an OpenAI-compatible ``/chat/completions`` endpoint (vLLM, Ollama, OpenAI).

    Unset ``base_url`` / ``model`` / ``api_key`` come from ``KGRAG_LLM_BASE_URL``,
    ``KGRAG_LLM_MODEL`` and ``KGRAG_LLM_API_KEY``. Timeouts, connection errors, HTTP 429/5xx
    and malformed responses are retried up to ``max_retries`` times with exponential backoff
    (``backoff * 2**n`` seconds); other 4xx fail at once. ``self.usage`` accumulates the
    ``usage`` field of successful responses.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        default_max_tokens: int | None = 512,
        default_temperature: float | None = 0.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        base_url = base_url or env("LLM_BASE_URL")
        model = model or env("LLM_MODEL")
        if not base_url:
            raise ValueError(
                "OpenAICompatibleLLM needs a base_url: pass base_url=... or set KGRAG_LLM_BASE_URL "
                "(e.g. http://localhost:8000/v1)"
            )
        if not model:
            raise ValueError("OpenAICompatibleLLM needs a model: pass model=... or set KGRAG_LLM_MODEL")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key or env("LLM_API_KEY")
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.default_max_tokens = default_max_tokens
        self.default_temperature = default_temperature
        self.extra_body = dict(extra_body or {})
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> OpenAICompatibleLLM:
        """Build from ``KGRAG_LLM_*`` environment variables; keyword arguments override."""
        return cls(**overrides)

    @property
    def url(self) -> str:
        """The full chat-completions URL."""
        return f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        key = "'***'" if self.api_key else "None"
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={key}, timeout={self.timeout}, max_retries={self.max_retries})"
        )

    # -- lifecycle

    def close(self) -> None:
        """Close the pooled sync HTTP client (async calls use a client per call)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> OpenAICompatibleLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout))
            return self._client

    # -- request / response

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _payload(
        self,
        prompt: str | list[Message],
        stop: list[str] | None,
        max_tokens: int | None,
        temperature: float | None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": _to_messages(prompt)}
        max_tokens = self.default_max_tokens if max_tokens is None else max_tokens
        temperature = self.default_temperature if temperature is None else temperature
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if temperature is not None:
            payload["temperature"] = temperature
        if stop:
            payload["stop"] = list(stop)
        payload.update(self.extra_body)
        return payload

    def _handle_response(self, resp: httpx.Response) -> str:
        """Return the content, raise ``_RetryableFailure`` or (fatal) ``LLMResponseError``."""
        status = resp.status_code
        if status == 429 or status >= 500:
            raise _RetryableFailure(f"HTTP {status}: {_snippet(resp.text)}")
        if status >= 300:
            raise LLMResponseError(
                f"LLM request to {self.url} (model {self.model!r}) failed with HTTP {status} "
                f"(not retried): {_snippet(resp.text)}"
            )
        try:
            data = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            raise _RetryableFailure(f"non-JSON response body: {_snippet(resp.text)!r}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _RetryableFailure(f"response lacks choices[0].message.content: {_snippet(resp.text)}") from None
        if not isinstance(content, str):
            raise _RetryableFailure(
                f"choices[0].message.content is {type(content).__name__}, not a string: {_snippet(resp.text)}"
            )
        self._record_usage(data.get("usage"))
        return content

    def _record_usage(self, usage: Any) -> None:
        with self._lock:
            self.usage["calls"] += 1
            if isinstance(usage, dict):
                for key in ("prompt_tokens", "completion_tokens"):
                    value = usage.get(key)
                    if isinstance(value, int):
                        self.usage[key] += value

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2 ** (attempt - 1))

    def _final_error(self, attempts: int, last: _RetryableFailure) -> LLMError:
        cls = LLMTimeoutError if last.timeout else LLMResponseError
        return cls(
            f"LLM request to {self.url} (model {self.model!r}) failed after {attempts} attempt(s); last error: {last}"
        )

    @staticmethod
    def _transport_failure(exc: httpx.TransportError, timeout: float) -> _RetryableFailure:
        if isinstance(exc, httpx.TimeoutException):
            return _RetryableFailure(f"timed out after {timeout}s ({type(exc).__name__})", timeout=True)
        return _RetryableFailure(f"{type(exc).__name__}: {exc}")

    # -- public API

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Send one chat completion request (with retries) and return the reply text."""
        payload = self._payload(prompt, stop, max_tokens, temperature)
        client = self._sync_client()
        attempts = self.max_retries + 1
        last: _RetryableFailure | None = None
        for attempt in range(1, attempts + 1):
            try:
                resp = client.post(self.url, json=payload, headers=self._headers())
                return self._handle_response(resp)
            except httpx.TransportError as exc:
                last = self._transport_failure(exc, self.timeout)
            except _RetryableFailure as exc:
                last = exc
            if attempt < attempts:
                time.sleep(self._delay(attempt))
        assert last is not None
        raise self._final_error(attempts, last)

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Async :meth:`complete` (uses a fresh ``httpx.AsyncClient`` per call)."""
        payload = self._payload(prompt, stop, max_tokens, temperature)
        attempts = self.max_retries + 1
        last: _RetryableFailure | None = None
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout)) as client:
            for attempt in range(1, attempts + 1):
                try:
                    resp = await client.post(self.url, json=payload, headers=self._headers())
                    return self._handle_response(resp)
                except httpx.TransportError as exc:
                    last = self._transport_failure(exc, self.timeout)
                except _RetryableFailure as exc:
                    last = exc
                if attempt < attempts:
                    await asyncio.sleep(self._delay(attempt))
        assert last is not None
        raise self._final_error(attempts, last)


# --------------------------------------------------------------------------- adapters


def _langchain_text(result: Any) -> str:
    """Text of a LangChain ``invoke`` result (message, content blocks, or plain string)."""
    content = getattr(result, "content", result)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)


class LangChainLLM:
    """Adapter for a LangChain chat model (``BaseChatModel``).

    ``stop`` is passed to ``invoke`` and also applied to the output (some models ignore it).
    ``max_tokens`` / ``temperature`` are ignored: configure them on the chat model itself.
    """

    def __init__(self, chat_model: BaseChatModel) -> None:
        self.chat_model = chat_model

    def __repr__(self) -> str:
        return f"LangChainLLM({type(self.chat_model).__name__})"

    @staticmethod
    def _lc_messages(prompt: str | list[Message]) -> list[Any]:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        classes = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        return [classes[m["role"]](content=m["content"]) for m in _to_messages(prompt)]

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Invoke the chat model and return its text."""
        kwargs: dict[str, Any] = {"stop": list(stop)} if stop else {}
        result = self.chat_model.invoke(self._lc_messages(prompt), **kwargs)
        return _truncate_at_stop(_langchain_text(result), stop)

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Async :meth:`complete` via ``ainvoke``."""
        kwargs: dict[str, Any] = {"stop": list(stop)} if stop else {}
        result = await self.chat_model.ainvoke(self._lc_messages(prompt), **kwargs)
        return _truncate_at_stop(_langchain_text(result), stop)


class LlamaIndexLLM:
    """Adapter for a LlamaIndex ``llama_index.core.llms.LLM`` (uses ``chat`` / ``achat``).

    ``stop`` is applied by truncating the reply at the first stop string.
    ``max_tokens`` / ``temperature`` are ignored: configure them on the LlamaIndex LLM itself.
    """

    def __init__(self, llm: LlamaIndexBaseLLM) -> None:
        self.llm = llm

    def __repr__(self) -> str:
        return f"LlamaIndexLLM({type(self.llm).__name__})"

    @staticmethod
    def _li_messages(prompt: str | list[Message]) -> list[Any]:
        from llama_index.core.llms import ChatMessage, MessageRole

        return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in _to_messages(prompt)]

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Call ``llm.chat`` and return the reply text."""
        response = self.llm.chat(self._li_messages(prompt))
        return _truncate_at_stop(response.message.content or "", stop)

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Async :meth:`complete` via ``llm.achat``."""
        response = await self.llm.achat(self._li_messages(prompt))
        return _truncate_at_stop(response.message.content or "", stop)


# --------------------------------------------------------------------------- scripted


class ScriptedLLM:
    """Deterministic LLM for tests.

    ``replies`` is either a list consumed in order (an ``Exception`` item is raised instead
    of returned) or a callable ``messages -> str``. Every call is recorded in ``self.calls``
    as ``{"messages", "stop", "max_tokens", "temperature"}``; stop strings truncate replies.
    """

    def __init__(self, replies: list[str | Exception] | Callable[[list[Message]], str]) -> None:
        if callable(replies):
            self._fn: Callable[[list[Message]], str] | None = replies
            self._replies: list[str | Exception] = []
        else:
            self._fn = None
            self._replies = list(replies)
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        mode = "callable" if self._fn is not None else f"{len(self._replies)} replies left"
        return f"ScriptedLLM({mode}, {len(self.calls)} calls)"

    @property
    def remaining(self) -> int:
        """Replies not yet consumed (0 for a callable script)."""
        return len(self._replies)

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Return the next scripted reply (truncated at ``stop``)."""
        messages = _to_messages(prompt)
        with self._lock:
            self.calls.append(
                {
                    "messages": messages,
                    "stop": list(stop) if stop else None,
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                }
            )
            if self._fn is None:
                if not self._replies:
                    raise LLMError(
                        f"ScriptedLLM ran out of replies after {len(self.calls) - 1} call(s); "
                        f"last prompt: {_snippet(messages[-1]['content'] if messages else '')!r}"
                    )
                reply = self._replies.pop(0)
        if self._fn is not None:
            reply = self._fn(messages)
        if isinstance(reply, BaseException):
            raise reply
        if not isinstance(reply, str):
            raise LLMResponseError(f"ScriptedLLM reply must be a str, got {type(reply).__name__}")
        return _truncate_at_stop(reply, stop)

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Async :meth:`complete`."""
        return self.complete(prompt, stop=stop, max_tokens=max_tokens, temperature=temperature)


# --------------------------------------------------------------------------- dispatch

_OWN_LLMS = (OpenAICompatibleLLM, LangChainLLM, LlamaIndexLLM, ScriptedLLM)


def _is_langchain_model(obj: Any) -> bool:
    try:
        from langchain_core.language_models import BaseLanguageModel
    except ImportError:
        BaseLanguageModel = None  # type: ignore[assignment,misc]  # noqa: N806
    if BaseLanguageModel is not None and isinstance(obj, BaseLanguageModel):
        return True
    return callable(getattr(obj, "invoke", None)) and callable(getattr(obj, "bind", None))


def _is_llamaindex_llm(obj: Any) -> bool:
    try:
        from llama_index.core.base.llms.base import BaseLLM
    except ImportError:
        BaseLLM = None  # type: ignore[assignment,misc]  # noqa: N806
    if BaseLLM is not None and isinstance(obj, BaseLLM):
        return True
    return callable(getattr(obj, "chat", None)) and hasattr(obj, "metadata")


def as_llm(obj: Any) -> LLM | None:
    """Coerce ``obj`` to an :class:`LLM`.

    ``None`` -> ``None``; our own clients and anything else with ``complete``/``acomplete``
    -> itself; a LangChain chat model -> :class:`LangChainLLM`; a LlamaIndex LLM ->
    :class:`LlamaIndexLLM`. Anything else raises ``TypeError``.
    """
    if obj is None:
        return None
    if isinstance(obj, _OWN_LLMS):
        return obj
    # Framework models first: a LlamaIndex LLM also has complete/acomplete, with other types.
    if _is_langchain_model(obj):
        return LangChainLLM(obj)
    if _is_llamaindex_llm(obj):
        return LlamaIndexLLM(obj)
    if callable(getattr(obj, "complete", None)) and callable(getattr(obj, "acomplete", None)):
        return obj
    raise TypeError(
        f"cannot use {type(obj).__module__}.{type(obj).__name__} as an LLM: expected an object "
        "with complete()/acomplete(), a LangChain chat model, or a LlamaIndex LLM"
    )
