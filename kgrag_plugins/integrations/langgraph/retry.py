"""Node retries: our retry predicate, the default :class:`~langgraph.types.RetryPolicy`, and how a
node with an LLM-free fallback defers that fallback to its last attempt.

Errors split into retryable ones (:func:`kgrag_plugins.errors.is_retryable`: LLM timeouts, an open
circuit breaker, a graph database / Chroma server that is down, an LLM reply that stayed invalid
after the step's own retry) and the rest (invalid input: ``ValueError`` / ``TypeError`` ...), which
fail at once. LangGraph's own ``default_retry_on`` would retry neither an ``LLMTimeoutError`` (a
``RuntimeError``) nor a reply that stayed invalid, hence :func:`retry_on`.

Every graph builder of this package takes ``retry_policy=`` (default :func:`default_retry_policy`;
``None``: no retries) and adds the nodes that call an LLM, the index or a graph database with it.
Nodes that fall back to an LLM-free output when their LLM fails (``generate``, ``reason``,
``write_note``, ``augment``) are also given the policy: while the running attempt is not the
policy's last they raise the retryable error, so LangGraph runs them again; on the last attempt
(or made without a policy, or invoked outside a graph) they fall back as before.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import RetryPolicy

from ...errors import RetryableError, is_retryable

__all__ = [
    "DEFAULT",
    "RetryableError",
    "default_retry_policy",
    "resolve_policy",
    "retry_on",
    "retry_or_fallback",
    "will_retry",
]

#: Sentinel default of the graph builders' ``retry_policy=``: :func:`default_retry_policy`.
DEFAULT: Any = object()


def retry_on(exc: BaseException) -> bool:
    """``RetryPolicy.retry_on``: ``True`` for a retryable error (:func:`kgrag_plugins.errors.is_retryable`),
    ``False`` for everything else (invalid input included)."""
    return is_retryable(exc)


def default_retry_policy(
    max_attempts: int = 3,
    *,
    initial_interval: float = 0.5,
    backoff_factor: float = 2.0,
    max_interval: float = 10.0,
    jitter: bool = True,
) -> RetryPolicy:
    """The policy our graph builders add LLM / index / database nodes with: ``max_attempts``
    attempts (the first included), exponential backoff (``initial_interval * backoff_factor**n``
    seconds, at most ``max_interval``, plus up to 1 s of ``jitter``), :func:`retry_on`."""
    return RetryPolicy(
        initial_interval=initial_interval,
        backoff_factor=backoff_factor,
        max_interval=max_interval,
        max_attempts=max_attempts,
        jitter=jitter,
        retry_on=retry_on,
    )


def resolve_policy(policy: Any) -> RetryPolicy | None:
    """A builder's ``retry_policy=`` argument: :data:`DEFAULT` -> :func:`default_retry_policy`,
    ``None`` -> no retries, a ``RetryPolicy`` as is."""
    if policy is DEFAULT:
        return default_retry_policy()
    if policy is None or isinstance(policy, RetryPolicy):
        return policy
    raise TypeError(f"retry_policy must be a langgraph RetryPolicy or None, got {type(policy).__name__}")


def _matches(policy: RetryPolicy, exc: BaseException) -> bool:
    on = policy.retry_on
    if isinstance(on, type):
        return isinstance(exc, on)
    if isinstance(on, (list, tuple)):
        return isinstance(exc, tuple(on))
    return bool(on(exc))  # type: ignore[operator, arg-type]


def _attempt() -> int | None:
    """The running node's attempt (1-indexed); ``None`` outside a graph run."""
    try:
        from langgraph.runtime import get_runtime

        info = getattr(get_runtime(), "execution_info", None)
    except (ImportError, RuntimeError, KeyError):
        return None
    # a node invoked on its own (``node.invoke(state)``) has a config but no graph runtime
    return int(getattr(info, "node_attempt", 1) or 1) if info is not None else None


def will_retry(policy: RetryPolicy | None, exc: BaseException) -> bool:
    """Whether LangGraph will run the current node again when it raises ``exc``: inside a graph run,
    ``policy`` retries ``exc`` and the running attempt is not its last. A node with a fallback raises
    ``exc`` when this is ``True`` and falls back otherwise."""
    if policy is None:
        return False
    attempt = _attempt()
    return attempt is not None and attempt < policy.max_attempts and _matches(policy, exc)


def retry_or_fallback(policy: RetryPolicy | None, exc: BaseException) -> None:
    """Raise ``exc`` when :func:`will_retry` (after a ``{"event": "retry", "attempt", "max_attempts",
    "error"}`` custom-stream event), else return: the caller then takes its LLM-free fallback."""
    if not will_retry(policy, exc):
        return
    from .events import emit

    assert policy is not None
    emit({"event": "retry", "attempt": _attempt(), "max_attempts": policy.max_attempts, "error": type(exc).__name__})
    raise exc
