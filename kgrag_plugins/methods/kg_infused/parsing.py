"""Tolerant parsing of KG-Infused RAG triple-selection replies (docs/methods.md §1(c)): ``<h | r | t>``
triples in the many shapes small LLMs write them, matched back to candidate triples."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ...index.builders.linking import name_key

__all__ = ["ParsedTriple", "SEP", "parse_triples"]

#: Field separator of a verbalised triple in prompts and replies.
SEP = " | "


# =========================================================================== triple parsing


class ParsedTriple(NamedTuple):
    """A triple read from an LLM reply; ``index`` is the matched candidate (``None`` when
    :func:`parse_triples` ran without candidates). Matched triples carry the candidate's text."""

    head: str
    relation: str
    tail: str
    index: int | None = None


_ANGLE = re.compile(r"<([^<>]+)>")
#: ``<h> | <r> | <t>`` (each field in its own brackets) -> one triple
_SPLIT_ANGLES = re.compile(r"<([^<>|]+)>\s*[|,;]\s*<([^<>|]+)>\s*[|,;]\s*<([^<>|]+)>")
_PAREN_PIPE = re.compile(r"\(([^()]*\|[^()]*)\)")
_BULLET = re.compile(r"^\s*(?:[-*•·]+|\d+\s*[.):]|\[\d+\]|\(\d+\))\s*")
_QUOTES = " \t\"'`*“”‘’«»"
_FUZZY_CUTOFF = 0.9
_FUZZY_MIN_CHARS = 12


def _fold(s: str) -> str:
    """Comparison key of one field: :func:`name_key` folding (case, accents, punctuation,
    leading article, possessive); the lower-cased text when that leaves nothing."""
    s = s.strip(_QUOTES)
    return name_key(s) or s.lower().strip()


def _split(content: str) -> tuple[list[str], str]:
    """Split the inside of a triple on ``|`` (preferred) or ``,``; fields stripped of quotes.
    Returns the fields and the separator used."""
    sep = "|" if "|" in content else ","
    return [p.strip().strip(_QUOTES).strip() for p in content.split(sep)], sep


def _fields(content: str) -> list[str]:
    return _split(content)[0]


def _as_triple(content: str) -> tuple[str, str, str] | None:
    """Three fields -> a triple. More fields (a separator inside a name) are ambiguous without
    candidates: first = head, second = relation, the rest (re-joined) = tail."""
    parts, sep = _split(content)
    if len(parts) < 3 or not parts[0] or not parts[-1]:
        return None
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return parts[0], parts[1], (" | " if sep == "|" else ", ").join(parts[2:])


def _segments(text: str, with_candidates: bool) -> list[str]:
    """Triple-shaped substrings of an LLM reply, in order."""
    out: list[str] = []
    for raw in text.splitlines():
        line = _SPLIT_ANGLES.sub(lambda m: f"<{m[1]} | {m[2]} | {m[3]}>", raw)
        found = _ANGLE.findall(line)
        if found:
            out.extend(found)
            continue
        body = _BULLET.sub("", line).strip().strip("*`").strip()
        if not body:
            continue
        if body.startswith("(") and body.endswith(")") and ("|" in body or body.count(",") >= 2):
            out.append(body[1:-1])
            continue
        found = _PAREN_PIPE.findall(body)
        if found:
            out.extend(found)
            continue
        if body.count("|") >= 2:
            out.append(body)
        elif with_candidates and body.count(",") >= 2:
            out.append(body)  # a bare "h, r, t" line: kept only if it matches a candidate
    return out


class _CandidateIndex:
    """Candidate triples by folded ``(head, relation, tail)`` and by folded joined text."""

    def __init__(self, candidates: Mapping[str, int]) -> None:
        self.by_fields: dict[tuple[str, str, str], tuple[int, tuple[str, str, str]]] = {}
        self.by_joined: dict[str, tuple[int, tuple[str, str, str]]] = {}
        for text, idx in candidates.items():
            inner = text.strip()
            if inner.startswith("<") and inner.endswith(">"):
                inner = inner[1:-1]
            parts = [p.strip() for p in inner.split(SEP)]
            if len(parts) != 3:
                parts = [p.strip() for p in inner.split("|")]
            fields = tuple(parts) if len(parts) == 3 else (inner, "", "")
            entry = (int(idx), fields)  # type: ignore[assignment]
            key = tuple(_fold(f) for f in fields)
            self.by_fields.setdefault(key, entry)  # type: ignore[arg-type]
            self.by_joined.setdefault(_fold(" ".join(fields)), entry)
        self._joined_keys = list(self.by_joined)

    def match(self, content: str) -> tuple[int, tuple[str, str, str]] | None:
        parts = _fields(content)
        if len(parts) == 3:
            hit = self.by_fields.get(tuple(_fold(p) for p in parts))  # type: ignore[arg-type]
            if hit:
                return hit
        joined = _fold(" ".join(parts))
        hit = self.by_joined.get(joined)
        if hit or len(joined) < _FUZZY_MIN_CHARS:
            return hit
        close = difflib.get_close_matches(joined, self._joined_keys, n=1, cutoff=_FUZZY_CUTOFF)
        return self.by_joined[close[0]] if close else None


def parse_triples(text: str, candidates: Mapping[str, int] | None = None) -> list[ParsedTriple]:
    """Triples in an LLM reply, de-duplicated in order.

    Accepts ``<h | r | t>`` (the official format), ``<h, r, t>``, ``(h | r | t)``,
    ``<h> | <r> | <t>``, bare ``h | r | t`` lines, any spacing around separators, quotes, bullets
    and numbering. With ``candidates`` (``"head | relation | tail"`` text, with or without angle
    brackets -> triple index) only triples matching a candidate are returned, as that candidate
    (``index`` set): fields are compared after :func:`~kgrag_plugins.index.builders.linking.name_key`
    folding (case, accents, punctuation, leading articles), then the whole folded text (so commas
    inside names do not matter), then a near-miss match (difflib ratio >= 0.9 on texts of at
    least 12 characters); bare ``h, r, t`` lines count only when they match a candidate.
    Without candidates every well-formed triple is returned (``index=None``).
    """
    if not text:
        return []
    cand = _CandidateIndex(candidates) if candidates else None
    if candidates is not None and not candidates:
        return []
    out: list[ParsedTriple] = []
    seen: set[Any] = set()
    for content in _segments(text, cand is not None):
        if cand is not None:
            hit = cand.match(content)
            if hit is None or hit[0] in seen:
                continue
            seen.add(hit[0])
            out.append(ParsedTriple(*hit[1], index=hit[0]))
        else:
            t = _as_triple(content)
            if t is None:
                continue
            key = tuple(_fold(f) for f in t)
            if key in seen:
                continue
            seen.add(key)
            out.append(ParsedTriple(*t))
    return out


# =========================================================================== memory
