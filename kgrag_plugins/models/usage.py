"""Token and cost visibility: LLM calls, tokens and wall time per step (framework-free).

A :class:`UsageMeter` counts, per LLM step (``"selection"``, ``"answer"``, ...), the calls, prompt
and completion tokens and the wall seconds of the calls (a call's own HTTP retries and backoff
included). Meters are bound to the running context with :func:`metering_usage` (a
:mod:`contextvars` value, so concurrent retrievals in threads or asyncio tasks each count into
their own meter; an ``asyncio.to_thread`` or ``contextvars.copy_context().run`` call counts into
its caller's). Meters nest: a call counts into every meter open around it, so a bench meter around
a retrieval sees what the retrieval's own meter sees.

Where the numbers come from:

* :func:`llm_call` wraps one call and opens a *call slot*: the validated-call helpers
  (:func:`~kgrag_plugins.models.replies.complete_validated`,
  :func:`~kgrag_plugins.models.logprobs.complete_logprobs_validated`) wrap every call they make, so
  each call is attributed to its step.
* A backend reports the tokens of each reply with :func:`report_usage` (the OpenAI-compatible,
  Ollama, LiteLLM, local transformers and vLLM clients and the framework adapters do); the counts
  go into the open call slot. Reported outside a slot, they count as one call of step ``"llm"``
  with no seconds.
* A backend that reports nothing but keeps a cumulative ``usage`` dict (``prompt_tokens`` /
  ``completion_tokens``) is read before and after the call (with a client shared between
  concurrent calls, the difference can include the other calls' tokens).
* Otherwise (a scripted or custom LLM) the tokens are estimated with tiktoken ``cl100k_base`` over
  the message contents and the reply (about 4 characters a token without tiktoken), and the step is
  marked ``"estimated": true``.

A failed call counts as a call with its seconds and no tokens.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LLM_USAGE_KEY",
    "LLMCall",
    "StepUsage",
    "UsageMeter",
    "add_usage",
    "estimate_tokens",
    "llm_call",
    "metering_usage",
    "report_usage",
    "usage_line",
]

#: ``Evidence.trace`` key (and bench report key) of the usage dict ``{"steps", "total"}``.
LLM_USAGE_KEY = "llm_usage"
#: Step name of tokens a backend reported outside any :func:`llm_call`.
UNATTRIBUTED = "llm"


@dataclass
class StepUsage:
    """One step's (or the total) LLM usage."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    estimated: bool = False

    def add(self, other: StepUsage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds += other.seconds
        self.estimated = self.estimated or other.estimated

    def as_dict(self) -> dict[str, Any]:
        """``{"calls", "prompt_tokens", "completion_tokens", "seconds", "estimated"?}``."""
        out: dict[str, Any] = {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
        }
        if self.estimated:
            out["estimated"] = True
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepUsage:
        return cls(
            int(d.get("calls", 0) or 0),
            int(d.get("prompt_tokens", 0) or 0),
            int(d.get("completion_tokens", 0) or 0),
            float(d.get("seconds", 0.0) or 0.0),
            bool(d.get("estimated", False)),
        )


class UsageMeter:
    """LLM usage per step (thread-safe); :meth:`as_dict` gives ``{"steps": {step: {...}}, "total": {...}}``."""

    __slots__ = ("_lock", "_steps")

    def __init__(self) -> None:
        self._steps: dict[str, StepUsage] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        t = self.total()
        return f"UsageMeter(calls={t.calls}, prompt_tokens={t.prompt_tokens}, completion_tokens={t.completion_tokens})"

    def record(self, step: str, usage: StepUsage) -> None:
        """Add ``usage`` to ``step``."""
        with self._lock:
            self._steps.setdefault(step, StepUsage()).add(usage)

    @property
    def calls(self) -> int:
        """LLM calls so far (0: no LLM was called)."""
        if not self._steps:
            return 0
        with self._lock:
            return sum(s.calls for s in self._steps.values())

    def steps(self) -> dict[str, StepUsage]:
        """A copy of the per-step usage."""
        with self._lock:
            return {k: StepUsage(**vars(v)) for k, v in self._steps.items()}

    def total(self) -> StepUsage:
        total = StepUsage()
        for s in self.steps().values():
            total.add(s)
        return total

    def as_dict(self) -> dict[str, Any]:
        return {"steps": {k: v.as_dict() for k, v in self.steps().items()}, "total": self.total().as_dict()}


_METERS: contextvars.ContextVar[tuple[UsageMeter, ...]] = contextvars.ContextVar("kgrag_usage_meters", default=())
_CALL: contextvars.ContextVar[LLMCall | None] = contextvars.ContextVar("kgrag_usage_call", default=None)


class metering_usage:  # noqa: N801 - used as a function: ``with metering_usage() as meter``
    """Count every LLM call made in this context (and in contexts copied from it) into ``meter``
    (default a fresh one), and into the meters already open around it::

        with metering_usage() as meter:
            ...
        meter.as_dict()
    """

    __slots__ = ("_token", "meter")

    def __init__(self, meter: UsageMeter | None = None) -> None:
        self.meter = UsageMeter() if meter is None else meter

    def __enter__(self) -> UsageMeter:
        self._token = _METERS.set((*_METERS.get(), self.meter))
        return self.meter

    def __exit__(self, *exc: object) -> None:
        _METERS.reset(self._token)


def report_usage(prompt_tokens: Any, completion_tokens: Any, *, if_unreported: bool = False) -> None:
    """A backend's token counts of one reply (``None`` / non-integers count as 0): into the open
    :func:`llm_call` slot, else one call of step ``"llm"`` in the open meters, else nowhere.

    ``if_unreported``: skip when the open call already has counts (a framework adapter's reply that
    may wrap one of our LLMs, whose own counts arrived first)."""
    p = prompt_tokens if isinstance(prompt_tokens, int) else 0
    c = completion_tokens if isinstance(completion_tokens, int) else 0
    call = _CALL.get()
    if call is not None:
        if if_unreported and call.reported:
            return
        call.prompt_tokens += p
        call.completion_tokens += c
        call.reported = True
        return
    for meter in _METERS.get():
        meter.record(UNATTRIBUTED, StepUsage(1, p, c))


_ENCODER: Any = None
_ENCODER_LOCK = threading.Lock()


def _load_encoder() -> Any:
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            try:
                import tiktoken

                # TIKTOKEN_CACHE_DIR (the bundled, offline cache) was set when kgrag_plugins was imported
                _ENCODER = tiktoken.get_encoding("cl100k_base")
            except Exception:  # noqa: BLE001 - no tiktoken / no cached encoding: count characters
                _ENCODER = False
    return _ENCODER


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by tiktoken ``cl100k_base`` (without it: ``ceil(len / 4)``)."""
    if not text:
        return 0
    enc = _ENCODER if _ENCODER is not None else _load_encoder()
    if enc:
        return len(enc.encode(text, disallowed_special=()))
    return (len(text) + 3) // 4


def _usage_pair(llm: Any) -> tuple[int, int] | None:
    usage = getattr(llm, "usage", None) if llm is not None else None
    if isinstance(usage, dict) and "prompt_tokens" in usage:
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return None


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in prompt)
    return "" if prompt is None else str(prompt)


class LLMCall:
    """One metered LLM call (:func:`llm_call`): set :attr:`reply` (the text) after the call so that
    its tokens can be estimated when the backend reports none; :meth:`usage` after the block."""

    __slots__ = (
        "_before", "_llm", "_outer", "_token", "active", "completion_tokens", "estimated", "failed",
        "prompt", "prompt_tokens", "reply", "reported", "seconds", "started", "step",
    )  # fmt: skip

    def __init__(self, step: str, prompt: Any, llm: Any, active: bool) -> None:
        self.step, self.prompt, self._llm, self.active = step, prompt, llm, active
        self.reply: str | None = None
        self.prompt_tokens = self.completion_tokens = 0
        self.reported = self.estimated = self.failed = False
        self.seconds = 0.0
        self._outer: LLMCall | None = None
        self._before: tuple[int, int] | None = None
        self._token: Any = None
        self.started = 0.0

    def usage(self) -> StepUsage:
        """This call's usage (one call)."""
        return StepUsage(1, self.prompt_tokens, self.completion_tokens, self.seconds, self.estimated)

    def __enter__(self) -> LLMCall:
        self._outer = _CALL.get()
        self.active = self.active or self._outer is not None or bool(_METERS.get())
        if self.active:
            self._before = _usage_pair(self._llm)
            self._token = _CALL.set(self)
        self.started = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.seconds = time.perf_counter() - self.started
        if not self.active:
            return
        _CALL.reset(self._token)
        self.failed = exc_type is not None
        if not self.reported and not self.failed:
            after = _usage_pair(self._llm)
            if self._before is not None and after is not None and after[0] > self._before[0]:
                self.prompt_tokens, self.completion_tokens = after[0] - self._before[0], after[1] - self._before[1]
            else:
                self.prompt_tokens = estimate_tokens(_prompt_text(self.prompt))
                self.completion_tokens = estimate_tokens(self.reply or "")
                self.estimated = True
        outer = self._outer
        if outer is not None:  # a call inside a call (an adapter around a backend): the outer one records
            outer.prompt_tokens += self.prompt_tokens
            outer.completion_tokens += self.completion_tokens
            outer.reported = True
            outer.estimated = outer.estimated or self.estimated
            return
        usage = self.usage()
        for meter in _METERS.get():
            meter.record(self.step, usage)


def llm_call(step: str, prompt: Any = None, *, llm: Any = None, always: bool = False) -> LLMCall:
    """A context manager around one LLM call of ``step``: times it and counts it into the open
    meters (a no-op without any, unless ``always``: an adapter that wants the call's own
    :meth:`LLMCall.usage`)::

        with llm_call("answer", prompt, llm=llm) as call:
            call.reply = llm.complete(prompt)
    """
    return LLMCall(step, prompt, llm, always)


def add_usage(acc: dict[str, Any] | None, usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``acc`` + ``usage`` (both ``{"steps", "total"}`` dicts; ``None`` is empty): a new dict."""
    if not usage:
        return acc
    steps: dict[str, StepUsage] = {k: StepUsage.from_dict(v) for k, v in ((acc or {}).get("steps") or {}).items()}
    total = StepUsage.from_dict((acc or {}).get("total") or {})
    for k, v in (usage.get("steps") or {}).items():
        steps.setdefault(k, StepUsage()).add(StepUsage.from_dict(v))
    total.add(StepUsage.from_dict(usage.get("total") or {}))
    return {"steps": {k: v.as_dict() for k, v in steps.items()}, "total": total.as_dict()}


def usage_line(total: Mapping[str, Any]) -> str:
    """One line for a usage total: ``LLM usage: 12 calls, 3400 prompt tokens, 210 completion
    tokens, 8.3 s in LLM calls`` (``(estimated)`` when some tokens are)."""
    est = " (tokens partly estimated)" if total.get("estimated") else ""
    return (
        f"LLM usage: {int(total.get('calls', 0))} calls, {int(total.get('prompt_tokens', 0))} prompt tokens, "
        f"{int(total.get('completion_tokens', 0))} completion tokens, "
        f"{float(total.get('seconds', 0.0)):.1f} s in LLM calls{est}"
    )
