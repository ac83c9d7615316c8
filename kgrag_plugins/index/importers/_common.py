"""What the KG importers share: error policy, reports, line reading, entity tables."""

from __future__ import annotations

import functools
import gc
import gzip
import os
import sys
import time
import zlib
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
from tqdm.auto import tqdm

from ...config import progress_enabled
from ..graph import KnowledgeGraph

try:  # not on Windows
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

OnError = Literal["raise", "skip"]

_MAX_EXAMPLES = 5
_SNIFF_LINES = 1000
_PROGRESS_EVERY = 1 << 14  # lines between progress-bar updates
_NO_ID = frozenset({"", "date_information", "none", "null", "nan"})


class KGFormatError(ValueError):
    """A malformed KG file. The message names the file and, for line errors, the 1-based line number
    (``"FILE:LINE: reason"``); ``path`` and ``line`` (``None`` for whole-file errors) are attributes."""

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None, line: int | None = None):
        super().__init__(message)
        self.path = str(path) if path is not None else None
        self.line = line


@dataclass
class LoadReport:
    """What a loader read: counts, skipped lines (with up to 5 ``"FILE:LINE: reason"`` examples),
    duplicates dropped, wall seconds and the process's peak RSS (``ru_maxrss``) in MB."""

    format: str
    path: str
    lines: int = 0
    triples: int = 0
    entities: int = 0
    relations: int = 0
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    duplicates: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (``ru_maxrss``; 0.0 where unavailable)."""
    if resource is None:  # pragma: no cover
        return 0.0
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


# --------------------------------------------------------------------------- shared helpers


class _Issues:
    """Applies the error policy: raise at the first bad line, or count and keep examples."""

    def __init__(self, path: str | os.PathLike[str], on_error: str):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.path = str(path)
        self.raise_ = on_error == "raise"
        self.skipped = 0
        self.examples: list[str] = []

    def __call__(self, line: int, reason: str, *, always_skip: bool = False) -> None:
        msg = f"{self.path}:{line}: {reason}"
        if self.raise_ and not always_skip:
            raise KGFormatError(msg, path=self.path, line=line)
        self.skipped += 1
        if len(self.examples) < _MAX_EXAMPLES:
            self.examples.append(msg)

    def bulk(self, count: int, first: list[tuple[int, str]]) -> None:
        """Record ``count`` bad lines; ``first`` = the earliest (line, reason) pairs, in line order."""
        if count <= 0:
            return
        if self.raise_:
            line, reason = first[0]
            raise KGFormatError(f"{self.path}:{line}: {reason}", path=self.path, line=line)
        for line, reason in first[: max(0, _MAX_EXAMPLES - len(self.examples))]:
            self.examples.append(f"{self.path}:{line}: {reason}")
        self.skipped += count


class _Sniffer:
    """Raises (also in skip mode) when more than half of the first 1000 non-empty lines are bad."""

    def __init__(self, path: str, what: str, hint: str):
        self.path, self.what, self.hint = path, what, hint
        self.seen = self.bad = 0
        self.first: tuple[int, str] | None = None
        self.done = False

    def add(self, line: int, reason: str | None) -> None:
        if self.done:
            return
        self.seen += 1
        if reason is not None:
            self.bad += 1
            if self.first is None:
                self.first = (line, reason)
        if self.seen >= _SNIFF_LINES:
            self.finish()

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        if self.first is not None and 2 * self.bad > self.seen:
            line, reason = self.first
            raise KGFormatError(
                f"{self.path}:{line}: this does not look like {self.what}: {self.bad} of the first {self.seen} "
                f"non-empty lines are malformed (line {line}: {reason}); {self.hint}",
                path=self.path,
                line=line,
            )


def _gc_paused(fn):
    """Run a loader with the cyclic GC paused: millions of new lists/tuples would trigger ever longer
    full collections (it halves the Wikidata5M entity read); nothing a loader builds is cyclic."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper


def _check_file(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"KG file not found: {p}")
    return p


@contextmanager
def _open_bytes(path: Path, progress: bool, desc: str) -> Iterator[tuple[BinaryIO, Any, BinaryIO]]:
    """Open ``path`` (``.gz`` transparently) for binary reading; yields (reader, bar, raw file).

    The bar counts bytes of the file on disk: update it with ``raw.tell()``. A ``.gz`` file that is
    not gzip, truncated or corrupt is a :class:`KGFormatError` naming the file.
    """
    raw = open(path, "rb")
    gz = path.suffix == ".gz"
    try:
        fh: BinaryIO = gzip.GzipFile(fileobj=raw) if gz else raw  # type: ignore[assignment]
        with tqdm(
            total=os.path.getsize(path),
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=desc,
            disable=not progress_enabled(progress),
            leave=False,
        ) as bar:
            yield fh, bar, raw
            bar.update(max(0, bar.total - bar.n))
    except (OSError, EOFError, zlib.error) as e:
        if not gz or isinstance(e, FileNotFoundError):
            raise
        raise KGFormatError(
            f"{path}: not a readable gzip file ({type(e).__name__}: {e}); decompress it or drop the .gz suffix",
            path=path,
        ) from None
    finally:
        raw.close()


def _iter_lines(path: Path, progress: bool, desc: str) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line_without_newline)`` for every line (1-based)."""
    with _open_bytes(path, progress, desc) as (fh, bar, raw):
        for lineno, line in enumerate(fh, 1):
            if lineno % _PROGRESS_EVERY == 0:
                bar.update(raw.tell() - bar.n)
            yield lineno, line.rstrip(b"\r\n")


def _decode(line: bytes, lineno: int) -> str | None:
    try:
        s = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s.lstrip("\ufeff") if lineno == 1 else s


def _no_triples(path: Path, lines: int, issues: _Issues) -> KGFormatError:
    if lines == 0:
        detail = "the file is empty"
    elif issues.skipped:
        detail = f"all {issues.skipped} bad lines were skipped, first: {issues.examples[0]}"
    else:
        detail = f"{lines} lines read, none holds a triple"
    return KGFormatError(f"no triples in {path} ({detail})", path=path, line=None)


def _finish(
    fmt: str,
    path: Path,
    g: KnowledgeGraph,
    lines: int,
    valid: int,
    issues: _Issues,
    t0: float,
) -> LoadReport:
    return LoadReport(
        format=fmt,
        path=str(path),
        lines=lines,
        triples=g.num_triples,
        entities=g.num_entities,
        relations=len(g.relations),
        skipped=issues.skipped,
        skipped_examples=list(issues.examples),
        duplicates=valid - g.num_triples,
        seconds=round(time.perf_counter() - t0, 4),
        peak_rss_mb=round(peak_rss_mb(), 1),
    )


class _Table:
    """An entity (or relation) table under construction: id -> row, names, ordered aliases."""

    def __init__(self) -> None:
        self.idx: dict[str, int] = {}
        self.ids: list[str] = []
        self.names: list[str] = []
        self.aliases: dict[int, list[str]] = {}

    def row(self, key: str, name: str) -> int:
        i = self.idx.get(key)
        if i is None:
            i = self.idx[key] = len(self.ids)
            self.ids.append(key)
            self.names.append(name)
        elif name != self.names[i]:
            al = self.aliases.setdefault(i, [])
            if name not in al:
                al.append(name)
        return i

    def alias_column(self) -> list[tuple[str, ...]]:
        empty: tuple[str, ...] = ()
        return [tuple(self.aliases[i]) if i in self.aliases else empty for i in range(len(self.ids))]


def _i32(a: array) -> np.ndarray:
    return np.frombuffer(a, dtype=np.int32) if len(a) else np.zeros(0, np.int32)
