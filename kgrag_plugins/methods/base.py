"""The retriever contract every method implements (framework-free).

Two guarantees live here so that every method gets them the same way:

- **Input checks** at the public entry (``retrieve`` / ``aretrieve``): ``query`` is a non-empty
  ``str`` and ``k`` a positive ``int`` (not a ``bool``); anything else is a one-line
  ``TypeError`` / ``ValueError`` naming the argument and the fix, raised before any work.
- **Fresh after index updates.** :meth:`KnowledgeIndex.add_passages
  <kgrag_plugins.index.store.KnowledgeIndex.add_passages>` / ``delete_passages`` replace the
  index's graph and passage store and bump ``index.revision``. Assigning ``self.index`` records
  the revision the retriever's derived state (name maps, CSR matrices, position arrays) was built
  from; every public entry calls :meth:`Retriever._sync_index`, which runs the subclass's
  :meth:`Retriever._refresh` hook once when the revision moved. So new passages are retrievable
  and deleted ones are never returned, without rebuilding the retriever. ``retrieve`` (and so
  ``aretrieve``) reads one generation throughout: it holds :meth:`KnowledgeIndex.reading
  <kgrag_plugins.index.store.KnowledgeIndex.reading>`, so an update's in-place swap waits for the
  retrievals in flight, and retrievals started meanwhile wait for the swap.
- **Honest output.** Every :class:`~kgrag_plugins.types.Evidence` that ``retrieve`` returns says
  what its passage scores are (``trace["score_kind"]``, default the class's :attr:`Retriever.score_kind`),
  says when an LLM step fell back to its LLM-free path (``trace["fallback"]``, derived from the
  ``llm_error`` entries; retrievers record their own fallbacks with
  :func:`~kgrag_plugins.types.note_fallback`), and carries facts with entity names instead of
  ``##`` masks (:func:`~kgrag_plugins.methods.facts.readable_facts`). When the retrieval called
  an LLM, ``trace["llm_usage"]`` says how much: ``{"steps": {step: {"calls", "prompt_tokens",
  "completion_tokens", "seconds", "estimated"?}}, "total": {...}}``
  (:mod:`kgrag_plugins.models.usage`; calls made in this retrieval's context only, so concurrent
  retrievals are counted apart). An LLM-free retrieval has no ``llm_usage`` key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import numbers
import threading
from abc import ABC, abstractmethod
from typing import Any

from ..models.usage import LLM_USAGE_KEY, metering_usage
from ..types import SCORE_KIND_KEY, Evidence, fallbacks_of, note_fallback
from .facts import readable_facts

logger = logging.getLogger(__name__)

#: Serialises refreshes (rare: once per index update per retriever), so two threads that meet a
#: stale retriever at once rebuild its state once, not concurrently.
_REFRESH_LOCK = threading.RLock()


#: Longest accepted query (characters): a question, not a document (spaCy's NER refuses 1M).
MAX_QUERY_CHARS = 100_000


def check_query_text(query: str, what: str = "query") -> str:
    """``query`` unchanged when it is text every step can read; else a one-line ``ValueError``:
    blank, longer than :data:`MAX_QUERY_CHARS`, or holding a lone surrogate (not encodable as UTF-8)."""
    if not query.strip():
        raise ValueError(f"{what} must be a non-empty string; pass the question text")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"{what} is {len(query)} characters long; at most {MAX_QUERY_CHARS} are accepted")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{what} is not valid Unicode: a lone surrogate {query[e.start]!r} at position {e.start}; "
            "decode the text with errors='replace'"
        ) from None
    return query


def check_query_k(query: Any, k: Any) -> tuple[str, int]:
    """Validate ``retrieve``'s arguments; returns ``(query, int(k))``.

    Raises ``TypeError`` for a non-``str`` query or a non-integer / ``bool`` ``k`` (``2.5``,
    ``"3"``, ``True``), ``ValueError`` for a blank, over-long or not UTF-8-encodable query
    (:func:`check_query_text`) or ``k < 1``; each message names the argument, what was given and
    what to pass instead.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a non-empty str (the question text), got {type(query).__name__}")
    check_query_text(query)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(
            f"k must be a positive int (how many passages to return), got {k!r} ({type(k).__name__}); pass e.g. k=5"
        )
    if k < 1:
        raise ValueError(f"k must be >= 1 (how many passages to return), got {k}; pass e.g. k=5")
    return query, int(k)


def note_llm_fallback(trace: dict[str, Any]) -> None:
    """Record the LLM steps that took their LLM-free path (``trace["llm_error"]`` /
    ``["llm_errors"]`` entries, :func:`~kgrag_plugins.models.replies.complete_validated`) as a
    fallback, unless the retriever already recorded one naming the last error."""
    errors = [e for key in ("llm_error", "llm_errors") for e in (trace.get(key) or []) if isinstance(e, dict)]
    if not errors:
        return
    last = errors[-1]
    if any(str(last.get("error", "")) in f["reason"] for f in fallbacks_of(trace)):
        return
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    note_fallback(trace, "the LLM-free path", f"LLM error in {last.get('step', '?')}: {last.get('error', '?')}{more}")


def _reading(index: Any) -> contextlib.AbstractContextManager[Any]:
    """``index.reading()`` (a :class:`KnowledgeIndex`: an update waits for this read and is then seen
    whole by the next), else a no-op."""
    reading = getattr(type(index), "reading", None)
    return reading(index) if callable(reading) else contextlib.nullcontext()


class Retriever(ABC):
    """``retrieve(query, k) -> Evidence``; ``aretrieve`` runs it off the event loop by default.

    Subclasses implement :meth:`_retrieve` and, when they cache anything derived from
    ``self.index`` (graph arrays, name indexes, matrices), :meth:`_refresh` to rebuild it; public
    methods other than ``retrieve`` that read such state should start with ``self._sync_index()``.
    Adapters (LlamaIndex, LangGraph) wrap this.
    """

    #: Short name used by ``kgrag bench --retrievers``.
    name: str = "retriever"
    #: What the passage scores are (``Evidence.score_kind``; higher is better); a retriever whose
    #: scores change kind per call (a fallback, a fusion option) sets ``trace["score_kind"]`` itself.
    score_kind: str = "retriever score"
    #: ``index.revision`` the derived state was built from (``None``: no index, or one without
    #: a revision counter).
    _index_revision: int | None = None

    @property
    def index(self) -> Any:
        """The :class:`~kgrag_plugins.index.store.KnowledgeIndex` this retriever reads."""
        return self.__dict__.get("_index")

    @index.setter
    def index(self, index: Any) -> None:
        self.__dict__["_index"] = index
        self._index_revision = getattr(index, "revision", None)

    def _sync_index(self) -> None:
        """Run :meth:`_refresh` once if the index changed since the derived state was built."""
        index = self.__dict__.get("_index")
        rev = getattr(index, "revision", None)
        if rev is None or rev == self._index_revision:
            return
        with _REFRESH_LOCK:
            rev = index.revision
            if rev == self._index_revision:
                return  # another thread refreshed meanwhile
            logger.info(
                "%s: index changed (revision %s -> %s); rebuilding derived state", self.name, self._index_revision, rev
            )
            self._refresh()
            self._index_revision = rev

    def _refresh(self) -> None:
        """Rebuild whatever was derived from ``self.index`` (default: nothing is cached)."""

    def retrieve(self, query: str, k: int = 5) -> Evidence:
        """Evidence for ``query``: at most ``k`` passages (plus facts / trace, per method)."""
        query, k = check_query_k(query, k)
        with _reading(self.__dict__.get("_index")), metering_usage() as usage:  # one index generation
            self._sync_index()
            ev = self._finish(self._retrieve(query, k))
        if usage.calls:  # LLM calls, tokens and seconds per step (module docstring, "Honest output")
            ev.trace[LLM_USAGE_KEY] = usage.as_dict()
        return ev

    def _finish(self, ev: Evidence) -> Evidence:
        """The house guarantees on a method's Evidence (module docstring, "Honest output")."""
        ev.trace.setdefault(SCORE_KIND_KEY, self.score_kind)
        note_llm_fallback(ev.trace)
        readable_facts(ev.facts, self.index)
        return ev

    async def aretrieve(self, query: str, k: int = 5) -> Evidence:
        """:meth:`retrieve` in a worker thread; bad arguments raise before the thread starts."""
        query, k = check_query_k(query, k)
        return await asyncio.to_thread(self.retrieve, query, k)

    @abstractmethod
    def _retrieve(self, query: str, k: int) -> Evidence: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
