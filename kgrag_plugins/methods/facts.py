"""Facts with entity names: the ``##`` masks of graph relation texts filled back in.

Both corpus-graph builders write a relation that is not a short phrase as its sentence with every
entity mention masked as ``##`` (ParseKG hyperrelations, KG-Translator §3.2; the long relations of
the ``mentions`` graph), and KG-Translator clues joined entity and relation with ``@@``. Shown as
they are, a person or an LLM reads ``"Hank Snow @@ ## was born in ##, ##."``.
:func:`readable_facts` (run on every :class:`~kgrag_plugins.types.Evidence` by
:meth:`Retriever.retrieve <kgrag_plugins.methods.base.Retriever.retrieve>`) rewrites each fact
whose text holds a mask or ``@@``:

- **clue** (``kind="clue"``; ``data``: ``name``, ``relation``, ``sentences``, ``hyperrelation``):
  the relation span with its slots filled from the first traced sentence (that sentence's full
  hyperrelation says which mention fills which slot, :func:`mask_fillers`), after the clue
  entity's name unless the span names it: ``"Hank Snow: Snow was born in Brooklyn, Nova Scotia."``
- **triple** (``data``: ``head``, ``relation``, ``tail``, ``sources``): ``head -> tail: "source
  sentence"``, the sentence found in the triple's source passages (:func:`unmask_sentence`);
- **path** / **completion** (``data``: ``nodes``, ``relations``): each masked hop relation
  replaced by its quoted sentence, found in the passages both hop entities are linked to;
- anything else, or a sentence that is not found: :func:`~kgrag_plugins.types.readable_text`
  (``…`` for a mask, ``": "`` for ``@@``).

The raw text is kept in ``fact.data["masked"]``; facts without masks are left alone.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..types import CLUE_SEP, MASK, Fact, readable_text

__all__ = ["fill_masks", "mask_fillers", "readable_facts", "unmask_sentence"]

logger = logging.getLogger(__name__)

#: Longest masked relation the graph builders write (words); a longer sentence was cut there.
MAX_MASKED_WORDS = 40
_WS = re.compile(r"\s+")


def _has_marks(text: str) -> bool:
    return MASK in text or CLUE_SEP in text


def mask_fillers(masked: str, sentence: str) -> list[str | None] | None:
    """The text each ``##`` of ``masked`` stands for in ``sentence``, the sentence it was masked
    from (a ParseKG hyperrelation and its sentence), in slot order; ``None`` for a slot that cannot
    be told (the last one of a text cut at :data:`MAX_MASKED_WORDS` words). Returns ``None`` when
    ``masked`` does not align with ``sentence``."""
    pieces = [" ".join(p.split()) for p in masked.split(MASK)]
    text = " ".join(sentence.split())
    if len(pieces) < 2 or not text.startswith(pieces[0]):
        return None
    cut = len(masked.split()) >= MAX_MASKED_WORDS
    pos, out = len(pieces[0]), []
    last = len(pieces) - 1
    for i, lit in enumerate(pieces[1:], 1):
        if not lit:
            if i < last:
                return None  # two masks side by side: where one name ends is unknown
            out.append(None if cut else text[pos:].strip() or None)
            pos = len(text)
            continue
        if i == last and not cut:
            if not text.endswith(lit) or len(text) - len(lit) <= pos:
                return None
            end = len(text) - len(lit)
        else:
            bound = r"(?<!\w)" if lit[0].isalnum() else ""
            m = re.compile(bound + re.escape(lit)).search(text, pos + 1)
            if m is None:
                return None
            end = m.start()
        out.append(text[pos:end].strip() or None)
        pos = end + len(lit)
    return out


def fill_masks(masked: str, fillers: Sequence[str | None]) -> str:
    """``masked`` with its ``##`` slots replaced by ``fillers`` in order (``…`` for ``None`` or a
    missing one), whitespace collapsed."""
    pieces = masked.split(MASK)
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        name = fillers[i] if i < len(fillers) else None
        out += [name or "…", piece]
    return _WS.sub(" ", "".join(out)).strip()


#: Where a sentence may start: the text's start, or after ``.``/``!``/``?`` (and a closing quote or
#: bracket) and one whitespace character.
_SENTENCE_START = re.compile(r"(?:^|(?<=[.!?]\s)|(?<=[.!?][\"')]\s))")
#: What a mention never holds: a sentence end (``.``/``!``/``?`` then whitespace) or a newline.
_MENTION_STOP = re.compile(r"[.!?](?=\s)|\n")
_NON_BLANK = re.compile(r"\S")


def _literal(piece: str) -> re.Pattern[str]:
    """A relation text piece between masks, its words separated by any whitespace."""
    return re.compile(r"\s+".join(map(re.escape, piece.split())))


def _mention_ends(text: str, p: int) -> tuple[int, int, int]:
    """``(lo, hi, first)``: a mention that starts at ``p`` (after optional whitespace) may be
    followed by the next piece at any ``q`` with ``lo <= q <= hi``: at least one character that is
    not a newline, and no sentence end or newline inside its non-blank part (``lo > hi``: none);
    ``first`` is the first non-blank position from ``p`` (``len(text)``: none)."""
    n = len(text)
    lo = p
    while lo < n and text[lo] == "\n":
        lo += 1
    lo += 1
    a = _NON_BLANK.search(text, p)
    if a is None:
        return lo, n, n
    stop = _MENTION_STOP.search(text, a.start())
    if stop is None:
        return lo, n, a.start()
    if text[stop.start()] != "\n":
        return lo, stop.start(), a.start()  # the sentence end itself must stay outside
    after = _NON_BLANK.search(text, stop.start())
    return lo, n if after is None else after.start(), a.start()


def _feasible(text: str, occ: list[list[tuple[int, int]]]) -> list[list[tuple[int, int]]]:
    """Per piece ``i >= 1``, the occurrences of ``occ[i]`` (every ``(start, end)`` of piece ``i``,
    by start) from which the rest of the relation can still be matched: a backward pass."""
    k = len(occ) - 1
    feasible: list[list[tuple[int, int]]] = [[] for _ in range(k + 1)]
    feasible[k] = occ[k]
    for i in range(k - 1, 0, -1):
        starts = [s for s, _ in feasible[i + 1]]
        for s, e in occ[i]:
            lo, hi, _ = _mention_ends(text, e)
            j = bisect.bisect_left(starts, lo)
            if j < len(starts) and starts[j] <= hi:
                feasible[i].append((s, e))
    return feasible


def _match_from(
    text: str, start: int, first: re.Pattern[str], feasible: list[list[tuple[int, int]]], last_empty: bool
) -> int | None:
    """End of the masked relation matched at sentence start ``start``, else ``None``: piece by
    piece, the first feasible occurrence (:func:`_feasible`) a valid mention reaches, so each
    mention is as short as possible, as a lazy regex would take it. Linear in the occurrences;
    the single regex this replaces backtracked for minutes on long passages with many masks."""
    m = first.match(text, start)
    if m is None:
        return None
    pos = m.end()
    for i, occ in enumerate(feasible[1:], 1):
        lo, hi, word = _mention_ends(text, pos)  # a regex takes the blanks before ``word`` first
        if i == len(feasible) - 1 and last_empty:  # then one character of the last mention
            if lo <= word + 1 <= hi and word < len(text):
                return word + 1
        j = bisect.bisect_left(occ, (max(lo, word + 1), -1))
        if j == len(occ) or occ[j][0] > hi:  # else a mention of blanks only
            j = bisect.bisect_left(occ, (lo, -1))
            if j == len(occ) or occ[j][0] > min(hi, word):
                return None
        pos = occ[j][1]
    return pos


def _occurrences(text: str, piece: re.Pattern[str], last: bool) -> list[tuple[int, int]]:
    """Every ``(start, end)`` of ``piece`` in ``text`` (overlapping ones too). An empty piece
    occurs everywhere; an empty last piece (the relation ends with a mask) ends the match one
    character into that mention, so it occurs after every character but a newline."""
    n = len(text)
    if not piece.pattern and last:
        return [(q, q) for q in range(1, n + 1) if text[q - 1] != "\n"]
    if not piece.pattern:
        return [(q, q) for q in range(n + 1)]
    out, q = [], 0
    while True:
        m = piece.search(text, q)
        if m is None:
            return out
        out.append((m.start(), m.end()))
        q = m.start() + 1


def unmask_sentence(relation: str, texts: Iterable[str]) -> str | None:
    """The source sentence of a masked relation text, names filled back in.

    The graph builders write a relation that is not a short phrase as its sentence with every
    entity mention replaced by ``##`` (whitespace collapsed, at most :data:`MAX_MASKED_WORDS`
    words). This finds that sentence in ``texts`` (the triple's source passages): it starts where
    a sentence may start, the pieces between masks follow in order, and each mention is at least
    one character, never across a sentence end or a newline, as short as possible. ``None`` when
    ``relation`` has no ``##`` or the sentence is not found. Linear in the text per piece and
    sentence start (:func:`_feasible`, :func:`_match_from`)."""
    if MASK not in relation:
        return None
    pieces = [_literal(piece) for piece in relation.split(MASK)]
    for text in texts:
        if pieces[0].pattern and pieces[0].search(text) is None:
            continue
        occ = [[]] + [_occurrences(text, p, i == len(pieces) - 1) for i, p in enumerate(pieces) if i]
        if not all(occ[1:]):
            continue
        feasible = _feasible(text, occ)
        if not feasible[1]:
            continue
        for start in _SENTENCE_START.finditer(text):
            end = _match_from(text, start.start(), pieces[0], feasible, not pieces[-1].pattern)
            if end is not None:
                sentence = text[start.start() : end].strip()
                return sentence if len(relation.split()) < MAX_MASKED_WORDS else sentence + " …"
    return None


# --------------------------------------------------------------------------- per fact kind
def _clue_text(fact: Fact) -> str | None:
    d = fact.data
    span = " ".join(str(d.get("relation", "")).split())
    sentences = d.get("sentences") or []
    if not span or not sentences:
        return None
    full = " ".join(str(d.get("hyperrelation") or span).split())
    fillers = mask_fillers(full, str(sentences[0]))
    at = full.find(span)
    if fillers is None or at < 0:
        return None
    first, n = full[:at].count(MASK), span.count(MASK)
    if first + n > len(fillers):
        return None
    filled = fill_masks(span, fillers[first : first + n])
    name = str(d.get("name") or fact.text.split(CLUE_SEP)[0]).strip()
    return filled if not name or name.casefold() in filled.casefold() else f"{name}: {filled}"


def _texts(index: Any, passage_ids: Iterable[str]) -> list[str]:
    store = getattr(index, "passages", None)
    if store is None:
        return []
    return [store.get(pid).text for pid in passage_ids if pid in store]


def _name(graph: Any, entity_id: str) -> str:
    return graph.name_of(entity_id) if graph is not None and entity_id in graph else str(entity_id)


def _triple_text(fact: Fact, index: Any) -> str | None:
    d = fact.data
    sentence = unmask_sentence(str(d["relation"]), _texts(index, d.get("sources") or []))
    if sentence is None:
        return None
    graph = getattr(index, "graph", None)
    return f'{_name(graph, d["head"])} -> {_name(graph, d["tail"])}: "{sentence}"'


def _path_text(fact: Fact, index: Any) -> str:
    d = fact.data
    nodes, rels = list(d["nodes"]), list(d["relations"])
    graph = getattr(index, "graph", None)
    text = fact.text
    for i, rel in enumerate(rels):
        rel = str(rel)
        if MASK not in rel or i + 1 >= len(nodes) or rel not in text:
            continue
        sentence = None
        if graph is not None and nodes[i] in graph and nodes[i + 1] in graph:
            shared = set(graph.passages_of(nodes[i])) & set(graph.passages_of(nodes[i + 1]))
            sentence = unmask_sentence(rel, _texts(index, sorted(shared)))
        text = text.replace(rel, f'"{sentence}"' if sentence else readable_text(rel), 1)
    return text


def _readable(fact: Fact, index: Any) -> str:
    d = fact.data
    text: str | None = None
    if fact.kind == "clue":
        text = _clue_text(fact)
    elif index is not None and {"head", "relation", "tail"} <= set(d) and MASK in str(d["relation"]):
        text = _triple_text(fact, index)
    elif index is not None and "nodes" in d and "relations" in d:
        text = _path_text(fact, index)
    return readable_text(text if text is not None else fact.text)


def readable_facts(facts: list[Fact], index: Any = None) -> list[Fact]:
    """Rewrite, in place, every fact of ``facts`` whose text holds ``##`` or ``@@`` with entity
    names (see the module docstring; ``index``: the :class:`~kgrag_plugins.index.store.KnowledgeIndex`
    the facts come from, for source sentences). The raw text goes to ``data["masked"]``.
    Returns ``facts``. Never raises for a fact it cannot fill: that one shows ``…`` instead."""
    for fact in facts:
        if not _has_marks(fact.text) or "masked" in fact.data:
            continue
        try:
            text = _readable(fact, index)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            logger.debug("fact %r: masks not filled (%s: %s)", fact.text[:80], type(exc).__name__, exc)
            text = readable_text(fact.text)
        fact.data["masked"] = fact.text
        fact.text = text
    return facts
