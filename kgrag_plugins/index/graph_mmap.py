"""Memory-mapped storage of a knowledge graph's columns.

A curated KG of Wikidata5M's size (4.6M entities, 21M triples) must open in seconds and a few
hundred MB: nothing may be parsed or built per entity at open. :func:`save_mapped` writes the
columns of a graph (:class:`GraphColumns`):

- every entity column (ids, names, descriptions, types, aliases) as a string store: an
  ``int64`` offsets array (``*.off.npy``) over one UTF-8 blob (``*.bin``); aliases add a
  per-entity pointer array into a flat alias store;
- an id -> row index: 64-bit BLAKE2b hashes of the ids, sorted (``id_hash.npy``), with the row
  of each (``id_rows.npy``): a lookup is one hash and one binary search of the mapped array;
- the triple columns (``heads/rels/tails.npy``, int32) and the CSR adjacency in both directions
  exactly as the graph holds it (``csr_out.*``, ``csr_in.*``), so no sort runs at open; triple
  sources and entity -> passage links as CSR arrays.

:func:`open_mapped` maps those files (``numpy.load(mmap_mode="r")`` / :mod:`mmap`) and returns
the same columns as read-only objects: :class:`StringColumn`, :class:`AliasColumn`,
:class:`RowIndex`, :class:`MappedRows`. Strings are decoded only when read.

This module knows arrays and files, not the graph: ``KnowledgeGraph`` hands its columns to
:func:`save_mapped` (or :func:`copy_mapped` when it is still the mapped graph it opened), plugs
the opened ones into itself, and copies them into its in-memory form before its first mutation.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import operator
import shutil
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Marker file of the mapped format (its presence selects :func:`open_mapped` in ``load``).
FORMAT_FILE = "graph_format.json"
FORMAT_VERSION = 1
_COLUMNS = ("ids", "names", "descs", "types")
_CHUNK = 65_536  # rows per block when a column is iterated


def id_hash(entity_id: str) -> int:
    """The 64-bit key of an entity id in ``id_hash.npy`` (BLAKE2b, little-endian)."""
    raw = entity_id.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


# =========================================================================== read-only columns
class StringColumn(Sequence):
    """A read-only sequence of strings over ``offsets`` (n + 1) and a mapped UTF-8 blob."""

    def __init__(self, offsets: np.ndarray, blob: "mmap.mmap | bytes") -> None:
        self._off = offsets
        self._blob = blob
        self._n = len(offsets) - 1

    def __len__(self) -> int:
        return self._n

    def _at(self, i: int) -> str:
        return self._blob[int(self._off[i]) : int(self._off[i + 1])].decode("utf-8", "surrogatepass")

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(self._n))]
        i = operator.index(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("string column index out of range")
        return self._at(i)

    def __iter__(self) -> Iterator[str]:
        blob = self._blob
        for lo in range(0, self._n, _CHUNK):  # offsets read in blocks: no numpy scalar per string
            off = self._off[lo : min(self._n, lo + _CHUNK) + 1].tolist()
            for a, b in zip(off, off[1:]):
                yield blob[a:b].decode("utf-8", "surrogatepass")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, StringColumn)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StringColumn(n={self._n})"


class AliasColumn(Sequence):
    """Per-entity alias tuples: ``ptr`` (n + 1) into a flat :class:`StringColumn`."""

    def __init__(self, ptr: np.ndarray, flat: StringColumn) -> None:
        self._ptr = ptr
        self._flat = flat

    def __len__(self) -> int:
        return len(self._ptr) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = operator.index(i)
        if i < 0:
            i += len(self)
        lo, hi = int(self._ptr[i]), int(self._ptr[i + 1])
        return tuple(self._flat._at(j) for j in range(lo, hi))

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        flat = iter(self._flat)
        n = len(self)
        for lo in range(0, n, _CHUNK):
            ptr = self._ptr[lo : min(n, lo + _CHUNK) + 1].tolist()
            for a, b in zip(ptr, ptr[1:]):
                yield tuple(next(flat) for _ in range(b - a)) if b > a else ()


class RowIndex:
    """Entity id -> row over the sorted hash keys (the mapped form of ``dict[str, int]``)."""

    def __init__(self, keys: np.ndarray, rows: np.ndarray, ids: StringColumn) -> None:
        self._keys = keys
        self._rows = rows
        self._ids = ids

    def get(self, entity_id: object, default: int | None = None) -> int | None:
        if not isinstance(entity_id, str) or not len(self._keys):
            return default
        try:
            h = np.uint64(id_hash(entity_id))
        except UnicodeEncodeError:  # pragma: no cover - ids are saved with surrogatepass too
            return default
        j = int(np.searchsorted(self._keys, h))
        while j < len(self._keys) and self._keys[j] == h:
            row = int(self._rows[j])
            if self._ids[row] == entity_id:
                return row
            j += 1
        return default

    def __getitem__(self, entity_id: str) -> int:
        row = self.get(entity_id)
        if row is None:
            raise KeyError(entity_id)
        return row

    def __contains__(self, entity_id: object) -> bool:
        return self.get(entity_id) is not None

    def __len__(self) -> int:
        return len(self._rows)


class MappedRows:
    """Read-only ``row -> list of ints`` over CSR arrays (triple sources, entity -> passages).

    ``keys`` names the row of each CSR row (``None``: CSR row i is row i). ``as_set`` returns
    sets, as the in-memory ``_ent_passages`` holds."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, keys: np.ndarray | None = None, as_set=False) -> None:
        self.indptr = indptr
        self.indices = indices
        self.keys = keys
        self._as_set = as_set

    def _pos(self, key: object) -> int | None:
        try:
            k = operator.index(key)  # type: ignore[arg-type]
        except TypeError:
            return None
        if self.keys is None:
            return k if 0 <= k < len(self.indptr) - 1 and self.indptr[k + 1] > self.indptr[k] else None
        j = int(np.searchsorted(self.keys, k))
        return j if j < len(self.keys) and int(self.keys[j]) == k else None

    def _value(self, j: int):
        vals = self.indices[int(self.indptr[j]) : int(self.indptr[j + 1])].tolist()
        return set(vals) if self._as_set else vals

    def get(self, key: object, default: Any = None):
        j = self._pos(key)
        return default if j is None else self._value(j)

    def __getitem__(self, key: object):
        j = self._pos(key)
        if j is None:
            raise KeyError(key)
        return self._value(j)

    def __contains__(self, key: object) -> bool:
        return self._pos(key) is not None

    def _nonempty(self) -> np.ndarray:
        return np.flatnonzero(np.diff(self.indptr) > 0)

    def __iter__(self) -> Iterator[int]:
        for j in self._nonempty().tolist():
            yield int(self.keys[j]) if self.keys is not None else j

    def __len__(self) -> int:
        return len(self._nonempty())

    def items(self) -> Iterator[tuple[int, Any]]:
        for j in self._nonempty().tolist():
            yield (int(self.keys[j]) if self.keys is not None else j), self._value(j)

    def csr(self, n_cols: int) -> sp.csr_matrix:
        """The rows as a 0/1 ``float32`` CSR matrix of ``n_cols`` columns (``keys`` must be ``None``):
        the entity x passage incidence straight from the mapped link arrays."""
        data = np.ones(len(self.indices), dtype=np.float32)
        shape = (len(self.indptr) - 1, n_cols)
        return sp.csr_matrix((data, np.asarray(self.indices), np.asarray(self.indptr)), shape=shape)


@dataclass
class GraphColumns:
    """A graph's columns as the mapped format stores them: what :func:`save_mapped` writes (the
    in-memory lists, arrays and dicts) and what :func:`open_mapped` gives back (read-only mapped
    objects; ``eidx`` is then a :class:`RowIndex`, ``sources`` and ``links`` :class:`MappedRows`)."""

    ids: Sequence[str]
    names: Sequence[str]
    descs: Sequence[str]
    types: Sequence[str]
    aliases: Sequence[tuple[str, ...]]
    relations: list[str]
    passage_ids: list[str]
    heads: np.ndarray  # int32 entity rows, one per triple
    rels: np.ndarray  # int32 relation rows
    tails: np.ndarray
    csr_out: sp.csr_matrix  # entity x entity; data = triple index + 1
    csr_in: sp.csr_matrix
    sources: Mapping[int, Sequence[int]]  # triple index -> passage rows it was read from
    links: Mapping[int, Collection[int]]  # entity row -> passage rows that mention it
    meta: dict
    eidx: Mapping[str, int] | None = None  # entity id -> row (not needed to save)


# =========================================================================== save
def _index_dtype(*sizes: int) -> type:
    """int32 when every index and count fits (scipy then keeps the mapped arrays, no copy)."""
    return np.int32 if max(sizes, default=0) < 2**31 - 1 else np.int64


def _write_strings(d: Path, name: str, strings: Iterator[str] | Sequence[str], n: int | None = None) -> int:
    """Write a string store ``name.off.npy`` + ``name.bin``; returns the number of strings."""
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    off = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=off[1:])
    with open(d / f"{name}.bin", "wb") as f:
        f.write(b"".join(encoded))
    np.save(d / f"{name}.off.npy", off)
    return len(encoded)


def _save_csr(d: Path, name: str, m: sp.csr_matrix) -> None:
    idt = _index_dtype(m.shape[0], m.shape[1], m.nnz)
    np.save(d / f"{name}.indptr.npy", np.asarray(m.indptr, dtype=idt))
    np.save(d / f"{name}.indices.npy", np.asarray(m.indices, dtype=idt))
    np.save(d / f"{name}.data.npy", np.asarray(m.data, dtype=np.int64))


def copy_mapped(src: str | Path, dst: str | Path, meta: dict) -> None:
    """Save a mapped graph unchanged since it was opened from ``src``: copy its files (the format
    marker last, so a partial copy never opens; nothing when ``dst`` is ``src``) and write ``meta``."""
    src, d = Path(src), Path(dst)
    d.mkdir(parents=True, exist_ok=True)
    if d.resolve() != src.resolve():
        for p in sorted(p for p in src.iterdir() if p.is_file() and p.name != FORMAT_FILE):
            shutil.copyfile(p, d / p.name)
        shutil.copyfile(src / FORMAT_FILE, d / FORMAT_FILE)
    (d / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")


def _save_rows(d: Path, name: str, rows: Mapping[int, Collection[int]], keys: Sequence[int], *, sort: bool) -> None:
    """``rows[k]`` for each of ``keys`` (in their order, or sorted) as CSR arrays
    ``name.indptr.npy`` / ``name.indices.npy`` (int64)."""
    vals = [rows.get(k, ()) for k in keys]
    ptr = np.zeros(len(vals) + 1, dtype=np.int64)
    if vals:
        np.cumsum(np.fromiter(map(len, vals), dtype=np.int64, count=len(vals)), out=ptr[1:])
    flat = (p for v in vals for p in (sorted(v) if sort else v))
    np.save(d / f"{name}.indptr.npy", ptr)
    np.save(d / f"{name}.indices.npy", np.fromiter(flat, dtype=np.int64, count=int(ptr[-1])))


def save_mapped(c: GraphColumns, directory: str | Path) -> None:
    """Write the columns ``c`` in the mapped format (see the module docstring). Callers handle atomicity."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    n = len(c.ids)
    for name, col in zip(_COLUMNS, (c.ids, c.names, c.descs, c.types)):
        _write_strings(d, name, col)
    alias_ptr = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.fromiter((len(a) for a in c.aliases), dtype=np.int64, count=n), out=alias_ptr[1:])
    np.save(d / "aliases.ptr.npy", alias_ptr)
    _write_strings(d, "aliases", (a for tup in c.aliases for a in tup))
    keys = np.fromiter((id_hash(e) for e in c.ids), dtype=np.uint64, count=n)
    order = np.argsort(keys, kind="stable")
    np.save(d / "id_hash.npy", keys[order])
    np.save(d / "id_rows.npy", order.astype(_index_dtype(n)))
    del keys, order
    for name, a in (("heads", c.heads), ("rels", c.rels), ("tails", c.tails)):
        np.save(d / f"{name}.npy", np.ascontiguousarray(a, dtype=np.int32))
    _save_csr(d, "csr_out", c.csr_out)
    _save_csr(d, "csr_in", c.csr_in)
    src_keys = sorted(c.sources)
    np.save(d / "sources.keys.npy", np.array(src_keys, dtype=np.int64))
    _save_rows(d, "sources", c.sources, src_keys, sort=False)  # a triple's sources keep their order
    _save_rows(d, "links", c.links, range(n), sort=True)
    (d / "relations.json").write_text(json.dumps(c.relations, ensure_ascii=False), encoding="utf-8")
    (d / "passage_ids.json").write_text(json.dumps(c.passage_ids), encoding="utf-8")
    (d / "meta.json").write_text(json.dumps(c.meta, ensure_ascii=False), encoding="utf-8")
    fmt = {"format": "mmap", "version": FORMAT_VERSION, "entities": n, "triples": int(len(c.heads))}
    (d / FORMAT_FILE).write_text(json.dumps(fmt), encoding="utf-8")


# =========================================================================== open
def _load(path: Path) -> np.ndarray:
    """A read-only mapped ``.npy`` as a plain ndarray view (slices are then plain arrays too)."""
    return np.load(path, mmap_mode="r").view(np.ndarray)


def _map_blob(path: Path) -> "mmap.mmap | bytes":
    if path.stat().st_size == 0:  # an empty file cannot be mapped
        return b""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _strings(d: Path, name: str, n: int | None) -> StringColumn:
    off = _load(d / f"{name}.off.npy")
    if n is not None and len(off) != n + 1:
        raise ValueError(f"{name}.off.npy has {len(off) - 1} rows, expected {n}")
    blob = _map_blob(d / f"{name}.bin")
    if len(off) and int(off[-1]) != len(blob):
        raise ValueError(f"{name}.bin has {len(blob)} bytes, its offsets end at {int(off[-1])}")
    return StringColumn(off, blob)


def _csr(d: Path, name: str, n: int) -> sp.csr_matrix:
    indptr, indices, data = (_load(d / f"{name}.{p}.npy") for p in ("indptr", "indices", "data"))
    if len(indptr) != n + 1 or len(indices) != len(data) or int(indptr[-1]) != len(indices):
        raise ValueError(f"{name} arrays do not fit a {n} x {n} adjacency")
    # Built directly (no format check, which would scan the arrays): they were written from a
    # valid CSR by save_mapped.
    m = sp.csr_matrix((n, n), dtype=data.dtype)
    m.data, m.indices, m.indptr = data, indices, indptr
    return m


def open_mapped(directory: str | Path) -> GraphColumns:
    """Open the columns written by :func:`save_mapped`: maps the arrays, builds nothing per entity.

    Missing files raise ``FileNotFoundError``, inconsistent ones ``ValueError`` (``load`` words
    both for the index)."""
    d = Path(directory)
    fmt = json.loads((d / FORMAT_FILE).read_text(encoding="utf-8"))
    if fmt.get("format") != "mmap" or fmt.get("version") != FORMAT_VERSION:
        raise ValueError(f"unsupported graph format {fmt!r} (this version reads mmap v{FORMAT_VERSION})")
    n, nt = int(fmt["entities"]), int(fmt["triples"])
    ids = _strings(d, "ids", n)
    ptr = _load(d / "aliases.ptr.npy")
    if len(ptr) != n + 1:
        raise ValueError("aliases.ptr.npy does not match the entity count")
    aliases = AliasColumn(ptr, _strings(d, "aliases", int(ptr[-1]) if n else None))
    keys, rows = _load(d / "id_hash.npy"), _load(d / "id_rows.npy")
    if len(keys) != n or len(rows) != n:
        raise ValueError("id_hash.npy / id_rows.npy do not match the entity count")
    triples = [_load(d / f"{c}.npy") for c in ("heads", "rels", "tails")]
    if any(len(c) != nt or c.dtype != np.int32 for c in triples):
        raise ValueError("triple columns do not match the triple count")
    sources = MappedRows(
        _load(d / "sources.indptr.npy"),
        _load(d / "sources.indices.npy"),
        _load(d / "sources.keys.npy"),
    )
    lptr = _load(d / "links.indptr.npy")
    if len(lptr) != n + 1:
        raise ValueError("links.indptr.npy does not match the entity count")
    return GraphColumns(
        ids=ids,
        names=_strings(d, "names", n),
        descs=_strings(d, "descs", n),
        types=_strings(d, "types", n),
        aliases=aliases,
        relations=json.loads((d / "relations.json").read_text(encoding="utf-8")),
        passage_ids=json.loads((d / "passage_ids.json").read_text(encoding="utf-8")),
        heads=triples[0],
        rels=triples[1],
        tails=triples[2],
        csr_out=_csr(d, "csr_out", n),
        csr_in=_csr(d, "csr_in", n),
        sources=sources,
        links=MappedRows(lptr, _load(d / "links.indices.npy"), as_set=True),
        meta=json.loads((d / "meta.json").read_text(encoding="utf-8")) if (d / "meta.json").is_file() else {},
        eidx=RowIndex(keys, rows, ids),
    )
