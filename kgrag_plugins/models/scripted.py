"""LLMs that are not HTTP clients: :class:`ChatAdapter` (the base of the framework adapters) and
:class:`ScriptedLLM` (deterministic replies for tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .breaker import LLMError, LLMResponseError
from .logprobs import Completion, as_completion
from .messages import Message, snippet, to_messages, truncate_at_stop

__all__ = ["ChatAdapter", "ScriptedLLM"]


# --------------------------------------------------------------------------- adapter base


class ChatAdapter:
    """Base for adapters of other chat APIs (the LangChain / LlamaIndex ones in ``integrations/``).

    :meth:`complete` / :meth:`acomplete` normalise the prompt to messages and cut the reply at the
    first ``stop`` string; a subclass implements ``_chat(messages, stop) -> str`` and its async
    twin ``_achat``. ``max_tokens`` / ``temperature`` are not forwarded: configure them on the
    wrapped model.
    """

    def _chat(self, messages: list[Message], stop: list[str] | None) -> str:  # pragma: no cover
        raise NotImplementedError

    async def _achat(self, messages: list[Message], stop: list[str] | None) -> str:  # pragma: no cover
        raise NotImplementedError

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """The wrapped model's reply, cut at ``stop``."""
        return truncate_at_stop(self._chat(to_messages(prompt), stop), stop)

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Async :meth:`complete`."""
        return truncate_at_stop(await self._achat(to_messages(prompt), stop), stop)


# --------------------------------------------------------------------------- scripted


class ScriptedLLM:
    """Deterministic LLM for tests.

    ``replies`` is either a list consumed in order (an ``Exception`` item is raised instead
    of returned) or a callable ``messages -> str``. Every call is recorded in ``self.calls``
    as ``{"messages", "stop", "max_tokens", "temperature"}``; stop strings truncate replies.
    A reply may be a :class:`~.logprobs.Completion` (its text for :meth:`complete`); a string
    reply to :meth:`complete_logprobs` is a completion without token logprobs.
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
        call = {"stop": list(stop) if stop else None, "max_tokens": max_tokens, "temperature": temperature}
        return self._next(prompt, call, stop)

    def complete_logprobs(
        self,
        prompt: str | list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_logprobs: int = 20,
        raw: bool = False,
    ) -> Any:
        """The next scripted reply as a :class:`~.logprobs.Completion` (call recorded with
        ``top_logprobs`` and ``raw``)."""
        call = {"stop": None, "max_tokens": max_tokens, "temperature": temperature}
        return self._next(prompt, {**call, "top_logprobs": top_logprobs, "raw": raw}, None, logprobs=True)

    def _next(self, prompt: str | list[Message], call: dict[str, Any], stop: list[str] | None, logprobs: bool = False):
        messages = to_messages(prompt)
        with self._lock:
            self.calls.append({"messages": messages, **call})
            if self._fn is None:
                if not self._replies:
                    raise LLMError(
                        f"ScriptedLLM ran out of replies after {len(self.calls) - 1} call(s); "
                        f"last prompt: {snippet(messages[-1]['content'] if messages else '')!r}"
                    )
                reply = self._replies.pop(0)
        if self._fn is not None:
            reply = self._fn(messages)
        if isinstance(reply, BaseException):
            raise reply
        if logprobs:
            return as_completion(reply)
        reply = reply.text if isinstance(reply, Completion) else reply
        if not isinstance(reply, str):
            raise LLMResponseError(f"ScriptedLLM reply must be a str, got {type(reply).__name__}")
        return truncate_at_stop(reply, stop)

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
