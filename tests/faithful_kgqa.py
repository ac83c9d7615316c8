"""A tiny MetaQA-format data directory for the issue-13 "faithful" tests (h_min labels, the
paper's FRAG pipelines in the KGQA bench, acc_raw in its report).

The KG is stored one way (``movie relation value``, as MetaQA's kb.txt). "Big" and
"Awakenings" share the release year 1990, so the 3-hop question "films that share directors
with [Big] were released in which years" has the answer 1990 one hop from its topic: its dataset
hop count (3, complex) and its h_min (1, simple) disagree. Every other question's h_min equals
its dataset hop count (checked in the tests with networkx).
"""

from __future__ import annotations

import json
from pathlib import Path

from movie_kg import movie_triples

# film, director, actors, writers, year, genres, language
MOVIES = [
    ("Big", "Penny Marshall", ["Tom Hanks"], ["Gary Ross"], "1990", ["Comedy"], "English"),
    ("Awakenings", "Penny Marshall", ["Robin Williams"], ["Steven Zaillian"], "1990", ["Drama"], "English"),
    ("A League of Their Own", "Penny Marshall", ["Geena Davis"], ["Lowell Ganz"], "1992", ["Sport"], "English"),
    ("Cast Away", "Robert Zemeckis", ["Tom Hanks"], ["William Broyles"], "2000", ["Drama"], "English"),
    ("Contact", "Robert Zemeckis", ["Jodie Foster"], ["James V. Hart"], "1997", ["Science Fiction"], "Navajo"),
    ("Batman", "Tim Burton", ["Michael Keaton"], ["Sam Hamm"], "1989", ["Action"], "English"),
    ("Ed Wood", "Tim Burton", ["Johnny Depp"], ["Scott Alexander"], "1994", ["Biography"], "English"),
]
TRIPLES = movie_triples(MOVIES)

#: (id, question, topic, answers, dataset hops, expected h_min)
QUESTIONS = [
    ("1-big", "who directed [Big]", "Big", ["Penny Marshall"], 1, 1),
    ("1-contact", "what language is [Contact] in", "Contact", ["Navajo"], 1, 1),
    ("1-batman", "who directed [Batman]", "Batman", ["Tim Burton"], 1, 1),
    ("1-hanks", "which movies did [Tom Hanks] star in", "Tom Hanks", ["Big", "Cast Away"], 1, 1),
    (
        "2-hanks",
        "who directed the films starred by [Tom Hanks]",
        "Tom Hanks",
        ["Penny Marshall", "Robert Zemeckis"],
        2,
        2,
    ),
    (
        "2-burton",
        "who acted in the movies directed by [Tim Burton]",
        "Tim Burton",
        ["Michael Keaton", "Johnny Depp"],
        2,
        2,
    ),
    ("2-foster", "who directed the films starred by [Jodie Foster]", "Jodie Foster", ["Robert Zemeckis"], 2, 2),
    ("2-davis", "who directed the films starred by [Geena Davis]", "Geena Davis", ["Penny Marshall"], 2, 2),
    (
        "3-big",
        "the films that share directors with the film [Big] were released in which years",
        "Big",
        ["1990", "1992"],
        3,
        1,
    ),
    (
        "3-castaway",
        "the films that share directors with the film [Cast Away] were released in which years",
        "Cast Away",
        ["1997"],
        3,
        3,
    ),
    (
        "3-batman",
        "the films that share directors with the film [Batman] were released in which years",
        "Batman",
        ["1994"],
        3,
        3,
    ),
    (
        "3-contact",
        "the films that share directors with the film [Contact] were released in which years",
        "Contact",
        ["2000"],
        3,
        3,
    ),
]
EXPECTED_HMIN = {f"metaqa-{q[0]}": q[5] for q in QUESTIONS}


def write_tiny_metaqa(root: Path) -> Path:
    """Write ``root/metaqa/{kb.txt, questions_{1,2,3}hop.jsonl}``; returns ``root``."""
    d = root / "metaqa"
    d.mkdir(parents=True)
    (d / "kb.txt").write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in TRIPLES), encoding="utf-8")
    for hops in (1, 2, 3):
        rows = [
            {
                "id": f"metaqa-{qid}",
                "question": text,
                "topic_entity": topic,
                "answers": answers,
                "hops": h,
                "answers_reachable_in_kb": 1.0,
            }
            for qid, text, topic, answers, h, _ in QUESTIONS
            if h == hops
        ]
        (d / f"questions_{hops}hop.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root
