"""Wikidata5M importer: streamed, vectorised parsing of the release files (see the package docstring)."""

from __future__ import annotations

import os
import time
import warnings
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..graph import KnowledgeGraph
from ._common import (
    _MAX_EXAMPLES,
    LoadReport,
    OnError,
    _check_file,
    _finish,
    _gc_paused,
    _Issues,
    _no_triples,
    _open_bytes,
)

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
        issues.examples[:0] = examples  # bad lines of the entities/relations files (else none to show)
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
