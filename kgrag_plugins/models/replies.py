"""Validated LLM calls: every reply is checked against the shape its prompt asks for.

:func:`complete_validated` is the one helper every LLM step uses (KG-Infused selection, summary,
expansion, note, augmentation and answer; SA-RAG + CoT reasoning and answer; FRAG answer and hop
estimation; :func:`~kgrag_plugins.methods.answer.generate_answer`; LLM graph extraction): call
the LLM, hand the reply to a *validator* (returns the parsed value or raises
:class:`InvalidReply`), retry once on an invalid reply, and otherwise return ``None`` after a
WARNING log and a trace entry, so the caller takes its LLM-free path. A failed call
(:class:`~kgrag_plugins.models.llm.LLMError`, including an open circuit breaker) is not retried
here: the HTTP client already retried within its deadline.

The text checks are deliberately simple and documented (:func:`check_text`): non-empty, has
letters or digits, at most ``max_chars``, mostly word characters (a reply of symbols is garbage),
not a refusal (``"I'm sorry"``, ``"I cannot"``, ``"As an AI"`` ...), and optionally not an echo
of the prompt's instructions (a line of 24+ characters copied from the fixed prompt text). Where
prose was asked (``prose=True``: notes, summaries, expanded queries) a reply shaped like JSON,
markup or code is invalid, and with a ``context`` (the question and the evidence the prompt showed)
a reply must share at least one content word with it: a random string or an off-topic ramble is
not passed on as a note or a query.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

from .._secrets import redact
from ..errors import RetryableError
from .breaker import LLMError, LLMTimeoutError, LLMUnavailableError
from .messages import Message
from .structured import OutputSchema, schema_enabled
from .usage import llm_call

__all__ = [
    "InvalidReply",
    "apply_schema",
    "check_text",
    "complete_validated",
    "content_words",
    "first_line",
    "is_refusal",
    "not_prose",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Errors of a call that count as "the LLM failed" (framework adapters may raise the last two).
CALL_ERRORS: tuple[type[BaseException], ...] = (LLMError, TimeoutError, ConnectionError)

_REFUSAL = re.compile(
    r"^\W*(?:i\s*(?:'|’)?\s*m\s+sorry|i\s+am\s+sorry|sorry\s*,|i\s+(?:can\s*not|can(?:'|’)t|am\s+unable|"
    r"(?:'|’)m\s+unable|won(?:'|’)t\s+be\s+able)|as\s+an\s+ai\b|i\s+apologi[sz]e)",
    re.I,
)
_WORDISH = re.compile(r"[\w\s.,;:'\"()\-–—?!%&/$€£]", re.U)
_MIN_WORDISH = 0.7
_ECHO_MIN_CHARS = 24
_SNIPPET = 200


class InvalidReply(ValueError):
    """A reply that does not have the shape its prompt asks for (the message says why)."""


class RepliesStayedInvalid(LLMError, RetryableError):
    """An LLM step whose replies stayed invalid after its retry (raised by steps that signal their
    fallback with an exception; the LLM itself answered, so this is not an outage). Retryable:
    sampling the step again may give a valid reply (a ``ValueError`` would not be retried)."""


#: Error ``type`` names of a trace entry (:func:`complete_validated`) that mean a timeout / an
#: unreachable endpoint (ours, the built-ins, httpx's and the OpenAI SDK's).
_TIMEOUT_TYPES = frozenset(
    {
        "LLMTimeoutError",
        "TimeoutError",
        "TimeoutException",
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "APITimeoutError",
    }
)
_UNAVAILABLE_TYPES = frozenset(
    {
        "LLMUnavailableError",
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "ConnectError",
        "RemoteProtocolError",
        "APIConnectionError",
    }
)


def step_error(entry: dict[str, Any]) -> LLMError:
    """The exception a failed step's trace entry (``{"step", "kind", "error", "type"?}`` of
    :func:`complete_validated`) stands for: :class:`RepliesStayedInvalid` for ``invalid_reply``,
    :class:`~kgrag_plugins.models.breaker.LLMTimeoutError` / ``LLMUnavailableError`` for a call
    that timed out / could not connect (both retryable), else a plain :class:`LLMError`."""
    step, error = entry.get("step", "llm"), str(entry.get("error", "no valid reply"))
    if entry.get("kind") == "invalid_reply":
        return RepliesStayedInvalid(f"{step}: {error}")
    kind = entry.get("type")
    if kind in _TIMEOUT_TYPES:
        return LLMTimeoutError(error)
    if kind in _UNAVAILABLE_TYPES:
        return LLMUnavailableError(error)
    return LLMError(error)


def error_kind(exc: BaseException) -> str:
    """The trace ``kind`` of an exception an LLM step raised: ``"invalid_reply"`` or ``"llm_error"``."""
    return "invalid_reply" if isinstance(exc, RepliesStayedInvalid) else "llm_error"


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, stripped ('' when there is none)."""
    return next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")


def is_refusal(text: str) -> bool:
    """``True`` when ``text`` opens like a refusal or an apology instead of doing the task."""
    return bool(_REFUSAL.match(text or ""))


#: Words too common to show a reply is about its question (English function words).
_STOPWORDS = frozenset(
    "the a an and or but nor of in on at to for from by with without as is are was were be been being "
    "it its this that these those there their they them he she his her him we our you your i me my "
    "which who whom whose what when where why how not no yes can could would should will shall may "
    "might must do does did done has have had having than then so such also into onto over under "
    "about after before between during through up down out off only just very more most other some "
    "any each all both few many much own same".split()
)
_WORD = re.compile(r"[^\W_]+", re.U)
_CODE_START = re.compile(r"^(?:def|class|import|from\s+\S+\s+import|function|var|const|let|SELECT|#include)\b")
_MARKUP_START = re.compile(r"^<\s*/?\s*[A-Za-z][^>]*>")


def content_words(text: str) -> set[str]:
    """Lower-cased words of 3+ characters that are not function words, cut to 6 characters (a
    crude stem: ``founded`` and ``founder`` meet)."""
    return {w[:6] for w in _WORD.findall((text or "").lower()) if len(w) >= 3 and w not in _STOPWORDS}


def not_prose(text: str) -> str | None:
    """Why ``text`` is JSON, markup or code rather than prose (``None``: it reads as prose)."""
    t = (text or "").strip()
    if t[:1] in "{[":
        try:
            json.loads(t)
            return "JSON"
        except ValueError:
            if t[:1] == "{" or t.endswith(("}", "]")):
                return "JSON-like"
    if "```" in t:
        return "a code block"
    first = t.splitlines()[0] if t else ""
    if _MARKUP_START.match(first):
        return "markup"
    if _CODE_START.match(first):
        return "code"
    return None


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def check_text(
    text: str,
    *,
    max_chars: int = 4000,
    single_line: bool = False,
    instructions: str | None = None,
    prose: bool = False,
    context: str | None = None,
) -> str:
    """Return ``text`` stripped (its first non-empty line when ``single_line``) or raise
    :class:`InvalidReply`: empty; no letter or digit; longer than ``max_chars``; under 70 %
    word characters (letters, digits, spaces, ``.,;:'"()-–—?!%&/$€£``); a refusal; (with
    ``instructions``, the prompt's fixed wording) a line of at least 24 characters copied from it;
    (``prose``) JSON, markup or code (:func:`not_prose`); (with ``context``, the question and the
    evidence shown) no content word in common with it (:func:`content_words`)."""
    if prose and (why := not_prose(text)):
        raise InvalidReply(f"{why} where prose was asked: {(text or '').strip()[:_SNIPPET]!r}")
    s = first_line(text) if single_line else (text or "").strip()
    if not s:
        raise InvalidReply("empty reply")
    if not any(ch.isalnum() for ch in s):
        raise InvalidReply(f"no words in reply {s[:_SNIPPET]!r}")
    if len(s) > max_chars:
        raise InvalidReply(f"reply of {len(s)} characters, more than {max_chars}")
    if len(_WORDISH.findall(s)) < _MIN_WORDISH * len(s):
        raise InvalidReply(f"reply is mostly symbols: {s[:_SNIPPET]!r}")
    if is_refusal(s):
        raise InvalidReply(f"refusal: {s[:_SNIPPET]!r}")
    if instructions:
        fixed = _norm(instructions)
        for line in s.splitlines():
            n = _norm(line)
            if len(n) >= _ECHO_MIN_CHARS and n in fixed:
                raise InvalidReply(f"reply echoes the instructions: {line.strip()[:_SNIPPET]!r}")
    if context is not None and content_words(context) and not (content_words(s) & content_words(context)):
        raise InvalidReply(f"reply shares no content word with the question and evidence: {s[:_SNIPPET]!r}")
    return s


def _record(errors: list[dict[str, Any]] | None, entry: dict[str, Any], log: logging.Logger) -> None:
    log.warning("LLM step %r fell back to the LLM-free path (%s): %s", entry["step"], entry["kind"], entry["error"])
    if errors is not None:
        errors.append(entry)


def _ignore_reply(step: str, valid: bool, constrained: bool) -> None:
    return None


def apply_schema(
    llm: Any, schema: OutputSchema | None, kwargs: dict[str, Any], *, accepts_schema: bool = True
) -> tuple[bool, Callable[[str, bool, bool], None]]:
    """Prepare one validated call: put ``schema`` into ``kwargs`` when ``llm`` enforces schemas (and
    the method takes one: ``accepts_schema``), its ``max_tokens`` when the call gives none; return
    ``(constrained, record_reply)`` (the LLM's ``record_reply``, or a no-op)."""
    constrained = schema is not None and accepts_schema and schema_enabled(llm)
    if constrained:
        kwargs["schema"] = schema
    if schema is not None and schema.max_tokens is not None and kwargs.get("max_tokens") is None:
        kwargs["max_tokens"] = schema.max_tokens
    record = getattr(llm, "record_reply", None)
    return constrained, record if callable(record) else _ignore_reply


#: The temperature of the retry after an invalid reply when the call decodes greedily
#: (``temperature`` unset or 0): greedy decoding of the same prompt returns the same reply, so the
#: retry samples instead (SmolLM2-135M repeated its invalid notes word for word). 0 disables it.
RETRY_TEMPERATURE = 0.7


def retry_kwargs(kwargs: dict[str, Any], after_invalid: bool) -> dict[str, Any]:
    """The keywords of the next attempt: ``kwargs``, sampled at :data:`RETRY_TEMPERATURE` when the
    previous reply was invalid and the call decodes greedily (a greedy retry repeats the reply)."""
    if after_invalid and not kwargs.get("temperature") and RETRY_TEMPERATURE:
        return {**kwargs, "temperature": RETRY_TEMPERATURE}
    return kwargs


def complete_validated(
    llm: Any,
    prompt: str | list[Message],
    validate: Callable[[str], T],
    *,
    step: str,
    errors: list[dict[str, Any]] | None = None,
    retries: int = 1,
    retry_errors: bool = False,
    context: dict[str, Any] | None = None,
    log: logging.Logger | None = None,
    schema: OutputSchema | None = None,
    **complete_kwargs: Any,
) -> T | None:
    """``validate(llm.complete(prompt, **complete_kwargs))``, retried ``retries`` times (default
    once) on :class:`InvalidReply` (and on failed calls too with ``retry_errors``); ``None`` when
    the call fails or every reply is invalid. A retry after an invalid greedy reply samples at
    :data:`RETRY_TEMPERATURE`.

    On ``None`` a WARNING is logged (``log``, default this module's logger) and a trace entry
    ``{"step", "kind": "invalid_reply" | "llm_error", "error", "attempts", "type"? (of the error),
    "reply"? (the last invalid one, cut to 200 characters), **context}`` is
    appended to ``errors``. The caller must then take its LLM-free path and must not cache or
    pass on anything from the reply.

    ``schema`` (:class:`~kgrag_plugins.models.structured.OutputSchema`): the reply's shape. It is
    passed to ``llm.complete`` as ``schema=`` only when the LLM enforces schemas (``supports_schema``);
    its ``max_tokens`` applies when the call gives none. Every reply is reported to the LLM's
    ``record_reply(step, valid, constrained)`` when it has one (the QA harness counts valid-reply
    rates per step that way). Each call is metered under ``step``
    (:func:`~kgrag_plugins.models.usage.llm_call`: calls, tokens, seconds).
    """
    log = log or logger
    reason, reply, invalid = "", "", False
    constrained, record = apply_schema(llm, schema, complete_kwargs)
    for attempt in range(1, retries + 2):
        kwargs = retry_kwargs(complete_kwargs, invalid)
        try:
            with llm_call(step, prompt, llm=llm) as call:  # calls, tokens, seconds per step (.usage)
                reply = call.reply = llm.complete(prompt, **kwargs)
        except CALL_ERRORS as exc:
            if retry_errors and attempt <= retries:
                reason, reply = f"{type(exc).__name__}: {redact(exc)}", ""
                continue
            entry = {
                "step": step,
                "kind": "llm_error",
                "error": redact(exc),  # a framework client's error may carry a key or a URL password
                "type": type(exc).__name__,
                "attempts": attempt,
            }
            _record(errors, {**entry, **(context or {})}, log)
            return None
        try:
            value = validate(reply)
        except InvalidReply as exc:
            reason, invalid = str(exc), True
            record(step, False, constrained)
            continue
        record(step, True, constrained)
        return value
    entry = {
        "step": step,
        "kind": "invalid_reply",
        "error": f"invalid reply: {reason}",
        "attempts": retries + 1,
        "reply": (reply or "")[:_SNIPPET],
    }
    _record(errors, {**entry, **(context or {})}, log)
    return None
