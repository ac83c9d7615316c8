"""Derived text vectors kept in the live index generation, fingerprinted (issue 36 item 4).

SA-RAG and KG-Infused RAG read a vector per triple (``index.triple_vectors``), SA-RAG, FRAG and
activation a vector per entity (``index.entity_vectors``), KG-Translator one per relation window
and per head-entity name. On a 5k-passage graph that is tens of thousands of texts (MuSiQue:
81,018 triples, 23,388 entities), minutes of MiniLM on a CPU: too slow for a first query. They
are therefore computed once -- at build (``KnowledgeIndex.build(precompute=...)``,
``kgrag index --precompute``), with :func:`precompute` on an existing index, or on first use --
and stored in the live generation as ``<name>.<fingerprint>.npy`` (float32, one row per text)
with a ``.json`` report beside it (rows, embedding seconds). The fingerprint is a SHA-256 of the
embedder's name and dimension and of every text in row order; being part of the file name, it is
published with the vectors by one ``os.replace``, and vectors whose texts (or embedder) changed are
never found: they are recomputed. The arrays are caches: a read-only directory keeps them in memory
(DEBUG log) and a damaged file is recomputed with a WARNING (the pattern of
``manifest.load_optional``; primary data such as ``windows.npy`` raise ``IndexCorruptError``
instead). A file from before fingerprints (``<name>.npy``) is used when its row count fits, as
before: it was written into the generation whose graph it describes.

An update (``add_passages`` / ``delete_passages``) writes a new generation; the entity and triple
vectors of the old one are carried over by text (:func:`carry`, :func:`keep`): unchanged texts keep
their rows, new or changed ones are embedded, so an update pays only for its own texts. Other
cached vectors (KG-Translator's) are not carried: the new generation computes them on first use.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .manifest import atomic_write_text, load_optional, one_line

log = logging.getLogger(__name__)

__all__ = [
    "KINDS",
    "RowVectors",
    "cached",
    "carry",
    "check_kinds",
    "entity_texts",
    "fingerprint",
    "load",
    "precompute",
    "register_precompute",
    "save",
    "stored",
    "triple_texts",
]

ENTITIES, TRIPLES = "entity_vectors.npy", "triple_vectors.npy"
#: What :func:`precompute` can compute: index entity, triple and relation-vocabulary vectors,
#: KG-Translator's relation-window and head-entity name vectors (ParseKG indexes).
KINDS = ("entities", "triples", "relations", "translator")
_READ_ONLY = {errno.EACCES, errno.EPERM, errno.EROFS}
#: kinds a method package computes (the package that registers each, imported on first use): the
#: index layer knows their names, not the methods
_PROVIDERS = {"translator": "kgrag_plugins.methods.translator"}
_PRECOMPUTERS: dict[str, Callable[[Any], None]] = {}


def register_precompute(kind: str, fn: Callable[[Any], None]) -> None:
    """Let a method package compute its vectors of ``kind`` for :func:`precompute` (``fn(index)``
    stores them through :func:`cached`)."""
    if kind not in _PROVIDERS:
        raise ValueError(f"unknown precompute kind {kind!r}; known method kinds: {', '.join(_PROVIDERS)}")
    _PRECOMPUTERS[kind] = fn


def fingerprint(embedder: Any, texts: Sequence[str]) -> str:
    """SHA-256 (24 hex chars) of the embedder's name and dim and of ``texts`` in order."""
    h = hashlib.sha256(f"{getattr(embedder, 'name', '?')}\x1f{int(getattr(embedder, 'dim', 0) or 0)}\x1e".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.hexdigest()[:24]


def file_for(path: Path, fp: str) -> Path:
    """Where vectors of fingerprint ``fp`` are stored for ``path`` (``triple_vectors.npy`` ->
    ``triple_vectors.<fp>.npy``): the name is the key, so one ``os.replace`` publishes them."""
    return path.with_name(f"{path.name.removesuffix('.npy')}.{fp}.npy")


def info_path(vectors: Path) -> Path:
    return vectors.with_name(vectors.name.removesuffix(".npy") + ".json")


def load(path: Path | None, fp: str, rows: int) -> np.ndarray | None:
    """The vectors stored for ``path`` under fingerprint ``fp`` (``rows`` long), else None: absent
    or stale (other texts: another file name) or damaged (a WARNING; the caller recomputes). A
    legacy file (``path`` itself, written before fingerprints) is used when ``rows`` long."""
    if path is None:
        return None
    target = file_for(path, fp)
    if not target.is_file():
        if not path.is_file():
            return None
        target = path
        log.debug("%s has no fingerprint (written before them); used as it has %d rows", path, rows)
    arr = load_optional(target, rows)  # damaged or the wrong shape: a WARNING and None
    return None if arr is None else np.asarray(arr, dtype=np.float32)


def save(
    path: Path | None,
    arr: np.ndarray,
    fp: str,
    embedder: Any = None,
    seconds: float | None = None,
    *,
    strict: bool = False,
) -> bool:
    """Store ``arr`` as the vectors of fingerprint ``fp`` for ``path`` (temporary name, then
    ``os.replace``: readers see all or nothing) with a small ``.json`` report (rows, seconds);
    files of other fingerprints for ``path`` are removed. False when not stored: no path (an
    unsaved index), a read-only directory (DEBUG) or another failure (WARNING; raised with
    ``strict``: a build's write must fail on a full disk)."""
    if path is None or not path.parent.is_dir():
        return False
    target = file_for(path, fp)
    info = {
        "fingerprint": fp,
        "rows": int(len(arr)),
        "embedder": getattr(embedder, "name", None),
        "seconds": round(seconds, 3) if seconds is not None else None,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if not _publish(target, lambda fh: np.save(fh, np.asarray(arr, dtype=np.float32)), strict=strict):
        return False
    with contextlib.suppress(OSError):  # the report and the clean-up are best effort
        atomic_write_text(info_path(target), json.dumps(info))
        stem = path.name.removesuffix(".npy")
        for old in [path, *path.parent.glob(f"{stem}.*.npy")]:
            if old != target and old.name.removeprefix(stem + ".").count(".") <= 1:
                old.unlink(missing_ok=True)
                info_path(old).unlink(missing_ok=True)
    return True


def _publish(target: Path, write: Callable[[Any], None], *, strict: bool = False) -> bool:
    """Write ``target`` through ``write(binary file)`` under a temporary name, then ``os.replace``
    (readers see all or nothing). False when not stored -- a read-only directory (DEBUG) or another
    failure (WARNING; raised with ``strict``) -- the caller keeps its data in memory."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, target)
    except OSError as e:  # a cache only: the vectors stay in memory
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if strict:
            raise
        level = logging.DEBUG if e.errno in _READ_ONLY else logging.WARNING
        log.log(level, "could not store %s in %s (%s); kept in memory only", target.name, target.parent, one_line(e))
        return False
    return True


def _embed(embedder: Any, texts: Sequence[str], progress: bool | None) -> np.ndarray:
    if not texts:
        return np.zeros((0, int(embedder.dim)), dtype=np.float32)
    return np.asarray(embedder.embed(list(texts), progress=progress), dtype=np.float32)


def cached(
    index: Any, name: str, texts: Sequence[str], *, progress: bool | None = None, what: str | None = None
) -> np.ndarray:
    """Vectors of ``texts`` (rows in order): stored in ``index``'s live generation as ``name``
    when the fingerprint matches, else embedded now and stored there (best effort)."""
    fp = fingerprint(index.embedder, texts)
    where = getattr(index, "derived_path", None)
    path = where(name) if callable(where) else None
    arr = load(path, fp, len(texts))
    if arr is not None:
        return arr
    t0 = time.perf_counter()
    arr = _embed(index.embedder, texts, progress)
    seconds = time.perf_counter() - t0
    if path is not None and len(texts):
        save(path, arr, fp, index.embedder, seconds)
    log.info(
        "%s: embedded %d texts in %.1f s%s",
        what or name,
        len(texts),
        seconds,
        f" (stored in {path.parent})" if path else "",
    )
    return arr


# ----------------------------------------------------------------- the index's entity / triple vectors
def entity_texts(graph: Any) -> list[str]:
    """``"name: description"`` per entity row (SA-RAG's description embedding text)."""
    from .embedding import entity_text

    return [entity_text(graph, i) for i in range(graph.num_entities)]


def triple_texts(graph: Any) -> list[str]:
    """Every triple verbalised ``"head relation tail"`` with entity names (rows = triple index)."""
    names = graph.names()
    return [t.verbalize(names) for t in graph.triples()]


def _texts_of(kind: str) -> Callable[[Any], list[str]]:
    return entity_texts if kind == ENTITIES else triple_texts


def load_for(gdir: Path, name: str, graph: Any, embedder: Any) -> np.ndarray | None:
    """Stored entity (``ENTITIES``) or triple (``TRIPLES``) vectors of ``graph`` in ``gdir`` (None
    when absent or stale)."""
    if not any(gdir.glob(name.removesuffix(".npy") + "*.npy")):
        return None  # nothing stored: skip making the texts
    texts = _texts_of(name)(graph)
    return load(gdir / name, fingerprint(embedder, texts), len(texts))


def save_for(gdir: Path, name: str, graph: Any, embedder: Any, arr: np.ndarray) -> None:
    """Store entity or triple vectors of ``graph`` into the (new) generation ``gdir``; raises on
    failure (a build's write: disk full must fail the build)."""
    save(gdir / name, arr, fingerprint(embedder, _texts_of(name)(graph)), embedder, strict=True)


def graph_vectors(index: Any, name: str, progress: bool | None = None) -> np.ndarray:
    """``index``'s entity or triple vectors: stored ones when current, else embedded and stored."""
    what = "entity vectors" if name == ENTITIES else "triple vectors"
    return cached(index, name, _texts_of(name)(index.graph), progress=progress, what=what)


def carry(index: Any, graph: Any, progress: bool | None) -> dict[str, np.ndarray | None]:
    """Before ``index`` is replaced by an update with ``graph``: the entity and triple vectors of
    ``graph`` built from ``index``'s (in memory, or stored in its generation): rows whose text is
    unchanged are copied, the others embedded. None for a kind ``index`` has not computed."""
    out: dict[str, np.ndarray | None] = {}
    for name, attr in ((ENTITIES, "_entity_vectors"), (TRIPLES, "_triple_vectors")):
        old = getattr(index, attr, None)
        gdir = index._gen_dir() if hasattr(index, "_gen_dir") else None
        if old is None and gdir is not None:
            old = load_for(gdir, name, index.graph, index.embedder)
        if old is None:
            out[name] = None
            continue
        texts = _texts_of(name)(index.graph)
        row = {t: i for i, t in enumerate(texts)} if len(texts) == len(old) else {}
        new = _texts_of(name)(graph)
        arr = np.zeros((len(new), old.shape[1]), dtype=np.float32)
        miss = []
        for i, t in enumerate(new):
            j = row.get(t)
            if j is None:
                miss.append(i)
            else:
                arr[i] = old[j]
        if miss:
            arr[miss] = _embed(index.embedder, [new[i] for i in miss], progress)
        log.debug("%s: %d rows carried over, %d embedded", name, len(new) - len(miss), len(miss))
        out[name] = arr
    return out


def keep(index: Any, carried: dict[str, np.ndarray | None]) -> None:
    """After the update's generation is live: hold the carried triple vectors in ``index`` and store
    them there (the entity vectors were written with the generation)."""
    tri = carried.get(TRIPLES)
    if tri is not None and index.graph.num_triples == len(tri):
        index._triple_vectors = tri
        where = index.derived_path(TRIPLES) if index.path is not None else None
        save(where, tri, fingerprint(index.embedder, triple_texts(index.graph)), index.embedder)


#: A text list shorter than this is embedded whole on its first use (:class:`RowVectors`): its
#: questions soon need most of it, and one batch is cheaper than many (Wikidata5M's 822 relations).
ON_DEMAND_MIN_ROWS = 5_000


class RowVectors:
    """Vectors of some rows of a long text list, embedded on demand and persisted after each use.

    For vocabularies too large to embed on a first query and too large for one question to need
    whole: MuSiQue's mentions graph has 59,475 relation phrases (226.8 s of MiniLM on 2 cores to
    embed all); one FRAG question reads a few dozen to ~12,000 of them. The rows embedded so far
    live in memory and in ``<name>.<fingerprint>.npz`` in the live generation (``rows``, ``vecs``;
    temporary name, then ``os.replace``), so a later process pays only for rows nobody has embedded
    yet. The file is a cache: a damaged one is ignored with a WARNING, a read-only directory keeps
    the rows in memory; two processes writing at once may drop each other's newest rows (they are
    embedded again when next needed), never mix texts (the fingerprint names the file). A text's
    vector does not depend on its batch, so these rows equal the full table's. A list of fewer than
    :data:`ON_DEMAND_MIN_ROWS` texts is embedded whole on the first miss; a complete table is not
    written here (the caller stores it as the full table, :meth:`complete`).
    """

    def __init__(self, index: Any, name: str, texts: Sequence[str]) -> None:
        self.name, self.embedder, self.texts = name, index.embedder, texts
        self.fp = fingerprint(index.embedder, texts)
        where = index.derived_path(name) if callable(getattr(index, "derived_path", None)) else None
        self.path = where.with_name(f"{name}.{self.fp}.npz") if where is not None else None
        self.pos = np.full(len(texts), -1, dtype=np.int64)  # row -> position in self.vecs
        self.vecs = np.zeros((0, int(index.embedder.dim)), dtype=np.float32)
        self._merge(*self._read())

    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        empty = (np.zeros(0, dtype=np.int64), self.vecs[:0])
        if self.path is None or not self.path.is_file():
            return empty
        try:
            with np.load(self.path, allow_pickle=False) as z:
                rows, vecs = np.asarray(z["rows"], dtype=np.int64), np.asarray(z["vecs"], dtype=np.float32)
            ok = rows.ndim == 1 and vecs.shape == (len(rows), self.vecs.shape[1])
            if not ok or (len(rows) and (rows.min() < 0 or rows.max() >= len(self.texts))):
                raise ValueError(f"rows {rows.shape} / vectors {vecs.shape} do not fit {len(self.texts)} texts")
        except (OSError, ValueError, KeyError) as e:
            log.warning("ignoring damaged %s (%s); its rows are embedded again", self.path.name, one_line(e))
            return empty
        return rows, vecs

    def _merge(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        rows, first = np.unique(rows, return_index=True)
        new = self.pos[rows] < 0
        rows, vecs = rows[new], vecs[first[new]]
        self.pos[rows] = len(self.vecs) + np.arange(len(rows))
        self.vecs = np.concatenate([self.vecs, vecs]) if len(self.vecs) else vecs.copy()

    def get(self, rows: np.ndarray) -> np.ndarray:
        """Vectors of ``rows`` (in that order): the missing ones embedded now, then stored."""
        rows = np.asarray(rows, dtype=np.int64)
        missing = np.unique(rows[self.pos[rows] < 0])
        if len(missing) and len(self.texts) < ON_DEMAND_MIN_ROWS:
            missing = np.flatnonzero(self.pos < 0)  # a short list: all of it at once
        if len(missing):
            t0 = time.perf_counter()
            self._merge(missing, _embed(self.embedder, [self.texts[int(i)] for i in missing], False))
            log.info(
                "%s: embedded %d of %d texts on demand in %.1f s (%d stored now; kgrag index --precompute embeds all)",
                self.name,
                len(missing),
                len(self.texts),
                time.perf_counter() - t0,
                len(self.vecs),
            )
            if self.complete() is None:
                self._write()
        return self.vecs[self.pos[rows]]

    def complete(self) -> np.ndarray | None:
        """The full table (rows in order) once every row is embedded, else None."""
        return self.vecs[self.pos] if len(self.vecs) == len(self.texts) else None

    def drop(self) -> None:
        """Remove the file (the full table is stored elsewhere now)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)

    def _write(self) -> None:
        if self.path is None or not self.path.parent.is_dir():
            return
        self._merge(*self._read())  # rows another process stored meanwhile
        have = np.flatnonzero(self.pos >= 0)
        _publish(self.path, lambda fh: np.savez(fh, rows=have, vecs=self.vecs[self.pos[have]]))


def stored(gdir: Path) -> dict[str, dict[str, Any]]:
    """What a generation holds of these vectors: file name -> rows, seconds, bytes (a report)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted([*gdir.glob("*.npy"), *gdir.glob("*.npz")]):
        info: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError, KeyError):
            if path.suffix == ".npz":  # RowVectors: the rows embedded so far
                with np.load(path, allow_pickle=False) as z:
                    info = {"rows": len(z["rows"])}
            else:
                info = json.loads(info_path(path).read_text(encoding="utf-8"))
        out[path.name] = {"rows": info.get("rows"), "seconds": info.get("seconds"), "bytes": path.stat().st_size}
    return out


def check_kinds(kinds: Sequence[str]) -> None:
    """Raise ValueError for a kind :func:`precompute` does not know (checked before a build)."""
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown precompute kind(s) {bad}; choose from {', '.join(KINDS)}")


def precompute(index: Any, kinds: Sequence[str], *, progress: bool | None = None) -> dict[str, float]:
    """Compute (or check) the vectors ``kinds`` (of :data:`KINDS`) of ``index`` now and store them
    in its generation, so the first query after ``open`` embeds nothing. Returns seconds per kind."""
    check_kinds(kinds)
    seconds: dict[str, float] = {}
    for kind in dict.fromkeys(kinds):
        t0 = time.perf_counter()
        if kind == "entities" and index.graph.num_entities:
            index._entity_vectors = graph_vectors(index, ENTITIES, progress)
        elif kind == "triples" and index.graph.num_triples:
            index._triple_vectors = graph_vectors(index, TRIPLES, progress)
        elif kind == "relations":  # the relation vocabulary (FRAG's chain scores and pruning, Know3)
            index.relation_vectors  # noqa: B018 - computed and stored on first read
        elif kind in _PROVIDERS and getattr(index, "parsekg", None) is not None:
            if kind not in _PRECOMPUTERS:  # the method package registers its step when imported
                importlib.import_module(_PROVIDERS[kind])
            _PRECOMPUTERS[kind](index)
        seconds[kind] = time.perf_counter() - t0
    return seconds
