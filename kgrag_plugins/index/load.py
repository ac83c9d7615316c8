"""Importers for curated knowledge graphs: MetaQA, generic triple TSVs, HippoRAG OpenIE, Wikidata5M.

Entry point: :func:`load_kg` ``(path, format)`` -> ``(KnowledgeGraph, LoadReport)``; one loader per format.

Formats
-------
``metaqa``
    ``subject|relation|object`` per line (MetaQA ``kb.txt``). Entity id = entity name.
``tsv``
    Generic tab-separated triples. ``header="auto"`` treats the first line as a header when it names a
    head column (``subject``/``head``), a ``relation`` column (or ``predicate``) and a tail column
    (``object``/``tail``); without a header the first three columns are head, relation, tail. Optional id
    columns (``subject_wikidata``/``object_wikidata``, ``head_id``/``tail_id``, ``subject_id``/``object_id``)
    give the entity id when present and not empty/``date_information``; the name is kept as
    ``Entity.name`` (first seen) and other names of the same id become aliases. An id-less endpoint whose
    name appears elsewhere in the file with exactly one id is merged into that entity.
``openie``
    HippoRAG OpenIE JSONL, one passage per line: ``{"passage_id", "title", "entities": [...],
    "triples": [[h, r, t], ...]}``. Entity id = normalised name (NFKC, casefold, collapsed whitespace,
    surrounding quotes/punctuation stripped) so "Hank Snow" and "hank snow" meet; the first surface form
    is the name, other forms are aliases. Triples keep their ``passage_id`` as source; every entity (listed
    entities, triple endpoints, the passage title) is linked to the passages it appears in
    (``graph.link``; see ``graph.passages_of`` / ``graph.link_matrix``).
``wikidata5m``
    The Wikidata5M release, all tab-separated: entities ``Qid\\tname\\talias...`` (first name = display
    name), relations ``Pid\\tname\\talias...``, triples ``Qhead\\tPrel\\tQtail`` and optional descriptions
    ``Qid\\ttext``. ``load_kg(dir, "wikidata5m")`` finds the release file names in a directory
    (``wikidata5m_entity.txt``, ``wikidata5m_relation.txt``, ``wikidata5m_all_triplet.txt``,
    ``wikidata5m_text.txt``, also ``.gz``). Relation labels are the relation names when a relations file is
    given (duplicate names get `` (Pid)`` appended), else the P-ids.

Error policy
------------
Every problem tied to a line is reported as ``"FILE:LINE: reason"`` (1-based line numbers).
``on_error="raise"`` raises :class:`KGFormatError` at the first bad line; ``on_error="skip"`` (default)
skips it, counts it in ``LoadReport.skipped`` and keeps the first 5 messages in ``skipped_examples``.
Whole-file problems always raise, also in skip mode: a file with no triples ("no triples in FILE"), and
a MetaQA/TSV file where more than half of the first 1000 non-empty lines are bad (a wrong format,
e.g. a TSV given as ``metaqa`` -> "did you mean format='tsv'?"). In ``openie`` files, triples that are not
3 non-empty strings (common in LLM output) are always skipped and counted, never raised; invalid JSON
lines follow ``on_error``. In ``wikidata5m`` a triple whose head/tail (relation) is not in the given
entities (relations) file is a bad line; without that file such ids become entities (relations) named
by their id. Descriptions of ids that are not in the graph are ignored. Blank lines are ignored
everywhere. Missing files raise ``FileNotFoundError``.

Memory design
-------------
MetaQA, TSV and Wikidata5M collect entities in plain lists and triples in int32 row columns and build the
graph once with :meth:`KnowledgeGraph.from_columns` (no per-triple Python objects are kept). OpenIE files
(passage-sized, with per-triple sources) go through ``add_triple``/``link``.

Wikidata5M is streamed in blocks of whole lines (``chunk_bytes``, default 64 MiB = ~2.7M triple lines)
and never holds all lines. Per block, numpy finds the newline/tab positions; when every line is exactly
``Q<digits> TAB P<digits> TAB Q<digits>`` with canonical ids (checked vectorised) the numbers are parsed in C
by ``np.fromstring``, otherwise per field with a vectorised digit loop (lines with errors get a code and
are reported). Ids map to rows through the sorted numeric ids of the entity/relation table -- a dense
int32 id -> row table while the triples and descriptions are read when the ids are dense enough (max id
<= 16 x count: ~240 MB for 4.6M entities; ``np.searchsorted`` otherwise), a dict only for ids not of the
``Q<digits>``/``P<digits>`` form. Only the int32 columns of the valid triples are kept (12 bytes per
triple). Repeated triples are dropped before descriptions are read (``np.sort`` of packed int64 keys,
then a stable argsort of only the repeated ones), so that temporary peak and the description strings do
not add up; ``from_columns`` then runs with ``dedupe=False``. The entities, relations and descriptions
files are split a block at a time with one ``str.split`` (no per-line Python loop unless a block has
irregular lines). The cyclic GC is paused while loading. The peak is the entity strings (~1.5 GB for
4.6M entities with aliases) + descriptions + the graph's own id dict during ``from_columns``; see
``benchmarks/wikidata5m_scale.py`` (21M triples / 4.6M entities) for measured time and peak RSS.

``LoadReport.peak_rss_mb`` is ``resource.getrusage`` ``ru_maxrss``: the peak of the whole process so far,
not only of this load (run the load in a fresh process to measure it alone).
"""

from __future__ import annotations

import functools
import gc
import gzip
import json
import os
import string
import sys
import time
import unicodedata
import warnings
from array import array
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
from tqdm.auto import tqdm

from .graph import KnowledgeGraph

try:  # not on Windows
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

__all__ = [
    "FORMATS",
    "KGFormatError",
    "LoadReport",
    "load_kg",
    "load_metaqa_kb",
    "load_triples_tsv",
    "load_openie_jsonl",
    "load_wikidata5m",
    "normalize_entity_key",
]

FORMATS = ("metaqa", "tsv", "openie", "wikidata5m")
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

    The bar counts bytes of the file on disk: update it with ``raw.tell()``.
    """
    raw = open(path, "rb")
    try:
        fh: BinaryIO = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw  # type: ignore[assignment]
        with tqdm(
            total=os.path.getsize(path),
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=desc,
            disable=not progress,
            leave=False,
        ) as bar:
            yield fh, bar, raw
            bar.update(max(0, bar.total - bar.n))
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


# --------------------------------------------------------------------------- dispatch


def load_kg(
    path: str | os.PathLike[str],
    format: str,
    *,
    on_error: OnError = "skip",
    progress: bool = True,
    **kw: Any,
) -> tuple[KnowledgeGraph, LoadReport]:
    """Load a curated KG file in one of :data:`FORMATS`; returns the graph and a :class:`LoadReport`.

    For ``wikidata5m`` ``path`` is the triples file or a directory holding the release files
    (``wikidata5m_entity.txt``, ``wikidata5m_relation.txt``, ``wikidata5m_all_triplet.txt``,
    ``wikidata5m_text.txt``; explicit ``entities_path=`` etc. override). Other keyword arguments go to
    the format's loader.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown KG format {format!r}; expected one of {', '.join(FORMATS)}")
    common = {"on_error": on_error, "progress": progress}
    if format == "metaqa":
        return load_metaqa_kb(path, **common, **kw)
    if format == "tsv":
        return load_triples_tsv(path, **common, **kw)
    if format == "openie":
        return load_openie_jsonl(path, **common, **kw)
    p = Path(path)
    if p.is_dir():
        found = _wikidata5m_files(p)
        for k, v in found.items():
            kw.setdefault(k, v)
        if kw.get("triples_path") is None:
            raise FileNotFoundError(
                f"no Wikidata5M triples file in {p}: expected one of {', '.join(_W5M_NAMES['triples_path'])}"
            )
    else:
        kw.setdefault("triples_path", p)
    return load_wikidata5m(**common, **kw)


_W5M_NAMES = {
    "entities_path": ("wikidata5m_entity.txt",),
    "relations_path": ("wikidata5m_relation.txt",),
    "triples_path": ("wikidata5m_all_triplet.txt", "wikidata5m_transductive_train.txt"),
    "descriptions_path": ("wikidata5m_text.txt",),
}


def _wikidata5m_files(d: Path) -> dict[str, Path | None]:
    out: dict[str, Path | None] = {}
    for key, names in _W5M_NAMES.items():
        out[key] = next((d / n for name in names for n in (name, name + ".gz") if (d / n).is_file()), None)
    return out


# --------------------------------------------------------------------------- MetaQA


@_gc_paused
def load_metaqa_kb(
    path: str | os.PathLike[str], *, on_error: OnError = "skip", progress: bool = True
) -> tuple[KnowledgeGraph, LoadReport]:
    """Load a MetaQA ``kb.txt`` (``subject|relation|object`` per line; entity id = name)."""
    t0 = time.perf_counter()
    p = _check_file(path)
    issues = _Issues(p, on_error)
    sniff = _Sniffer(str(p), "a MetaQA kb.txt ('subject|relation|object' per line)", "did you mean format='tsv'?")
    ents, rels = _Table(), _Table()
    h, r, t = array("i"), array("i"), array("i")
    lines = 0
    for lineno, raw in _iter_lines(p, progress, "metaqa kb"):
        lines = lineno
        s = _decode(raw, lineno)
        if s is not None and not s.strip():
            continue
        reason = None
        if s is None:
            reason = "line is not valid UTF-8"
        else:
            parts = [x.strip() for x in s.split("|")]
            if len(parts) != 3 or not all(parts):
                reason = _metaqa_reason(s, parts)
        sniff.add(lineno, reason)
        if reason is not None:
            issues(lineno, reason)
            continue
        a, b, c = parts
        h.append(ents.row(a, a))
        r.append(rels.row(b, b))
        t.append(ents.row(c, c))
    sniff.finish()
    if not len(h):
        raise _no_triples(p, lines, issues)
    g = KnowledgeGraph.from_columns(ents.ids, ents.names, rels.ids, _i32(h), _i32(r), _i32(t))
    return g, _finish("metaqa", p, g, lines, len(h), issues, t0)


def _metaqa_reason(s: str, parts: list[str]) -> str:
    if len(parts) != 3:
        got = f"{len(parts)} '|'-separated fields"
        for sep, name in (("\t", "tab"), (",", "comma")):
            if len(parts) == 1 and sep in s:
                got += f" (wrong separator: looks {name}-separated)"
                break
    else:
        got = "an empty " + ("subject", "relation", "object")[parts.index("")]
    return f"expected 'subject|relation|object' (3 non-empty fields separated by '|'), got {got}: {s[:120]!r}"


# --------------------------------------------------------------------------- generic TSV

_HEAD_COLS = ("subject", "head", "subj")
_REL_COLS = ("relation", "predicate", "rel")
_TAIL_COLS = ("object", "tail", "obj")
_ID_SUFFIXES = ("_wikidata", "_id", "_qid")


def _find_col(header: list[str], names: Sequence[str]) -> int | None:
    for n in names:
        if n in header:
            return header.index(n)
    return None


def _resolve_columns(
    columns: Sequence[int | str] | Mapping[str, int | str] | None, header: list[str] | None
) -> dict[str, int | None]:
    """Column indices for head, relation, tail, head_id, tail_id."""
    keys = ("head", "relation", "tail", "head_id", "tail_id")
    if columns is None:
        if header is None:
            return {"head": 0, "relation": 1, "tail": 2, "head_id": None, "tail_id": None}
        hi, ri, ti = _find_col(header, _HEAD_COLS), _find_col(header, _REL_COLS), _find_col(header, _TAIL_COLS)
        assert hi is not None and ri is not None and ti is not None
        out: dict[str, int | None] = {"head": hi, "relation": ri, "tail": ti}
        for k, base in (("head_id", header[hi]), ("tail_id", header[ti])):
            out[k] = _find_col(header, [base + s for s in _ID_SUFFIXES])
        return out
    spec = dict(columns) if isinstance(columns, Mapping) else dict(zip(keys, columns))
    unknown = set(spec) - set(keys)
    if unknown or not {"head", "relation", "tail"} <= set(spec):
        raise ValueError(f"columns needs head, relation, tail (optionally head_id, tail_id); got {sorted(spec)}")
    res: dict[str, int | None] = {k: None for k in keys}
    for k, v in spec.items():
        if v is None:
            continue
        if isinstance(v, str):
            if header is None or v.strip().lower() not in header:
                raise ValueError(f"column {v!r} is not in the header {header}")
            res[k] = header.index(v.strip().lower())
        else:
            res[k] = int(v)
    return res


@_gc_paused
def load_triples_tsv(
    path: str | os.PathLike[str],
    *,
    columns: Sequence[int | str] | Mapping[str, int | str] | None = None,
    header: bool | Literal["auto"] = "auto",
    on_error: OnError = "skip",
    progress: bool = True,
) -> tuple[KnowledgeGraph, LoadReport]:
    """Load a tab-separated triples file.

    ``columns``: ``(head, relation, tail[, head_id, tail_id])`` or a mapping with those keys; values are
    0-based indices or header names. Default: from the header (see the module docstring), else 0, 1, 2.
    ``header``: ``"auto"`` (detect), ``True`` (first non-empty line is a header), ``False``.
    """
    t0 = time.perf_counter()
    p = _check_file(path)
    if header not in ("auto", True, False):
        raise ValueError(f"header must be 'auto', True or False, got {header!r}")
    issues = _Issues(p, on_error)
    sniff = _Sniffer(str(p), "a tab-separated triples file", "did you mean format='metaqa'?")
    ents, rels = _Table(), _Table()
    h, r, t = array("i"), array("i"), array("i")
    name_only: dict[str, int] = {}  # entities keyed by their name (no id column value)
    name_ids: dict[str, set[int]] = {}  # name -> rows of id-keyed entities seen with that name
    cols: dict[str, int | None] | None = None
    lines = 0
    for lineno, raw in _iter_lines(p, progress, "triples tsv"):
        lines = lineno
        s = _decode(raw, lineno)
        if s is not None and not s.strip():
            continue
        if s is None:
            sniff.add(lineno, "line is not valid UTF-8")
            issues(lineno, "line is not valid UTF-8")
            continue
        fields = [x.strip() for x in s.split("\t")]
        if cols is None:
            low = [x.lower() for x in fields]
            named = all(_find_col(low, c) is not None for c in (_HEAD_COLS, _REL_COLS, _TAIL_COLS))
            if header is True and columns is None and not named:
                raise KGFormatError(
                    f"{p}:{lineno}: header {fields} names no subject/head, relation and object/tail columns; "
                    "pass columns=(head, relation, tail)",
                    path=p,
                    line=lineno,
                )
            is_header = header is True or (header == "auto" and named)
            cols = _resolve_columns(columns, low if is_header else None)
            if is_header:
                continue
        need_here = max(cols["head"], cols["relation"], cols["tail"]) + 1  # type: ignore[type-var]
        reason = None
        if len(fields) < need_here:
            reason = (
                f"expected at least {need_here} tab-separated columns (head, relation, tail), got {len(fields)}"
                + (" (looks '|'-separated: format='metaqa'?)" if "|" in s and len(fields) == 1 else "")
                + f": {s[:120]!r}"
            )
        else:
            hn, rn, tn = fields[cols["head"]], fields[cols["relation"]], fields[cols["tail"]]  # type: ignore[index]
            if not (hn and rn and tn):
                which = "head" if not hn else "relation" if not rn else "tail"
                reason = f"empty {which} column: {s[:120]!r}"
        sniff.add(lineno, reason)
        if reason is not None:
            issues(lineno, reason)
            continue
        rows = []
        for name, idc in ((hn, cols["head_id"]), (tn, cols["tail_id"])):
            eid = fields[idc] if idc is not None and idc < len(fields) else ""
            if eid.lower() in _NO_ID:
                key = "\x00" + name  # provisional, resolved below
                i = ents.row(key, name)
                name_only[name] = i
            else:
                i = ents.row(eid, name)
                name_ids.setdefault(name, set()).add(i)
            rows.append(i)
        h.append(rows[0])
        r.append(rels.row(rn, rn))
        t.append(rows[1])
    sniff.finish()
    if not len(h):
        raise _no_triples(p, lines, issues)
    hh, tt = _i32(h).copy(), _i32(t).copy()
    n = len(ents.ids)
    remap = np.arange(n, dtype=np.int64)
    drop = np.zeros(n, dtype=bool)
    for name, i in name_only.items():
        target = name_ids.get(name)
        if target is not None and len(target) == 1:  # the name has exactly one id in this file
            remap[i] = next(iter(target))
            drop[i] = True
        ents.ids[i] = name  # provisional key -> the name is the id
    if name_only and len(set(ents.ids)) != n:  # a name equal to some id string: keep them apart
        for name, i in name_only.items():
            if not drop[i] and name in ents.idx and ents.idx[name] != i:
                ents.ids[i] = f"name:{name}"
    keep = np.flatnonzero(~drop)
    newrow = np.cumsum(~drop) - 1
    final = newrow[remap]
    hh, tt = final[hh].astype(np.int32), final[tt].astype(np.int32)
    aliases = ents.alias_column()
    if drop.any():  # a merged name is already the name or an alias of its id entity
        ids = [ents.ids[i] for i in keep]
        names = [ents.names[i] for i in keep]
        aliases = [aliases[i] for i in keep]
    else:
        ids, names = ents.ids, ents.names
    g = KnowledgeGraph.from_columns(ids, names, rels.ids, hh, _i32(r), tt, aliases=aliases)
    return g, _finish("tsv", p, g, lines, len(h), issues, t0)


# --------------------------------------------------------------------------- HippoRAG OpenIE

_STRIP = string.whitespace + ".,;:!?\"'`“”‘’«»„‚‹›…"


def normalize_entity_key(name: str) -> str:
    """The entity id used by the ``openie`` loader: NFKC, casefold, collapsed whitespace, surrounding
    quotes and sentence punctuation stripped (``" Hank  Snow."`` -> ``"hank snow"``)."""
    s = " ".join(unicodedata.normalize("NFKC", name).casefold().split())
    return s.strip(_STRIP) or s


@_gc_paused
def load_openie_jsonl(
    path: str | os.PathLike[str], *, on_error: OnError = "skip", progress: bool = True
) -> tuple[KnowledgeGraph, LoadReport]:
    """Load HippoRAG-style OpenIE JSONL (``{"passage_id","title","entities","triples"}`` per line).

    Triples are sourced to their passage; entities are linked to the passages they appear in (read
    them back with ``graph.passages_of(entity_id)`` / ``graph.entities_of(passage_id)``). HippoRAG's own
    keys ``extracted_entities`` / ``extracted_triples`` / ``idx`` are accepted too.
    """
    t0 = time.perf_counter()
    p = _check_file(path)
    issues = _Issues(p, on_error)
    ents, rels = _Table(), _Table()
    triples: list[tuple[int, int, int, int]] = []  # h, r, t, passage
    passages: list[str] = []
    links: set[tuple[int, int]] = set()
    lines = 0
    for lineno, raw in _iter_lines(p, progress, "openie jsonl"):
        lines = lineno
        s = _decode(raw, lineno)
        if s is None:
            issues(lineno, "line is not valid UTF-8")
            continue
        if not s.strip():
            continue
        try:
            rec = json.loads(s)
        except json.JSONDecodeError as e:
            issues(lineno, f"invalid JSON ({e.msg} at column {e.colno}): {s[:80]!r}")
            continue
        if not isinstance(rec, dict):
            issues(lineno, f"expected a JSON object, got {type(rec).__name__}")
            continue
        pid = rec.get("passage_id", rec.get("idx"))
        if pid is None or str(pid).strip() == "":
            issues(lineno, "record has no 'passage_id'")
            continue
        pi = len(passages)
        passages.append(str(pid))
        ent_list = rec.get("entities", rec.get("extracted_entities")) or []
        tri_list = rec.get("triples", rec.get("extracted_triples")) or []
        if not isinstance(ent_list, list) or not isinstance(tri_list, list):
            issues(lineno, "'entities' and 'triples' must be lists")
            continue
        title = rec.get("title")
        names = [title] if isinstance(title, str) and title.strip() else []
        for k, e in enumerate(ent_list):
            if isinstance(e, str) and e.strip():
                names.append(e)
            else:
                issues(lineno, f"entity {k} is not a non-empty string: {e!r}", always_skip=True)
        for name in names:
            links.add((ents.row(normalize_entity_key(name), name.strip()), pi))
        for k, tr in enumerate(tri_list):
            if not (isinstance(tr, list) and len(tr) == 3 and all(isinstance(x, str) and x.strip() for x in tr)):
                issues(lineno, f"triple {k} is not 3 non-empty strings: {str(tr)[:100]}", always_skip=True)
                continue
            hn, rn, tn = (x.strip() for x in tr)
            hi = ents.row(normalize_entity_key(hn), hn)
            ti = ents.row(normalize_entity_key(tn), tn)
            links.add((hi, pi))
            links.add((ti, pi))
            triples.append((hi, rels.row(rn, rn), ti, pi))
    if not triples and not ents.ids:
        raise _no_triples(p, lines, issues)
    g = KnowledgeGraph.from_columns(
        ents.ids, ents.names, [], np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32),
        aliases=ents.alias_column(),
    )  # fmt: skip
    ids = ents.ids
    for e, pi in sorted(links, key=lambda x: (x[1], x[0])):  # passages in file order
        g.link(ids[e], passages[pi])
    for hi, ri, ti, pi in triples:
        g.add_triple(ids[hi], rels.ids[ri], ids[ti], [passages[pi]])
    return g, _finish("openie", p, g, lines, len(triples), issues, t0)


# --------------------------------------------------------------------------- Wikidata5M

_Q, _P = ord("Q"), ord("P")
_DENSE_FACTOR = 16  # use a dense id -> row table when max id <= 16 x the number of ids


def _canonical(s: str, prefix: str) -> int:
    """``int(digits)`` for ``prefix`` + canonical digits (no leading zero, <= 18 digits), else -1."""
    d = s[1:]
    if s[:1] == prefix and 0 < len(d) <= 18 and d.isascii() and d.isdigit() and (d[0] != "0" or len(d) == 1):
        return int(d)
    return -1


def _parse_ids(buf: np.ndarray, start: np.ndarray, end: np.ndarray, prefix: int) -> np.ndarray:
    """Vectorised :func:`_canonical` over the fields ``buf[start:end]``: int64, -1 where not canonical."""
    ndig = end - start - 1
    ok = (ndig >= 1) & (ndig <= 18)
    ok &= buf[np.where(ok, start, 0)] == prefix
    ok &= ~((ndig > 1) & (buf[np.where(ok, start + 1, 0)] == 48))
    val = np.zeros(len(start), dtype=np.int64)
    width = int(ndig[ok].max()) if ok.any() else 0
    for k in range(width):
        active = ok & (k < ndig)
        d = buf[np.where(active, start + 1 + k, 0)].astype(np.int64) - 48
        ok &= ~active | ((d >= 0) & (d <= 9))
        val = np.where(active, val * 10 + d, val)
    val[~ok] = -1
    return val


def _iter_chunks(path: Path, progress: bool, desc: str, chunk_bytes: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(lines_before, data)``: blocks of whole lines, each ending in ``\\n`` (``\\r\\n`` -> ``\\n``)."""
    with _open_bytes(path, progress, desc) as (fh, bar, raw):
        rest, base = b"", 0
        while True:
            block = fh.read(chunk_bytes)
            if block:
                data = rest + block if rest else block
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # no line end yet: keep reading
                    rest = data
                    continue
                data, rest = data[:cut], data[cut:]
            elif rest:
                data, rest = rest + b"\n", b""
            else:
                break
            n = data.count(b"\n")
            if b"\r" in data:
                data = data.replace(b"\r\n", b"\n")
            yield base, data
            base += n
            bar.update(raw.tell() - bar.n)
            if not block:
                break


def _layout(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(buf, line starts, newline positions, tab positions)`` of a block of whole lines."""
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    starts = np.empty(len(nl), np.int64)
    if len(nl):
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
    return buf, starts, nl, np.flatnonzero(buf == 9)


def _first_field_end(starts: np.ndarray, nl: np.ndarray, tabs: np.ndarray) -> np.ndarray:
    if not len(tabs):
        return nl
    k = np.searchsorted(tabs, starts)
    ft = tabs[np.minimum(k, len(tabs) - 1)]
    return np.where((k < len(tabs)) & (ft < nl), ft, nl)


def _decode_lines(data: bytes, base: int) -> tuple[list[str], set[int]]:
    """Lines of a block as text, and the indices of lines that are not UTF-8 (those become ``""``)."""
    try:
        lines = data.decode("utf-8").split("\n")
        lines.pop()
        bad: set[int] = set()
    except UnicodeDecodeError:
        lines, bad = [], set()
        for j, raw in enumerate(data.split(b"\n")[:-1]):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                lines.append("")
                bad.add(j)
    if base == 0 and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines, bad


class _IdMap:
    """Q/P-id -> row: sorted numeric ids + ``np.searchsorted`` (or a dense table while the triples are
    read, when the ids are dense enough); a dict for non-canonical ids."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.keys = np.zeros(0, np.int64)
        self.rows = np.zeros(0, np.int32)
        self.other: dict[str, int] = {}
        self.table: np.ndarray | None = None

    def build(self, nums: np.ndarray) -> None:
        """Index rows ``0..len(nums)-1`` by numeric id (``-1`` entries are in ``other``)."""
        rows = np.flatnonzero(nums >= 0)
        keys = nums[rows]
        order = np.argsort(keys, kind="stable")
        self.keys, self.rows = keys[order], rows[order].astype(np.int32)
        self.table = None

    def add(self, nums: np.ndarray, rows: np.ndarray) -> None:
        keys = np.concatenate([self.keys, nums])
        allrows = np.concatenate([self.rows, rows.astype(np.int32)])
        order = np.argsort(keys, kind="stable")
        self.keys, self.rows = keys[order], allrows[order]
        self.table = None

    def make_dense(self) -> None:
        """A direct id -> row table (int32, ``max id + 1`` entries) when ids are dense enough."""
        n = len(self.keys)
        if n and int(self.keys[-1]) < 2**31 - 1 and int(self.keys[-1]) + 1 <= _DENSE_FACTOR * n + 65536:
            table = np.full(int(self.keys[-1]) + 1, -1, np.int32)
            table[self.keys[::-1]] = self.rows[::-1]  # the first row wins for repeated ids
            self.table = table

    def lookup(self, q: np.ndarray) -> np.ndarray:
        """Rows for numeric ids ``q`` (int32, -1 where absent or ``q < 0``)."""
        if self.table is not None:
            inr = (q >= 0) & (q < len(self.table))
            out = np.full(len(q), -1, np.int32)
            out[inr] = self.table[q[inr]]
            return out
        if not len(self.keys):
            return np.full(len(q), -1, np.int32)
        pos = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
        hit = (self.keys[pos] == q) & (q >= 0)
        return np.where(hit, self.rows[pos], -1).astype(np.int32)

    def get(self, s: str) -> int:
        n = _canonical(s, self.prefix)
        if n >= 0:
            return int(self.lookup(np.array([n], np.int64))[0])
        return self.other.get(s, -1)


def _clean_aliases(al: list[str], name: str) -> tuple[str, ...]:
    """Aliases without empties, repeats and the name itself."""
    if "" in al or name in al or len(set(al)) < len(al):
        al = [a for a in dict.fromkeys(al) if a and a != name]
    return tuple(al)


class _W5MTable:
    """Entities or relations of a Wikidata5M file: id/name/alias columns plus an :class:`_IdMap`."""

    def __init__(self, prefix: str):
        self.ids: list[str] = []
        self.names: list[str] = []
        self.aliases: list[tuple[str, ...]] = []
        self.map = _IdMap(prefix)
        self.from_file = False

    def read(self, path: Path, issues: _Issues, progress: bool, desc: str, chunk_bytes: int) -> None:
        """Read ``id<TAB>name<TAB>alias...`` lines in chunks; duplicate ids merge into the first as aliases."""
        self.from_file = True
        all_nums: list[np.ndarray] = []
        for base, data in _iter_chunks(path, progress, desc, chunk_bytes):
            buf, starts, nl, tabs = _layout(data)
            nums = _parse_ids(buf, starts, _first_field_end(starts, nl, tabs), ord(self.map.prefix))
            if (nums >= 0).all() and self._fast_chunk(data, nl, tabs):
                all_nums.append(nums)
                continue
            all_nums.append(self._slow_chunk(data, base, nums, issues))
        self._dedupe(np.concatenate(all_nums) if all_nums else np.zeros(0, np.int64))

    def _fast_chunk(self, data: bytes, nl: np.ndarray, tabs: np.ndarray) -> bool:
        """Every line starts with a canonical id: split all fields at once, slice them per line.

        Returns ``False`` (nothing added) when the block is not valid UTF-8."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        fields = np.array(text.replace("\n", "\t").split("\t"), dtype=object)  # ends with ""
        nf = np.bincount(np.searchsorted(nl, tabs), minlength=len(nl)) + 1  # fields per line
        first = np.zeros(len(nl), np.int64)
        np.cumsum(nf[:-1], out=first[1:])
        ids = fields[first].tolist()
        self.ids.extend(ids)
        named = nf > 1
        names = fields[np.where(named, first + 1, first)]
        bad_name = np.flatnonzero(names == "")
        if len(bad_name):
            names[bad_name] = fields[first[bad_name]]
        self.names.extend(names.tolist())
        empty: tuple[str, ...] = ()
        al = [empty] * len(nl)
        multi = np.flatnonzero(nf > 2)
        if len(multi):
            f = fields.tolist()
            lo, hi = (first[multi] + 2).tolist(), (first[multi] + nf[multi]).tolist()
            for i, a, b, n in zip(multi.tolist(), lo, hi, names[multi].tolist()):
                al[i] = _clean_aliases(f[a:b], n)
        self.aliases.extend(al)
        return True

    def _slow_chunk(self, data: bytes, base: int, nums: np.ndarray, issues: _Issues) -> np.ndarray:
        """Line by line (non-canonical ids, empty ids, undecodable lines)."""
        prefix, other, empty = self.map.prefix, self.map.other, ()
        lines, bad = _decode_lines(data, base)
        kept = array("q")
        for j, ln in enumerate(lines):
            if j in bad:
                issues(base + j + 1, "line is not valid UTF-8")
                continue
            p = [x.strip() for x in ln.split("\t")]
            eid = p[0]
            if not eid:
                if any(p):
                    issues(base + j + 1, f"empty id: {ln[:120]!r}")
                continue
            n = int(nums[j]) if nums[j] >= 0 else _canonical(eid, prefix)
            if n < 0 and eid in other:
                self._merge(other[eid], p[1:])
                continue
            if n < 0:
                other[eid] = len(self.ids)
            name = p[1] if len(p) > 1 and p[1] else eid
            self.ids.append(eid)
            self.names.append(name)
            self.aliases.append(_clean_aliases(p[2:], name) if len(p) > 2 else empty)
            kept.append(n)
        return np.frombuffer(kept, dtype=np.int64).copy() if len(kept) else np.zeros(0, np.int64)

    def _merge(self, i: int, more: list[str]) -> None:
        extra = [x.strip() for x in more if x.strip() and x.strip() != self.names[i]]
        if extra:
            self.aliases[i] = tuple(dict.fromkeys([*self.aliases[i], *extra]))

    def _dedupe(self, num: np.ndarray) -> None:
        valid = np.flatnonzero(num >= 0)
        order = valid[np.argsort(num[valid], kind="stable")]
        dup = np.zeros(len(num), bool)
        if len(order) > 1:
            same = np.flatnonzero(num[order[1:]] == num[order[:-1]])
            run_first = order.copy()
            for k in same:  # runs of repeated ids: merge every copy into the first row
                run_first[k + 1] = run_first[k]
                i, j = int(run_first[k + 1]), int(order[k + 1])
                self._merge(i, [self.names[j], *self.aliases[j]])
                dup[j] = True
        if dup.any():
            keep = np.flatnonzero(~dup)
            self.ids = [self.ids[i] for i in keep]
            self.names = [self.names[i] for i in keep]
            self.aliases = [self.aliases[i] for i in keep]
            num = num[keep]
            self.map.other = {e: i for i, e in enumerate(self.ids) if _canonical(e, self.map.prefix) < 0}
        self.map.build(num)

    def add_new(self, nums: np.ndarray) -> None:
        """Append entities for unseen canonical ids (name = id)."""
        new = np.unique(nums)
        start = len(self.ids)
        fresh = [f"{self.map.prefix}{k}" for k in new.tolist()]
        self.ids.extend(fresh)
        self.names.extend(fresh)
        self.aliases.extend([()] * len(fresh))
        self.map.add(new, np.arange(start, start + len(new)))

    def add_other(self, s: str) -> int:
        i = self.map.other[s] = len(self.ids)
        self.ids.append(s)
        self.names.append(s)
        self.aliases.append(())
        return i


_REASONS = {
    1: "expected 3 tab-separated fields (head, relation, tail), got {n}",
    2: "empty field",
    3: "line is not valid UTF-8",
    4: "unknown head entity {h!r} (not in the entities file)",
    5: "unknown relation {r!r} (not in the relations file)",
    6: "unknown tail entity {t!r} (not in the entities file)",
}


@_gc_paused
def load_wikidata5m(
    entities_path: str | os.PathLike[str] | None = None,
    relations_path: str | os.PathLike[str] | None = None,
    triples_path: str | os.PathLike[str] | None = None,
    descriptions_path: str | os.PathLike[str] | None = None,
    *,
    on_error: OnError = "skip",
    progress: bool = True,
    relation_names: bool = True,
    max_description_chars: int | None = None,
    chunk_bytes: int = 64 << 20,
) -> tuple[KnowledgeGraph, LoadReport]:
    """Load the Wikidata5M release files (streaming; see the module docstring for the memory design).

    ``triples_path`` is required. ``relation_names``: label relations by their name from the relations
    file (else by P-id). ``max_description_chars`` truncates descriptions (the release's
    ``wikidata5m_text.txt`` holds whole Wikipedia intros). ``chunk_bytes``: bytes read per chunk.
    """
    t0 = time.perf_counter()
    if triples_path is None:
        raise ValueError("load_wikidata5m needs triples_path (the Qhead<TAB>Prel<TAB>Qtail file)")
    tp = _check_file(triples_path)
    ep = _check_file(entities_path) if entities_path is not None else None
    rp = _check_file(relations_path) if relations_path is not None else None
    dp = _check_file(descriptions_path) if descriptions_path is not None else None
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    skipped, examples = 0, []

    ents, rels = _W5MTable("Q"), _W5MTable("P")
    for table, path, desc in ((ents, ep, "wikidata5m entities"), (rels, rp, "wikidata5m relations")):
        if path is not None:
            iss = _Issues(path, on_error)
            table.read(path, iss, progress, desc, chunk_bytes)
            skipped += iss.skipped
            examples += iss.examples
    ents.map.make_dense()
    rels.map.make_dense()

    issues = _Issues(tp, on_error)
    hs: list[np.ndarray] = []
    rs: list[np.ndarray] = []
    ts: list[np.ndarray] = []
    lines = 0
    for base, data in _iter_chunks(tp, progress, "wikidata5m triples", chunk_bytes):
        h, r, t = _triples_chunk(data, base, ents, rels, issues)
        lines = base + data.count(b"\n")
        hs.append(h)
        rs.append(r)
        ts.append(t)
    rels.map.table = None
    valid = sum(len(x) for x in hs)
    if not valid:
        ents.map.table = None
        issues.skipped += skipped
        raise _no_triples(tp, lines, issues)
    heads, rels_col, tails = np.concatenate(hs), np.concatenate(rs), np.concatenate(ts)
    del hs, rs, ts
    heads, rels_col, tails = _dedupe_triples(heads, rels_col, tails, len(ents.ids), len(rels.ids))

    descs: list[str] | None = None
    if dp is not None:  # after the dedupe, so its temporary arrays and the description strings don't add up
        iss = _Issues(dp, on_error)
        descs = _read_descriptions(dp, ents, iss, progress, max_description_chars, chunk_bytes)
        skipped += iss.skipped
        examples += iss.examples
    ents.map.table = None

    labels = rels.ids
    if relation_names and rels.from_file:
        count: dict[str, int] = {}
        for nm in rels.names:
            count[nm] = count.get(nm, 0) + 1
        labels = [nm if count[nm] == 1 else f"{nm} ({pid})" for nm, pid in zip(rels.names, rels.ids)]
        if len(set(labels)) != len(labels):  # a name equal to another's "name (Pid)": fall back to ids
            labels = rels.ids
    g = KnowledgeGraph.from_columns(
        ents.ids, ents.names, labels, heads, rels_col, tails, aliases=ents.aliases, descriptions=descs, dedupe=False
    )
    del heads, rels_col, tails
    issues.skipped += skipped
    issues.examples = (examples + issues.examples)[:_MAX_EXAMPLES]
    return g, _finish("wikidata5m", tp, g, lines, valid, issues, t0)


def _dedupe_triples(
    h: np.ndarray, r: np.ndarray, t: np.ndarray, n_ent: int, n_rel: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop repeated triples, keeping first occurrences in file order (as ``from_columns`` would).

    ``np.sort`` of the packed int64 keys finds the repeated keys; only the triples whose key hashes
    into that (small) set are then argsorted to find which copies come later. Much faster than a
    stable argsort of all keys (``np.unique(return_index=True)``)."""
    if (n_ent + 1) ** 2 * (n_rel + 1) >= 2**62:  # pragma: no cover - ids too large to pack into one int64
        _, first = np.unique(np.stack([h, r, t], axis=1), axis=0, return_index=True)
        first.sort()
        return h[first], r[first], t[first]
    key = (h.astype(np.int64) * (n_rel + 1) + r) * (n_ent + 1) + t
    ks = np.sort(key)
    rep = ks[1:] == ks[:-1]
    if not rep.any():
        return h, r, t
    dupkeys = np.unique(ks[1:][rep])
    del ks, rep
    bits = int(min(30, max(16, np.ceil(np.log2(len(dupkeys) * 64)))))
    flag = np.zeros(1 << bits, bool)
    flag[_hash_bits(dupkeys, bits)] = True
    cand = np.flatnonzero(flag[_hash_bits(key, bits)])  # all repeated triples + a few false positives
    del flag
    ck = key[cand]
    del key
    pos = np.minimum(np.searchsorted(dupkeys, ck), len(dupkeys) - 1)
    real = dupkeys[pos] == ck
    cand, ck = cand[real], ck[real]
    order = np.argsort(ck, kind="stable")
    cks = ck[order]
    later = order[1:][cks[1:] == cks[:-1]]
    keep = np.ones(len(h), bool)
    keep[cand[later]] = False
    return h[keep], r[keep], t[keep]


def _hash_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """Fibonacci hashing of int64 keys to ``bits`` bits."""
    return ((x.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits)).astype(np.intp)


_ID_SPACES = bytes.maketrans(b"QP\t\n", b"    ")


def _fast_triple_ids(data: bytes, buf: np.ndarray, starts: np.ndarray, nl: np.ndarray, tabs: np.ndarray):
    """The numeric ids ``(n, 3)`` of a block in which every line is exactly ``Q<d> TAB P<d> TAB Q<d>`` with
    canonical ids (checked with numpy), parsed by ``np.fromstring`` in C; ``None`` if any line is not."""
    n = len(nl)
    if not n or len(tabs) != 2 * n:
        return None
    t0, t1 = tabs[0::2], tabs[1::2]
    fields = ((starts, t0 - starts, _Q), (t0 + 1, t1 - t0 - 1, _P), (t1 + 1, nl - t1 - 1, _Q))
    for s, ln, prefix in fields:  # each line holds its own two tabs, every field is prefix + 1-18 digits
        if ln.min() < 2 or ln.max() > 19 or not (buf[s] == prefix).all():
            return None
        if ((buf[s + 1] == 48) & (ln > 2)).any():  # a leading zero: not canonical
            return None
    digits = np.count_nonzero((buf - np.uint8(48)) < 10)
    if digits != len(buf) - 6 * n:  # anything but prefixes, tabs and newlines must be a digit
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            nums = np.fromstring(data.translate(_ID_SPACES), dtype=np.int64, sep=" ")  # type: ignore[call-overload]
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - a numpy without text fromstring
        return None
    return nums.reshape(n, 3) if len(nums) == 3 * n else None


def _triples_chunk(
    data: bytes, base: int, ents: _W5MTable, rels: _W5MTable, issues: _Issues
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse a block of whole lines into int32 row columns of its valid triples (numpy only)."""
    buf, starts, nl, tabs = _layout(data)
    fast = _fast_triple_ids(data, buf, starts, nl, tabs)
    if fast is not None:
        code = np.zeros(len(nl), np.int8)
        good = np.arange(len(nl))
        fs: list[tuple[np.ndarray, np.ndarray]] = []
    else:
        code, good, fs = _triples_structure(data, buf, starts, nl, tabs)

    cols = []
    for k, table, prefix, err in ((0, ents, _Q, 4), (1, rels, _P, 5), (2, ents, _Q, 6)):
        if fast is not None:
            nums = fast[:, k]
        else:
            s, e = fs[k]
            nums = _parse_ids(buf, s, e, prefix)
        rows = table.map.lookup(nums)
        miss = rows < 0
        if miss.any() and not table.from_file:
            canon_new = miss & (nums >= 0)
            if canon_new.any():
                table.add_new(nums[canon_new])
                rows[canon_new] = table.map.lookup(nums[canon_new])
        miss = np.flatnonzero(rows < 0)
        for j in miss[nums[miss] < 0].tolist():  # non-canonical ids (rare, never on the fast path)
            sid = data[s[j] : e[j]].decode("utf-8", "replace").strip()
            i = table.map.get(sid)
            if i < 0 and not table.from_file and sid:
                i = table.add_other(sid)
            rows[j] = i
        code[good[(rows < 0) & (code[good] == 0)]] = err
        cols.append(rows)

    bad_lines = np.flatnonzero(code > 0)
    if len(bad_lines):
        first = []
        for li in bad_lines[: 1 if issues.raise_ else _MAX_EXAMPLES].tolist():
            text = data[starts[li] : nl[li]].decode("utf-8", "replace")
            f = text.split("\t")
            reason = _REASONS[int(code[li])].format(
                n=len(f), h=f[0], r=f[1] if len(f) > 1 else "", t=f[2] if len(f) > 2 else ""
            )
            first.append((base + li + 1, f"{reason}: {text[:120]!r}"))
        issues.bulk(len(bad_lines), first)
    ok = code[good] == 0
    return cols[0][ok], cols[1][ok], cols[2][ok]


def _triples_structure(
    data: bytes, buf: np.ndarray, starts: np.ndarray, nl: np.ndarray, tabs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """General path: per-line error codes, the lines that are well-formed and their field spans."""
    tab_line = np.searchsorted(nl, tabs)
    ntabs = np.bincount(tab_line, minlength=len(nl))
    code = np.zeros(len(nl), np.int8)  # 0 ok, -1 blank, else a _REASONS key
    blank = starts == nl
    code[(ntabs != 2) & ~blank] = 1
    code[blank] = -1
    good = np.flatnonzero(code == 0)
    t2 = tabs[(code == 0)[tab_line]].reshape(-1, 2)
    fs = [(starts[good], t2[:, 0]), (t2[:, 0] + 1, t2[:, 1]), (t2[:, 1] + 1, nl[good])]
    empty = np.zeros(len(good), bool)
    for s, e in fs:
        empty |= e <= s
    code[good[empty]] = 2
    high = np.flatnonzero(buf >= 128)
    if len(high):  # non-ASCII bytes: check those lines decode
        for li in np.unique(np.searchsorted(nl, high)).tolist():
            try:
                data[starts[li] : nl[li]].decode("utf-8")
            except UnicodeDecodeError:
                code[li] = 3
    keep = code[good] == 0
    return code, good[keep], [(s[keep], e[keep]) for s, e in fs]


def _read_descriptions(
    path: Path, ents: _W5MTable, issues: _Issues, progress: bool, max_chars: int | None, chunk_bytes: int
) -> list[str]:
    """``Qid<TAB>text`` lines -> a description column aligned with the entity rows (first one wins)."""
    descs = np.full(len(ents.ids), "", dtype=object)
    assigned = np.zeros(len(ents.ids), bool)

    def put(rows: np.ndarray, texts: np.ndarray) -> None:
        sel = np.flatnonzero(rows >= 0)
        sel = sel[~assigned[rows[sel]]]
        u, first = np.unique(rows[sel], return_index=True)
        if max_chars is not None:
            descs[u] = [x[:max_chars] for x in texts[sel[first]].tolist()]
        else:
            descs[u] = texts[sel[first]]
        assigned[u] = True

    for base, data in _iter_chunks(path, progress, "wikidata5m descriptions", chunk_bytes):
        buf, starts, nl, tabs = _layout(data)
        idend = _first_field_end(starts, nl, tabs)
        nums = _parse_ids(buf, starts, idend, _Q)
        rows = ents.map.lookup(nums)
        if len(tabs) == len(nl) and (nums >= 0).all() and (idend < nl).all():
            try:  # fast path: one tab per line, canonical ids; split every line at once
                parts = data.decode("utf-8").replace("\n", "\t").split("\t")
            except UnicodeDecodeError:
                pass
            else:
                put(rows, np.array(parts[1::2], dtype=object))
                continue
        lines, bad = _decode_lines(data, base)
        texts = np.full(len(lines), "", dtype=object)
        for j, ln in enumerate(lines):
            if j in bad:
                issues(base + j + 1, "line is not valid UTF-8")
            if j in bad or not ln.strip():
                rows[j] = -1
                continue
            eid, sep, text = ln.partition("\t")
            eid, text = eid.strip(), text.strip()
            if not sep or not eid:
                issues(base + j + 1, f"expected 'id<TAB>description': {ln[:120]!r}")
                rows[j] = -1
                continue
            if nums[j] < 0:  # non-canonical ids; ids not in the graph are ignored
                rows[j] = ents.map.get(eid)
            texts[j] = text
        put(rows, texts)
    return descs.tolist()
