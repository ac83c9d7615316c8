"""HippoRAG OpenIE JSONL importer: one passage per line with entities and triples."""

from __future__ import annotations

import json
import os
import string
import time
import unicodedata

import numpy as np

from ..graph import KnowledgeGraph
from ._common import (
    LoadReport,
    OnError,
    _check_file,
    _decode,
    _finish,
    _gc_paused,
    _Issues,
    _iter_lines,
    _no_triples,
    _Table,
)

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
        except (ValueError, RecursionError) as e:  # over-long integers, absurd nesting
            issues(lineno, f"invalid JSON ({type(e).__name__}): {s[:80]!r}")
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
