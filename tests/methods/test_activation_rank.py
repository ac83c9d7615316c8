"""Ranking the activation top-k for a reader: ``second_hop`` (place 2 continues the chain)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.methods.activation import ActivationRetriever
from kgrag_plugins.methods.activation_rank import second_hop


@dataclass
class _P:
    id: str
    title: str
    text: str


class _Graph:
    """The one graph call ``second_hop`` makes: the entities a passage mentions."""

    def __init__(self, mentions: dict[str, list[str]]) -> None:
        self.mentions = mentions

    def entities_of(self, pid: str) -> list[str]:
        return list(self.mentions.get(pid, []))


def _run(passages, mentions, asked=(), sims=None, query="who is the spouse of the singer of green?"):
    top = list(range(len(passages)))
    return second_hop(
        top,
        graph=_Graph(mentions),
        passage_of=lambda i: passages[i],
        question_entities=list(asked),
        sims=None if sims is None else np.asarray(sims, dtype=float),
        query=query,
    )


def test_an_unrelated_second_place_gives_way_to_the_page_of_a_bridge_entity():
    ps = [
        _P("p0", "Green (song)", "Green is a song performed by Steve Hillage."),
        _P("p1", "Four (album)", "Four is an album."),
        _P("p2", "Hillage Band", "A band with Steve Hillage."),  # mentions the bridge entity
        _P("p3", "Steve Hillage", "Steve Hillage married Miquette Giraudy."),  # is the bridge entity's page
    ]
    mentions = {"p0": ["green song", "steve hillage"], "p2": ["steve hillage"], "p3": ["steve hillage"]}
    order, moved = _run(ps, mentions, asked=["green song"], sims=[0.9, 0.5, 0.45, 0.2])
    assert order == [0, 3, 1, 2]  # the page about the entity first, although its cosine is lower
    assert moved == {"id": "p3", "from": 4, "by": "page of a bridge entity", "via": ["steve hillage"]}
    # no page about it: the passage that mentions it moves up
    order, moved = _run(ps[:3], mentions, asked=["green song"], sims=[0.9, 0.5, 0.45])
    assert order == [0, 2, 1] and moved["by"] == "mentions a bridge entity"


def test_a_second_place_that_continues_the_chain_stays():
    base = [
        _P("p0", "Green (song)", "Green is a song performed by Steve Hillage."),
        None,
        _P("p2", "Steve Hillage", "Steve Hillage married Miquette Giraudy."),
    ]
    mentions = {"p0": ["green song", "steve hillage"], "p2": ["steve hillage"]}
    keep = {
        "named by the first passage": _P("p1", "Green", "Green is a colour."),
        "named by the question": _P("p1", "Singer", "A singer sings."),
        "a question entity's page": _P("p1", "Green (song)", "Another paragraph."),
        "mentions a bridge entity": _P("p1", "Gong (band)", "Gong, with Steve Hillage."),
    }
    mentions_of_p1 = {"mentions a bridge entity": ["steve hillage"]}
    for why, p1 in keep.items():
        ps = [base[0], p1, base[2]]
        m = dict(mentions, p1=mentions_of_p1.get(why, []))
        assert _run(ps, m, asked=["green song"], sims=[0.9, 0.1, 0.8]) == ([0, 1, 2], None), why


def test_question_entities_are_not_bridges_and_short_rankings_stay():
    ps = [
        _P("p0", "Green (song)", "Green is a song."),
        _P("p1", "Four (album)", "Four is an album."),
        _P("p2", "Green (disambiguation)", "Green may refer to several songs."),
    ]
    mentions = {"p0": ["green song"], "p2": ["green song"]}
    assert _run(ps, mentions, asked=["green song"]) == ([0, 1, 2], None)  # shares only the question's entity
    order, moved = _run(ps, mentions, asked=[])  # not asked: the same entity is a bridge
    assert order == [0, 2, 1] and moved["via"] == ["green song"]
    assert _run(ps[:2], mentions) == ([0, 1], None)


def test_without_cosines_the_earliest_candidate_moves():
    ps = [_P("p0", "A", "x"), _P("p1", "B", "y"), _P("p2", "C", "z"), _P("p3", "D", "w")]
    mentions = {"p0": ["e"], "p2": ["e"], "p3": ["e"]}
    assert _run(ps, mentions)[0] == [0, 2, 1, 3]
    assert _run(ps, mentions, sims=[0.9, 0.1, 0.2, 0.3])[0] == [0, 3, 1, 2]  # best cosine among equals


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 7).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.lists(st.sampled_from("abcdef"), max_size=3), min_size=n, max_size=n),
            st.lists(st.floats(-1, 1), min_size=n, max_size=n),
            st.lists(st.sampled_from("abcdef"), max_size=2),
        )
    )
)
def test_second_hop_only_reorders_and_keeps_the_first_place(case):
    n, ents, sims, asked = case
    ps = [_P(f"p{i}", f"Title {i}", f"text {i}") for i in range(n)]
    mentions = {f"p{i}": e for i, e in enumerate(ents)}
    order, moved = _run(ps, mentions, asked=asked, sims=sims)
    assert sorted(order) == list(range(n))
    if n:
        assert order[0] == 0
    if moved is None:
        assert order == list(range(n))
    else:  # one passage moved to place 2; the others keep their order, and it shares a bridge entity
        rest = [i for i in range(n) if i != order[1]]
        assert order == [0, order[1], *rest[1:]] and moved["from"] == order[1] + 1 >= 3
        bridge = set(ents[0]) - set(asked)
        assert set(ents[order[1]]) & bridge and not set(ents[1]) & bridge


def test_second_hop_in_the_retriever_reorders_the_same_passages(sample_mentions_index, sample_questions):
    idx = sample_mentions_index
    base, hop = ActivationRetriever(idx), ActivationRetriever(idx, second_hop=True)
    assert base.second_hop is False  # off by default
    moved = 0
    for q in sample_questions:
        ev, got = base.retrieve(q.question, 5), hop.retrieve(q.question, 5)
        assert sorted(got.passage_ids) == sorted(ev.passage_ids) and got.passage_ids[:1] == ev.passage_ids[:1]
        scores = [sp.score for sp in got.passages]
        assert scores == sorted(scores, reverse=True)  # a ranking's scores never increase
        if "second_hop" in got.trace:
            moved += 1
            m = got.trace["second_hop"]
            assert got.passage_ids[1] == m["id"] != ev.passage_ids[1]
            first_ents = set(idx.graph.entities_of(got.passage_ids[0]))
            assert set(m["via"]) <= first_ents
        else:
            assert got.passage_ids == ev.passage_ids
    assert moved >= 1
    with pytest.raises(TypeError):
        ActivationRetriever(idx, second_hops=True)  # a misspelt option is an error, not ignored
