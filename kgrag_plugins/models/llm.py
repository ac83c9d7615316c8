"""LLM clients: one small protocol plus an OpenAI-compatible HTTP client and adapters.

Every method in the package talks to an :class:`LLM`: ``complete(prompt) -> str``, where
``prompt`` is a string (one user message) or a list of ``{"role", "content"}`` messages.

* :class:`OpenAICompatibleLLM` - ``POST {base_url}/chat/completions`` via ``httpx`` (works with
  ``vllm serve``, Ollama's ``/v1``, OpenAI), with bounded retries, one total deadline per call
  (``KGRAG_LLM_DEADLINE``, default 30 s), a :class:`CircuitBreaker` and usage counting.
* :class:`~kgrag_plugins.models.ollama.OllamaLLM` (in :mod:`.ollama`) - a subclass on Ollama's
  native ``/api/chat`` (``format`` JSON schemas, ``think: false``, ``keep_alive``).
* :class:`ScriptedLLM` - deterministic replies for tests.
* :func:`as_llm` - turn any of the above, or a framework chat model, into an :class:`LLM`. The
  framework adapters (LangChain, LlamaIndex) live in ``kgrag_plugins.integrations``; this module
  imports no framework.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx

from .._secrets import redact, register_secret, split_userinfo
from ..adapters import GROUP, hook
from ..config import DEFAULT_LLM_ATTEMPT_TIMEOUT, DEFAULT_LLM_DEADLINE, env, env_number
from .breaker import CircuitBreaker, LLMError, LLMResponseError, LLMTimeoutError, LLMUnavailableError
from .logprobs import (
    DEFAULT_TOP_LOGPROBS,
    Completion,
    LogprobsFormatError,
    parse_chat_logprobs,
    parse_completion_logprobs,
)
from .messages import LLM, Message, snippet, to_messages
from .scripted import ChatAdapter, ScriptedLLM
from .usage import report_usage

__all__ = [
    "LLM",
    "ChatAdapter",
    "CircuitBreaker",
    "LLMError",
    "LLMResponseError",
    "LLMTimeoutError",
    "LLMUnavailableError",
    "Message",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "as_llm",
]

logger = logging.getLogger(__name__)

_DEADLINE_MARGIN = 0.1


# --------------------------------------------------------------------------- helpers


class _RetryableFailure(Exception):
    """Internal: a failure worth retrying (timeout, connection, 429/5xx, garbage)."""

    def __init__(self, description: str, *, timeout: bool = False, connection: bool = False) -> None:
        super().__init__(description)
        self.timeout = timeout
        #: The server refused or dropped the connection (it is down or was restarted).
        self.connection = connection


def _json_body(resp: httpx.Response, url: str, model: str) -> Any:
    """The decoded JSON body of an LLM server's reply: HTTP 429 / 5xx and a non-JSON body raise
    ``_RetryableFailure``, another non-2xx status a fatal :class:`LLMResponseError`."""
    status = resp.status_code
    if status == 429 or status >= 500:
        raise _RetryableFailure(f"HTTP {status}: {snippet(resp.text)}")
    if status >= 300:
        raise LLMResponseError(
            f"LLM request to {url} (model {model!r}) failed with HTTP {status} (not retried): {snippet(resp.text)}"
        )
    try:
        return resp.json()
    except ValueError:  # JSONDecodeError and UnicodeDecodeError included
        raise _RetryableFailure(f"non-JSON response body: {snippet(resp.text)!r}") from None


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAICompatibleLLM:
    """Client for an OpenAI-compatible ``/chat/completions`` endpoint (vLLM, Ollama, OpenAI).

    Unset ``base_url`` / ``model`` / ``api_key`` come from ``KGRAG_LLM_BASE_URL``,
    ``KGRAG_LLM_MODEL`` and ``KGRAG_LLM_API_KEY``. Timeouts, connection errors, HTTP 429/5xx
    and malformed responses are retried up to ``max_retries`` times with exponential backoff
    (``backoff * 2**n`` seconds); other 4xx fail at once. ``self.usage`` accumulates the
    ``usage`` field of successful responses.

    ``deadline`` (default ``KGRAG_LLM_DEADLINE`` or 30 s) bounds the whole call from its entry,
    retries and backoff included: each attempt waits at most ``min(timeout, time left)`` less a
    margin of at most 0.1 s (httpx applies it to connecting and to each read), and no retry starts
    once its backoff would reach the deadline; running out raises :class:`LLMTimeoutError`.
    ``timeout`` (per attempt; default the larger of 60 s,
    :data:`~kgrag_plugins.config.DEFAULT_LLM_ATTEMPT_TIMEOUT`, and the deadline): a deadline above
    60 s lifts the attempt timeout with it, so a slow CPU server's long reply is waited for instead
    of abandoned and sent again until the deadline runs out.
    ``breaker`` (default: a fresh :class:`CircuitBreaker` per client,
    ``KGRAG_LLM_BREAKER_FAILURES`` = 3 failed attempts, ``KGRAG_LLM_BREAKER_COOLDOWN`` = 30 s)
    makes calls to a dead endpoint fail fast with :class:`LLMUnavailableError`; pass one breaker
    to several clients to share it.

    ``structured`` says how an :class:`~kgrag_plugins.models.structured.OutputSchema` passed as
    ``complete(..., schema=...)`` is enforced: ``"vllm"`` (vLLM's ``structured_outputs``: JSON, regex
    and choice; :meth:`VLLMServer.client <kgrag_plugins.models.vllm.VLLMServer.client>` sets it),
    ``"openai"`` (``response_format`` with a strict ``json_schema``: OpenAI, Ollama's ``/v1``,
    llama.cpp; a regex or choice is sent unconstrained), ``"auto"`` (the default: ``"vllm"`` when the
    server's ``/models`` lists a model ``owned_by`` vLLM, else ``"openai"``), or ``"off"``. A server
    that refuses the constraint with HTTP 400/422 is asked again without it, and later calls of this
    client send none (one WARNING).
    """

    #: Request fields that carry a structured-output constraint (a 400/422 to them: see ``_refused``).
    _SCHEMA_FIELDS: tuple[str, ...] = ("structured_outputs", "response_format")

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        backoff: float = 0.5,
        default_max_tokens: int | None = 512,
        default_temperature: float | None = 0.0,
        extra_body: dict[str, Any] | None = None,
        deadline: float | None = None,
        breaker: CircuitBreaker | None = None,
        structured: str = "auto",
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
        deadline = env_number("LLM_DEADLINE", DEFAULT_LLM_DEADLINE) if deadline is None else float(deadline)
        if not deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline}")
        # user:password@ in the URL is sent as a header, never kept in the URL we log and name in errors
        self.base_url, self._userinfo = split_userinfo(base_url.rstrip("/"))
        self.model = model
        self.api_key = api_key or env("LLM_API_KEY")
        register_secret(self.api_key)  # masked wherever redact() runs
        # a deadline above the attempt timeout lifts it: a slow server's long reply is waited for, not
        # abandoned and sent again until the deadline runs out (a hung server is still bounded by it)
        self.timeout = max(DEFAULT_LLM_ATTEMPT_TIMEOUT, deadline) if timeout is None else float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.default_max_tokens = default_max_tokens
        self.default_temperature = default_temperature
        self.extra_body = dict(extra_body or {})
        self.deadline = deadline
        self.breaker = breaker if breaker is not None else CircuitBreaker()
        if structured not in ("auto", "vllm", "openai", "off"):
            raise ValueError(f"structured must be 'auto', 'vllm', 'openai' or 'off', got {structured!r}")
        self.structured = structured
        self._schema_refused = False
        self._auto_mode: str | None = None
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
            f"api_key={key}, timeout={self.timeout}, max_retries={self.max_retries}, deadline={self.deadline})"
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
        if self._userinfo:  # the URL's credentials win, as httpx's own userinfo handling did
            token = base64.b64encode(":".join(self._userinfo).encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    @property
    def supports_schema(self) -> bool:
        """Whether ``complete(..., schema=...)`` is enforced by the server (see ``structured``)."""
        return self.structured != "off" and not self._schema_refused

    def _structured_mode(self) -> str:
        """``structured``, with ``"auto"`` settled once: ``"vllm"`` when ``GET /models`` says a model
        is ``owned_by`` vLLM (its ``structured_outputs`` covers regex and choice too), else ``"openai"``."""
        if self.structured != "auto":
            return self.structured
        with self._lock:
            settled = self._auto_mode
        if settled is None:
            if self.breaker.is_open:  # the server is down: decide once it answers again
                return "openai"
            settled = "openai"
            try:
                resp = self._sync_client().get(f"{self.base_url}/models", headers=self._headers(), timeout=2.0)
                models = resp.json().get("data", []) if resp.status_code == 200 else []
                if any(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models):
                    settled = "vllm"
            except httpx.TransportError:  # not reachable now (down, restarting): ask again next call
                return "openai"
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
            with self._lock:
                self._auto_mode = settled
            logger.debug("%s: structured outputs via %s", self.base_url, settled)
        return settled

    def _schema_body(self, schema: Any) -> dict[str, Any]:
        """The request fields that enforce ``schema`` (empty when this server cannot)."""
        if schema is None or not self.supports_schema:
            return {}
        if self._structured_mode() == "vllm":
            return schema.vllm_body()
        fmt = schema.response_format()
        return {"response_format": fmt} if fmt is not None else {}

    def _payload(
        self,
        prompt: str | list[Message],
        stop: list[str] | None,
        max_tokens: int | None,
        temperature: float | None,
        schema: Any = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": to_messages(prompt)}
        max_tokens = self.default_max_tokens if max_tokens is None else max_tokens
        temperature = self.default_temperature if temperature is None else temperature
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if temperature is not None:
            payload["temperature"] = temperature
        if stop:
            payload["stop"] = list(stop)
        payload.update(self._schema_body(schema))
        payload.update(self.extra_body)
        return payload

    def _refused(self, exc: LLMResponseError, payload: dict[str, Any]) -> bool:
        """A 400/422 to a constrained request: stop sending constraints (once, with a WARNING)."""
        if not any(k in payload for k in self._SCHEMA_FIELDS):
            return False
        if "HTTP 400" not in str(exc) and "HTTP 422" not in str(exc):
            return False
        self._schema_refused = True
        logger.warning("%s refused the structured-output request (%s); sending replies unconstrained", self.url, exc)
        return True

    def _handle_response(self, resp: httpx.Response) -> str:
        """Return the content, raise ``_RetryableFailure`` or (fatal) ``LLMResponseError``."""
        data = _json_body(resp, self.url, self.model)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _RetryableFailure(f"response lacks choices[0].message.content: {snippet(resp.text)}") from None
        if not isinstance(content, str):
            raise _RetryableFailure(
                f"choices[0].message.content is {type(content).__name__}, not a string: {snippet(resp.text)}"
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
        if isinstance(usage, dict):  # this reply's own counts, for the running step's meter
            report_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2 ** (attempt - 1))

    def _final_error(self, attempts: int, last: _RetryableFailure, url: str = "") -> LLMError:
        cls = LLMTimeoutError if last.timeout else LLMResponseError
        return cls(
            f"LLM request to {url or self.url} (model {self.model!r}) failed after {attempts} attempt(s); "
            f"last error: {last}{self._down_hint(last)}"
        )

    def _down_hint(self, last: _RetryableFailure | None) -> str:
        """What to do when the server refused or dropped the connection."""
        if last is None or not last.connection:
            return ""
        return (
            f". Is the LLM server at {self.base_url} running? Start it again (or fix KGRAG_LLM_BASE_URL): "
            f"the client reconnects by itself, with its first call after the circuit breaker's "
            f"{self.breaker.cooldown:g}s cool-down (KGRAG_LLM_BREAKER_COOLDOWN)"
        )

    @staticmethod
    def _transport_failure(exc: httpx.TransportError, timeout: float) -> _RetryableFailure:
        if isinstance(exc, httpx.TimeoutException):
            return _RetryableFailure(f"timed out after {timeout}s ({type(exc).__name__})", timeout=True)
        return _RetryableFailure(f"{type(exc).__name__}: {redact(exc)}", connection=True)

    def _plan(
        self, started: float, handle: Callable[[httpx.Response], Any] | None = None, url: str = ""
    ) -> Generator[tuple[str, float], httpx.Response | httpx.TransportError | None, Any]:
        """The retry policy, written once for :meth:`complete` and :meth:`acomplete`.

        Yields ``("post", timeout)`` to ask for one POST with that timeout (the driver sends back
        the response, or the transport error it raised) and ``("sleep", seconds)`` for a pause;
        returns the reply text or raises the final :class:`LLMError`. Checks the circuit breaker
        first and reports every attempt to it; keeps the whole call, from ``started``
        (``time.monotonic()`` at the call's entry, so client set-up counts), within ``self.deadline``.
        ``handle``/``url``: another response parser and endpoint (:mod:`.logprobs`).
        """
        handle, url = handle or self._handle_response, url or self.url
        self.breaker.check(f"LLM endpoint {url}")
        end = started + self.deadline
        attempts = self.max_retries + 1
        last: _RetryableFailure | None = None
        made = 0
        for attempt in range(1, attempts + 1):
            # keep a small margin (<= 0.1 s) for connecting and handling the reply after a timeout
            left = end - time.monotonic()
            left -= min(_DEADLINE_MARGIN, left / 10)
            if left <= 0:
                break
            timeout = min(self.timeout, left)
            made = attempt
            outcome = yield ("post", timeout)
            try:
                if isinstance(outcome, httpx.TransportError):
                    raise self._transport_failure(outcome, round(timeout, 3))
                text = handle(outcome)
            except _RetryableFailure as exc:
                last = exc
                self.breaker.failure()
            except LLMResponseError:
                self.breaker.success()  # the endpoint is up; the request itself was refused
                raise
            else:
                self.breaker.success()
                return text
            if attempt == attempts or self.breaker.is_open:
                assert last is not None
                raise self._final_error(made, last, url)
            pause = self._delay(attempt)
            if time.monotonic() + pause >= end:
                break
            yield ("sleep", pause)
        self.breaker.trip()
        raise LLMTimeoutError(
            f"LLM request to {url} (model {self.model!r}) got no reply within its {self.deadline:g}s deadline "
            f"(KGRAG_LLM_DEADLINE) after {made} attempt(s); last error: {last}{self._down_hint(last)}"
        )

    # -- public API

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        schema: Any = None,
    ) -> str:
        """Send one chat completion request (with retries) and return the reply text (``schema``:
        an :class:`~kgrag_plugins.models.structured.OutputSchema`, enforced as ``structured`` says)."""
        started = time.monotonic()
        payload = self._payload(prompt, stop, max_tokens, temperature, schema)
        try:
            return self._post_planned(started, payload)
        except LLMResponseError as exc:
            if not self._refused(exc, payload):
                raise
        return self._post_planned(started, self._payload(prompt, stop, max_tokens, temperature))

    def _post_planned(
        self,
        started: float,
        payload: dict[str, Any],
        handle: Callable[[httpx.Response], Any] | None = None,
        url: str = "",
    ) -> Any:
        """Drive :meth:`_plan` synchronously: POST ``payload`` to ``url`` (default the chat
        endpoint) under the retry plan and return what ``handle`` makes of the reply. The one
        sync driver of :meth:`complete`, :mod:`.logprobs` and the vLLM translator backend."""
        client, url = self._sync_client(), url or self.url
        plan: Generator[tuple[str, float], Any, Any] = self._plan(started, handle, url)
        outcome: Any = None
        try:
            while True:
                step, seconds = plan.send(outcome)
                outcome = None
                if step == "sleep":
                    time.sleep(seconds)
                    continue
                try:
                    outcome = client.post(url, json=payload, headers=self._headers(), timeout=seconds)
                except httpx.TransportError as exc:
                    outcome = exc
        except StopIteration as done:
            return done.value

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        schema: Any = None,
    ) -> str:
        """Async :meth:`complete` (same retry plan; a fresh ``httpx.AsyncClient`` per call)."""
        started = time.monotonic()
        payload = self._payload(prompt, stop, max_tokens, temperature, schema)
        try:
            return await self._apost(started, payload)
        except LLMResponseError as exc:
            if not self._refused(exc, payload):
                raise
        return await self._apost(started, self._payload(prompt, stop, max_tokens, temperature))

    async def _apost(self, started: float, payload: dict[str, Any]) -> str:
        """Drive :meth:`_plan` asynchronously for one chat payload."""
        plan: Generator[tuple[str, float], Any, str] = self._plan(started)
        outcome: Any = None
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout)) as client:
            try:
                while True:
                    step, seconds = plan.send(outcome)
                    outcome = None
                    if step == "sleep":
                        await asyncio.sleep(seconds)
                        continue
                    try:
                        outcome = await client.post(self.url, json=payload, headers=self._headers(), timeout=seconds)
                    except httpx.TransportError as exc:
                        outcome = exc
            except StopIteration as done:
                return done.value

    def complete_logprobs(self, prompt: str | list[Message], **kwargs: Any) -> Any:
        """A :class:`~.logprobs.Completion` with token logprobs (chat, or ``raw=True``: ``/completions``);
        see :func:`openai_complete_logprobs` for the keywords."""
        return openai_complete_logprobs(self, prompt, **kwargs)


# --------------------------------------------------------------------------- token logprobs over HTTP


def _logprobs_payload(
    llm: Any,
    prompt: str | list[Message],
    max_tokens: int | None,
    temperature: float | None,
    top_logprobs: int,
    raw: bool,
) -> dict[str, Any]:
    if not 0 <= int(top_logprobs) <= 100_000:
        raise ValueError(f"top_logprobs must be >= 0, got {top_logprobs}")
    payload: dict[str, Any] = {"model": llm.model}
    if raw:
        if not isinstance(prompt, str):
            raise TypeError("raw=True (the /completions endpoint) needs a prompt string, not chat messages")
        payload.update(prompt=prompt, logprobs=int(top_logprobs))
    else:
        payload.update(messages=to_messages(prompt), logprobs=True, top_logprobs=int(top_logprobs))
    max_tokens = llm.default_max_tokens if max_tokens is None else max_tokens
    temperature = llm.default_temperature if temperature is None else temperature
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    if temperature is not None:
        payload["temperature"] = temperature
    payload.update(llm.extra_body)
    return payload


def _logprobs_handler(llm: Any, url: str, raw: bool) -> Callable[[httpx.Response], Completion]:
    parse = parse_completion_logprobs if raw else parse_chat_logprobs

    def handle(resp: httpx.Response) -> Completion:
        data = _json_body(resp, url, llm.model)
        try:
            out = parse(data)
        except LogprobsFormatError as exc:
            raise _RetryableFailure(f"{exc}: {snippet(resp.text)}") from None
        llm._record_usage(data.get("usage") if isinstance(data, dict) else None)
        return out

    return handle


def openai_complete_logprobs(
    llm: Any,
    prompt: str | list[Message],
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    raw: bool = False,
    schema: Any = None,
) -> Completion:
    """:meth:`OpenAICompatibleLLM.complete_logprobs`: one request through the client's retry plan
    (same deadline, retries and circuit breaker as ``complete``). ``schema`` is enforced as in
    ``complete`` (on ``/completions``, ``raw``, only by a vLLM server: OpenAI's
    ``response_format`` is chat-only); a server that refuses it gets the request once more, plain."""
    started = time.monotonic()
    url = f"{llm.base_url}/completions" if raw else llm.url
    payload = _logprobs_payload(llm, prompt, max_tokens, temperature, top_logprobs, raw)
    handle = _logprobs_handler(llm, url, raw)
    body = llm._schema_body(schema) if schema is not None and (not raw or llm._structured_mode() == "vllm") else {}
    if not body:
        return llm._post_planned(started, payload, handle, url)
    try:
        return llm._post_planned(started, {**payload, **body, **llm.extra_body}, handle, url)
    except LLMResponseError as exc:
        if not llm._refused(exc, body):
            raise
    return llm._post_planned(started, payload, handle, url)


# --------------------------------------------------------------------------- dispatch

_OWN_LLMS = (OpenAICompatibleLLM, ScriptedLLM, ChatAdapter)


def as_llm(obj: Any) -> LLM | None:
    """Coerce ``obj`` to an :class:`LLM`.

    ``None`` -> ``None``; our own clients -> themselves; a LangChain chat model or a LlamaIndex LLM
    -> its adapter from ``kgrag_plugins.integrations`` (the ``"llm"`` hook of
    :mod:`kgrag_plugins.adapters`; recognised there without importing a framework the caller has
    not loaded); anything else with ``complete``/``acomplete`` -> itself.
    Anything else raises ``TypeError``.
    """
    if obj is None:
        return None
    if isinstance(obj, _OWN_LLMS):
        return obj
    # Framework models first: a LlamaIndex LLM also has complete/acomplete, with other types.
    framework_llm = hook("llm")  # registered by kgrag_plugins.integrations (an entry point)
    adapted = framework_llm(obj) if framework_llm is not None else None
    if adapted is not None:
        return adapted
    if callable(getattr(obj, "complete", None)) and callable(getattr(obj, "acomplete", None)):
        return obj
    why = (
        ""
        if framework_llm is not None
        else f"; no framework adapter is registered (the {GROUP!r} entry points are missing): reinstall "
        "kgrag-plugins (pip install -e . or pip install kgrag-plugins) to pass a framework model"
    )
    raise TypeError(
        f"cannot use {type(obj).__module__}.{type(obj).__name__} as an LLM: expected an object "
        f"with complete()/acomplete() or a framework chat model / LLM{why}"
    )
