"""Exceptions of the index directory (all ``ValueError`` so the CLI prints one line, rc 2)."""

from __future__ import annotations

import errno

from ..errors import RetryableError


class IndexCorruptError(ValueError):
    """A file of the index directory is damaged; the message names the file/field and the fix."""


class IndexMismatchError(ValueError):
    """The index on disk was built with another embedder or format version."""


class IndexLockedError(ValueError):
    """Another process held the index's writer lock for longer than the timeout."""


class IndexWriteError(OSError, ValueError):
    """Saving a generation failed for lack of space; the previous generation is untouched."""


class ChromaServerError(ConnectionError, ValueError, RetryableError):
    """The Chroma server of ``chroma_url`` / ``KGRAG_CHROMA_URL`` cannot be reached; the message
    names the URL (a ``ConnectionError``, and a ``ValueError`` like the other index errors)."""


class GraphDBServerError(ConnectionError, ValueError, RetryableError):
    """The graph database server (FalkorDB, Neo4j) of a ``PropertyGraphKG`` was lost mid-call or
    cannot be reached; the message names its URL and says to start it again (the next call
    reconnects by itself). A ``ConnectionError`` and a ``ValueError``, like :class:`ChromaServerError`."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the disk or quota is full (``ENOSPC``/``EDQUOT``)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc).lower()
        if "no space left on device" in text or "database or disk is full" in text or "disk quota exceeded" in text:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
