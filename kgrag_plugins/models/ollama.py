"""Ollama as a first-class backend: its native ``POST /api/chat`` (``--llm ollama:MODEL[@URL]``).

:class:`OllamaLLM` is :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` with Ollama's request
and reply shapes; the rest is shared: one total deadline per call (``KGRAG_LLM_DEADLINE``), bounded
retries with backoff, the circuit breaker, usage counting, the async path and secret redaction.

Why the native API and not Ollama's OpenAI-compatible ``/v1``: ``/v1`` ignores ``think: false`` (a
thinking model such as qwen3 or deepseek-r1 then spends the step's token budget thinking), and the
native body carries ``keep_alive`` and ``options`` as Ollama defines them. (``--llm
http://HOST:11434/v1`` still works through :class:`OpenAICompatibleLLM`.) The request:

* ``{"model", "messages", "stream": false, "options": {"temperature", "num_predict", "stop", ...},
  "keep_alive", "think", "format"?}``; ``num_predict`` is the call's ``max_tokens`` (or the
  schema's, or ``default_max_tokens``), so no reply is unbounded;
* a structured step (``complete(..., schema=...)``): ``think: false`` always, and a JSON schema
  goes as ``format`` (Ollama compiles it to a grammar). A regex or choice schema has no Ollama form:
  it is sent unconstrained and the step's validator alone checks the reply;
* a free-text step: ``think`` as constructed (default ``False``; ``None`` leaves the model's own
  default, which is *on* for thinking models);
* the reply's ``message.content`` is the text (``message.thinking`` is ignored);
  ``prompt_eval_count`` / ``eval_count`` count as prompt / completion tokens in ``usage``.

A model that is not pulled gives HTTP 404, and a one-line :class:`LLMResponseError` naming
``ollama pull MODEL``. Token logprobs are not offered (``complete_logprobs`` is ``None``), so
Self-RAG takes its prompted path.
"""

from __future__ import annotations

import os
import re
from typing import Any

import httpx

from .._secrets import register_secret
from .breaker import LLMResponseError
from .llm import OpenAICompatibleLLM, _json_body, _RetryableFailure
from .messages import Message, snippet, to_messages

__all__ = ["DEFAULT_KEEP_ALIVE", "DEFAULT_OLLAMA_URL", "OllamaLLM", "ollama_host", "parse_ollama_spec"]

#: Where ``ollama serve`` listens unless ``OLLAMA_HOST`` says otherwise.
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
#: How long Ollama keeps the model loaded after a call (Ollama's own default).
DEFAULT_KEEP_ALIVE = "5m"

#: Sampling options that Ollama reads from ``options``, not the top level: found in ``extra_body``
#: (``train.dpo`` sets ``top_p`` there for any OpenAI-compatible client) they move into ``options``.
_OPTION_KEYS = frozenset(
    {"top_p", "top_k", "min_p", "typical_p", "seed", "num_ctx", "repeat_penalty", "repeat_last_n"}
    | {"presence_penalty", "frequency_penalty", "mirostat", "mirostat_tau", "mirostat_eta"}
)

_SPEC = re.compile(r"(?P<model>[^@\s]+)(?:@(?P<url>https?://\S+))?")


def ollama_host() -> str:
    """The Ollama base URL: ``OLLAMA_HOST`` (as ``ollama`` itself reads it: ``host``, ``host:port``,
    ``:port`` or a URL; a bind-all ``0.0.0.0`` means this machine) or :data:`DEFAULT_OLLAMA_URL`."""
    raw = (os.environ.get("OLLAMA_HOST") or "").strip().rstrip("/")
    if not raw:
        return DEFAULT_OLLAMA_URL
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "http", raw
    host, colon, port = rest.rpartition(":") if ":" in rest.split("/")[0] else (rest, "", "")
    host = host or "127.0.0.1"
    if host in ("0.0.0.0", "[::]", "::"):
        host = "127.0.0.1"
    return f"{scheme}://{host}:{port if colon and port else 11434}"


def parse_ollama_spec(spec: str) -> tuple[str, str | None]:
    """``"ollama:MODEL[@URL]"`` (or the part after ``ollama:``) -> ``(MODEL, URL or None)``.

    ``MODEL`` is Ollama's name with its tag (``smollm2:135m``, ``hf.co/org/repo:Q4_K_M``)."""
    rest = spec[len("ollama:") :] if spec.startswith("ollama:") else spec
    m = _SPEC.fullmatch(rest.strip())
    if not m:
        raise ValueError(
            f"--llm {spec!r}: expected ollama:MODEL or ollama:MODEL@http://HOST:PORT (e.g. ollama:smollm2:135m)"
        )
    return m["model"], m["url"]


class OllamaLLM(OpenAICompatibleLLM):
    """Client for an Ollama server's native chat API (see the module docstring).

    ``model``: Ollama's model name (``smollm2:135m``). ``base_url``: the server (default
    ``OLLAMA_HOST`` or ``http://127.0.0.1:11434``; a trailing ``/v1`` or ``/api`` is dropped).
    ``keep_alive``: how long the server keeps the model loaded after each call (``"5m"``, seconds,
    ``-1`` for ever, ``0`` to unload at once; ``None`` sends nothing). ``think``: thinking on free-text
    steps (``False``, ``True``, ``"low"``/``"medium"``/``"high"`` for gpt-oss, or ``None`` for the
    model's default); structured steps always send ``think: false``. ``structured``: send JSON
    schemas as ``format`` (``False``: validation only). ``options``: more of Ollama's model options
    (``{"num_ctx": 8192, "seed": 0}``); the call's temperature, token budget and stop strings are
    added to them. ``api_key``: a bearer token for an Ollama behind a proxy (default
    ``OLLAMA_API_KEY``; ``KGRAG_LLM_API_KEY`` is not sent here). The other keywords are
    :class:`OpenAICompatibleLLM`'s (``deadline``, ``max_retries``, ``breaker``, ``default_max_tokens``...).
    """

    _SCHEMA_FIELDS = ("format",)

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        keep_alive: str | float | None = DEFAULT_KEEP_ALIVE,
        think: bool | str | None = False,
        structured: bool = True,
        options: dict[str, Any] | None = None,
        api_key: str | None = None,
        **client_kwargs: Any,
    ) -> None:
        if not model:
            raise ValueError("OllamaLLM needs a model name, e.g. OllamaLLM('smollm2:135m') (see `ollama list`)")
        url = re.sub(r"/(?:v1|api)/?$", "", (base_url or ollama_host()).rstrip("/"))
        super().__init__(base_url=url, model=model, structured="openai" if structured else "off", **client_kwargs)
        self.api_key = api_key or os.environ.get("OLLAMA_API_KEY") or None
        register_secret(self.api_key)
        self.keep_alive = keep_alive
        self.think = think
        self.options = dict(options or {})

    @property
    def url(self) -> str:
        """The native chat URL."""
        return f"{self.base_url}/api/chat"

    #: Ollama's logprobs are not wired up: ``supports_logprobs`` is false, Self-RAG uses its prompts.
    complete_logprobs = None  # type: ignore[assignment]

    # -- request / reply

    def _structured_mode(self) -> str:
        return "ollama" if self.supports_schema else "off"

    def _schema_body(self, schema: Any) -> dict[str, Any]:
        """``{"format": <JSON schema>}`` for a JSON schema; nothing for a regex or choice (or when off)."""
        if schema is None or not self.supports_schema or schema.json is None:
            return {}
        return {"format": dict(schema.json)}

    def _payload(
        self,
        prompt: str | list[Message],
        stop: list[str] | None,
        max_tokens: int | None,
        temperature: float | None,
        schema: Any = None,
    ) -> dict[str, Any]:
        options = dict(self.options)
        max_tokens = self.default_max_tokens if max_tokens is None else max_tokens
        temperature = self.default_temperature if temperature is None else temperature
        if max_tokens is not None:
            options["num_predict"] = int(max_tokens)
        if temperature is not None:
            options["temperature"] = temperature
        if stop:
            options["stop"] = list(stop)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": to_messages(prompt),
            "stream": False,
            "options": options,
        }
        if self.keep_alive is not None:
            payload["keep_alive"] = self.keep_alive
        think = False if schema is not None else self.think  # a structured step never thinks
        if think is not None:
            payload["think"] = think
        payload.update(self._schema_body(schema))
        for key, value in self.extra_body.items():
            (options if key in _OPTION_KEYS else payload)[key] = value
        return payload

    def _handle_response(self, resp: httpx.Response) -> str:
        """``message.content`` of a non-streamed ``/api/chat`` reply; a 404 names ``ollama pull``."""
        if resp.status_code == 404:
            raise LLMResponseError(self._not_found(resp))
        data = _json_body(resp, self.url, self.model)
        message = data.get("message") if isinstance(data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise _RetryableFailure(f"reply lacks message.content (a string): {snippet(resp.text)}")
        self._record_usage(
            {"prompt_tokens": data.get("prompt_eval_count"), "completion_tokens": data.get("eval_count")}
        )
        return content

    def _not_found(self, resp: httpx.Response) -> str:
        try:
            error = str(resp.json().get("error", ""))
        except (ValueError, AttributeError):
            error = ""
        if "not found" in error.lower() and "model" in error.lower():
            return (
                f"Ollama at {self.base_url} has no model {self.model!r}: run `ollama pull {self.model}` "
                f"(or pick one `ollama list` shows); server said: {snippet(error)}"
            )
        return (
            f"{self.url} answered HTTP 404 ({snippet(resp.text)}): is {self.base_url} an Ollama server? "
            "For an OpenAI-compatible /v1 endpoint use --llm URL instead"
        )

    def _down_hint(self, last: Any) -> str:
        if last is None or not last.connection:
            return ""
        return (
            f". Is Ollama running at {self.base_url}? Start it (`ollama serve`) or fix the URL "
            f"(ollama:MODEL@http://HOST:PORT, or OLLAMA_HOST): the client reconnects by itself, with its first "
            f"call after the circuit breaker's {self.breaker.cooldown:g}s cool-down (KGRAG_LLM_BREAKER_COOLDOWN)"
        )

    # -- the server

    def available_models(self, timeout: float = 5.0) -> list[str]:
        """The names ``GET /api/tags`` lists (the models pulled on the server)."""
        try:
            resp = self._sync_client().get(f"{self.base_url}/api/tags", headers=self._headers(), timeout=timeout)
            resp.raise_for_status()
            models = resp.json().get("models", [])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            raise LLMResponseError(f"could not list the models of Ollama at {self.base_url}: {exc}") from None
        return [str(m.get("name") or m.get("model")) for m in models if isinstance(m, dict)]

    def has_model(self, timeout: float = 5.0) -> bool:
        """Whether the server has this client's model (a bare name means its ``:latest`` tag)."""
        want = self.model if ":" in self.model.rsplit("/", 1)[-1] else f"{self.model}:latest"
        return want in self.available_models(timeout)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, keep_alive={self.keep_alive!r}, think={self.think!r})"
