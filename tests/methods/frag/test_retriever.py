"""FRAG (docs/methods.md §2): hop-aware routing between a simple and a complex path-retrieval pipeline.

Most tests run on a hand-made movie KG stored one way, like MetaQA's ``kb.txt`` (``movie
directed_by person``, ``movie starred_actors person``, ...), so a person or a genre is only ever
a triple *tail* and can be reached from a film only by walking edges backwards. Ids are slugs
("big", "penny") and names are titles ("Big", "Penny Marshall"), so verbalisation must use names.

    film          directed_by  starred_actors     written_by        year  genres
    Big           penny        hanks              gary_ross         1988  comedy
    A League ...  penny        hanks, geena       ganz              1992  comedy, sport
    Awakenings    penny        robin_williams     -                 1990  biography
    Cast Away     zemeckis     hanks              broyles           2000  drama
    Forrest Gump  zemeckis     hanks, robin_wright -                1994  drama
    Back to ...   zemeckis     fox                zemeckis, gale    1985  scifi
    Beetlejuice   burton       geena, keaton      -                 1988  comedy
    Batman        burton       keaton             -                 1989  action

Known by construction (undirected distances from Big): Penny Marshall, Tom Hanks, Gary Ross, 1988,
Comedy at 1; the other Penny Marshall / Tom Hanks / 1988 / Comedy films at 2; their people, years
and genres at 3 (Biography only via Big -> Penny Marshall <- Awakenings -> Biography); Back to the
Future and Batman at 4; Michael J. Fox, Bob Gale, 1985, Science Fiction, 1989 and Action at 5.
Robert Zemeckis both directed and wrote Back to the Future (parallel relations).

Path ranking scores may change, so no test asserts on scores or on the order between paths of
*different* relation chains; candidate sets, path structure, verbalisation, routes, traces and
errors are checked against oracles computed here (brute-force enumeration, networkx).
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.graph import KnowledgeGraph, UnknownEntityError
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.frag import FRAGRetriever, count_hops, heuristic_route
from kgrag_plugins.methods.frag.hop_classifier import HopClassifier
from kgrag_plugins.methods.frag.prompts import STOP, reasoning_prompt
from kgrag_plugins.models.llm import LLMError, ScriptedLLM
from kgrag_plugins.types import Entity, Fact, Path

ALL = 10_000  # max_paths large enough to return every candidate

NAMES = {
    "big": "Big",
    "league": "A League of Their Own",
    "awakenings": "Awakenings",
    "cast_away": "Cast Away",
    "forrest_gump": "Forrest Gump",
    "bttf": "Back to the Future",
    "beetlejuice": "Beetlejuice",
    "batman": "Batman",
    "penny": "Penny Marshall",
    "zemeckis": "Robert Zemeckis",
    "burton": "Tim Burton",
    "hanks": "Tom Hanks",
    "geena": "Geena Davis",
    "robin_williams": "Robin Williams",
    "robin_wright": "Robin Wright",
    "fox": "Michael J. Fox",
    "keaton": "Michael Keaton",
    "gary_ross": "Gary Ross",
    "ganz": "Lowell Ganz",
    "broyles": "William Broyles",
    "gale": "Bob Gale",
    "comedy": "Comedy",
    "sport": "Sport",
    "biography": "Biography",
    "drama": "Drama",
    "scifi": "Science Fiction",
    "action": "Action",
}

# film, director, actors, writers, year, genres
MOVIES = [
    ("big", "penny", ["hanks"], ["gary_ross"], "1988", ["comedy"]),
    ("league", "penny", ["hanks", "geena"], ["ganz"], "1992", ["comedy", "sport"]),
    ("awakenings", "penny", ["robin_williams"], [], "1990", ["biography"]),
    ("cast_away", "zemeckis", ["hanks"], ["broyles"], "2000", ["drama"]),
    ("forrest_gump", "zemeckis", ["hanks", "robin_wright"], [], "1994", ["drama"]),
    ("bttf", "zemeckis", ["fox"], ["zemeckis", "gale"], "1985", ["scifi"]),
    ("beetlejuice", "burton", ["geena", "keaton"], [], "1988", ["comedy"]),
    ("batman", "burton", ["keaton"], [], "1989", ["action"]),
]


def _movie_triples() -> list[tuple[str, str, str]]:
    out = []
    for film, director, actors, writers, year, genres in MOVIES:
        out.append((film, "directed_by", director))
        out += [(film, "starred_actors", a) for a in actors]
        out += [(film, "written_by", w) for w in writers]
        out.append((film, "release_year", year))
        out += [(film, "has_genre", g) for g in genres]
    return out


TRIPLES = _movie_triples()
RELATIONS = sorted({r for _, r, _ in TRIPLES})


def _graph(triples, names=None) -> KnowledgeGraph:
    names = names or {}
    g = KnowledgeGraph()
    for h, _, t in triples:
        for e in (h, t):
            g.add_entity(Entity(e, names.get(e, e)))
    for h, r, t in triples:
        g.add_triple(h, r, t)
    return g


def _hash_index(graph: KnowledgeGraph) -> KnowledgeIndex:
    from conftest import HashEmbedder

    return KnowledgeIndex.build([], graph=graph, embedder=HashEmbedder(dim=256), progress=False)


# --------------------------------------------------------------------------- oracles


def _key(p: Path) -> tuple:
    """A path as ``(nodes, relations, inverse flags)``."""
    return tuple(p.nodes), tuple(p.relations), tuple(p.inverse or [False] * len(p.relations))


def _simple_paths_oracle(triples, start, max_len, *, inverse=True, allowed=None) -> set[tuple]:
    """Every simple path of 1..max_len edges from ``start`` (edges walked both ways when
    ``inverse``), optionally inside the node set ``allowed``: brute-force depth-first search."""
    adj = defaultdict(list)
    for h, r, t in triples:
        walks = [(h, r, False, t)] + ([(t, r, True, h)] if inverse else [])
        for a, rel, back, b in walks:
            if allowed is None or (a in allowed and b in allowed):
                adj[a].append((rel, back, b))
    out: set[tuple] = set()

    def walk(nodes, rels, flags):
        if rels:
            out.add((tuple(nodes), tuple(rels), tuple(flags)))
        if len(rels) == max_len:
            return
        for rel, back, b in adj[nodes[-1]]:
            if b not in nodes:
                walk(nodes + [b], rels + [rel], flags + [back])

    walk([start], [], [])
    return out


def _undirected(triples) -> nx.Graph:
    g = nx.Graph()
    g.add_edges_from((h, t) for h, _, t in triples)
    return g


def _ppr(triples, seeds, damping=0.8) -> dict[str, float]:
    """Personalized PageRank over edges walked both ways (parallel edges add weight)."""
    g = nx.MultiDiGraph()
    for h, _, t in triples:
        g.add_edge(h, t)
        g.add_edge(t, h)
    return nx.pagerank(g, alpha=damping, personalization={s: 1.0 for s in seeds}, tol=1e-12, max_iter=1000)


def _assert_walks_real_edges(p: Path, triples) -> None:
    """Each step is a triple, forwards (``->``) or against its direction (``<-``)."""
    ts = set(triples)
    assert p.inverse is not None and len(p.inverse) == len(p.relations)
    for a, rel, back, b in zip(p.nodes, p.relations, p.inverse, p.nodes[1:]):
        assert ((b, rel, a) if back else (a, rel, b)) in ts, (p, a, rel, back, b)


def _unbracket(q: str) -> str:
    return re.sub(r"\[([^\[\]]+)\]", r"\1", q)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def movie_graph() -> KnowledgeGraph:
    return _graph(TRIPLES, NAMES)


@pytest.fixture(scope="module")
def movie_index(movie_graph) -> KnowledgeIndex:
    """The movie KG with the fast hash embedder (semantics do not matter for these checks)."""
    return _hash_index(movie_graph)


@pytest.fixture(scope="module")
def real_index(movie_graph) -> KnowledgeIndex:
    """The movie KG with the real MiniLM embedder (needed to load a classifier by path)."""
    from kgrag_plugins.models.embed import default_embedder

    return KnowledgeIndex.build([], graph=movie_graph, embedder=default_embedder(), progress=False)


SIMPLE_QS = [
    ("who directed [Big]", 1),
    ("what genre is [Cast Away]", 1),
    ("who starred in [Batman]", 1),
    ("when was [Awakenings] released", 1),
    ("who wrote [Back to the Future]", 1),
    ("what movies did [Tom Hanks] act in", 1),
    ("who directed the movies starred by [Geena Davis]", 2),
    ("which films were directed by the director of [Big]", 2),
    ("what genres are the movies written by [Gary Ross]", 2),
    ("the films starred by [Michael Keaton] were released in which years", 2),
]
COMPLEX_QS = [
    ("who starred in the films whose directors also directed [Big]", 3),
    ("what genres are the movies that share directors with [Cast Away]", 3),
    ("who are the writers of the films that share actors with [Batman]", 3),
    ("the movies that share actors with the movie [Forrest Gump] were directed by who", 3),
    ("which years were the films released whose writers also wrote [Big]", 3),
    ("what languages are spoken in the films whose directors also directed [Awakenings]", 3),
    ("who acted in the movies directed by the director of [Beetlejuice]", 3),
    ("what are the genres of the films that share actors with [A League of Their Own]", 3),
    ("who wrote the films that share directors with the film [Batman]", 3),
    ("when were the movies released whose actors also starred in [Big]", 3),
]


@pytest.fixture(scope="module")
def hop_clf() -> HopClassifier:
    """A hop classifier trained on 20 hand-written MetaQA-style questions (real embedder)."""
    from kgrag_plugins.models.embed import default_embedder

    qs = SIMPLE_QS + COMPLEX_QS
    return HopClassifier(default_embedder()).fit([q for q, _ in qs], [h for _, h in qs])


class RecordingLLM(ScriptedLLM):
    """An LLM that records prompts and returns ``reply`` untouched (no stop-string truncation),
    so the retriever's own first-line parsing is tested. (A ScriptedLLM subclass only so that
    ``as_llm`` accepts it without probing for LangChain/LlamaIndex, a slow import.)"""

    def __init__(self, reply: str) -> None:
        super().__init__([])
        self.reply = reply
        self.calls: list[dict] = []

    def complete(self, prompt, *, stop=None, max_tokens=None, temperature=None) -> str:
        self.calls.append({"prompt": prompt, "stop": stop, "max_tokens": max_tokens, "temperature": temperature})
        return self.reply

    async def acomplete(self, prompt, *, stop=None, max_tokens=None, temperature=None) -> str:
        return self.complete(prompt, stop=stop, max_tokens=max_tokens, temperature=temperature)


class StubClassifier:
    """Duck-typed hop classifier with a fixed P(complex)."""

    delta = 2

    def __init__(self, p: float) -> None:
        self.p = p
        self.seen: list[str] = []

    def predict_proba(self, questions):
        self.seen += list(questions)
        return np.full(len(questions), self.p)


# --------------------------------------------------------------------------- 1. simple pipeline


def test_simple_pipeline_returns_every_simple_path_of_one_or_two_hops(movie_index):
    r = FRAGRetriever(movie_index, max_paths=ALL)
    paths, trace = r.paths("who wrote [Back to the Future]", route="simple")
    got = [_key(p) for p in paths]
    assert len(got) == len(set(got)), "a candidate path is returned twice"
    assert set(got) == _simple_paths_oracle(TRIPLES, "bttf", 2)
    assert trace["route"] == "simple" and trace["k"] == 2 and trace["candidate_paths"] == len(paths)
    for p in paths:
        assert p.nodes[0] == "bttf" and 1 <= len(p.relations) <= 2
        assert len(set(p.nodes)) == len(p.nodes), f"path revisits a node: {p}"
        _assert_walks_real_edges(p, TRIPLES)

    # Robert Zemeckis directed *and* wrote the film: one path per parallel relation, at 1 and 2 hops
    to_zemeckis = {k for k in got if k[0] == ("bttf", "zemeckis")}
    assert to_zemeckis == {
        (("bttf", "zemeckis"), ("directed_by",), (False,)),
        (("bttf", "zemeckis"), ("written_by",), (False,)),
    }
    assert (("bttf", "zemeckis", "cast_away"), ("directed_by", "directed_by"), (False, True)) in got
    assert (("bttf", "zemeckis", "cast_away"), ("written_by", "directed_by"), (False, True)) in got

    # FRAG-Simple (mode="simple") gives the same candidates through the router
    forced = FRAGRetriever(movie_index, mode="simple", max_paths=ALL)
    paths2, trace2 = forced.paths("who are the directors of the films that share actors with [Back to the Future]")
    assert forced.name == "frag-simple" and trace2["route"] == "simple" and trace2["retriever"] == "frag-simple"
    assert {_key(p) for p in paths2} == set(got)


def test_max_candidates_caps_the_enumeration_and_reports_it(movie_index):
    n_all = len(_simple_paths_oracle(TRIPLES, "big", 2))
    r = FRAGRetriever(movie_index, max_paths=ALL, max_candidates=4)
    paths, trace = r.paths("who directed [Big]", route="simple")
    # enumeration stops expanding once a level exceeds the cap, and reports what it had found
    assert n_all > trace["candidates_truncated_from"] > 4
    assert trace["candidate_paths"] == len(paths) <= 4


# --------------------------------------------------------------------------- 2. complex pipeline


def test_complex_pipeline_one_shortest_path_per_node_within_four_hops(movie_index, movie_graph):
    r = FRAGRetriever(movie_index, max_paths=ALL)
    paths, trace = r.paths("what genres are the films that share a director with [Big]", route="complex")
    dist = nx.single_source_shortest_path_length(_undirected(TRIPLES), "big", cutoff=4)
    ends = [p.nodes[-1] for p in paths]
    assert sorted(ends) == sorted(n for n in dist if n != "big"), "not exactly one path per reachable node"
    for p in paths:
        assert p.nodes[0] == "big" and len(set(p.nodes)) == len(p.nodes)
        assert len(p.relations) == dist[p.nodes[-1]], f"not a shortest path: {p}"
        _assert_walks_real_edges(p, TRIPLES)
    assert trace["route"] == "complex" and trace["k"] == 4 and trace["neighbourhood"] == len(dist)
    assert trace["pagerank"] is False and trace["subgraph_nodes"] == len(dist)

    # hand-checked distances: Back to the Future / Batman at 4; their own attributes at 5 are out of reach
    assert {"bttf", "batman"} <= set(ends)
    assert not {"fox", "gale", "1985", "scifi", "1989", "action"} & set(ends)

    # the 3-hop answer "genres of the films sharing a director with Big" (its only shortest path)
    bio = next(p for p in paths if p.nodes[-1] == "biography")
    text = bio.verbalize(movie_graph.names())
    assert text == "Big -> directed_by -> Penny Marshall <- directed_by <- Awakenings -> has_genre -> Biography"
    assert count_hops(text) == 3

    # ... which the 2-hop simple pipeline cannot reach
    simple, _ = r.paths("what genres are the films that share a director with [Big]", route="simple")
    assert "biography" not in {p.nodes[-1] for p in simple}


# --------------------------------------------------------------------------- 3. inverse edges


def test_path_verbalisation_marks_inverse_steps():
    p = Path(["a", "b", "c"], ["r1", "r2"], inverse=[True, False])
    assert p.verbalize({"a": "A", "c": "C"}) == "A <- r1 <- b -> r2 -> C"
    assert Path(["a", "b"], ["r1"]).verbalize() == "a -> r1 -> b"  # no flags: all forward
    assert Path.from_dict(p.to_dict()) == p
    with pytest.raises(ValueError, match="one flag per relation"):
        Path(["a", "b"], ["r1"], inverse=[True, False])
    assert count_hops("a -> r1 -> b") == 1
    assert count_hops("a <- r1 <- b -> r2 -> c <- r3 <- d") == 3
    assert count_hops("NO") == 0


def test_inverse_edges_reach_entities_that_are_only_tails(movie_index):
    r = FRAGRetriever(movie_index, max_paths=ALL)
    ev = r.evidence("what films did [Tom Hanks] act in", route="simple")
    assert ev.trace["topic_entities"] == ["hanks"] and ev.facts
    by_text = {f.text: f for f in ev.facts}
    two = by_text["Tom Hanks <- starred_actors <- Big -> directed_by -> Penny Marshall"]
    assert two.data["nodes"] == ["hanks", "big", "penny"]
    assert two.data["relations"] == ["starred_actors", "directed_by"]
    assert two.data["inverse"] == [True, False]
    assert two.data["answer"] == "penny" and two.data["hops"] == 2
    assert count_hops(two.text) == 2
    one = by_text["Tom Hanks <- starred_actors <- Big"]
    assert one.data["inverse"] == [True] and one.data["hops"] == 1
    # Tom Hanks is only ever a tail: every path starts with an inverse step, and the flags match the triples
    for f in ev.facts:
        assert f.data["inverse"][0] is True
        _assert_walks_real_edges(Path(f.data["nodes"], f.data["relations"], inverse=f.data["inverse"]), TRIPLES)
    assert {(tuple(f.data["nodes"]), tuple(f.data["relations"]), tuple(f.data["inverse"])) for f in ev.facts} == (
        _simple_paths_oracle(TRIPLES, "hanks", 2)
    )

    # out-edges only (inverse=False): an actor topic has no paths; a film reaches only its own tails
    fwd = FRAGRetriever(movie_index, inverse=False, max_paths=ALL)
    ev2 = fwd.evidence("what films did [Tom Hanks] act in", route="simple")
    assert ev2.facts == [] and ev2.trace["topic_entities"] == ["hanks"] and ev2.trace["candidate_paths"] == 0
    ev2 = fwd.evidence("what films did [Tom Hanks] act in", route="complex")
    assert ev2.facts == []
    paths, _ = fwd.paths("who directed [Big]", route="simple")
    assert {_key(p) for p in paths} == {(("big", t), (rel,), (False,)) for h, rel, t in TRIPLES if h == "big"}


# --------------------------------------------------------------------------- 4. linking


def test_linking_by_bracket_by_name_and_given(movie_index):
    r = FRAGRetriever(movie_index)
    _, t = r.paths("who directed [Big]")
    assert t["linking"] == "bracket" and t["topic_entities"] == ["big"]
    _, t = r.paths("who directed [cast_away]")  # an entity id works too
    assert t["linking"] == "bracket" and t["topic_entities"] == ["cast_away"]
    _, t = r.paths("who directed [Big] and [Nowhere Land]")  # the known one is used, the other reported
    assert t["topic_entities"] == ["big"] and t["unknown_topic_entities"] == ["Nowhere Land"]
    paths, t = r.paths("Who directed Cast Away?")
    assert t["linking"] == "name" and t["topic_entities"] == ["cast_away"]
    assert paths and all(p.nodes[0] == "cast_away" for p in paths)
    _, t = r.paths("who directed [Big]", topic_entities=["batman", "batman"])
    assert t["linking"] == "given" and t["topic_entities"] == ["batman"]


def test_unknown_topic_entities(movie_index):
    r = FRAGRetriever(movie_index)
    ev = r.evidence("who directed [Zyzzyva Quux]")
    assert ev.facts == [] and ev.passages == []
    assert ev.trace["topic_entities"] == [] and ev.trace["linking"] == "none"
    assert ev.trace["unknown_topic_entities"] == ["Zyzzyva Quux"]
    assert "Zyzzyva Quux" in ev.trace["error"] and "topic entity" in ev.trace["error"]
    assert r.answer("who directed [Zyzzyva Quux]").text == ""
    with pytest.raises(UnknownEntityError, match="nope"):
        r.paths("who directed [Big]", topic_entities=["nope"])
    with pytest.raises(UnknownEntityError):
        r.evidence("who directed [Big]", topic_entities=["big", "nope"])


# --------------------------------------------------------------------------- 5. bad inputs


def test_bad_inputs_raise_clear_errors(movie_index, tmp_path):
    g = KnowledgeGraph()
    g.add_entity(Entity("a", "A"))
    g.add_entity(Entity("b", "B"))
    with pytest.raises(ValueError, match="knowledge graph with triples"):
        FRAGRetriever(_hash_index(g))
    with pytest.raises(ValueError, match="mode must be"):
        FRAGRetriever(movie_index, mode="bogus")
    with pytest.raises(ValueError, match="damping"):
        FRAGRetriever(movie_index, damping=1.0)
    with pytest.raises(ValueError, match="max_paths"):
        FRAGRetriever(movie_index, max_paths=0)
    with pytest.raises(ValueError, match="complex_hops"):
        FRAGRetriever(movie_index, complex_hops=0)
    with pytest.raises(FileNotFoundError):
        FRAGRetriever(movie_index, classifier=str(tmp_path / "missing.npz"))
    r = FRAGRetriever(movie_index)
    for q in ("", "   "):
        with pytest.raises(ValueError, match="non-empty"):
            r.retrieve(q)
    with pytest.raises(ValueError, match="k must be"):
        r.retrieve("who directed [Big]", k=0)
    with pytest.raises(ValueError, match="route must be"):
        r.evidence("who directed [Big]", route="medium")
    with pytest.raises(ValueError, match="needs an llm"):
        r.estimate_hops("who directed Big", [])
    with pytest.raises(ValueError, match="feedback needs"):
        r.feedback(["who directed [Big]"])


# --------------------------------------------------------------------------- 6. routing


@pytest.mark.parametrize(
    "question, route",
    [
        ("who directed [Big]", "simple"),
        ("what genre is [Cast Away]", "simple"),
        ("what films did [Tom Hanks] act in", "simple"),
        ("who are the directors of the films that share actors with [Big]", "complex"),
        ("what are the genres of the movies whose writers also wrote [Big]", "complex"),
        # the cues inside a [bracketed] title do not count (who, of the, by)
        ("what genre is [The Man Who Knew the Name of the Man Shot by Liberty]", "simple"),
    ],
)
def test_heuristic_route(question, route):
    assert heuristic_route(question) == route


def test_heuristic_route_has_no_co_star_cue():
    # "of the" and "by" are two cues; "co-starring" is not a third since issue 20 (it changed no
    # route on MetaQA, MuSiQue or 2Wiki and one HotpotQA route for the worse)
    assert heuristic_route("the films co-starring the actors of the film by [Penny Marshall]") == "simple"


def test_heuristic_route_does_not_count_words_that_merely_start_with_co():
    # one relational step ("the composer of Big"): only "who" is a cue; "composed"/"comedy"/"country"
    # are not cues (no "co-" prefix cue: the co-star cue was removed in issue 20, it changed no route)
    assert heuristic_route("who composed the music for the comedy [Big]") == "simple"
    assert heuristic_route("which country is the comedy [Big] from") == "simple"


def test_mode_and_route_argument_force_a_pipeline(movie_index):
    r = FRAGRetriever(movie_index, mode="complex")
    assert r.name == "frag-complex"
    _, t = r.paths("who directed [Big]")
    assert t["route"] == "complex" and t["k"] == 4 and t["p_complex"] is None and t["retriever"] == "frag-complex"
    _, t = r.paths("who directed [Big]", route="simple")  # an explicit route wins over the mode
    assert t["route"] == "simple" and t["k"] == 2

    auto = FRAGRetriever(movie_index)
    assert auto.name == "frag"
    assert auto.paths("who directed [Big]")[1]["route"] == "simple"
    _, t = auto.paths("who are the directors of the films that share actors with [Big]")
    assert t["route"] == "complex" and t["p_complex"] is None


def test_a_classifier_overrides_the_heuristic(movie_index):
    stub = StubClassifier(0.9)
    r = FRAGRetriever(movie_index, classifier=stub)
    _, t = r.paths("who directed [Big]")  # heuristically simple
    assert t["route"] == "complex" and t["p_complex"] == pytest.approx(0.9)
    assert stub.seen == ["who directed Big"]  # the classifier sees the question without brackets
    stub = StubClassifier(0.1)
    _, t = FRAGRetriever(movie_index, classifier=stub).paths(
        "who are the directors of the films that share actors with [Big]"
    )
    assert t["route"] == "simple" and t["p_complex"] == pytest.approx(0.1)
    forced = StubClassifier(0.9)
    _, t = FRAGRetriever(movie_index, classifier=forced, mode="simple").paths("who directed [Big]")
    assert t["route"] == "simple" and t["p_complex"] is None and forced.seen == []


def test_trained_classifier_routes_and_loads_from_a_path(hop_clf, movie_index, real_index, tmp_path):
    r = FRAGRetriever(movie_index, classifier=hop_clf)
    probs = {}
    for q, hops in (SIMPLE_QS[0], COMPLEX_QS[0]):
        _, t = r.paths(q)
        p = t["p_complex"]
        assert isinstance(p, float) and 0.0 <= p <= 1.0
        assert p == pytest.approx(float(hop_clf.predict_proba([_unbracket(q)])[0]))
        assert t["route"] == ("complex" if p >= 0.5 else "simple")
        probs[q] = p
    assert probs[COMPLEX_QS[0][0]] > probs[SIMPLE_QS[0][0]]  # training questions are separated

    path = hop_clf.save(tmp_path / "hop.npz")
    loaded = FRAGRetriever(real_index, classifier=str(path))
    assert isinstance(loaded.classifier, HopClassifier)
    for q, p in probs.items():
        assert loaded.paths(q)[1]["p_complex"] == pytest.approx(p, abs=1e-6)
    assert isinstance(FRAGRetriever(real_index, classifier=path).classifier, HopClassifier)
    # the classifier is loaded with the index's embedder, which must be the one it was trained with
    with pytest.raises(ValueError, match="trained with embedder"):
        FRAGRetriever(movie_index, classifier=str(path))


# --------------------------------------------------------------------------- 7. PageRank subgraph


def test_pagerank_keeps_the_top_nodes_and_the_topic_entities(movie_index):
    r = FRAGRetriever(movie_index, max_nodes=6, max_paths=ALL)
    paths, t = r.paths("who directed [Big]", route="complex")
    hood = nx.single_source_shortest_path_length(_undirected(TRIPLES), "big", cutoff=4)
    assert t["neighbourhood"] == len(hood) > 6
    assert t["pagerank"] is True and t["subgraph_nodes"] <= 6 + 1
    used = {n for p in paths for n in p.nodes}
    assert paths and all(p.nodes[0] == "big" for p in paths) and len(used) <= t["subgraph_nodes"]
    ppr = _ppr(TRIPLES, ["big"])
    sixth = sorted((ppr[n] for n in hood), reverse=True)[5]
    low = {n: ppr[n] for n in used if ppr[n] < sixth - 1e-4}
    assert not low, f"path nodes outside the top-6 PageRank nodes: {low}"

    # two topics and max_nodes=1: the top node plus the other topic, and only the paths between them
    r1 = FRAGRetriever(movie_index, max_nodes=1, max_paths=ALL)
    paths, t = r1.paths("who directed [Big]", route="simple", topic_entities=["big", "penny"])
    assert t["pagerank"] is True and t["subgraph_nodes"] == 2
    assert {_key(p) for p in paths} == {
        (("big", "penny"), ("directed_by",), (False,)),
        (("penny", "big"), ("directed_by",), (True,)),
    }


@pytest.mark.parametrize("walk", ["push", "exact"])
def test_local_pagerank_on_large_graphs_keeps_the_paths(movie_index, monkeypatch, walk):
    """From LARGE_GRAPH_ENTITIES on, PageRank walks the k-hop neighbourhood only (the bounded
    push walk by default, or the exact one) and chains are scored by relation vectors; with every
    node kept the candidate paths are the same set."""
    import kgrag_plugins.methods.frag.retriever as frag_mod

    q = "who directed [Big]"
    whole, t0 = FRAGRetriever(movie_index, max_paths=ALL).paths(q, route="complex")
    assert "local_walk" not in t0  # below the threshold: the paper's whole-graph walk
    monkeypatch.setattr(frag_mod, "LARGE_GRAPH_ENTITIES", 0)
    big = FRAGRetriever(movie_index, max_paths=ALL, local_walk=walk)

    def no_texts(texts):  # large graphs score chains by relation vectors, embedding no chain text
        raise AssertionError(f"embedded chain texts {texts[:2]}")

    monkeypatch.setattr(big, "_embed", no_texts)
    local, t1 = big.paths(q, route="complex")
    assert t0["local_pagerank"] is False and t1["local_pagerank"] is True
    assert whole and {_key(p) for p in local} == {_key(p) for p in whole}
    # the push walk reached the whole 4-hop ball of this small graph; the exact walk has no trace
    assert (t1.get("local_walk", {}).get("ball_entities") == t1["neighbourhood"]) == (walk == "push")
    with pytest.raises(ValueError, match="local_walk"):
        FRAGRetriever(movie_index, local_walk="approximate")
    with pytest.raises(ValueError, match="push_eps"):
        FRAGRetriever(movie_index, push_eps=0)


def test_relation_scoring_embeds_only_the_relations_of_the_candidate_chains(monkeypatch):
    """Chains scored by relation vectors (large or many-relation graphs) embed only the relations
    their candidate chains use, not the whole vocabulary (MuSiQue: 59,475 relation phrases, a 410 s
    first query), and rank exactly as with the index's full relation vectors. (A vocabulary below
    ``ON_DEMAND_MIN_ROWS`` is embedded whole at once: set to 0 here, as for a large one.)"""
    import kgrag_plugins.methods.frag.retriever as frag_mod
    from kgrag_plugins.index import vector_cache

    monkeypatch.setattr(frag_mod, "LARGE_GRAPH_ENTITIES", 0)
    monkeypatch.setattr(vector_cache, "ON_DEMAND_MIN_ROWS", 0)
    q = "who directed [Big]"
    geo = [
        ("paris", "capital_of", "france"),
        ("rhine", "flows_through", "germany"),
        ("berlin", "capital_of", "germany"),
    ]
    graph = _graph(TRIPLES + geo, NAMES)  # relations no chain from Big uses
    lazy_idx, full_idx = _hash_index(graph), _hash_index(graph)
    embedded: list[str] = []
    inner = lazy_idx.embedder.embed
    monkeypatch.setattr(lazy_idx.embedder, "embed", lambda texts, **kw: embedded.extend(texts) or inner(texts, **kw))
    lazy, _ = FRAGRetriever(lazy_idx, max_paths=ALL).paths(q, route="simple")
    assert not lazy_idx.has_relation_vectors  # the vocabulary was never embedded as a whole
    rels = set(graph.relations)
    used = {r for p in lazy for r in p.relations}
    assert used and used <= set(embedded) and set(embedded) & rels < rels
    assert full_idx.relation_vectors is not None and full_idx.has_relation_vectors
    full, _ = FRAGRetriever(full_idx, max_paths=ALL).paths(q, route="simple")
    assert [_key(p) for p in lazy] == [_key(p) for p in full]
    np.testing.assert_allclose([p.score for p in lazy], [p.score for p in full], atol=1e-6)
    # relation pruning (more relations around the topic than max_relations) scores lazily too
    lazy_idx2 = _hash_index(graph)
    pruned, trace = FRAGRetriever(lazy_idx2, max_paths=ALL, max_relations=2).paths(q, route="complex")
    assert trace.get("relations_kept") == 2 and not lazy_idx2.has_relation_vectors
    pruned_full, _ = FRAGRetriever(full_idx, max_paths=ALL, max_relations=2).paths(q, route="complex")
    assert [_key(p) for p in pruned] == [_key(p) for p in pruned_full]


@pytest.mark.parametrize("max_nodes, pagerank", [(15, True), (2000, False)])
def test_paths_of_one_relation_chain_are_ordered_by_pagerank(movie_index, max_nodes, pagerank):
    # The docstring: "Paths with the same chain are ordered by the PageRank of their end node", and
    # skipping PageRank when the neighbourhood fits in max_nodes gives "the same result".
    r = FRAGRetriever(movie_index, max_nodes=max_nodes, max_paths=ALL)
    paths, t = r.paths("what films did [Tom Hanks] act in", route="simple")
    assert t["neighbourhood"] == 19 and t["pagerank"] is pagerank
    ppr = _ppr(TRIPLES, ["hanks"])
    by_chain = defaultdict(list)
    for p in paths:
        by_chain[_key(p)[1:]].append(p.nodes[-1])
    films = by_chain[(("starred_actors",), (True,))]
    assert sorted(films) == ["big", "cast_away", "forrest_gump", "league"]
    for chain, ends in by_chain.items():
        scores = [ppr[e] for e in ends]
        assert all(a >= b - 1e-4 for a, b in zip(scores, scores[1:])), (chain, ends, scores)


# --------------------------------------------------------------------------- 8. relation pruning


def _pruned_nodes(triples, hood, seeds, relation) -> set[str]:
    """Topic entities plus both endpoints of ``relation`` edges inside ``hood``."""
    nodes = set(seeds)
    for h, rel, t in triples:
        if rel == relation and h in hood and t in hood:
            nodes |= {h, t}
    return nodes


def test_relation_pruning_keeps_the_top_relations(movie_index):
    hood = set(nx.single_source_shortest_path_length(_undirected(TRIPLES), "big", cutoff=2))
    r = FRAGRetriever(movie_index, max_relations=1, max_paths=ALL)
    paths, t = r.paths("who directed [Big]", route="simple")
    assert t["relations"] == len(RELATIONS) and t["relations_kept"] == 1
    # whichever relation was kept, the paths are exactly those of the subgraph its edges induce
    got = {_key(p) for p in paths}
    fits = []
    for rel in RELATIONS:
        nodes = _pruned_nodes(TRIPLES, hood, ["big"], rel)
        if t["pruned_nodes"] == len(nodes) and got == _simple_paths_oracle(TRIPLES, "big", 2, allowed=nodes):
            fits.append(rel)
    assert fits, "the paths do not match the subgraph of any single kept relation"
    used = {n for p in paths for n in p.nodes}
    assert any(used <= _pruned_nodes(TRIPLES, hood, ["big"], rel) for rel in fits)

    # with a scorer that prefers "has genre": Big, Comedy and the other comedies in reach are kept
    def genre_first(query, texts):
        return [1.0 if "genre" in text else 0.0 for text in texts]

    r = FRAGRetriever(movie_index, max_relations=1, max_paths=ALL, reranker=genre_first)
    paths, t = r.paths("what genre is [Big]", route="simple")
    assert t["relations_kept"] == 1 and t["pruned_nodes"] == 4
    assert {_key(p) for p in paths} == {
        (("big", "comedy"), ("has_genre",), (False,)),
        (("big", "comedy", "league"), ("has_genre", "has_genre"), (False, True)),
        (("big", "comedy", "beetlejuice"), ("has_genre", "has_genre"), (False, True)),
    }
    # no pruning when the subgraph has at most max_relations relations
    _, t = FRAGRetriever(movie_index, max_relations=len(RELATIONS)).paths("who directed [Big]", route="simple")
    assert "relations_kept" not in t


# --------------------------------------------------------------------------- 9. CVT nodes


def test_unnamed_cvt_nodes_are_never_path_ends():
    triples = [
        ("big", "film.film.starring", "m.0abc"),  # CVT: id == name
        ("m.0abc", "film.performance.actor", "hanks"),
        ("m.0abc", "film.performance.character", "josh"),
        ("big", "film.film.release_date_s", "g.11xyz"),  # CVT
        ("g.11xyz", "film.film_regional_release_date.region", "usa"),
        ("big", "film.film.directed_by", "m.0named"),  # a named entity with a mid: a fine answer
    ]
    names = {"big": "Big", "hanks": "Tom Hanks", "josh": "Josh Baskin", "usa": "United States",
             "m.0named": "Penny Marshall"}  # fmt: skip
    idx = _hash_index(_graph(triples, names))
    r = FRAGRetriever(idx, max_paths=ALL)
    for route in ("simple", "complex"):
        paths, _ = r.paths("who starred in [Big]", route=route)
        assert {p.nodes[-1] for p in paths} == {"hanks", "josh", "usa", "m.0named"}, route
        assert (("big", "m.0abc", "hanks"), ("film.film.starring", "film.performance.actor"), (False, False)) in {
            _key(p) for p in paths
        }
    ev = r.evidence("who starred in [Big]", route="simple")
    assert "Big -> film.film.starring -> m.0abc -> film.performance.actor -> Tom Hanks" in [f.text for f in ev.facts]
    assert set(ev.trace["answers"]) == {"Tom Hanks", "Josh Baskin", "United States", "Penny Marshall"}
    # a CVT reached only from the topic's side: from Tom Hanks the CVT ends are dropped too
    paths, _ = r.paths("what films did [Tom Hanks] act in", route="simple")
    assert {p.nodes[-1] for p in paths} == {"big", "josh"}


# --------------------------------------------------------------------------- 10. evidence & answers


def test_evidence_facts_are_verbalised_top_paths(movie_index, movie_graph):
    r = FRAGRetriever(movie_index, max_paths=3)
    ev = r.retrieve("who directed [Big]", k=5)
    assert len(ev.facts) == 3 < ev.trace["candidate_paths"]
    assert ev.passages == []  # a KG without passages
    names = movie_graph.names()
    for f in ev.facts:
        assert isinstance(f, Fact) and f.kind == "path"
        p = Path(f.data["nodes"], f.data["relations"], inverse=f.data["inverse"])
        assert f.text == p.verbalize(names)
        assert f.data["answer"] == f.data["nodes"][-1] and f.data["hops"] == len(f.data["relations"])
        assert f.data["nodes"][0] == "big"
    expected = list(dict.fromkeys(names[f.data["answer"]] for f in ev.facts))
    assert ev.trace["answers"] == expected
    json.dumps(ev.to_dict())  # the trace is JSON-able

    # answers are unique end-entity names, in fact order, when several paths end at one entity
    wide = FRAGRetriever(movie_index, max_paths=ALL).retrieve("who wrote [Back to the Future]")
    ends = [names[f.data["answer"]] for f in wide.facts]
    assert len(set(ends)) < len(ends)  # Robert Zemeckis is reached by two paths (at least)
    assert wide.trace["answers"] == list(dict.fromkeys(ends))


def test_answer_without_and_with_an_llm(movie_index):
    q = "who directed [Big]"
    plain = FRAGRetriever(movie_index, max_paths=4)
    a = plain.answer(q)
    answers = a.evidence.trace["answers"]
    assert a.text == answers[0] and a.metadata["llm"] is False and a.metadata["answers"] == answers
    assert a.metadata["route"] == "simple"

    llm = RecordingLLM("  Penny Marshall  \nBecause she directed Big.")
    r = FRAGRetriever(movie_index, max_paths=4, llm=llm)
    ev = r.retrieve(q, k=5)
    a = r.answer(q, evidence=ev)
    assert a.text == "Penny Marshall" and a.metadata["llm"] is True and "llm_error" not in a.metadata
    assert len(llm.calls) == 1
    prompt = llm.calls[0]["prompt"]
    lines = [f.text for f in ev.facts]
    assert prompt == reasoning_prompt("who directed Big", lines)
    assert "who directed Big" in prompt and all(line in prompt.splitlines() for line in lines)
    assert llm.calls[0]["stop"] == STOP

    # an empty reply falls back to the top end entity
    r = FRAGRetriever(movie_index, max_paths=4, llm=RecordingLLM("   "))
    assert r.answer(q, evidence=ev).text == ev.trace["answers"][0]

    # a failing LLM falls back to the top end entity and says why
    r = FRAGRetriever(movie_index, max_paths=4, llm=ScriptedLLM([LLMError("server down")]))
    a = r.answer(q)
    assert a.text == a.evidence.trace["answers"][0] and "server down" in a.metadata["llm_error"]


# --------------------------------------------------------------------------- 11. FRAG-F feedback

THREE_HOP = "Big -> directed_by -> Penny Marshall <- directed_by <- Awakenings -> has_genre -> Biography"


def test_estimate_hops_counts_the_path_the_llm_copies(movie_index):
    def run(reply):
        return FRAGRetriever(movie_index, llm=RecordingLLM(reply)).estimate_hops("q", ["p"])

    assert run(THREE_HOP) == 3
    assert run(f"  {THREE_HOP}  \nbecause it fits") == 3  # first line only
    assert run("Big -> directed_by -> Penny Marshall") == 1
    assert run("NO") is None and run("") is None
    assert run("a -> r -> b -> r -> c -> r -> d -> r -> e -> r -> f") is None  # 5 hops: out of 1..4
    assert FRAGRetriever(movie_index, llm=ScriptedLLM([LLMError("x")])).estimate_hops("q", ["p"]) is None


def test_feedback_adapts_the_classifier_with_hop_labels(hop_clf, movie_index, tmp_path, monkeypatch):
    clf = HopClassifier.load(hop_clf.save(tmp_path / "copy.npz"), embedder=hop_clf.embedder)
    calls = []
    original = clf.adapt

    def spy(questions, labels, **kw):
        calls.append((list(questions), list(labels)))
        return original(questions, labels, **kw)

    monkeypatch.setattr(clf, "adapt", spy)
    questions = [q for q, _ in SIMPLE_QS[:4] + COMPLEX_QS[:4]]
    sampled = random.Random(0).sample(questions, 2)  # fraction 0.25 of 8, seed 0

    llm = ScriptedLLM(lambda messages: THREE_HOP)
    r = FRAGRetriever(movie_index, classifier=clf, llm=llm)
    out = r.feedback(questions, fraction=0.25)
    assert out == {"sampled": 2, "labelled": 2, "complex": 2}
    assert calls == [([_unbracket(q) for q in sampled], [3, 3])]
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "extract the correct reasoning path" in prompt and _unbracket(sampled[0]) in prompt

    # labels are the hop counts of the copied paths
    calls.clear()
    r = FRAGRetriever(movie_index, classifier=clf, llm=ScriptedLLM(["Big -> directed_by -> Penny Marshall", THREE_HOP]))
    assert r.feedback(questions, fraction=0.25) == {"sampled": 2, "labelled": 2, "complex": 1}
    assert [labels for _, labels in calls] == [[1, 3]]

    # no usable path: nothing to adapt on
    calls.clear()
    r = FRAGRetriever(movie_index, classifier=clf, llm=ScriptedLLM(lambda messages: "NO"))
    assert r.feedback(questions, fraction=0.25) == {"sampled": 2, "labelled": 0, "complex": 0}
    assert calls == []
    with pytest.raises(ValueError, match="feedback needs"):
        FRAGRetriever(movie_index, classifier=clf).feedback(questions)


# --------------------------------------------------------------------------- 12. corpus graphs


def test_corpus_graph_returns_passages_linked_to_path_entities_first(sample_mentions_index):
    idx = sample_mentions_index
    r = FRAGRetriever(idx)
    q = "On which river does the city where Marie Curie was born stand?"
    for k in (3, 1):
        ev = r.retrieve(q, k=k)
        assert ev.facts and all(f.kind == "path" for f in ev.facts)
        assert 1 <= len(ev.passages) <= k, f"k={k}: {len(ev.passages)} passages"
        n = ev.trace["passages_from_paths"]
        assert 1 <= n <= len(ev.passages)
        linked = {pid for f in ev.facts for e in f.data["nodes"] for pid in idx.graph.passages_of(e)}
        assert all(pid in linked for pid in ev.passage_ids[:n])
        scores = [sp.score for sp in ev.passages]
        assert scores == sorted(scores, reverse=True)
        assert len(set(ev.passage_ids)) == len(ev.passage_ids)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_the_hop_estimate_parser_reads_no_or_a_path_of_one_to_four_hops(reply):
    """FRAG-F's reply: ``NO`` is 0, a first line with 1..4 hops is its count, anything else is
    invalid (asked once more by complete_validated); never another number."""
    from kgrag_plugins.methods.frag.prompts import parse_hop_estimate
    from kgrag_plugins.models.replies import InvalidReply

    try:
        hops = parse_hop_estimate(reply)
    except InvalidReply:
        return
    assert hops in (0, 1, 2, 3, 4)
    assert parse_hop_estimate("NO, none of them") == 0
    assert parse_hop_estimate("Big -> directed_by -> Penny Marshall\nmore") == 1
    with pytest.raises(InvalidReply):
        parse_hop_estimate("a -> r -> b -> r -> c -> r -> d -> r -> e -> r -> f")
