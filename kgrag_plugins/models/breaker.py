"""The LLM errors, and the circuit breaker every HTTP LLM client uses."""

from __future__ import annotations

import threading
import time

from ..config import DEFAULT_LLM_BREAKER_COOLDOWN, DEFAULT_LLM_BREAKER_FAILURES, env_number
from ..errors import RetryableError

__all__ = ["CircuitBreaker", "LLMError", "LLMResponseError", "LLMTimeoutError", "LLMUnavailableError"]


class LLMError(RuntimeError):
    """An LLM call failed."""


class LLMUnavailableError(LLMError, RetryableError):
    """The client's circuit breaker is open: the call failed fast without a request (retryable)."""


class LLMTimeoutError(LLMError, RetryableError):
    """The LLM did not answer in time (after all retries; retryable)."""


class LLMResponseError(LLMError):
    """The LLM answered with an HTTP error or a malformed / empty response."""


class CircuitBreaker:
    """Fail fast on an endpoint that keeps failing (one per client, or shared by passing it).

    Closed: calls go through; every failed attempt (timeout, connection error, HTTP 429/5xx,
    malformed body) counts, a reply resets the count. ``failures`` consecutive failed attempts,
    or a call that used up its whole deadline, open the breaker: for ``cooldown`` seconds every
    call raises :class:`LLMUnavailableError` at once. Half-open: after the cool-down one call is let
    through as a trial (the others keep failing fast); its reply closes the breaker, its failure
    opens it again for another ``cooldown``.
    """

    def __init__(self, failures: int | None = None, cooldown: float | None = None) -> None:
        self.failures = int(
            failures if failures is not None else env_number("LLM_BREAKER_FAILURES", DEFAULT_LLM_BREAKER_FAILURES)
        )
        self.cooldown = float(
            cooldown if cooldown is not None else env_number("LLM_BREAKER_COOLDOWN", DEFAULT_LLM_BREAKER_COOLDOWN)
        )
        if self.failures < 1:
            raise ValueError(f"CircuitBreaker failures must be >= 1, got {failures}")
        if self.cooldown < 0:
            raise ValueError(f"CircuitBreaker cooldown must be >= 0, got {cooldown}")
        self.consecutive = 0
        self._opened_at: float | None = None
        self._trial = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CircuitBreaker(state={self.state!r}, consecutive={self.consecutive}, failures={self.failures})"

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"`` (a trial call is in flight)."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            return "half-open" if self._trial else "open"

    def check(self, what: str) -> None:
        """Raise :class:`LLMUnavailableError` while open; after the cool-down admit one trial call."""
        with self._lock:
            if self._opened_at is None:
                return
            left = self._opened_at + self.cooldown - time.monotonic()
            if left > 0:
                raise LLMUnavailableError(
                    f"{what} is unavailable: {self.consecutive} consecutive failure(s) opened the circuit "
                    f"breaker; failing fast for another {left:.1f}s (KGRAG_LLM_BREAKER_COOLDOWN)"
                )
            self._opened_at = time.monotonic()  # others keep failing fast until the trial reports
            self._trial = True

    def success(self) -> None:
        """The endpoint answered: close the breaker."""
        with self._lock:
            self.consecutive, self._opened_at, self._trial = 0, None, False

    def failure(self) -> None:
        """One failed attempt; opens the breaker at ``failures`` in a row or when a trial fails."""
        with self._lock:
            self.consecutive += 1
            if self._trial or self.consecutive >= self.failures:
                self._opened_at, self._trial = time.monotonic(), False

    def trip(self) -> None:
        """Open now (a call used up its whole deadline)."""
        with self._lock:
            self.consecutive = max(self.consecutive, 1)
            self._opened_at, self._trial = time.monotonic(), False

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None and not self._trial
