"""Every LLM reply is validated against the shape its prompt asks for (issue 13 item 4): invalid ->
one retry -> the LLM-free path for that step, with a WARNING and a trace entry; nothing invalid is
passed on as a query or an answer."""

from __future__ import annotations

import logging

import pytest
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.answer import generate_answer
from kgrag_plugins.methods.frag.retriever import FRAGRetriever
from kgrag_plugins.methods.kg_infused import KGInfusedRetriever
from kgrag_plugins.methods.kg_infused import prompts as P
from kgrag_plugins.methods.sa_rag.cot import SARAGCoT
from kgrag_plugins.models.llm import LLMError, LLMUnavailableError, ScriptedLLM
from kgrag_plugins.models.replies import InvalidReply, check_text, complete_validated
from kgrag_plugins.types import Entity, Evidence, Fact, Passage, ScoredPassage

SYMBOLS = "x@@## ~~ ^^^ }{ ||| @@ ## ** <> [] ++ == q"
REFUSAL = "I'm sorry, but I can't help with that request."
Q = "Where was the director of Inception born?"


# --------------------------------------------------------------------------- the helper


def test_llm_helper_retries_once_then_records_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM([SYMBOLS, "", "never asked"])
    errors: list[dict] = []
    with caplog.at_level(logging.WARNING):
        out = complete_validated(llm, "q", lambda r: check_text(r), step="demo", errors=errors, context={"round": 2})
    assert out is None and len(llm.calls) == 2 and llm.remaining == 1
    (entry,) = errors
    assert entry["step"] == "demo" and entry["kind"] == "invalid_reply" and entry["attempts"] == 2
    assert entry["error"] == "invalid reply: empty reply" and entry["round"] == 2
    assert any("fell back to the LLM-free path" in r.getMessage() for r in caplog.records)
    # valid on the retry -> the value; an LLMError is not retried here (the client already did)
    assert complete_validated(ScriptedLLM([REFUSAL, "Paris"]), "q", check_text, step="s") == "Paris"
    llm = ScriptedLLM([LLMUnavailableError("open"), "late"])
    errors = []
    assert complete_validated(llm, "q", check_text, step="s", errors=errors) is None
    assert len(llm.calls) == 1 and errors[0]["kind"] == "llm_error" and errors[0]["type"] == "LLMUnavailableError"


def test_the_retry_after_an_invalid_greedy_reply_samples() -> None:
    """Greedy decoding would repeat the invalid reply: the retry samples at RETRY_TEMPERATURE; a
    caller's own sampling temperature is kept, and a retry after a valid reply never happens."""
    from kgrag_plugins.models.logprobs import complete_logprobs_validated
    from kgrag_plugins.models.replies import RETRY_TEMPERATURE

    assert 0 < RETRY_TEMPERATURE <= 1
    llm = ScriptedLLM([SYMBOLS, "Paris"])
    assert complete_validated(llm, "q", check_text, step="s", temperature=0.0) == "Paris"
    assert [c["temperature"] for c in llm.calls] == [0.0, RETRY_TEMPERATURE]
    llm = ScriptedLLM([SYMBOLS, "Paris"])
    assert complete_validated(llm, "q", check_text, step="s") == "Paris"  # unset = greedy
    assert [c["temperature"] for c in llm.calls] == [None, RETRY_TEMPERATURE]
    llm = ScriptedLLM([SYMBOLS, "Paris"])
    assert complete_validated(llm, "q", check_text, step="s", temperature=0.9) == "Paris"
    assert [c["temperature"] for c in llm.calls] == [0.9, 0.9]
    llm = ScriptedLLM([SYMBOLS, "Paris"])
    got = complete_logprobs_validated(llm, "q", lambda out: check_text(out.text), step="s", temperature=0)
    assert got == "Paris" and [c["temperature"] for c in llm.calls] == [0, RETRY_TEMPERATURE]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("   \n ", "empty"),
        (SYMBOLS, "mostly symbols"),
        ("!!! ??? ...", "no words"),
        (REFUSAL, "refusal"),
        ("As an AI language model, I cannot browse.", "refusal"),
        ("x" * 501, "more than 500"),
        ("Only give me the new short query and do not output any other words.", "echoes the instructions"),
    ],
)
def test_llm_check_text_rejects(reply: str, why: str) -> None:
    with pytest.raises(InvalidReply, match=why):
        check_text(reply, max_chars=500, instructions=P.QUERY_EXPANSION)


def test_llm_check_text_accepts_answers() -> None:
    assert check_text("  Christopher Nolan\nmore", single_line=True) == "Christopher Nolan"
    assert (
        check_text("1879") == "1879" and check_text("São Paulo, Brazil (1990–2001)") == "São Paulo, Brazil (1990–2001)"
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.booleans())
def test_llm_check_text_total(text: str, single: bool) -> None:
    """Any text: either a non-empty accepted string within the limit, or InvalidReply."""
    try:
        out = check_text(text, max_chars=120, single_line=single, instructions=P.QUERY_EXPANSION)
    except InvalidReply:
        return
    assert out and out == out.strip() and len(out) <= 120 and any(c.isalnum() for c in out)
    if single:
        assert "\n" not in out


# --------------------------------------------------------------------------- generate_answer


def _evidence(answers: list[str] | None = None) -> Evidence:
    p = Passage("p1", "Christopher Nolan was born in London.", "Christopher Nolan")
    trace = {"answers": answers} if answers else {}
    return Evidence(Q, [ScoredPassage(p, 1.0)], [], trace)


def test_llm_generate_answer_garbage_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM([SYMBOLS, REFUSAL])
    with caplog.at_level(logging.WARNING):
        ans = generate_answer(llm, Q, _evidence(["London"]))
    assert len(llm.calls) == 2
    assert ans.text == "London" and ans.metadata["fallback"] is True  # the LLM-free answer, not garbage
    assert ans.metadata["llm_error"][0]["kind"] == "invalid_reply"
    assert caplog.records and caplog.records[-1].levelno == logging.WARNING
    # no LLM-free answer in the evidence: empty, never the garbage
    assert generate_answer(ScriptedLLM([SYMBOLS, SYMBOLS]), Q, _evidence()).text == ""
    # a dead endpoint: one call, the fallback
    ans = generate_answer(ScriptedLLM([LLMError("connection refused")]), Q, _evidence(["London"]))
    assert ans.text == "London" and "connection refused" in ans.metadata["llm_error"][0]["error"]
    # invalid then valid: the retry's answer
    assert generate_answer(ScriptedLLM(["", "Answer: London"]), Q, _evidence()).text == "London"


# --------------------------------------------------------------------------- KG-Infused


@pytest.fixture(scope="module")
def kgi_index(tmp_path_factory) -> KnowledgeIndex:
    g = KnowledgeGraph()
    for eid in ("Inception", "Christopher Nolan", "London", "2010", "Emma Thomas"):
        g.add_entity(Entity(eid, eid))
    g.add_triple("Inception", "directed_by", "Christopher Nolan")
    g.add_triple("Inception", "release_year", "2010")
    g.add_triple("Christopher Nolan", "born_in", "London")
    g.add_triple("Christopher Nolan", "spouse", "Emma Thomas")
    passages = [
        Passage("c1", "Inception is a 2010 film directed by Christopher Nolan.", "Inception"),
        Passage("c2", "Christopher Nolan was born in Westminster, London.", "Christopher Nolan"),
        Passage("c3", "London is the capital of England.", "London"),
    ]
    d = tmp_path_factory.mktemp("kgi")
    return KnowledgeIndex.build(
        passages, d / "idx", graph=g, embedder=HashEmbedder(), entity_vectors=True, progress=False
    )


def _kind(prompt: str) -> str:
    for key, marker in (
        ("update", "Previously Selected Triples"),
        ("select", "Retrieved Entity Triples"),
        ("summary", "write a summary"),
        ("qe", "New Query:"),
        ("answer", "Answer:"),
    ):
        if marker in prompt:
            return key
    raise AssertionError(prompt[:200])


def _script(**replies):
    seen: list[str] = []

    def fn(messages):
        k = _kind(messages[-1]["content"])
        seen.append(k)
        r = replies[k]
        r = r.pop(0) if isinstance(r, list) else r
        if isinstance(r, Exception):
            raise r
        return r

    return fn, seen


def test_llm_kg_infused_garbage_query_and_selection_fall_back(kgi_index: KnowledgeIndex) -> None:
    fn, seen = _script(
        select=["I think the answer is London.", "Sure! Here you go: <Titanic | directed_by | James Cameron>"],
        summary="Inception was directed by Christopher Nolan.",
        qe=[SYMBOLS, "Only give me the new short query and do not output any other words."],  # echo
    )
    r = KGInfusedRetriever(kgi_index, llm=ScriptedLLM(fn), k_entities=1, rounds=1)
    ev = r.retrieve("Inception", 3)
    assert seen == ["select", "select", "summary", "qe", "qe"]  # each invalid reply asked once more
    rt0 = ev.trace["activation_rounds"][0]
    assert rt0["extra"]["mode"].startswith("embedding") and rt0["selected"]  # LLM-free selection
    errs = {e["step"]: e for e in ev.trace["llm_error"]}
    assert errs["triple_selection"]["kind"] == "invalid_reply" and errs["triple_selection"]["round"] == 0
    assert errs["query_expansion"]["kind"] == "invalid_reply" and "echoes" in errs["query_expansion"]["error"]
    # q' is the LLM-free expansion, not the garbage
    assert ev.trace["expanded_query"].startswith("Inception ") and "@@" not in ev.trace["expanded_query"]
    assert "Only give me" not in ev.trace["expanded_query"]


def test_llm_kg_infused_garbage_answer_is_not_passed_on(kgi_index: KnowledgeIndex) -> None:
    r = KGInfusedRetriever(kgi_index, llm=ScriptedLLM([REFUSAL, SYMBOLS]), k_entities=1)
    ev = Evidence(Q, [ScoredPassage(Passage("c2", "Nolan was born in London.", "Nolan"), 1.0)], [], {})
    ans = r.answer(Q, ev)
    assert ans.text == "" and ans.metadata["llm_error"][0]["step"] == "answer"
    with pytest.raises(LLMError, match="write_note: invalid reply"):
        KGInfusedRetriever(kgi_index, llm=ScriptedLLM([SYMBOLS, ""]), k_entities=1).write_note(Q, ev.passages)


# --------------------------------------------------------------------------- SA-RAG + CoT


def test_llm_sa_rag_refusal_answer_is_not_passed_on() -> None:
    refusal = '{"reasoning": "", "final_answer": "I cannot answer that from the context."}'
    cot = SARAGCoT(object(), ScriptedLLM([refusal, refusal, refusal]))  # type: ignore[arg-type]
    result = cot._answer(Q, "ctx")
    assert result["answer"] == "" and not result["parsed"] and "refusal" in result["error"]
    with pytest.raises(LLMError, match="answering call failed"):
        SARAGCoT(object(), ScriptedLLM([refusal] * 3)).final_answer(Q, "ctx")  # type: ignore[arg-type]
    # reasoning: an invalid reply is asked once more before the step is skipped
    ok = '{"provided_context": "c", "answer_possible": true, "final_answer": "London", "additional_question": ""}'
    llm = ScriptedLLM(["no JSON here", ok])
    parsed, error = SARAGCoT(object(), llm).reason_with_error(Q, "ctx")  # type: ignore[arg-type]
    assert error is None and parsed["answer_possible"] is True and len(llm.calls) == 2


# --------------------------------------------------------------------------- FRAG


def _frag(llm) -> FRAGRetriever:
    r = FRAGRetriever.__new__(FRAGRetriever)  # answer / estimate_hops use only the LLM and prompts
    r.llm, r.prompts = llm, {}
    return r


def test_llm_frag_answer_and_hops_validated() -> None:
    path = Fact("Inception -> directed_by -> Christopher Nolan -> born_in -> London", 1.0, "path")
    ev = Evidence(Q, [], [path], {"answers": ["London"], "route": "complex"})
    llm = ScriptedLLM([SYMBOLS, REFUSAL])
    ans = _frag(llm).answer(Q, evidence=ev)
    assert ans.text == "London" and "refusal" in ans.metadata["llm_error"] and len(llm.calls) == 2
    assert _frag(ScriptedLLM(["", "Westminster"])).answer(Q, evidence=ev).text == "Westminster"
    # hop estimation: NO is a valid "no path"; garbage is asked once more, then None
    llm = ScriptedLLM(["NO"])
    assert _frag(llm).estimate_hops(Q, [path.text]) is None and len(llm.calls) == 1
    llm = ScriptedLLM(["maybe the first one", "London"])
    assert _frag(llm).estimate_hops(Q, [path.text]) is None and len(llm.calls) == 2
    llm = ScriptedLLM(["garbage", path.text])
    assert _frag(llm).estimate_hops(Q, [path.text]) == 2 and len(llm.calls) == 2


def test_kg_infused_note_steps_tell_invalid_replies_from_outages(kgi_index: KnowledgeIndex) -> None:
    """write_note / augment raise RepliesStayedInvalid (an LLMError, kind invalid_reply) when the
    replies stay invalid, and a plain LLMError (kind llm_error) when the call fails: the QA harness
    reruns a question only for the second (an outage), never for the first."""
    from kgrag_plugins.eval.qa_meter import QuestionMeter
    from kgrag_plugins.eval.qa_run import _llm_down
    from kgrag_plugins.models.llm import LLMTimeoutError
    from kgrag_plugins.models.replies import RepliesStayedInvalid, error_kind

    r = KGInfusedRetriever(kgi_index, llm=ScriptedLLM([SYMBOLS, "<pre><code>\n<pre><code>"]), k_entities=1)
    with pytest.raises(RepliesStayedInvalid, match="augment: invalid reply") as bad:
        r.augment("Who directed Inception?", "Inception is a film.", "Inception was directed by Christopher Nolan.")
    assert isinstance(bad.value, LLMError) and error_kind(bad.value) == "invalid_reply"
    assert not _llm_down([{"step": "kg.augment", "kind": error_kind(bad.value)}], QuestionMeter())

    r = KGInfusedRetriever(kgi_index, llm=ScriptedLLM([LLMTimeoutError("no reply in 30 s")]), k_entities=1)
    with pytest.raises(LLMError) as down:
        r.write_note("Who directed Inception?", [])
    assert not isinstance(down.value, RepliesStayedInvalid) and error_kind(down.value) == "llm_error"
    assert _llm_down([{"step": "kg.write_note", "kind": error_kind(down.value)}], QuestionMeter())


# --------------------------------------------------------------------------- free text: prose, on topic


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ('{"query": "Inception director"}', "JSON where prose was asked"),
        ('[{"note": "x"}]', "JSON where prose was asked"),
        ('{"query": "Inception', "JSON-like where prose was asked"),
        ("```python\nprint(1)\n```", "a code block where prose was asked"),
        ("<pre><code>\nInception\n", "markup where prose was asked"),
        ("def answer():\n    return 'Nolan'", "code where prose was asked"),
        ("xq zzv plorbit gnarf", "shares no content word"),
        ("The weather in Paris is sunny today.", "shares no content word"),
    ],
)
def test_free_text_must_be_prose_and_on_topic(reply: str, why: str) -> None:
    with pytest.raises(InvalidReply, match=why):
        check_text(reply, prose=True, context="Who directed Inception?\nInception was directed by Christopher Nolan.")


def test_free_text_on_topic_prose_passes() -> None:
    ctx = "Who founded the Jagiellonian University?\nIt was founded in 1364 by King Casimir III the Great."
    assert check_text("Casimir the Great founded it.", prose=True, context=ctx) == "Casimir the Great founded it."
    assert check_text("The founder: King Casimir III (1364).", prose=True, context=ctx)
    assert check_text("Founders of Kraków's university", prose=True, context=ctx)  # 6-character stems meet
    assert check_text('{"a": 1}') == '{"a": 1}'  # without prose=True the old checks only


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_free_text_validation_is_total(text: str) -> None:
    try:
        out = check_text(text, prose=True, context="Inception Nolan director")
    except InvalidReply:
        return
    assert out and out == out.strip()


def test_kg_infused_random_or_json_expansion_falls_back(kgi_index: KnowledgeIndex, caplog) -> None:
    """A random string, then a JSON blob as the "expanded query": the LLM-free expansion is used,
    with a WARNING and a trace entry naming why."""
    fn, seen = _script(
        select="None",
        summary="Inception was directed by Christopher Nolan.",
        qe=["xq zzv plorbit gnarf", '{"new_query": "Inception director"}'],
    )
    r = KGInfusedRetriever(kgi_index, llm=ScriptedLLM(fn), k_entities=1, rounds=1)
    with caplog.at_level(logging.WARNING):
        ev = r.retrieve("Inception", 3)
    assert seen.count("qe") == 2
    errs = [e for e in ev.trace["llm_error"] if e["step"] == "query_expansion"]
    assert errs and errs[0]["kind"] == "invalid_reply" and "JSON" in errs[0]["error"]
    assert "plorbit" not in ev.trace["expanded_query"] and "{" not in ev.trace["expanded_query"]
    assert ev.trace["expanded_query"].startswith("Inception")
    assert "query_expansion" in caplog.text


def test_kg_infused_off_topic_note_is_not_passed_on(kgi_index: KnowledgeIndex) -> None:
    ev = Evidence(Q, [ScoredPassage(Passage("c2", "Nolan was born in London.", "Nolan"), 1.0)], [], {})
    off_topic = "The weather in Madrid is sunny and warm today."
    with pytest.raises(LLMError, match="shares no content word"):
        KGInfusedRetriever(kgi_index, llm=ScriptedLLM([off_topic, off_topic]), k_entities=1).write_note(Q, ev.passages)
    note = KGInfusedRetriever(kgi_index, llm=ScriptedLLM(["Nolan was born in London."]), k_entities=1)
    assert note.write_note(Q, ev.passages) == "Nolan was born in London."
