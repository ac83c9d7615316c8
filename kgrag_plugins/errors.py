"""The retryable error family, shared by the LLM clients, the index and the framework adapters.

A :class:`RetryableError` is a failure that may go away when the same call is made again: an LLM
that timed out or whose circuit breaker is open, a graph database or Chroma server that is down,
an LLM reply that stayed invalid after the step's own retry (sampling again may fix it). Invalid
input (``ValueError`` / ``TypeError`` that are not also a ``RetryableError``) never is.

``RetryableError`` is a marker mixed into existing classes (``LLMTimeoutError(LLMError,
RetryableError)``, ``GraphDBServerError(ConnectionError, ValueError, RetryableError)``, ...): it
derives from ``Exception`` only, so every ``except`` clause that caught these errors still does.
"""

from __future__ import annotations

__all__ = ["RETRYABLE_NAMES", "RetryableError", "is_retryable"]


class RetryableError(Exception):
    """Marker: calling again may succeed (timeouts, unavailable servers, replies that stayed invalid)."""


#: Names of third-party exception classes (anywhere in an exception's MRO) that mean a timeout, a
#: dropped connection or an overloaded server: httpx's and the OpenAI / Anthropic SDKs' (which
#: LangChain chat models raise). Matched by name so that no framework is imported here.
RETRYABLE_NAMES = frozenset(
    {
        "TimeoutException",  # httpx (ConnectTimeout, ReadTimeout, ... derive from it)
        "NetworkError",  # httpx (ConnectError, ReadError, ...)
        "RemoteProtocolError",  # httpx: the server dropped the connection mid-reply
        "APITimeoutError",
        "APIConnectionError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
    }
)


def is_retryable(exc: BaseException) -> bool:
    """Whether calling again may succeed: a :class:`RetryableError`, a built-in ``TimeoutError`` or
    ``ConnectionError``, or a third-party class named in :data:`RETRYABLE_NAMES`. Anything else, in
    particular invalid input (``ValueError``, ``TypeError``, ``KeyError``), is not."""
    if isinstance(exc, (RetryableError, TimeoutError, ConnectionError)):
        return True
    return any(cls.__name__ in RETRYABLE_NAMES for cls in type(exc).__mro__)
