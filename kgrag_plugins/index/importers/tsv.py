"""Generic tab-separated triples importer (optional header and id columns)."""

from __future__ import annotations

import os
import time
from array import array
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from ..graph import KnowledgeGraph
from ._common import (
    _NO_ID,
    KGFormatError,
    LoadReport,
    OnError,
    _check_file,
    _decode,
    _finish,
    _gc_paused,
    _i32,
    _Issues,
    _iter_lines,
    _no_triples,
    _Sniffer,
    _Table,
)

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
