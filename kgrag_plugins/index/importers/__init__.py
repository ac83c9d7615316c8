"""Importers for curated knowledge graphs: MetaQA, generic triple TSVs, HippoRAG OpenIE, Wikidata5M.

Entry point: :func:`load_kg` ``(path, format)`` -> ``(KnowledgeGraph, LoadReport)``; one module per format
(``metaqa``, ``tsv``, ``openie``, ``wikidata5m``) over the shared helpers in ``_common`` (error policy,
reports, line reading, entity tables).

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

import os
from pathlib import Path
from typing import Any

from ..graph import KnowledgeGraph
from ._common import KGFormatError, LoadReport, OnError, peak_rss_mb
from .metaqa import load_metaqa_kb
from .openie import load_openie_jsonl, normalize_entity_key
from .tsv import load_triples_tsv
from .wikidata5m import _W5M_NAMES, _wikidata5m_files, load_wikidata5m

__all__ = [
    "FORMATS",
    "KGFormatError",
    "LoadReport",
    "load_kg",
    "load_metaqa_kb",
    "load_openie_jsonl",
    "load_triples_tsv",
    "load_wikidata5m",
    "normalize_entity_key",
    "peak_rss_mb",
]

FORMATS = ("metaqa", "tsv", "openie", "wikidata5m")


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
