"""Entity names -> one entity: resolution while building, linking in questions.

The LLM-free graph lives or dies by linking: a passage titled "Hank Snow" and a sentence
mentioning "Hank Snow" (or "hank snow", "Hank Snow's") must meet at one entity. Names are
compared by :func:`~.names.name_key` (Unicode-folded, case-folded, punctuation-free, no leading
article, no possessive; :mod:`.names`, whose ``fold`` / ``name_key`` / ``title_base`` are also
importable from here).
"""

from __future__ import annotations

import re

from .names import fold, name_key, title_base

__all__ = ["NameIndex", "fold", "link_question", "name_key", "title_base", "title_keys", "usable_key"]

#: single-word mentions that are never entity names on their own
_STOP_KEYS = frozenset(
    "the a an he she it they his her its their this that these those who what which when where why how "
    "is was are were be of in on at to for by with from and or as".split()
)


def title_keys(title: str, person: bool = False) -> set[str]:
    """Keys by which a passage's own text refers to its title entity.

    The full title, the title without a parenthetical disambiguation, the part before a comma
    ("Springfield, Illinois" -> "Springfield") and, when the title names a ``person`` (spaCy
    tags it PERSON in its passage), the last word (a surname: "Hank Snow" -> "Snow"; never
    "University of Paris" -> "Paris"). Only used *inside* the titled passage.
    """
    keys = {name_key(title), name_key(title_base(title))}
    base = title_base(title)
    if "," in base:
        keys.add(name_key(base.split(",")[0]))
    words = name_key(base).split()
    if person and len(words) >= 2 and len(words[-1]) > 2:
        keys.add(words[-1])
    return {k for k in keys if k and k not in _STOP_KEYS}


def usable_key(key: str) -> bool:
    """Whether a key can name an entity (not empty, not a stop word, not a bare number)."""
    return bool(key) and key not in _STOP_KEYS and not (len(key) < 2 and not key.isdigit())


class NameIndex:
    """Key -> entity id, including aliases; the first entity to claim a key keeps it."""

    def __init__(self) -> None:
        self._by_key: dict[str, str] = {}
        self.max_words = 1

    def add(self, key: str, entity_id: str) -> None:
        if key and key not in self._by_key:
            self._by_key[key] = entity_id
            self.max_words = max(self.max_words, key.count(" ") + 1)

    def get(self, key: str) -> str | None:
        return self._by_key.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    @classmethod
    def from_graph(cls, graph, *, aliases: bool = True) -> "NameIndex":
        """Index every entity of a graph by the keys of its name (names win) and its aliases."""
        idx = cls()
        for e in graph.entities():
            idx.add(name_key(e.name), e.id)
        if aliases:
            for e in graph.entities():
                for a in e.aliases:
                    idx.add(name_key(a), e.id)
        return idx

    def match_ngrams(self, text: str, *, max_words: int | None = None) -> list[tuple[str, str]]:
        """Greedy longest-match of word n-grams of ``text`` against the keys.

        Returns ``(surface, entity_id)`` pairs left to right, non-overlapping. Single words must
        start with a capital letter or a digit in ``text`` (so "river" does not link to a
        band called "River"); longer n-grams must contain a capitalised word.
        """
        words = re.findall(r"[\w'\u2019.-]+", text)
        n = min(max_words or self.max_words, 8)
        out: list[tuple[str, str]] = []
        i = 0
        while i < len(words):
            hit = None
            for m in range(min(n, len(words) - i), 0, -1):
                span = words[i : i + m]
                if not any(w[:1].isupper() or w[:1].isdigit() for w in span):
                    continue
                key = name_key(" ".join(span))
                if not usable_key(key):
                    continue
                eid = self._by_key.get(key)
                if eid is not None:
                    hit = (" ".join(span), eid, m)
                    break
            if hit:
                out.append((hit[0], hit[1]))
                i += hit[2]
            else:
                i += 1
        return out


def link_question(graph, text: str, *, names: NameIndex | None = None, use_ner: bool = True) -> list[str]:
    """Entity ids mentioned in a question: spaCy NER spans resolved by key, then n-gram matches
    of the remaining text against entity names/aliases (questions are often lower-cased or too
    short for NER). Order = first occurrence; no duplicates."""
    names = names or NameIndex.from_graph(graph)
    found: list[str] = []
    if use_ner:
        from .nlp import load_spacy

        for ent in load_spacy(False)(text).ents:
            eid = names.get(name_key(ent.text))
            if eid is not None:
                found.append(eid)
    found.extend(eid for _, eid in names.match_ngrams(text))
    return list(dict.fromkeys(found))
