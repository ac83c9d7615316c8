"""Ranking the activation top-k for a reader: bridge pages and the chain's second hop (issue 35).

:class:`~kgrag_plugins.methods.activation.ActivationRetriever` ranks passages by the activation
they end with; these functions then reorder (never replace) its top-k so that a reader given
the first two or three passages sees a chain's first *and* second hop (docs/activation.md,
"Ranking for a reader"):

- :class:`TitleMentions` — which titled passages a text names (a passage-title "hyperlink" table).
- :func:`bridge_rank` — bridge expansion: the last places of the top-k go to the pages the first
  passage names by title, and ``bridge_promote`` (with ``chain_check``) can move the first of
  them to place 2.
- :func:`second_hop` — the chain check on place 2 (``second_hop=True``): when place 2 holds no
  page that continues the chain from place 1, the best passage of the top-k that does moves up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    """Case- and accent-folded word tokens (the comparison form of titles and passage text)."""
    from ..index.builders.linking import fold

    return _WORD.findall(fold(text))


class TitleMentions:
    """Which titled passages a passage's text names: a passage-title "hyperlink" table.

    Wikipedia-style corpora link a page to the pages whose titles it mentions; a multi-hop
    question's second passage is usually one of those pages (HotpotQA's bridge entity, the
    object page of a PopQA fact). Built from the titles only (one dict entry per usable title,
    without its disambiguation: "Paris (band)" -> "paris"); :meth:`named_in` scans one passage's
    word n-grams at query time. Titles that are stop words, bare numbers or under three
    characters are skipped.
    """

    def __init__(self, titles: Sequence[str], max_words: int = 8) -> None:
        from ..index.builders.linking import title_base, usable_key

        self._by_key: dict[str, list[int]] = {}
        longest = 1
        for pos, title in enumerate(titles):
            words = _words(title_base(title)) if title and title.strip() else []
            key = " ".join(words)
            if len(key) < 3 or not usable_key(key):
                continue
            self._by_key.setdefault(key, []).append(pos)
            longest = max(longest, len(words))
        self._max = min(longest, max_words)

    def __len__(self) -> int:
        return len(self._by_key)

    def named_in(self, text: str) -> set[int]:
        """Positions of the passages whose title occurs (as whole words) in ``text``."""
        if not self._by_key:
            return set()
        toks = _words(text)
        found: set[int] = set()
        for i in range(len(toks)):
            for n in range(1, min(self._max, len(toks) - i) + 1):
                hit = self._by_key.get(" ".join(toks[i : i + n]))
                if hit:
                    found.update(hit)
        return found


def bridge_rank(
    top: list[int],
    k: int,
    slots: int,
    *,
    titles: TitleMentions,
    passage_of: Callable[[int], Any],
    sims: Any,
    query: str,
    promote: float | None = None,
    chain_check: bool = False,
) -> tuple[list[int], list[int]]:
    """Give the last ``slots`` places of ``top`` (passage positions, best first) to the pages the
    first passage names by title (best cosine ``sims`` first, those not already kept).

    ``promote`` (a cosine margin): the first bridge page moves to place 2 when its cosine is at
    least place 2's minus the margin; with ``chain_check`` only when place 2 holds no page the
    question or the first passage names and the question does not name the bridge page itself.
    Returns (ranking, bridged)."""
    first = top[0]
    named = titles.named_in(passage_of(first).text) - {first}
    keep = top[: k - slots]
    pool = sorted(i for i in named if i not in keep)
    score = dict(zip(pool, sims[np.array(pool, dtype=np.int64)].tolist())) if pool else {}  # one lookup
    cands = sorted(pool, key=lambda i: (-score[i], i))[:slots]
    if not cands:
        return top, []
    rest = [i for i in top if i not in keep and i not in cands]
    up = promote is not None and len(keep) >= 2 and float(sims[cands[0]]) >= float(sims[keep[1]]) - promote
    if up and chain_check:  # place 2 already holds a hop of the chain
        in_question = titles.named_in(query)
        up = keep[1] not in named and keep[1] not in in_question and cands[0] not in in_question
    if up:  # the chain's second hop right after its first
        return (keep[:1] + cands[:1] + keep[1:] + cands[1:] + rest)[:k], cands
    return (keep + cands + rest)[:k], cands


def second_hop(
    top: list[int],
    *,
    graph: Any,
    passage_of: Callable[[int], Any],
    question_entities: Sequence[str],
    sims: Any,
    query: str,
) -> tuple[list[int], dict[str, Any] | None]:
    """Make place 2 continue the chain that starts at place 1 (``second_hop=True``; issue 35).

    A multi-hop question's second passage is reached through a *bridge entity*: an entity the
    first passage mentions and the question does not (MuSiQue / HotpotQA "bridge"). Place 2
    continues the chain when it is a page the question or the first passage names by its full
    title (a bare "Four (One Direction album)" is not named by "four"), the page of a question
    entity, or a passage that mentions a bridge entity. When it does none of
    these, the passage of places 3..k that does moves to place 2: first a page *about* a bridge
    entity (its title is that entity), else one that mentions one; among several, the best
    cosine to the question. Only the order of ``top`` changes. Returns (ranking, what moved or
    ``None``). Measured leave-one-dataset-out in ``benchmarks/loo_activation.py``."""
    if len(top) < 3:
        return top, None
    from ..index.builders.linking import name_key

    first = passage_of(top[0])
    asked = set(question_entities)
    bridge = {e for e in graph.entities_of(first.id) if e not in asked}
    said = f" {' '.join(_words(first.text))} {' '.join(_words(query))} "

    def key(i: int) -> str:  # the full title's key: a bare "Four (album)" is not "four"
        return name_key(passage_of(i).title or "")

    def named(i: int) -> bool:  # the first passage or the question names the page, or it is a question entity's
        k = key(i)
        return bool(k) and (k in asked or f" {k} " in said)

    def subject(i: int) -> set[str]:  # the page is about a bridge entity
        return {key(i)} & bridge

    def mentions(i: int) -> set[str]:
        return set(graph.entities_of(passage_of(i).id)) & bridge

    second = top[1]
    if named(second) or subject(second) or mentions(second):
        return top, None
    for how, test in (("page of a bridge entity", subject), ("mentions a bridge entity", mentions)):
        cands = [i for i in top[2:] if test(i)]
        if cands:
            best = max(cands, key=lambda i: (float(sims[i]) if sims is not None else 0.0, -top.index(i)))
            moved = {"id": passage_of(best).id, "from": top.index(best) + 1, "by": how, "via": sorted(test(best))[:3]}
            return [top[0], best] + [i for i in top[1:] if i != best], moved
    return top, None
