"""Chat messages and the LLM protocol: what every LLM client and every LLM step shares."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .._secrets import redact

__all__ = ["LLM", "Message", "snippet", "to_messages", "truncate_at_stop"]

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


def to_messages(prompt: str | list[Message]) -> list[Message]:
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


def truncate_at_stop(text: str, stop: list[str] | None) -> str:
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


def snippet(text: str) -> str:
    """``text`` on one line, secrets masked (:func:`~kgrag_plugins._secrets.redact`), cut to 300
    characters (for error messages)."""
    text = redact(text).strip().replace("\n", " ")
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "..."
