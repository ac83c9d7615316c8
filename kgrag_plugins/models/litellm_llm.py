"""LiteLLM as a routing layer: ``--llm litellm:MODEL`` (``litellm:ollama_chat/smollm2:135m``,
``litellm:openai/gpt-4o-mini``, ``litellm:anthropic/claude-...``).

:class:`LiteLLMLLM` is a thin adapter over ``litellm.completion``: LiteLLM is an optional import,
not a dependency (``pip install litellm``; it is large). The adapter keeps the package's contract:
one total deadline per call (``KGRAG_LLM_DEADLINE``; each attempt gets the time left as LiteLLM's
``timeout``), bounded retries with backoff (LiteLLM's own retries are off: ``num_retries=0``), the
:class:`~kgrag_plugins.models.breaker.CircuitBreaker`, ``usage`` counting and redacted errors. A JSON
schema of a structured step goes as ``response_format`` (strict ``json_schema``), which LiteLLM
translates per provider (Ollama's ``format`` included); a regex or choice goes unconstrained. A
provider that refuses it (LiteLLM's ``BadRequestError`` / ``UnsupportedParamsError``) is asked
again without it, and this client sends no more (one WARNING). ``acomplete`` runs ``complete`` in a
worker thread.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from typing import Any

from .._secrets import redact, register_secret
from ..config import DEFAULT_LLM_DEADLINE, env_number
from .breaker import CircuitBreaker, LLMResponseError, LLMTimeoutError
from .messages import Message, to_messages
from .usage import report_usage

__all__ = ["LiteLLMLLM", "import_litellm"]

logger = logging.getLogger(__name__)

#: LiteLLM exception names that mean "the request itself is wrong": not retried, the breaker stays closed.
_FATAL = frozenset(
    {
        "BadRequestError",
        "UnsupportedParamsError",
        "NotFoundError",
        "AuthenticationError",
        "PermissionDeniedError",
        "UnprocessableEntityError",
        "ContextWindowExceededError",
        "ContentPolicyViolationError",
        "InvalidRequestError",
    }
)
_REFUSAL = frozenset({"BadRequestError", "UnsupportedParamsError", "UnprocessableEntityError"})


def import_litellm() -> Any:
    """The ``litellm`` module, or an ImportError saying how to install it."""
    try:
        return importlib.import_module("litellm")
    except ImportError as exc:
        raise ImportError(
            "--llm litellm:MODEL needs LiteLLM, which kgrag-plugins does not install: pip install litellm "
            "(or pip install 'kgrag-plugins[litellm]'); for Ollama or an OpenAI-compatible server no extra "
            "package is needed: --llm ollama:MODEL or --llm http://HOST/v1"
        ) from exc


def _get(obj: Any, key: str) -> Any:
    """``obj.key`` or ``obj[key]`` (LiteLLM's response objects allow both; a dict only the second)."""
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


class LiteLLMLLM:
    """An :class:`~kgrag_plugins.models.messages.LLM` over ``litellm.completion(model=MODEL, ...)``.

    ``litellm_kwargs`` go to every call (``api_base=``, ``api_key=``, ``keep_alive=`` ...).
    """

    def __init__(
        self,
        model: str,
        *,
        deadline: float | None = None,
        max_retries: int = 2,
        backoff: float = 0.5,
        default_max_tokens: int | None = 512,
        default_temperature: float | None = 0.0,
        breaker: CircuitBreaker | None = None,
        structured: bool = True,
        **litellm_kwargs: Any,
    ) -> None:
        if not model:
            raise ValueError("LiteLLMLLM needs a LiteLLM model string, e.g. 'ollama_chat/smollm2:135m'")
        self._litellm = import_litellm()
        self.model = model
        self.deadline = env_number("LLM_DEADLINE", DEFAULT_LLM_DEADLINE) if deadline is None else float(deadline)
        if not self.deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {self.deadline}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.max_retries, self.backoff = int(max_retries), float(backoff)
        self.default_max_tokens, self.default_temperature = default_max_tokens, default_temperature
        self.breaker = breaker if breaker is not None else CircuitBreaker()
        self.structured = structured
        self._schema_refused = False
        self.kwargs = dict(litellm_kwargs)
        register_secret(self.kwargs.get("api_key"))
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LiteLLMLLM(model={self.model!r}, deadline={self.deadline}, max_retries={self.max_retries})"

    @property
    def supports_schema(self) -> bool:
        """Whether a JSON schema goes to LiteLLM as ``response_format``."""
        return self.structured and not self._schema_refused

    def close(self) -> None:
        """Nothing to close (LiteLLM pools its own clients)."""

    def _request(
        self,
        prompt: str | list[Message],
        stop: list[str] | None,
        max_tokens: int | None,
        temperature: float | None,
        schema: Any,
    ) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model, "messages": to_messages(prompt), "num_retries": 0}
        max_tokens = self.default_max_tokens if max_tokens is None else max_tokens
        temperature = self.default_temperature if temperature is None else temperature
        if max_tokens is not None:
            req["max_tokens"] = int(max_tokens)
        if temperature is not None:
            req["temperature"] = temperature
        if stop:
            req["stop"] = list(stop)
        if schema is not None and self.supports_schema and schema.json is not None:
            req["response_format"] = schema.response_format()
        return {**req, **self.kwargs}

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        schema: Any = None,
    ) -> str:
        """One completion through LiteLLM under the deadline, retries and breaker."""
        started = time.monotonic()
        req = self._request(prompt, stop, max_tokens, temperature, schema)
        try:
            return self._call(started, req)
        except LLMResponseError as exc:
            if "response_format" not in req or getattr(exc, "kind", "") not in _REFUSAL:
                raise
            self._schema_refused = True
            logger.warning(
                "LiteLLM model %s refused the structured-output request (%s); sending plain", self.model, exc
            )
        return self._call(started, self._request(prompt, stop, max_tokens, temperature, None))

    async def acomplete(self, prompt: str | list[Message], **kwargs: Any) -> str:
        """:meth:`complete` in a worker thread."""
        return await asyncio.to_thread(self.complete, prompt, **kwargs)

    def _call(self, started: float, req: dict[str, Any]) -> str:
        self.breaker.check(f"LiteLLM model {self.model}")
        end = started + self.deadline
        last = ""
        timed_out = False
        made = 0
        for attempt in range(1, self.max_retries + 2):
            left = end - time.monotonic()
            if left <= 0.05:
                break
            made = attempt
            try:
                resp = self._litellm.completion(**req, timeout=left)
            except Exception as exc:  # LiteLLM raises its own classes (OpenAI SDK style)
                kind = type(exc).__name__
                if kind in _FATAL:
                    self.breaker.success()  # the provider answered; the request was refused
                    error = LLMResponseError(f"LiteLLM model {self.model} refused the request ({kind}): {redact(exc)}")
                    error.kind = kind  # type: ignore[attr-defined]
                    raise error from None
                self.breaker.failure()
                timed_out = "Timeout" in kind
                last = f"{kind}: {redact(exc)}"
            else:
                text = self._content(resp)
                if text is not None:
                    self.breaker.success()
                    return text
                self.breaker.failure()
                last, timed_out = "reply lacks choices[0].message.content (a string)", False
            if self.breaker.is_open or attempt == self.max_retries + 1:
                break
            pause = self.backoff * 2 ** (attempt - 1)
            if time.monotonic() + pause >= end:
                break
            time.sleep(pause)
        cls = LLMTimeoutError if timed_out or time.monotonic() >= end - 0.05 else LLMResponseError
        raise cls(
            f"LiteLLM model {self.model} failed after {made} attempt(s) within its {self.deadline:g}s deadline "
            f"(KGRAG_LLM_DEADLINE); last error: {last or 'no time left'}"
        )

    def _content(self, resp: Any) -> str | None:
        try:
            content = _get(_get(_get(resp, "choices")[0], "message"), "content")
        except (TypeError, IndexError, KeyError):
            return None
        if not isinstance(content, str):
            return None
        usage = _get(resp, "usage")
        with self._lock:
            self.usage["calls"] += 1
            for key in ("prompt_tokens", "completion_tokens"):
                value = _get(usage, key) if usage is not None else None
                if isinstance(value, int):
                    self.usage[key] += value
        if usage is not None:
            report_usage(_get(usage, "prompt_tokens"), _get(usage, "completion_tokens"))
        return content
