"""Metering for ``kgrag bench --qa``: :class:`MeteredLLM` counts LLM calls, tokens and validated
replies per step, overall and per question (:class:`QuestionMeter`, bound to the running question
through a context variable so that concurrent questions are counted apart)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..models.breaker import LLMTimeoutError, LLMUnavailableError
from ..models.messages import Message, to_messages

__all__ = ["MeteredLLM", "QuestionMeter", "RETRYABLE_ERRORS", "metering"]

#: Error type names (``llm_error`` trace entries' ``type``) that mean "the LLM was not there":
#: the harness reruns such questions after the cool-down instead of reporting the fallback.
RETRYABLE_ERRORS = frozenset({LLMUnavailableError.__name__, LLMTimeoutError.__name__})


@dataclass
class QuestionMeter:
    """What one question's run cost: LLM calls and tokens, replies per step
    (``{step: [replies, valid, constrained]}``) and the failed calls' error type names."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    replies: dict[str, list[int]] = field(default_factory=dict)
    call_errors: list[str] = field(default_factory=list)

    def reply_stats(self) -> dict[str, dict[str, int]]:
        """``{step: {"replies", "valid", "constrained"}}``."""
        return {s: {"replies": r[0], "valid": r[1], "constrained": r[2]} for s, r in self.replies.items()}


_CURRENT: contextvars.ContextVar[QuestionMeter | None] = contextvars.ContextVar("kgrag_qa_meter", default=None)


@contextmanager
def metering(meter: QuestionMeter) -> Iterator[QuestionMeter]:
    """Count every :class:`MeteredLLM` call made in this context (and in contexts copied from it)
    into ``meter`` too."""
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def _tiktoken() -> Any:
    import tiktoken

    from .. import integrations  # noqa: F401  (sets TIKTOKEN_CACHE_DIR, read at get_encoding time)

    return tiktoken.get_encoding("cl100k_base")


class MeteredLLM:
    """Wraps an LLM and counts calls, prompt / completion tokens and validated replies (thread-safe).

    Tokens come from the wrapped client's ``usage`` counters when they grow on a call (an
    OpenAI-compatible endpoint returning ``usage``) and ``use_usage`` is on, else from tiktoken
    ``cl100k_base`` over the message contents and the reply. With several questions in flight
    turn ``use_usage`` off: a shared client's counters then also grow with the other questions'
    calls. Other attributes are the wrapped client's.
    """

    def __init__(self, llm: Any, *, use_usage: bool = True) -> None:
        self.llm = llm
        self.use_usage = use_usage
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.token_source = "tiktoken cl100k_base"
        self.replies: dict[str, list[int]] = {}
        self._enc: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.__dict__["llm"], name)
        if name == "complete_logprobs" and callable(attr):  # Self-RAG's logprob calls are counted too
            return self._counted_logprobs(attr)
        return attr

    def __repr__(self) -> str:
        return f"MeteredLLM({self.llm!r}, calls={self.calls})"

    def record_reply(self, step: str, valid: bool, constrained: bool) -> None:
        """Count one reply of ``step`` (called by ``complete_validated`` after each reply)."""
        with self._lock:
            for table in (self.replies, *((m.replies,) if (m := _CURRENT.get()) is not None else ())):
                row = table.setdefault(step, [0, 0, 0])
                row[0] += 1
                row[1] += bool(valid)
                row[2] += bool(constrained)

    def reply_stats(self) -> dict[str, dict[str, int]]:
        """``{step: {"replies", "valid", "constrained"}}`` so far."""
        with self._lock:
            return {s: {"replies": r[0], "valid": r[1], "constrained": r[2]} for s, r in self.replies.items()}

    def _counted_logprobs(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def complete_logprobs(prompt: str | list[Message], **kwargs: Any) -> Any:
            messages, before = to_messages(prompt), self._usage()
            try:
                out = fn(prompt, **kwargs)
            except Exception as exc:
                self._failed(exc)
                raise
            self._record(messages, str(getattr(out, "text", "") or ""), before)
            return out

        return complete_logprobs

    def _count(self, text: str) -> int:
        if self._enc is None:
            self._enc = _tiktoken()
        return len(self._enc.encode(text, disallowed_special=()))

    def _usage(self) -> tuple[int, int] | None:
        usage = getattr(self.llm, "usage", None) if self.use_usage else None
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        return None

    def _failed(self, exc: BaseException) -> None:
        meter = _CURRENT.get()
        with self._lock:
            self.calls += 1
            if meter is not None:
                meter.calls += 1
                meter.call_errors.append(type(exc).__name__)

    def _record(self, messages: list[Message], reply: str, before: tuple[int, int] | None) -> None:
        after = self._usage()
        if before is not None and after is not None and after[0] > before[0]:
            prompt, completion, source = after[0] - before[0], after[1] - before[1], "endpoint usage"
        else:
            prompt = sum(self._count(m.get("content", "")) for m in messages)
            completion, source = self._count(reply), None
        meter = _CURRENT.get()
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            if source:
                self.token_source = source
            if meter is not None:
                meter.calls += 1
                meter.prompt_tokens += prompt
                meter.completion_tokens += completion

    def complete(self, prompt: str | list[Message], **kwargs: Any) -> str:
        """The wrapped ``complete``, counted (a failed call counts as a call with no tokens)."""
        messages, before = to_messages(prompt), self._usage()
        try:
            reply = self.llm.complete(prompt, **kwargs)
        except Exception as exc:
            self._failed(exc)
            raise
        self._record(messages, reply, before)
        return reply

    async def acomplete(self, prompt: str | list[Message], **kwargs: Any) -> str:
        """The wrapped ``acomplete``, counted."""
        messages, before = to_messages(prompt), self._usage()
        try:
            reply = await self.llm.acomplete(prompt, **kwargs)
        except Exception as exc:
            self._failed(exc)
            raise
        self._record(messages, reply, before)
        return reply

    def snapshot(self) -> tuple[int, int, int]:
        """``(calls, prompt_tokens, completion_tokens)`` so far."""
        return self.calls, self.prompt_tokens, self.completion_tokens
