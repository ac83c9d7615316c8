"""Know³ prompts and reply parsers (App. D, docs/methods.md §5(c)) and the θ_t schedules (§5(b), §8.1)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.methods.know3 import prompts as P
from kgrag_plugins.methods.know3.threshold import PAPER_THETA0, ThresholdSchedule
from kgrag_plugins.models.prompting import DATA_NOTICE
from kgrag_plugins.models.replies import InvalidReply

# --------------------------------------------------------------------------- triple parser


def test_parser_reads_a_leading_json_list_and_expands_lists() -> None:
    reply = (
        'Here you go: [{"subject": "Albert Einstein", "predicate": "was born in", "object": ["Ulm", "Germany"]},'
        ' {"subject": "He", "predicate": "won", "object": "Nobel Prize"},'
        ' {"subject": "Einstein", "predicate": "worked at"}] trailing words'
    )
    assert P.parse_triples(reply) == [
        ("Albert Einstein", "was born in", "Ulm"),
        ("Albert Einstein", "was born in", "Germany"),
    ]


def test_parser_falls_back_to_every_object_and_drops_generic_terms() -> None:
    reply = (
        '1. {"subject": "Marie Curie", "predicate": "born in", "object": "Warsaw"}\n'
        '2. {"subject": "the organization", "predicate": "has", "object": "Marie Curie"}\n'
        '3. {"subject": "Pierre Curie", "predicate": "married", "object": "Marie Curie",}\n'  # invalid JSON
        "[not json at all"
    )
    assert P.parse_triples(reply) == [("Marie Curie", "born in", "Warsaw")]


@pytest.mark.parametrize("reply", ["None", " none. ", "[None]", "None\n", "", None, "There are no triples: None"])
def test_none_means_no_triples(reply) -> None:
    assert P.parse_triples(reply) == []


@pytest.mark.parametrize("reply", ["Albert Einstein was born in Ulm.", "subject: A, predicate: b, object: C"])
def test_text_without_json_or_none_is_invalid(reply: str) -> None:
    with pytest.raises(InvalidReply):
        P.parse_triples(reply)


_field = st.one_of(
    st.text(max_size=12),
    st.lists(st.text(max_size=8), max_size=3),
    st.sampled_from(["he", "She", "the organization", "It", "Ulm", "Albert Einstein"]),
    st.integers(),
    st.none(),
)
_item = st.dictionaries(st.sampled_from(["subject", "predicate", "object", "extra"]), _field, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.one_of(_item, st.integers(), st.text(max_size=5)), max_size=6),
    noise=st.text(max_size=30),
    mode=st.integers(0, 3),
)
def test_parser_on_malformed_replies(items, noise: str, mode: int) -> None:
    """Whatever the reply, the parser returns complete, non-generic string triples or raises
    InvalidReply; a well-formed list of complete items is always read."""
    body = json.dumps(items)
    reply = [body, noise + body + noise, body[: len(body) // 2], noise][mode]
    try:
        out = P.parse_triples(reply)
    except InvalidReply:
        return
    for s, p, o in out:
        assert s and p and o and all(isinstance(x, str) for x in (s, p, o))
        assert s.lower() not in P.GENERIC_TERMS and o.lower() not in P.GENERIC_TERMS
    assert len(out) == len(set(out))
    if mode == 0:
        complete = [
            it
            for it in items
            if isinstance(it, dict)
            and all(isinstance(it.get(k), str) and " ".join(it[k].split()) for k in ("subject", "predicate", "object"))
            and all(" ".join(it[k].lower().split()) not in P.GENERIC_TERMS for k in ("subject", "object"))
        ]
        assert len(out) >= (1 if complete else 0)


# --------------------------------------------------------------------------- other parsers


def test_answer_is_the_text_after_the_last_marker() -> None:
    reply = "The answer is maybe Paris. Checking again: the capital is Lyon.\nThe answer is [Lyon]."
    assert P.parse_answer(reply) == "Lyon"
    with pytest.raises(InvalidReply):
        P.parse_answer("Lyon, I think.")
    with pytest.raises(InvalidReply):
        P.parse_answer("The answer is ")


def test_relevance_verdict() -> None:
    assert P.parse_relevance("It discusses the CEO. The reliability of the passage is yes.") is True
    assert P.parse_relevance("Unrelated fruit. The reliability of the passage is no.") is False
    with pytest.raises(InvalidReply):
        P.parse_relevance("Looks fine to me.")
    with pytest.raises(InvalidReply):
        P.parse_relevance("The reliability of the passage is unclear.")


def test_query_and_reference_replies() -> None:
    assert P.parse_query("New question: Who taught Bernhard Heiden?\nextra") == "Who taught Bernhard Heiden?"
    assert (
        P.parse_reference("[Bernhard Heiden studied with Paul Hindemith.]")
        == "Bernhard Heiden studied with Paul Hindemith."
    )
    with pytest.raises(InvalidReply):
        P.parse_query("I'm sorry, I cannot help.")


def test_prompts_carry_the_paper_wording_and_the_data_notice() -> None:
    qa = P.qa_prompt("Who taught Heiden?", [])
    assert qa.count("The answer is") >= 4 and "No reference available." in qa and DATA_NOTICE in qa
    msgs = P.extraction_messages("Ulm is in Germany.", ["Ulm", "Germany"])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"].startswith('[{"subject": "Albert Einstein"') and msgs[4]["content"] == "None"
    rel = P.relevance_messages("q?", "a passage", [("Apple Inc.", "A company")])
    assert rel[-1]["content"].count("<passage>") == 1 and "Apple Inc.: A company" in rel[-1]["content"]
    assert "Please directly output the new question:" in P.query_prompt("q", ["r"], "a")


# --------------------------------------------------------------------------- θ_t


def test_threshold_schedules_against_hand_computed_values() -> None:
    ramp = ThresholdSchedule(2.0, kind="logistic-ramp-as-extracted")
    # θ_t = 2 * 128 / (1 + e^(1 - 2t))
    assert ramp.theta(0) == pytest.approx(256 / (1 + math.e))  # 68.85
    assert ramp.theta(1) == pytest.approx(256 / (1 + math.exp(-1)))  # 187.15
    assert ramp.theta(2) == pytest.approx(256 / (1 + math.exp(-3)))  # 243.86
    assert ramp.values() == pytest.approx([68.849, 187.1507, 243.8593], abs=1e-3)
    small = ThresholdSchedule.paper("popqa", "gpt-4o-mini")
    assert small.theta0 == 0.01 and small.theta(0) == pytest.approx(1.28 / (1 + math.e))
    const = ThresholdSchedule(0.7)
    assert [const.theta(t) for t in range(3)] == [0.7, 0.7, 0.7]
    assert PAPER_THETA0[("2wikimultihopqa", "qwen2.5-32b")] == 0.2


def test_threshold_decisions() -> None:
    s = ThresholdSchedule(1.0, max_turns=2)
    assert s.accept(0.5, 0) and not s.accept(1.0, 0) and not s.accept(None, 1)
    assert s.accept(None, 2) and s.accept(99.0, 2)  # forced at T
    with pytest.raises(ValueError):
        ThresholdSchedule(1.0, kind="sigmoid")
    with pytest.raises(ValueError):
        ThresholdSchedule.paper("musique", "glm4-9b")


class _Verifier:
    def __init__(self) -> None:
        self.asked: list[float] = []

    def calibrate(self, percentile: float = 90.0, sample: int = 2000, seed: int = 0) -> float:
        self.asked.append(percentile)
        return 0.25


def test_calibrated_theta0_comes_from_the_verifier() -> None:
    v = _Verifier()
    s = ThresholdSchedule.calibrated(v, percentile=80)
    assert v.asked == [80] and s.theta0 == 0.25 and s.source == "calibrated:p80" and s.theta(1) == 0.25
