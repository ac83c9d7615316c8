"""MetaQA ``kb.txt`` importer: ``subject|relation|object`` per line; entity id = name."""

from __future__ import annotations

import os
import time
from array import array

from ..graph import KnowledgeGraph
from ._common import (
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
