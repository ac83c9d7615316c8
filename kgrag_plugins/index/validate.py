"""Validation of the passages handed to an index build or ``add_passages``.

What is refused (one-line :class:`PassageError`, a ``ValueError``, naming the passage and the fix):
an item that is not a :class:`~kgrag_plugins.types.Passage` (``TypeError``), an empty or non-string
id, a duplicate id, a non-string ``text``/``title``, text that cannot be encoded as UTF-8 (lone
surrogates), and a corpus with no passage left to index.

What is accepted, with one WARNING per call:

* **Empty passages** (``text`` empty or whitespace only) are skipped: they carry nothing to
  retrieve. The skipped ids are on the returned list's ``skipped_empty`` attribute.
* **Long passages** are kept whole. BM25 and the graph builders read the whole text (the spaCy
  pass parses long texts in chunks, see :mod:`kgrag_plugins.index.builders.nlp`); a dense
  embedder reads a bounded window (the default all-MiniLM-L6-v2: 256 word pieces, about 1,100
  characters of English), so the index also embeds overlapping windows over the rest and scores
  the passage by its best window (:mod:`kgrag_plugins.index.windows`). Passages longer than
  :data:`LONG_PASSAGE_CHARS` are counted in ``long_ids`` and logged at INFO (their windows cost
  embedding time: about one passage's worth per 190 word pieces). We do not split them, since
  that would change passage ids (and gold ``supporting_passage_ids``).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from ..types import Passage

__all__ = ["LONG_PASSAGE_CHARS", "PassageError", "ValidatedPassages", "validate_passages"]

logger = logging.getLogger(__name__)

#: Passages longer than this many characters are certainly truncated by a 256-token embedder.
LONG_PASSAGE_CHARS = 1500
_EXAMPLES = 3


class PassageError(ValueError):
    """A passage that cannot be indexed; ``passage_id`` and ``item`` (position) name it."""

    def __init__(self, message: str, *, passage_id: str | None = None, item: int | None = None):
        super().__init__(message)
        self.passage_id = passage_id
        self.item = item


class ValidatedPassages(list):
    """The passages to index (a ``list``), with what validation skipped or flagged."""

    skipped_empty: list[str]
    long_ids: list[str]

    def stats(self) -> dict[str, Any]:
        """``{"skipped_empty_passages": n, "long_passages": n}`` for build statistics."""
        return {"skipped_empty_passages": len(self.skipped_empty), "long_passages": len(self.long_ids)}


def _examples(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_EXAMPLES])
    return shown + (", ..." if len(ids) > _EXAMPLES else "")


def validate_passages(passages: Iterable[Passage], allow_empty: bool = False) -> ValidatedPassages:
    """Check ``passages`` and return the indexable ones (see the module docstring for the rules).

    ``allow_empty``: an empty result is fine (a curated KG attached without passages).
    """
    items = list(passages)
    out = ValidatedPassages()
    out.skipped_empty, out.long_ids = [], []
    seen: dict[str, int] = {}
    for i, p in enumerate(items):
        if not isinstance(p, Passage):
            raise TypeError(f"item {i} is a {type(p).__name__}, not a Passage; wrap texts as Passage(id, text)")
        pid = p.id
        if not isinstance(pid, str):
            raise PassageError(
                f"passage {i} has a {type(pid).__name__} id {pid!r}; ids must be strings (use str(id))", item=i
            )
        if not pid:
            raise PassageError(f"passage {i} has an empty id; give every passage a unique id", item=i)
        if pid in seen:
            raise PassageError(
                f"duplicate passage id {pid!r} (items {seen[pid]} and {i}); passage ids must be unique",
                passage_id=pid,
                item=i,
            )
        seen[pid] = i
        for name in ("text", "title"):
            value = getattr(p, name)
            if not isinstance(value, str):
                raise PassageError(
                    f"passage {pid!r}: field {name!r} is a {type(value).__name__}, expected a string",
                    passage_id=pid,
                    item=i,
                )
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise PassageError(
                    f"passage {pid!r}: field {name!r} is not valid Unicode ({e.reason} at position {e.start}); "
                    "remove the lone surrogate or decode the source with errors='replace'",
                    passage_id=pid,
                    item=i,
                ) from None
        try:
            pid.encode("utf-8")
        except UnicodeEncodeError:
            raise PassageError(
                f"passage {i}: id {pid!r} is not valid Unicode (lone surrogate)", passage_id=pid, item=i
            ) from None
        if not p.text.strip():
            out.skipped_empty.append(pid)
            continue
        if len(p.text) > LONG_PASSAGE_CHARS:
            out.long_ids.append(pid)
        out.append(p)
    if out.skipped_empty:
        logger.warning(
            "skipped %d empty passage(s) (text empty or whitespace only): %s",
            len(out.skipped_empty),
            _examples(out.skipped_empty),
        )
    if out.long_ids:
        logger.info(
            "%d passage(s) are longer than %d characters (%s): kept whole; dense search embeds them as "
            "overlapping windows beside their own vector and scores each by its best window",
            len(out.long_ids),
            LONG_PASSAGE_CHARS,
            _examples(out.long_ids),
        )
    if not out and not allow_empty:
        if out.skipped_empty:
            raise PassageError(
                f"no passage to index: all {len(out.skipped_empty)} passage(s) are empty "
                f"({_examples(out.skipped_empty)}); give them text"
            )
        raise PassageError("cannot build an index from an empty corpus; pass at least one Passage")
    return out
