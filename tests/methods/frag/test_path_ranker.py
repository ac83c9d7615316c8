"""FRAG's relation-chain path ranker: weak chain labels, the model, save/load, its use in FRAG
(path scores and chain-guided completion) and ``train_path_ranker``.

A hand-made movie KG stored one way like MetaQA's ``kb.txt`` (``film directed_by person``), with
entity id = name as MetaQA has it:

    film                   director         actors                      writer            year  genres          language
    Big                    Penny Marshall   Tom Hanks                   Gary Ross         1988  Comedy          English
    A League of Their Own  Penny Marshall   Tom Hanks, Geena Davis      Lowell Ganz       1992  Comedy, Sport   English
    Awakenings             Penny Marshall   Robin Williams              Steven Zaillian   1990  Drama           Latin
    Cast Away              Robert Zemeckis  Tom Hanks                   William Broyles   2000  Drama           English
    Forrest Gump           Robert Zemeckis  Tom Hanks, Robin Wright     Eric Roth         1994  Drama           English
    Back to the Future     Robert Zemeckis  Michael J. Fox              Bob Gale          1985  Science Fiction English
    Contact                Robert Zemeckis  Jodie Foster                James V. Hart     1997  Drama, SciFi    Navajo
    Beetlejuice            Tim Burton       Geena Davis, Michael Keaton Michael McDowell  1987  Comedy          English
    Batman                 Tim Burton       Michael Keaton              Sam Hamm          1989  Action          English
    Annie Hall             Woody Allen      Diane Keaton                Woody Allen       1977  Comedy, Romance English
    Manhattan              Woody Allen      Diane Keaton, M. Hemingway  Woody Allen       1979  Drama           English
    Schindler's List       Steven Spielberg Liam Neeson                 Steven Zaillian   1993  Drama           German
    Lone Film              Nobody           -                           -                 -     -               -

Known by construction: Woody Allen directed exactly the films he wrote (two tied 1-hop chains);
Drama is a hub of six films; Contact (the only Navajo film) shares both its director and the
Drama hub with Cast Away; "Lone Film" / "Nobody" form a separate component (unreachable answers).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from movie_kg import movie_triples

from kgrag_plugins.datasets.loaders import Question
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.frag import FRAGRetriever
from kgrag_plugins.methods.frag.path_ranker import PathRanker, best_chains, chain_ends, chain_key, relation_query
from kgrag_plugins.methods.frag.paths import PathGraph
from kgrag_plugins.train.path import answer_ceiling, label_questions, train_path_ranker
from kgrag_plugins.types import Entity

ALL = 10_000  # max_paths large enough to return every candidate

# film, director, actors, writers, year, genres, language
MOVIES = [
    ("Big", "Penny Marshall", ["Tom Hanks"], ["Gary Ross"], "1988", ["Comedy"], "English"),
    (
        "A League of Their Own",
        "Penny Marshall",
        ["Tom Hanks", "Geena Davis"],
        ["Lowell Ganz"],
        "1992",
        ["Comedy", "Sport"],
        "English",
    ),
    ("Awakenings", "Penny Marshall", ["Robin Williams"], ["Steven Zaillian"], "1990", ["Drama"], "Latin"),
    ("Cast Away", "Robert Zemeckis", ["Tom Hanks"], ["William Broyles"], "2000", ["Drama"], "English"),
    ("Forrest Gump", "Robert Zemeckis", ["Tom Hanks", "Robin Wright"], ["Eric Roth"], "1994", ["Drama"], "English"),
    ("Back to the Future", "Robert Zemeckis", ["Michael J. Fox"], ["Bob Gale"], "1985", ["Science Fiction"], "English"),
    ("Contact", "Robert Zemeckis", ["Jodie Foster"], ["James V. Hart"], "1997", ["Drama", "Science Fiction"], "Navajo"),
    (
        "Beetlejuice",
        "Tim Burton",
        ["Geena Davis", "Michael Keaton"],
        ["Michael McDowell"],
        "1987",
        ["Comedy"],
        "English",
    ),
    ("Batman", "Tim Burton", ["Michael Keaton"], ["Sam Hamm"], "1989", ["Action"], "English"),
    ("Annie Hall", "Woody Allen", ["Diane Keaton"], ["Woody Allen"], "1977", ["Comedy", "Romance"], "English"),
    (
        "Manhattan",
        "Woody Allen",
        ["Diane Keaton", "Mariel Hemingway"],
        ["Woody Allen"],
        "1979",
        ["Drama"],
        "English",
    ),
    ("Schindler's List", "Steven Spielberg", ["Liam Neeson"], ["Steven Zaillian"], "1993", ["Drama"], "German"),
]


def _triples() -> list[tuple[str, str, str]]:
    out = movie_triples(MOVIES)
    out.append(("Lone Film", "directed_by", "Nobody"))  # a separate component
    return out


TRIPLES = _triples()
GENRES = sorted({g for m in MOVIES for g in m[5]})


def _graph() -> KnowledgeGraph:
    """The KG with genre entities in the first rows: breadth-first search then meets a film
    through its genre hub before meeting it through its director (the chain-guided test needs
    the director route *not* to be the one shortest path)."""
    g = KnowledgeGraph()
    for e in GENRES + [x for h, _, t in TRIPLES for x in (h, t)]:
        if e not in g:
            g.add_entity(Entity(e, e))
    for h, r, t in TRIPLES:
        g.add_triple(h, r, t)
    return g


def _ends(topic: str, chain: list[str]) -> set[str]:
    """Oracle: the end set of a relation chain (``~`` = inverse) from ``topic`` with set semantics,
    the topic removed at every step (what best_chains compares with the answers)."""
    nodes = {topic}
    for step in chain:
        inv, rel = step.startswith("~"), step.lstrip("~")
        nodes = {(h if inv else t) for h, r, t in TRIPLES if r == rel and (t if inv else h) in nodes} - {topic}
    return nodes


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def graph() -> KnowledgeGraph:
    return _graph()


@pytest.fixture(scope="module")
def pg(graph):
    return PathGraph(graph, inverse=True)


@pytest.fixture(scope="module")
def emb():
    from kgrag_plugins.models.embed import default_embedder

    return default_embedder()


@pytest.fixture(scope="module")
def index(graph, emb) -> KnowledgeIndex:
    return KnowledgeIndex.build([], graph=graph, embedder=emb, progress=False)


DIRECTOR = ("directed_by",)
YEAR = ("release_year",)
FILMS_OF_ACTOR = ("~starred_actors",)
LANG_VIA_DIRECTOR = ("directed_by", "~directed_by", "in_language")

TRAIN = {
    DIRECTOR: [
        "who directed it",
        "who is the director of it",
        "it was directed by who",
        "which person directed it",
        "who was the director of the movie it",
        "the film it was directed by whom",
        "who is listed as director of it",
    ],
    YEAR: [
        "what year was it released",
        "when was it released",
        "it was released in which year",
        "in which year did it premiere",
        "what is the release year of it",
        "when did the movie it come out",
        "the film it was released when",
    ],
    FILMS_OF_ACTOR: [
        "which films did it star in",
        "what movies did it act in",
        "it appeared in which movies",
        "which movies was it an actor in",
        "what films feature it as an actor",
        "the actor it starred in which films",
        "list the movies starring it",
    ],
    LANG_VIA_DIRECTOR: [
        "the films that share directors with the film it were in which languages",
        "what languages are the movies that share a director with it in",
        "which languages are spoken in the films directed by the director of it",
        "the movies with the same director as it are in what languages",
        "what language are the films by the director of it",
        "the director of it also directed films in which languages",
        "languages of the other films directed by the director of it",
    ],
}
TRAIN_QUERIES = [q for qs in TRAIN.values() for q in qs]
TRAIN_CHAINS = [c for c, qs in TRAIN.items() for _ in qs]


@pytest.fixture(scope="module")
def ranker(emb) -> PathRanker:
    return PathRanker(emb).fit(TRAIN_QUERIES, TRAIN_CHAINS)


def _rid(graph: KnowledgeGraph, name: str, inverse: bool = False) -> int:
    R = len(graph.relations)
    return graph.relations.index(name) + (R if inverse else 0)


def _rows(graph: KnowledgeGraph, names) -> np.ndarray:
    return np.array([graph.index_of(n) for n in names])


def _key(p) -> tuple:
    return tuple(p.nodes), tuple(p.relations), tuple(p.inverse)


# --------------------------------------------------------------------------- 1. best_chains


def test_best_chains_finds_the_two_hop_chain_with_signed_ids(graph, pg):
    answers = _ends("Tom Hanks", ["~starred_actors", "directed_by"])
    assert answers == {"Penny Marshall", "Robert Zemeckis"}
    best, f1 = best_chains(pg, _rows(graph, ["Tom Hanks"]), _rows(graph, answers))
    # inverse step = relation id + number of relations
    assert best == [(_rid(graph, "starred_actors", inverse=True), _rid(graph, "directed_by"))]
    assert best[0][0] == graph.relations.index("starred_actors") + len(graph.relations)
    assert f1 == pytest.approx(1.0)

    # partial overlap: F1 of the best chain's end set against the answers
    best, f1 = best_chains(pg, _rows(graph, ["Tom Hanks"]), _rows(graph, ["Penny Marshall", "Gary Ross"]))
    assert f1 == pytest.approx(2 * 1 / (2 + 2)) and all(len(c) == 2 for c in best)


def test_best_chains_returns_every_tied_chain(graph, pg):
    films = _ends("Woody Allen", ["~directed_by"])
    assert films == {"Annie Hall", "Manhattan"} == _ends("Woody Allen", ["~written_by"])
    best, f1 = best_chains(pg, _rows(graph, ["Woody Allen"]), _rows(graph, films))
    assert sorted(best) == sorted([(_rid(graph, "directed_by", True),), (_rid(graph, "written_by", True),)])
    assert f1 == pytest.approx(1.0)


def test_best_chains_prefers_the_shortest_and_hops_restricts_the_length(graph, pg):
    big, penny = _rows(graph, ["Big"]), _rows(graph, ["Penny Marshall"])
    db, inv_db = _rid(graph, "directed_by"), _rid(graph, "directed_by", True)
    # a 3-hop chain (director -> their films -> director) reaches the same set; the 1-hop one wins
    assert best_chains(pg, big, penny) == ([(db,)], pytest.approx(1.0))
    best3, f3 = best_chains(pg, big, penny, hops=3)
    assert f3 == pytest.approx(1.0) and (db, inv_db, db) in best3
    assert best3 and all(len(c) == 3 for c in best3)
    # on a film -> attribute graph a 2-hop chain ends at films only: nothing matches a person
    assert best_chains(pg, big, penny, hops=2) == ([], 0.0)
    # max_hops bounds the search when hops is not given
    answers3 = _rows(graph, _ends("Cast Away", list(LANG_VIA_DIRECTOR)))
    _, f_full = best_chains(pg, _rows(graph, ["Cast Away"]), answers3)
    _, f_short = best_chains(pg, _rows(graph, ["Cast Away"]), answers3, max_hops=2)
    assert f_full == pytest.approx(1.0) and f_short < 1.0


def test_best_chains_does_not_expand_hubs_beyond_depth_one(graph, pg):
    chain = ["has_genre", "~has_genre", "in_language"]
    hub_films = _ends("Cast Away", chain[:2])
    assert len(hub_films) == 5  # the Drama hub, Cast Away excluded
    answers = _rows(graph, _ends("Cast Away", chain))
    signed = (_rid(graph, "has_genre"), _rid(graph, "has_genre", True), _rid(graph, "in_language"))
    topic = _rows(graph, ["Cast Away"])

    best, f1 = best_chains(pg, topic, answers)
    assert signed in best and f1 == pytest.approx(1.0)
    best, f1 = best_chains(pg, topic, answers, hub_cap=5)  # 5 nodes: not over the cap
    assert signed in best and f1 == pytest.approx(1.0)
    best, f1 = best_chains(pg, topic, answers, hub_cap=4)  # the 5 hub films are not expanded
    assert signed not in best and f1 < 1.0

    # a genre topic is expanded (depth 1), but its films are not expanded further
    drama = _rows(graph, ["Drama"])
    directors = _rows(graph, _ends("Drama", ["~has_genre", "directed_by"]))
    assert best_chains(pg, drama, directors, hub_cap=100)[1] == pytest.approx(1.0)
    assert best_chains(pg, drama, directors, hub_cap=3) == ([], 0.0)
    # the topic set itself is always expanded, however large
    films = _rows(graph, ["Big", "A League of Their Own", "Awakenings"])
    assert best_chains(pg, films, _rows(graph, ["Penny Marshall"]), hub_cap=1) == (
        [(_rid(graph, "directed_by"),)],
        pytest.approx(1.0),
    )


def test_best_chains_without_a_chain(graph, pg):
    big = _rows(graph, ["Big"])
    assert best_chains(pg, big, _rows(graph, ["Nobody"])) == ([], 0.0)  # another component
    assert best_chains(pg, big, np.array([], dtype=np.int64)) == ([], 0.0)
    assert best_chains(pg, _rows(graph, ["Nobody"]), big) == ([], 0.0)


# --------------------------------------------------------------------------- 2. helpers


def test_relation_query_and_chain_key():
    assert relation_query("who directed [Big]") == "who directed it"
    assert relation_query("did [A] and [B C] share  a director?") == "did it and it share a director?"
    assert relation_query("Who directed forrest GUMP", ["Forrest Gump"]) == "Who directed it"
    assert relation_query("films like Batman (1989)?", ["Batman (1989)"]) == "films like it?"  # regex-escaped
    # names of at most two characters are left alone (they would hit common words)
    assert relation_query("is Up a film", ["Up"]) == "is Up a film"
    assert relation_query("[Heat] stars who", ["Heat"]) == "it stars who"

    assert chain_key(["starred_actors", "directed_by"], [True, False]) == ("~starred_actors", "directed_by")
    assert chain_key(["release_year"], [False]) == ("release_year",)
    assert chain_key([], []) == ()


# --------------------------------------------------------------------------- 3. PathRanker


def test_ranker_predicts_the_chain_of_paraphrased_held_out_queries(ranker):
    assert len(ranker) == 4 and set(ranker.chains) == set(TRAIN)
    assert DIRECTOR in ranker and ("nope",) not in ranker
    held_out = {
        "name the person who directed it": DIRECTOR,
        "in what year did it come out in cinemas": YEAR,
        "which pictures did it play a role in": FILMS_OF_ACTOR,
        "what languages were the films sharing a director with it made in": LANG_VIA_DIRECTOR,
    }
    assert ranker.predict(list(held_out)) == list(held_out.values())


def test_ranker_log_probs_and_score(ranker, emb):
    qv = emb.embed(["who was it directed by"], progress=False)[0]
    lp = ranker.log_probs(qv)
    assert lp.shape == (len(ranker),)
    assert np.exp(lp).sum() == pytest.approx(1.0, abs=1e-4)
    assert ranker.chains[int(np.argmax(lp))] == DIRECTOR

    s = ranker.score(qv, [YEAR, ("not_a_relation",), DIRECTOR])
    assert np.isnan(s[1]) and not np.isnan(s[[0, 2]]).any()
    assert s[0] == pytest.approx(lp[ranker.chains.index(YEAR)])
    assert s[2] == pytest.approx(lp[ranker.chains.index(DIRECTOR)])
    assert s[2] > s[0]


def test_soft_targets_split_probability_between_tied_chains(emb):
    made = [("~directed_by",), ("~written_by",)]
    tied = [
        "which films did it direct",
        "what movies did it make",
        "it directed which films",
        "the films by it",
        "what are the movies directed by it",
        "which movies were made by it",
    ]
    qs = TRAIN[DIRECTOR] + TRAIN[YEAR] + tied
    chains = [DIRECTOR] * 7 + [YEAR] * 7 + [made] * len(tied)
    r = PathRanker(emb).fit(qs, chains)
    assert set(r.chains) == {DIRECTOR, YEAR, *made}
    lp = r.log_probs(emb.embed(["what films did it direct"], progress=False)[0])
    a, b = lp[r.chains.index(made[0])], lp[r.chains.index(made[1])]
    assert a == pytest.approx(b, abs=0.05)
    assert min(a, b) > max(lp[r.chains.index(DIRECTOR)], lp[r.chains.index(YEAR)])
    assert np.exp(a) + np.exp(b) > 0.6


def test_fit_and_inference_errors(emb):
    with pytest.raises(ValueError, match="two different chains"):
        PathRanker(emb).fit(["who directed it", "who is the director of it"], [DIRECTOR, DIRECTOR])
    with pytest.raises(ValueError):
        PathRanker(emb).fit(["who directed it"], [DIRECTOR, YEAR])  # lengths differ
    untrained = PathRanker(emb)
    with pytest.raises(ValueError, match="not trained"):
        untrained.log_probs(np.zeros(emb.embed(["x"], progress=False).shape[1]))
    with pytest.raises(ValueError):
        untrained.save("unused.npz")


def test_save_load_round_trip_is_atomic_and_checks_the_embedder(ranker, emb, tmp_path):
    from conftest import HashEmbedder

    path = ranker.save(tmp_path / "models" / "pr.npz")
    assert path == tmp_path / "models" / "pr.npz"
    assert os.listdir(tmp_path / "models") == ["pr.npz"], "a temporary file was left behind"

    loaded = PathRanker.load(path, embedder=emb)
    assert loaded.chains == ranker.chains and len(loaded) == len(ranker)
    vecs = emb.embed(["who directed it", "which movies did it star in", "what languages are they in"], progress=False)
    for v in vecs:
        assert np.array_equal(loaded.log_probs(v), ranker.log_probs(v))
    assert loaded.predict(TRAIN_QUERIES) == ranker.predict(TRAIN_QUERIES)

    # saving over an existing file replaces it whole, still leaving no temporary file
    ranker.save(path)
    assert os.listdir(tmp_path / "models") == ["pr.npz"]
    assert PathRanker.load(path, embedder=emb).chains == ranker.chains

    hash_emb = HashEmbedder()
    with pytest.raises(ValueError) as e:
        PathRanker.load(path, embedder=hash_emb)
    assert emb.name in str(e.value) and hash_emb.name in str(e.value)
    with pytest.raises(FileNotFoundError):
        PathRanker.load(tmp_path / "missing.npz", embedder=emb)


# --------------------------------------------------------------------------- 4. FRAG with a ranker


def test_frag_ranks_the_paths_of_the_preferred_chain_first(index, ranker):
    r = FRAGRetriever(index, path_ranker=ranker)
    for question, topic in (("who directed [Big]", "Big"), ("which movies did [Tom Hanks] act in", "Tom Hanks")):
        preferred = ranker.predict([relation_query(question, [topic])])[0]
        ev = r.retrieve(question, 5)
        top = ev.facts[0].data
        assert top["nodes"][0] == topic
        assert chain_key(top["relations"], top["inverse"]) == preferred
    assert preferred == FILMS_OF_ACTOR  # an inverse step: the flag is set on the top fact
    assert ev.facts[0].data["inverse"] == [True] and ev.facts[0].data["relations"] == ["starred_actors"]
    # every path of the preferred chain comes before any other path
    paths, _ = FRAGRetriever(index, path_ranker=ranker, max_paths=ALL).paths("which movies did [Tom Hanks] act in")
    flags = [chain_key(p.relations, p.inverse) == FILMS_OF_ACTOR for p in paths]
    assert sum(flags) == 4 and flags[:4] == [True] * 4  # his four films


def test_frag_loads_a_saved_ranker_from_a_path(index, ranker, tmp_path):
    path = ranker.save(tmp_path / "pr.npz")
    r = FRAGRetriever(index, path_ranker=str(path))
    assert isinstance(r.path_ranker, PathRanker) and r.path_ranker.chains == ranker.chains
    q = "when was [Batman] released"
    got = r.retrieve(q, 5).facts
    want = FRAGRetriever(index, path_ranker=ranker).retrieve(q, 5).facts
    assert [f.text for f in got] == [f.text for f in want]
    assert chain_key(got[0].data["relations"], got[0].data["inverse"]) == YEAR
    with pytest.raises(FileNotFoundError):
        FRAGRetriever(index, path_ranker=str(tmp_path / "missing.npz"))


def test_chain_guided_completion_adds_the_non_shortest_chain_path(index, ranker):
    question = "the films that share directors with the film [Cast Away] were in which languages"
    via_director = (
        ("Cast Away", "Robert Zemeckis", "Contact", "Navajo"),
        ("directed_by", "directed_by", "in_language"),
        (False, True, False),
    )

    # the paper's pipeline: one shortest path per node; Contact is first met through the Drama hub
    plain = FRAGRetriever(index, mode="complex", path_ranker=ranker, chain_beam=0, max_paths=ALL)
    paths, trace = plain.paths(question)
    assert "guided_chains" not in trace
    to_navajo = [_key(p) for p in paths if p.nodes[-1] == "Navajo"]
    via_hub = (
        ("Cast Away", "Drama", "Contact", "Navajo"),
        ("has_genre", "has_genre", "in_language"),
        (False, True, False),
    )
    assert to_navajo == [via_hub]
    assert via_director not in {_key(p) for p in paths}

    for beam in (1, 3):
        guided = FRAGRetriever(index, mode="complex", path_ranker=ranker, chain_beam=beam, max_paths=ALL)
        paths, trace = guided.paths(question)
        assert trace["guided_chains"][0] == "/".join(LANG_VIA_DIRECTOR)
        assert 1 <= len(trace["guided_chains"]) <= beam
        keys = [_key(p) for p in paths]
        assert via_director in keys
        assert len(keys) == len(set(keys)) == trace["candidate_paths"]
        # the guided chain is the ranker's favourite: its paths come first
        assert chain_key(paths[0].relations, paths[0].inverse) == LANG_VIA_DIRECTOR
        # the shortest path through the hub is still there
        assert via_hub in keys


def test_complex_candidates_are_unique_when_guided_and_shortest_paths_overlap(index, ranker):
    # all chains guided: the 1-hop director path is found by both searches, and kept once
    r = FRAGRetriever(index, mode="complex", path_ranker=ranker, chain_beam=len(ranker), max_paths=ALL)
    paths, trace = r.paths("who directed [Cast Away]")
    assert set(trace["guided_chains"]) == {"/".join(c) for c in ranker.chains}
    keys = [_key(p) for p in paths]
    assert len(keys) == len(set(keys)) == trace["candidate_paths"]
    assert keys.count((("Cast Away", "Robert Zemeckis"), ("directed_by",), (False,))) == 1
    assert keys[0] == (("Cast Away", "Robert Zemeckis"), ("directed_by",), (False,))


# --------------------------------------------------------------------------- 5. training from QA pairs


def _questions() -> list[Question]:
    qs = []
    for film, *_ in MOVIES:
        qs.append(Question(f"d-{film}", f"who directed [{film}]", sorted(_ends(film, ["directed_by"])), hops=1))
        qs.append(Question(f"y-{film}", f"when was [{film}] released", sorted(_ends(film, ["release_year"])), hops=1))
    for actor in ("Tom Hanks", "Geena Davis", "Michael Keaton", "Diane Keaton"):
        answers = sorted(_ends(actor, ["~starred_actors", "directed_by"]))
        qs.append(Question(f"ad-{actor}", f"who directed the films starred by [{actor}]", answers, hops=2))
    for q in qs:
        q.topic_entity = q.question[q.question.index("[") + 1 : q.question.index("]")]
    qs.append(Question("no-topic", "who directed [Jaws]", ["Steven Spielberg"], hops=1, topic_entity="Jaws"))
    qs.append(Question("no-chain", "who directed [Big]", ["Nobody"], hops=1, topic_entity="Big"))
    return qs


def test_label_questions_counts_and_labels(graph):
    qs = _questions()
    queries, chains, kept, counts = label_questions(graph, qs, progress=False)
    assert counts == {"questions": len(qs), "no_topic": 1, "no_chain": 1, "labelled": len(qs) - 2}
    assert len(queries) == len(chains) == len(kept) == len(qs) - 2
    assert {q.id for q in kept} == {q.id for q in qs} - {"no-topic", "no-chain"}
    by_id = {q.id: (query, c) for q, query, c in zip(kept, queries, chains)}
    assert by_id["d-Big"] == ("who directed it", [DIRECTOR])
    assert by_id["y-Contact"] == ("when was it released", [YEAR])
    assert by_id["ad-Tom Hanks"] == ("who directed the films starred by it", [("~starred_actors", "directed_by")])
    # ties are kept: Woody Allen directed and wrote Annie Hall, and he is Diane Keaton's only director
    assert sorted(by_id["d-Annie Hall"][1]) == [DIRECTOR, ("written_by",)]
    assert sorted(by_id["ad-Diane Keaton"][1]) == [
        ("~starred_actors", "directed_by"),
        ("~starred_actors", "written_by"),
    ]


def test_answer_ceiling_is_the_chance_of_a_random_end_of_the_label_chain(graph, pg):
    from kgrag_plugins.eval.kgqa import hits_ceiling

    # chain_ends follows a signed chain with best_chains' set semantics (= the oracle _ends)
    chain = (_rid(graph, "starred_actors", inverse=True), _rid(graph, "directed_by"))
    ends = chain_ends(pg, _rows(graph, ["Tom Hanks"]), chain)
    assert {graph.entity_ids[int(e)] for e in ends} == _ends("Tom Hanks", ["~starred_actors", "directed_by"])
    assert len(chain_ends(pg, _rows(graph, ["Big"]), (_rid(graph, "written_by", inverse=True),))) == 0

    # gold = a subset of the asked chain's ends (as MetaQA's merged same-title films give):
    # a random end is gold with probability |gold ∩ ends| / |ends|
    qs = [
        Question("third", "which films did [Penny Marshall] direct", ["Big"], hops=1, topic_entity="Penny Marshall"),
        Question("all", "who directed [Big]", ["Penny Marshall"], hops=1, topic_entity="Big"),
        Question("half", "who directed the films starred by [Tom Hanks]", ["Penny Marshall"], hops=2),
        Question("no-topic", "who directed [Jaws]", ["Steven Spielberg"], hops=1, topic_entity="Jaws"),
        Question("no-chain", "who directed [Big]", ["Nobody"], hops=1, topic_entity="Big"),
    ]
    qs[2].topic_entity = "Tom Hanks"
    assert _ends("Penny Marshall", ["~directed_by"]) == {"Big", "A League of Their Own", "Awakenings"}
    assert answer_ceiling(graph, qs) == [pytest.approx(1 / 3), 1.0, 0.5, None, None]
    # the tied label chains of a director who wrote every film give the same end set
    woody = Question("w", "which films did [Woody Allen] make", ["Annie Hall"], hops=1, topic_entity="Woody Allen")
    assert answer_ceiling(graph, [woody]) == [0.5]

    report = hits_ceiling(graph, qs)
    assert report["overall"] == pytest.approx((1 / 3 + 1 + 0.5) / 3, abs=1e-4)
    assert report["by_hops"] == {"1": pytest.approx(2 / 3, abs=1e-4), "2": 0.5}
    assert (report["below_1"], report["unlabelled"]) == (2, 2)
    assert report["unlabelled_by_hops"] == {"1": 2, "2": 0}  # no-topic and no-chain are 1-hop


def test_train_path_ranker_report(graph, emb):
    qs = _questions()
    labelled = len(qs) - 2
    ranker, report = train_path_ranker(graph, qs, holdout=0.25, embedder=emb, progress=False)
    assert report["questions"] == len(qs)
    assert (report["labelled"], report["no_topic"], report["no_chain"]) == (labelled, 1, 1)
    assert report["held_out"] == int(labelled * 0.25) and report["train"] == labelled - report["held_out"]
    assert 0.0 <= report["held_out_chain_accuracy"] <= 1.0
    assert report["chains"] == len(ranker) >= 2
    # Woody Allen directed and wrote his films: those questions carry both (tied) chains
    assert set(ranker.chains) <= {
        DIRECTOR,
        ("written_by",),
        YEAR,
        ("~starred_actors", "directed_by"),
        ("~starred_actors", "written_by"),
    }
    assert ranker.predict(["who directed it"]) == [DIRECTOR]


# ------------------------------------------------------- 6. issue 20: set semantics, scope, ties, routing, words

WRITER_THEN_DIRECTOR = ("written_by", "~written_by", "directed_by")


def test_chain_walks_with_revisit_follow_set_semantics(graph, pg):
    # Annie Hall -> Woody Allen (writer) <- Manhattan -> Woody Allen (director): the answer of
    # "who directed films for the writer of [Annie Hall]" passes Woody Allen twice
    from kgrag_plugins.methods.frag.paths import walk_paths

    chain = [_rid(graph, "written_by"), _rid(graph, "written_by", True), _rid(graph, "directed_by")]
    everywhere = np.ones(pg.n, dtype=bool)
    s = graph.index_of("Annie Hall")

    def ends(revisit: bool) -> set[str]:
        c = walk_paths(pg, s, everywhere, 3, 4, 10_000, chain, revisit)
        return {graph.entity_ids[int(e)] for e in c.ends()}

    assert ends(False) == set()  # simple paths cannot come back to Woody Allen
    assert ends(True) == {"Woody Allen"} == _ends("Annie Hall", list(WRITER_THEN_DIRECTOR))
    # the start node is never revisited: Annie Hall -> Woody Allen -> Annie Hall is not a path
    back = walk_paths(pg, s, everywhere, 2, 4, 10_000, chain[:2], True)
    assert s not in set(back.ends().tolist()) and {graph.entity_ids[int(e)] for e in back.ends()} == {"Manhattan"}


@pytest.fixture(scope="module")
def writer_ranker(emb) -> PathRanker:
    train = {**TRAIN, WRITER_THEN_DIRECTOR: [
        "who directed films for the writer of it",
        "the films written by the screenwriter of it were directed by who",
        "who are the directors of the movies written by the writer of it",
        "who directed the movies written by the writer of it",
        "the screenwriter of it wrote films directed by whom",
    ]}  # fmt: skip
    return PathRanker(emb).fit([q for qs in train.values() for q in qs], [c for c, qs in train.items() for _ in qs])


def test_guided_chain_answers_count_a_node_passed_twice(index, writer_ranker):
    q = "who directed films for the writer of [Annie Hall]"
    new = FRAGRetriever(index, mode="complex", path_ranker=writer_ranker)
    old = FRAGRetriever(index, mode="complex", path_ranker=writer_ranker, chain_scope="subgraph", support_ties=False)
    ev_new, ev_old = new.retrieve(q, 5), old.retrieve(q, 5)
    assert ev_new.trace["guided_chains"][0] == "/".join(WRITER_THEN_DIRECTOR)
    assert ev_new.trace["answers"][0] == "Woody Allen"
    assert chain_key(ev_new.facts[0].data["relations"], ev_new.facts[0].data["inverse"]) == WRITER_THEN_DIRECTOR
    assert ev_new.facts[0].data["nodes"] == ["Annie Hall", "Woody Allen", "Manhattan", "Woody Allen"]
    assert not any(
        chain_key(f.data["relations"], f.data["inverse"]) == WRITER_THEN_DIRECTOR for f in ev_old.facts
    )  # simple paths only: the chain has no path


def test_guided_chains_walk_the_whole_graph_not_only_the_pruned_subgraph(index, ranker):
    # PageRank keeps 3 nodes: Contact and Navajo are outside the subgraph
    q = "the films that share directors with the film [Cast Away] were in which languages"
    whole = FRAGRetriever(index, mode="complex", path_ranker=ranker, max_nodes=3, max_paths=ALL)
    inside = FRAGRetriever(
        index, mode="complex", path_ranker=ranker, max_nodes=3, max_paths=ALL, chain_scope="subgraph"
    )
    got = {p.nodes[-1] for p in whole.paths(q)[0] if chain_key(p.relations, p.inverse) == LANG_VIA_DIRECTOR}
    assert got == _ends("Cast Away", list(LANG_VIA_DIRECTOR)) == {"English", "Navajo"}
    assert "Navajo" not in {p.nodes[-1] for p in inside.paths(q)[0]}
    with pytest.raises(ValueError, match="chain_scope"):
        FRAGRetriever(index, chain_scope="everywhere")  # type: ignore[arg-type]


def test_equal_scores_put_the_end_with_more_supporting_paths_first():
    from kgrag_plugins.methods.frag.paths import rank_order

    # five paths: two chains; chain 0 (score 1.0) reaches end 5 once and end 7 twice (through two
    # intermediate nodes); PageRank prefers end 5; chain 1 scores lower
    score = np.array([1.0, 1.0, 1.0, 0.5, 0.5])
    ends = np.array([5, 7, 7, 9, 9])
    chain = np.array([0, 0, 0, 1, 1])
    ppr = np.array([0.3, 0.1, 0.1, 0.9, 0.9])
    assert ends[rank_order(score, ends, ppr, chain)].tolist() == [7, 7, 5, 9, 9]  # support first
    assert ends[rank_order(score, ends, ppr)].tolist() == [5, 7, 7, 9, 9]  # PageRank only
    # support counts paths of the *same* chain: end 9's two paths do not lift it above chain 0
    assert rank_order(score[:0], ends[:0], ppr[:0], chain[:0]).tolist() == []


def test_support_ties_need_a_path_ranker(index):
    q = "who directed the films starred by [Tom Hanks]"
    plain = FRAGRetriever(index, mode="simple", max_paths=ALL)
    off = FRAGRetriever(index, mode="simple", max_paths=ALL, support_ties=False)
    assert [_key(p) for p in plain.paths(q)[0]] == [_key(p) for p in off.paths(q)[0]]


def test_a_long_chain_sends_a_simple_routed_question_to_the_complex_pipeline(index, writer_ranker):
    q = "who directed films for the writer of [Annie Hall]"
    simple_clf = type("AlwaysSimple", (), {"predict_proba": lambda self, qs: np.zeros(len(qs))})()
    r = FRAGRetriever(index, classifier=simple_clf, path_ranker=writer_ranker)
    ev = r.retrieve(q, 5)
    assert ev.trace["route"] == "complex" and ev.trace["route_by_chain"] == "/".join(WRITER_THEN_DIRECTOR)
    assert ev.trace["answers"][0] == "Woody Allen"
    off = FRAGRetriever(index, classifier=simple_clf, path_ranker=writer_ranker, route_by_chain=False).retrieve(q, 5)
    assert off.trace["route"] == "simple" and "route_by_chain" not in off.trace
    # a 1-hop chain keeps the simple route; a forced pipeline is never changed
    assert r.retrieve("who directed [Big]", 5).trace["route"] == "simple"
    forced = FRAGRetriever(index, mode="simple", path_ranker=writer_ranker).retrieve(q, 5)
    assert forced.trace["route"] == "simple" and "route_by_chain" not in forced.trace


def test_lexical_features_separate_queries_the_embedding_confuses(emb, tmp_path):
    from kgrag_plugins.methods.frag.path_ranker import lexical_features

    m = lexical_features(["who wrote it", "who wrote it", "Who directed it?"], 256)
    assert m.shape == (3, 256) and np.allclose(np.sqrt(m.multiply(m).sum(axis=1)), 1.0)
    assert (m[0] != m[1]).nnz == 0 and (m[0] != m[2]).nnz > 0
    # one embedding for every query: only the words can tell the chains apart
    qs = ["which person wrote it", "who wrote it", "which person directed it", "who directed it"]
    chains = [("written_by",), ("written_by",), DIRECTOR, DIRECTOR]
    same = np.tile(np.asarray(emb.embed(["it"], progress=False), dtype=np.float64), (4, 1))
    dense = PathRanker(emb).fit(qs, chains, vectors=same)
    lexical = PathRanker(emb, lexical_dim=512).fit(qs, chains, vectors=same)
    assert np.allclose(dense.logits(same)[:, 0], dense.logits(same)[0, 0])
    got = [lexical.chains[int(i)] for i in lexical.logits(same, qs).argmax(axis=1)]
    assert got == chains
    with pytest.raises(ValueError, match="relation queries"):
        lexical.logits(same, qs[:2])
    # without the texts: the embedding weights alone, and a warning
    assert np.allclose(lexical.logits(same), same.astype(np.float32) @ lexical.weights[:384] + lexical.bias)
    loaded = PathRanker.load(lexical.save(tmp_path / "lex.npz"), embedder=emb)
    assert loaded.lexical_dim == 512 and np.allclose(loaded.logits(same, qs), lexical.logits(same, qs))
    with pytest.raises(ValueError, match="lexical_dim"):
        PathRanker(emb, lexical_dim=-1)


def test_set_ties_let_untied_questions_decide_between_tied_chains(emb):
    # one vector for every query: the model is a single distribution over three chains. Two
    # questions are labelled written_by alone, six carry the tie {directed_by, written_by}
    # (the director also wrote the film), two are labelled release_year.
    chains = [("written_by",)] * 2 + [[DIRECTOR, ("written_by",)]] * 6 + [YEAR] * 2
    same = np.tile(np.asarray(emb.embed(["it"], progress=False), dtype=np.float64), (10, 1))
    qs = ["which person wrote it"] * 10

    def probs(ties: str) -> dict:
        r = PathRanker(emb, ties=ties).fit(qs, chains, vectors=same)
        return dict(zip(r.chains, np.exp(r.log_probs(same[0]))))

    uniform, as_set = probs("uniform"), probs("set")
    # uniform targets split the tie: directed_by keeps (6 / 2) / 10 of the mass
    assert uniform[DIRECTOR] == pytest.approx(0.3, abs=0.02) and uniform[("written_by",)] == pytest.approx(
        0.5, abs=0.02
    )
    # the set likelihood only asks the tie to be covered: written_by takes it, directed_by fades
    assert as_set[DIRECTOR] < 0.05 and as_set[("written_by",)] == pytest.approx(0.8, abs=0.03)
    assert as_set[YEAR] == pytest.approx(0.2, abs=0.03)
    with pytest.raises(ValueError, match="ties"):
        PathRanker(emb, ties="first")
