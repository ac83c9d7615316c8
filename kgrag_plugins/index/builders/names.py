"""Comparison keys of entity names: the normalisation that building and linking share.

Names are compared by :func:`name_key` (Unicode-folded, case-folded, punctuation-free, no leading
article, no possessive); :func:`title_base` drops a title's disambiguation. Pure string functions:
the spaCy pass (:mod:`.nlp`) and name resolution (:mod:`.linking`) both build on them.
"""

from __future__ import annotations

import re
import unicodedata

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_ARTICLES = ("the ", "a ", "an ")


def fold(text: str) -> str:
    """``text`` without accents (NFKD, combining marks dropped), case-folded."""
    s = unicodedata.normalize("NFKD", text)
    return "".join(c for c in s if not unicodedata.combining(c)).casefold()


def name_key(name: str) -> str:
    """Normalised comparison key of an entity name ("" for names that are only punctuation)."""
    s = fold(name)
    s = s.replace("\u2019", "'").strip()
    for art in _ARTICLES:
        if s.startswith(art) and len(s) > len(art) + 2:
            s = s[len(art) :]
            break
    if s.endswith("'s"):
        s = s[:-2]
    elif s.endswith("'"):
        s = s[:-1]
    return _NON_ALNUM.sub(" ", s).strip()


def title_base(title: str) -> str:
    """A title without its disambiguation: "Paris (band)" -> "Paris"."""
    return _PAREN.sub("", title).strip() or title
