"""Every declared step schema describes what the step's parser accepts: replies generated from the
schema's regex (hypothesis) pass the step's validator, and a schema-enforcing LLM receives it."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kgrag_plugins.agents import self_rag_prompts as SR
from kgrag_plugins.agents.decompose import parse_decomposition
from kgrag_plugins.agents.prompts import DECOMPOSE_SCHEMA, SELF_ASK_FINAL_SCHEMA, SELF_ASK_SCHEMA
from kgrag_plugins.agents.self_ask import parse_self_ask
from kgrag_plugins.methods.frag.hop_classifier import count_hops
from kgrag_plugins.methods.frag.prompts import NO_PATH, hop_schema
from kgrag_plugins.methods.kg_infused import prompts as KP
from kgrag_plugins.methods.kg_infused.parsing import SEP, parse_triples
from kgrag_plugins.methods.kg_infused.retriever import MAX_QUERY_CHARS, _text_validator
from kgrag_plugins.methods.know3 import prompts as K3
from kgrag_plugins.methods.sa_rag.cot import parse_reasoning
from kgrag_plugins.methods.sa_rag.prompts import ANSWER_SCHEMA, REASONING_SCHEMA
from kgrag_plugins.methods.translator.prompts import NEXT_QUERY_SCHEMA, parse_next_query
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.models.replies import (
    _STOPWORDS,
    InvalidReply,
    check_text,
    complete_validated,
    content_words,
    first_line,
)
from kgrag_plugins.models.structured import (
    OutputSchema,
    literal_regex,
    mentions_regex,
    one_of_regex,
    paragraph_regex,
    phrase_regex,
    prose_regex,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _sa_answer(reply: str) -> str:
    from kgrag_plugins.agents.common import _json_answer

    return _json_answer(reply)


def _accepts(validate, reply: str) -> None:
    """``validate(reply)`` passes; a refusal-looking text (which no schema can exclude) is skipped."""
    try:
        validate(reply)
    except InvalidReply as exc:
        assume("refusal" not in str(exc))
        raise


#: (schema, validator) of every schema that does not depend on the call's data.
STATIC = {
    "sa_rag_reasoning": (REASONING_SCHEMA, parse_reasoning),
    "sa_rag_answer": (ANSWER_SCHEMA, _sa_answer),
    "self_ask_step": (SELF_ASK_SCHEMA, lambda r: parse_self_ask(r, question="Q0 unasked", previous=[])),
    "self_ask_final": (SELF_ASK_FINAL_SCHEMA, lambda r: parse_self_ask(r, final_only=True)),
    "decomposition": (DECOMPOSE_SCHEMA, parse_decomposition),
    "know3_answer": (K3.ANSWER_SCHEMA, K3.parse_answer),
    "know3_relevance": (K3.RELEVANCE_SCHEMA, K3.parse_relevance),
    "know3_triples": (K3.EXTRACTION_SCHEMA, K3.parse_triples),
    "translator_next_query": (NEXT_QUERY_SCHEMA, parse_next_query),
    "kg_infused_query": (
        KP.QUERY_EXPANSION_SCHEMA,
        _text_validator(KP.QUERY_EXPANSION, single_line=True, max_chars=MAX_QUERY_CHARS),
    ),
    **{s.name: (s, lambda r, labels=labels: SR.parse_label(r, labels)) for s, labels in (
        (SR.LABEL_SCHEMAS["retrieve?"], SR.RETRIEVE_LABELS),
        (SR.LABEL_SCHEMAS["relevant?"], SR.RELEVANCE_LABELS),
        (SR.LABEL_SCHEMAS["supported?"], SR.SUPPORT_LABELS),
        (SR.LABEL_SCHEMAS["useful?"], SR.UTILITY_LABELS),
    )},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(STATIC))
def test_schema_conforming_replies_pass_the_validator(name: str) -> None:
    schema, validate = STATIC[name]
    rx = schema.to_regex()

    @FAST
    @given(st.from_regex(re.compile(rx, re.S), fullmatch=True))
    def check(reply: str) -> None:
        assert schema.matches(reply) or schema.kind == "json"
        _accepts(validate, reply)

    check()
    assert schema.max_tokens is not None and schema.max_tokens <= 256


def test_hand_made_conforming_json_replies() -> None:
    r = parse_reasoning(
        '{"provided_context": "Curie was born in Warsaw.", "answer_possible": true, '
        '"final_answer": "Vistula", "additional_question": ""}'
    )
    assert r["answer_possible"] is True and r["final_answer"] == "Vistula"
    assert _sa_answer('{"reasoning": "Warsaw is on the Vistula.", "final_answer": "Vistula"}') == "Vistula"
    subs = parse_decomposition(
        '{"original_question": "Q?", "subquestions": [{"id": 1, "question": "Where was Curie born?"}]}'
    )
    assert subs == ["Where was Curie born?"]


_FIELD = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20).filter(
    lambda s: s.strip() and "\n" not in s
)


@FAST
@given(st.lists(st.tuples(_FIELD, _FIELD, _FIELD), min_size=1, max_size=6, unique=True), st.data())
def test_kg_infused_selection_schema_replies_pick_candidates(triples, data) -> None:
    """What the retriever builds (candidates raw and as shown) parses back to >= 1 candidate."""
    cmap: dict[str, int] = {}
    lines = []
    for i, f in enumerate(triples):
        cmap.setdefault(SEP.join(f), i)
        line = KP.format_triple(*f)
        cmap.setdefault(line[1:-1], i)
        lines.append(line)
    schema = KP.selection_schema(lines)
    picked = data.draw(st.lists(st.sampled_from(lines), min_size=1, max_size=4))
    reply = data.draw(st.sampled_from(["\n".join(picked), KP.NONE_SELECTED]))
    assert re.fullmatch(schema.to_regex(), reply)
    got = parse_triples(reply, cmap)
    assert got or reply == KP.NONE_SELECTED
    assert schema.max_tokens == KP.MAX_TOKENS["triple_selection"]


def test_frag_hop_schema_choices_pass_the_validator() -> None:
    paths = ["Curie -> born in -> Warsaw", "a -> r -> b -> s -> c", "x", "a -> r -> b\n-> s -> c", "<a> -> r -> b"]
    schema = hop_schema(paths)
    assert schema.choice[-1] == NO_PATH and "x" not in schema.choice
    for c in schema.choice:
        line = first_line(c)
        assert c == NO_PATH or 1 <= count_hops(line) <= 4


def test_literal_and_phrase_regexes() -> None:
    for text in ["a.b*c", "x | y (z) [w] {v} ^$ #&-~", "ü ‹t›"]:
        assert re.fullmatch(literal_regex(text), text)
    assert re.fullmatch(one_of_regex(["a|b", "c"], repeat=True), "a|b\nc\na|b")
    assert re.fullmatch(phrase_regex(5), "Ab c.") and not re.fullmatch(phrase_regex(5), "Ab cde")
    assert check_text("Zürich (city)", single_line=True)


def test_prose_regex_allows_notes_and_refuses_markup() -> None:
    """The note / summary / rewrite schema: SmolLM2-135M's ``<pre><code>`` loops cannot match."""
    rx = prose_regex()
    note = 'Marie Curie was born in Warsaw (1867).\nShe said: "radium!" – twice; 100% sure.'
    assert re.fullmatch(rx, note)
    for bad in ["<pre><code>", "The original passage is:\n<pre><code>", '{"note": "x"}', "`x`", "\nText", ""]:
        assert not re.fullmatch(rx, bad), bad


def test_kg_infused_prose_steps_pass_their_schemas(sample_mentions_index) -> None:
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever

    llm = SchemaLLM(["Curie was born in Warsaw.", "Curie, born in Warsaw, studied in Paris."])
    kgi = KGInfusedRetriever(sample_mentions_index, llm=llm, rounds=1)
    assert kgi.write_note("Where was Curie born?", []) == "Curie was born in Warsaw."
    assert kgi.augment("Where was Curie born?", "Curie was born in Warsaw.", "Curie studied in Paris.")
    assert llm.schemas == [KP.note_schema("Where was Curie born?"), KP.PROSE_SCHEMAS["augment"]]
    assert llm.budgets == [KP.MAX_TOKENS["write_note"], KP.MAX_TOKENS["augment"]]
    for step, schema in KP.PROSE_SCHEMAS.items():
        assert schema.regex == (paragraph_regex() if step == "write_note" else prose_regex())
        assert schema.max_tokens == KP.MAX_TOKENS[step]


def test_paragraph_regex_is_one_line_of_prose() -> None:
    """The note schema: one paragraph; SmolLM2-135M's heading loops (``Title:\\n\\nTitle:``) cannot match."""
    rx = paragraph_regex()
    assert re.fullmatch(rx, 'Marie Curie was born in Warsaw (1867); she said: "radium!" – twice.')
    for bad in ["Title:\n\nTitle:", "The note is:\nThe note is:", "<p>", "Curie <b>x</b>", '{"note": "x"}', ""]:
        assert not re.fullmatch(rx, bad), bad
    assert re.fullmatch(prose_regex(), "Title:\n\nTitle:")  # what the multi-line prose schema let through


_STEMS = st.lists(st.from_regex(r"[a-zà-öø-ÿ0-9]{3,6}", fullmatch=True), min_size=1, max_size=6)


@FAST
@given(_STEMS, st.sampled_from([None, 0, 4]), st.sampled_from([None, 4]), st.data())
def test_mentions_regex_replies_share_a_content_word(stems, within, symbols, data) -> None:
    """Every reply the note schema allows names one of the stems, as ``check_text`` counts them."""
    stems = [s for s in stems if s not in _STOPWORDS]
    assume(stems)
    rx = mentions_regex(stems, within_words=within, max_symbols=symbols)
    reply = data.draw(st.from_regex(rx, fullmatch=True))
    assert re.fullmatch(paragraph_regex(), reply)
    assert content_words(reply) & set(stems), (stems, reply)


def test_note_schema_refuses_preambles_and_takes_mentions() -> None:
    """SmolLM2-135M's MuSiQue notes that fell back (pure preamble) cannot match; notes naming the
    question's subject, in any case or inflection, can."""
    q = "Who is the spouse of the Green performer?"
    rx = KP.note_schema(q).to_regex()
    assert KP.note_schema(q).max_tokens == KP.MAX_TOKENS["write_note"]
    for bad in [
        "The note contains all the original text information useful for answering the question:",
        "The document contains information about the location of the location of",
        "Greenland is large.",  # "green" is a whole-word stem: "Greenland" is another word
        "The note is:\nThe Green performer",
        # the question named only after 11 words (NOTE_MENTION_WITHIN = 10)
        "According to the five passages given above and the notes below, the spouse",
        "The note: ““““““ Green",  # at most 3 non-word characters between opening words
        "The Green performer: “Brand (play)”””””””",  # at most 4 after the mention
    ]:
        assert not re.fullmatch(rx, bad), bad
    for good in [
        "GREEN is the performer's name; his spouse was Ann.",
        "The spouses of the singer: none known.",
        "Green.",
        "Performers' spouses are listed.",
        "The Green performer (1998), “Ann”.",
        "The document contains information about the Green performer.",  # an ordinary opening
    ]:
        assert re.fullmatch(rx, good), good
        assert check_text(good, context=q)
    assert KP.note_schema("Who is it?") == KP.PROSE_SCHEMAS["write_note"]  # no content word
    assert mentions_regex(["東京都"]) is None  # no constrained reply can hold it


# --------------------------------------------------------------------------- schemas reach the LLM


class SchemaLLM(ScriptedLLM):
    """A scripted LLM that enforces schemas: records each call's ``schema`` and ``max_tokens``."""

    supports_schema = True

    def __init__(self, replies) -> None:
        super().__init__(replies)
        self.schemas: list[OutputSchema | None] = []
        self.budgets: list[int | None] = []

    def complete(self, prompt, *, schema=None, **kwargs):
        self.schemas.append(schema)
        self.budgets.append(kwargs.get("max_tokens"))
        return super().complete(prompt, **kwargs)


def test_complete_validated_passes_the_schema_and_its_budget() -> None:
    llm = SchemaLLM(["Yes"])
    schema = SR.LABEL_SCHEMAS["retrieve?"]
    assert complete_validated(llm, "q", lambda r: r, step="retrieve?", schema=schema) == "Yes"
    assert llm.schemas == [schema] and llm.budgets == [SR.LABEL_MAX_TOKENS]


def test_steps_pass_their_schemas() -> None:
    from kgrag_plugins.agents.common import json_answer
    from kgrag_plugins.methods.sa_rag.cot import SARAGCoT
    from kgrag_plugins.methods.translator.decompose import next_query

    llm = SchemaLLM(
        [
            '{"reasoning": "r", "final_answer": "Vistula"}',
            '{"provided_context": "c", "answer_possible": true, "final_answer": "V", "additional_question": ""}',
            "So the next search query is: None",
        ]
    )
    assert json_answer(llm, "Q?", "ctx", []) == "Vistula"
    assert SARAGCoT(None, llm).reason("Q?", "ctx")["final_answer"] == "V"  # type: ignore[arg-type]
    assert next_query(llm, "Q?", ["p"], []) == ("stop", None)
    assert llm.schemas == [ANSWER_SCHEMA, REASONING_SCHEMA, NEXT_QUERY_SCHEMA]
    assert all(b is not None and b <= 256 for b in llm.budgets)


def test_self_rag_label_passes_its_choice_schema() -> None:
    from kgrag_plugins.agents.self_rag import SelfRAG

    class NoLogprobs(SchemaLLM):
        complete_logprobs = None  # type: ignore[assignment]

    llm = NoLogprobs(["Relevant"])
    core = SelfRAG(llm, mode="prompted")
    got = core._label("prompt", SR.RELEVANCE_LABELS, "relevant?", [])
    assert got == ({"[Relevant]": 1.0}, "label")
    assert llm.schemas == [SR.LABEL_SCHEMAS["relevant?"]] and llm.budgets == [SR.LABEL_MAX_TOKENS]


def test_frag_hop_estimation_passes_its_choice_schema() -> None:
    from types import SimpleNamespace

    from kgrag_plugins.methods.frag.retriever import FRAGRetriever

    llm = SchemaLLM(["Curie -> born in -> Warsaw"])
    hops = FRAGRetriever.estimate_hops(SimpleNamespace(llm=llm, prompts={}), "Q?", ["Curie -> born in -> Warsaw"])  # type: ignore[arg-type]
    assert hops == 1 and llm.schemas[0].choice == ("Curie -> born in -> Warsaw", NO_PATH)
