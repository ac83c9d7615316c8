"""Token log-probabilities from LLM endpoints (for Self-RAG's critique scores, docs/methods.md §6.2).

Self-RAG scores each candidate generation from the probabilities of its reflection tokens
(``run_short_form.py``), and the prompted variant for any instruct model reads the probability of
a label word from ``top_logprobs``. This module gives the package one shape for that:

* :class:`TokenLogprob` (``token``, ``logprob``, ``top``: alternative token -> logprob, the chosen
  token included) and :class:`Completion` (``text``, ``tokens``);
* :class:`LogprobLLM`, the optional protocol ``complete_logprobs(prompt, *, max_tokens,
  temperature, top_logprobs=20, raw=False) -> Completion``. ``raw=False`` calls the chat endpoint
  with ``logprobs: true, top_logprobs: N``; ``raw=True`` the plain ``/v1/completions`` endpoint with a
  prompt string and ``logprobs: N`` (for models with their own non-chat format, such as the released
  ``selfrag/selfrag_llama2_7b``). :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` and
  :class:`~kgrag_plugins.models.llm.ScriptedLLM` implement it;
* :func:`parse_chat_logprobs` / :func:`parse_completion_logprobs` for OpenAI's two response shapes.
  A body without logprobs (``logprobs`` absent or ``null``: the endpoint ignored the request) gives
  a :class:`Completion` with no tokens, and callers fall back to the parsed text; a malformed body
  raises :class:`LogprobsFormatError` naming the offending field (over HTTP: retried, then
  :class:`~kgrag_plugins.models.llm.LLMResponseError`);
* :func:`complete_logprobs_validated`, the logprob twin of
  :func:`~kgrag_plugins.models.replies.complete_validated` (validate, retry once, WARNING + trace
  entry, ``None`` -> the caller's fallback).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from .breaker import LLMResponseError
from .messages import Message
from .replies import CALL_ERRORS, InvalidReply, apply_schema, retry_kwargs
from .structured import OutputSchema
from .usage import llm_call

__all__ = [
    "Completion",
    "LogprobLLM",
    "LogprobsFormatError",
    "TokenLogprob",
    "complete_logprobs_validated",
    "parse_chat_logprobs",
    "parse_completion_logprobs",
    "supports_logprobs",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Most alternatives OpenAI accepts per position (vLLM's server default ``max_logprobs`` is 20 too).
DEFAULT_TOP_LOGPROBS = 20
_SNIPPET = 200


class LogprobsFormatError(LLMResponseError, ValueError):
    """A response whose logprobs do not have OpenAI's shape (the message names the field)."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its log-probability and the top alternatives at its position
    (``token -> logprob``; the chosen token is always included)."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)

    def prob(self, token: str, missing: float = -100.0) -> float:
        """``exp(logprob)`` of ``token`` among the alternatives (``exp(missing)`` when absent:
        ``run_short_form.py`` uses -100 for a reflection token outside the returned set)."""
        return math.exp(self.top.get(token, missing))


@dataclass
class Completion:
    """A reply text with its per-token log-probabilities (``tokens`` is empty when the endpoint
    returned none)."""

    text: str
    tokens: list[TokenLogprob] = field(default_factory=list)

    @property
    def has_logprobs(self) -> bool:
        return bool(self.tokens)

    def mean_logprob(self) -> float | None:
        """Mean token log-probability (Self-RAG's ``cumulative_logprob / len(token_ids)``);
        ``None`` without tokens."""
        if not self.tokens:
            return None
        return sum(t.logprob for t in self.tokens) / len(self.tokens)


@runtime_checkable
class LogprobLLM(Protocol):
    """An LLM that can also return token log-probabilities (see the module docstring)."""

    def complete_logprobs(
        self,
        prompt: str | list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
        raw: bool = False,
    ) -> Completion: ...


def supports_logprobs(llm: Any) -> bool:
    """Whether ``llm`` has a callable ``complete_logprobs``."""
    return callable(getattr(llm, "complete_logprobs", None))


# --------------------------------------------------------------------------- parsing


def _is_number(x: Any) -> bool:
    """A real log-probability value: a number, not NaN, not +inf (-inf is probability 0)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x) and x != math.inf


def _get(obj: Any, key: str | int, where: str) -> Any:
    if isinstance(key, int):
        if not isinstance(obj, list) or not obj:
            raise LogprobsFormatError(f"{where} must be a non-empty list, got {type(obj).__name__}")
        return obj[key]
    if not isinstance(obj, dict) or key not in obj:
        raise LogprobsFormatError(f"response lacks {where}.{key}")
    return obj[key]


def _logprob(x: Any, where: str) -> float:
    if x is None:
        return -math.inf  # a position the server could not score (vLLM: echoed prompt tokens)
    if not _is_number(x):
        raise LogprobsFormatError(f"{where} must be a number, got {x!r:.80}")
    return float(x)


_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list"}


def _expect(x: Any, kind: type, where: str) -> None:
    """Raise :class:`LogprobsFormatError` unless ``x`` is a ``kind`` (``str``, ``dict`` or ``list``)."""
    if not isinstance(x, kind):
        raise LogprobsFormatError(f"{where} must be {_TYPE_NAMES[kind]}, got {type(x).__name__}")


def _choice(data: Any) -> dict[str, Any]:
    choice = _get(_get(data, "choices", "response"), 0, "choices")
    _expect(choice, dict, "choices[0]")
    return choice


def parse_chat_logprobs(data: Any) -> Completion:
    """Parse a chat-completions body: text ``choices[0].message.content``, tokens from
    ``choices[0].logprobs.content[i].{token, logprob, top_logprobs[{token, logprob}]}``."""
    choice = _choice(data)
    text = _get(_get(choice, "message", "choices[0]"), "content", "choices[0].message")
    _expect(text, str, "choices[0].message.content")
    lp = choice.get("logprobs")
    if lp is None:
        return Completion(text)
    _expect(lp, dict, "choices[0].logprobs")
    content = lp.get("content")
    if content is None:
        return Completion(text)
    _expect(content, list, "choices[0].logprobs.content")
    tokens: list[TokenLogprob] = []
    for i, item in enumerate(content):
        where = f"choices[0].logprobs.content[{i}]"
        token = _get(item, "token", where)
        _expect(token, str, f"{where}.token")
        logprob = _logprob(_get(item, "logprob", where), f"{where}.logprob")
        top: dict[str, float] = {}
        alts = item.get("top_logprobs") or []
        _expect(alts, list, f"{where}.top_logprobs")
        for j, alt in enumerate(alts):
            w = f"{where}.top_logprobs[{j}]"
            tok = _get(alt, "token", w)
            _expect(tok, str, f"{w}.token")
            value = _logprob(_get(alt, "logprob", w), f"{w}.logprob")
            top[tok] = max(value, top.get(tok, -math.inf))
        top.setdefault(token, logprob)
        tokens.append(TokenLogprob(token, logprob, top))
    return Completion(text, tokens)


def parse_completion_logprobs(data: Any) -> Completion:
    """Parse a ``/v1/completions`` body: text ``choices[0].text``, tokens from
    ``choices[0].logprobs.{tokens, token_logprobs, top_logprobs[{token: logprob}]}``."""
    choice = _choice(data)
    text = _get(choice, "text", "choices[0]")
    _expect(text, str, "choices[0].text")
    lp = choice.get("logprobs")
    if lp is None:
        return Completion(text)
    _expect(lp, dict, "choices[0].logprobs")
    toks = _get(lp, "tokens", "choices[0].logprobs")
    lps = _get(lp, "token_logprobs", "choices[0].logprobs")
    tops = lp.get("top_logprobs")
    if not isinstance(toks, list) or not isinstance(lps, list) or len(toks) != len(lps):
        raise LogprobsFormatError("choices[0].logprobs.tokens and .token_logprobs must be lists of the same length")
    if tops is None:
        tops = [None] * len(toks)
    if not isinstance(tops, list) or len(tops) != len(toks):
        raise LogprobsFormatError("choices[0].logprobs.top_logprobs must be a list as long as .tokens")
    tokens: list[TokenLogprob] = []
    for i, (token, value, alts) in enumerate(zip(toks, lps, tops)):
        where = "choices[0].logprobs"
        _expect(token, str, f"{where}.tokens[{i}]")
        logprob = _logprob(value, f"{where}.token_logprobs[{i}]")
        if alts is None:
            alts = {}
        _expect(alts, dict, f"{where}.top_logprobs[{i}]")
        top = {str(k): _logprob(v, f"{where}.top_logprobs[{i}][{k!r:.40}]") for k, v in alts.items()}
        top.setdefault(token, logprob)
        tokens.append(TokenLogprob(token, logprob, top))
    return Completion(text, tokens)


# --------------------------------------------------------------------------- validated calls


def complete_logprobs_validated(
    llm: Any,
    prompt: str | list[Message],
    validate: Callable[[Completion], T],
    *,
    step: str,
    errors: list[dict[str, Any]] | None = None,
    retries: int = 1,
    context: dict[str, Any] | None = None,
    log: logging.Logger | None = None,
    schema: OutputSchema | None = None,
    **kwargs: Any,
) -> T | None:
    """``validate(llm.complete_logprobs(prompt, **kwargs))``, asked again ``retries`` times (default
    once) on :class:`~kgrag_plugins.models.replies.InvalidReply`; ``None`` when the call fails or
    every reply is invalid, after a WARNING and a trace entry ``{"step", "kind": "invalid_reply" |
    "llm_error", "error", "attempts", "reply"?, **context}`` appended to ``errors`` (the same
    contract as :func:`~kgrag_plugins.models.replies.complete_validated`, ``schema`` included: it
    is passed on only to an LLM that enforces schemas and whose ``complete_logprobs`` takes one;
    its ``max_tokens`` applies when the call gives none; replies go to ``record_reply``; a retry
    after an invalid greedy reply samples)."""
    log = log or logger
    reason, reply, invalid = "", "", False
    takes = schema is not None and _takes_schema(llm.complete_logprobs)
    constrained, record = apply_schema(llm, schema, kwargs, accepts_schema=takes)
    for attempt in range(1, retries + 2):
        call_kwargs = retry_kwargs(kwargs, invalid)
        try:
            with llm_call(step, prompt, llm=llm) as call:
                out = llm.complete_logprobs(prompt, **call_kwargs)
                call.reply = getattr(out, "text", "")
        except CALL_ERRORS as exc:
            entry = {"step": step, "kind": "llm_error", "error": str(exc), "type": type(exc).__name__}
            _record(errors, {**entry, "attempts": attempt, **(context or {})}, log)
            return None
        reply = getattr(out, "text", "")
        try:
            value = validate(out)
        except InvalidReply as exc:
            reason, invalid = str(exc), True
            record(step, False, constrained)
            continue
        record(step, True, constrained)
        return value
    entry = {"step": step, "kind": "invalid_reply", "error": f"invalid reply: {reason}", "attempts": retries + 1}
    _record(errors, {**entry, "reply": (reply or "")[:_SNIPPET], **(context or {})}, log)
    return None


def _takes_schema(method: Any) -> bool:
    """Whether ``method`` accepts a ``schema`` keyword (or ``**kwargs``)."""
    import inspect

    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "schema" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _record(errors: list[dict[str, Any]] | None, entry: dict[str, Any], log: logging.Logger) -> None:
    log.warning("LLM step %r fell back (%s): %s", entry["step"], entry["kind"], entry["error"])
    if errors is not None:
        errors.append(entry)


def as_completion(reply: Any) -> Completion:
    """A scripted reply as a :class:`Completion` (a plain string has no tokens)."""
    if isinstance(reply, Completion):
        return reply
    if isinstance(reply, str):
        return Completion(reply)
    raise LLMResponseError(f"scripted logprob reply must be a str or a Completion, got {type(reply).__name__}")
