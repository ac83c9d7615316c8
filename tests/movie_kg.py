"""Shared builder for the hand-made MetaQA-style movie KGs of the FRAG tests (stored one way:
``movie relation value``, as in MetaQA's kb.txt)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: (film, director, actors, writers, year, genres, language)
Movie = tuple[str, str, Sequence[str], Sequence[str], str, Sequence[str], str]


def movie_triples(movies: Iterable[Movie]) -> list[tuple[str, str, str]]:
    """``directed_by``, ``starred_actors``, ``written_by``, ``release_year``, ``has_genre`` and
    ``in_language`` triples of each film."""
    out = []
    for film, director, actors, writers, year, genres, language in movies:
        out.append((film, "directed_by", director))
        out += [(film, "starred_actors", a) for a in actors]
        out += [(film, "written_by", w) for w in writers]
        out.append((film, "release_year", year))
        out += [(film, "has_genre", g) for g in genres]
        out.append((film, "in_language", language))
    return out
