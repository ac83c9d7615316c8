"""Fuzzing every parser of untrusted text (issue 13 item 8).

Property for each: arbitrary text/bytes in -> the documented result type, or a library error
(a ``ValueError`` subclass naming the problem) -- never IndexError/KeyError/TypeError/
UnicodeError/RecursionError. Example counts are modest so the file runs in well under a minute.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kgrag_plugins.datasets.loaders import CorpusFormatError, Question, load_corpus_jsonl, load_questions_jsonl
from kgrag_plugins.index.builders import llm_replies
from kgrag_plugins.index.builders.llm_replies import chunk_words
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.importers import KGFormatError, LoadReport, load_kg, load_wikidata5m
from kgrag_plugins.index.parsekg import ParseKG
from kgrag_plugins.methods.frag.hop_classifier import (
    count_hops,
    heuristic_route,
    normalize_question,
    question_stats,
    strip_topic_marks,
)
from kgrag_plugins.methods.kg_infused.parsing import ParsedTriple, parse_triples
from kgrag_plugins.methods.kg_infused.prompts import postprocess
from kgrag_plugins.methods.sa_rag.cot import parse_json_object
from kgrag_plugins.types import Passage

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Deeply nested / over-long inputs that trip the json module (RecursionError, int-digit limit).
NASTY = ["[" * 3000, '{"a":' * 3000, "[" + "9" * 5000 + "]", '{"x": ' + "1" * 5000 + "}", "\ud800", ""]

# Text biased towards the characters the parsers act on.
_SYNTAX = list('[]{}",:\\ \n\t`<>|()-*#.;') + ["```json\n", "```", "true", "None", "->", "<-", "</s>", "Note:"]
syntax_text = st.lists(st.sampled_from(_SYNTAX) | st.text(max_size=4), max_size=40).map("".join)
any_text = st.text(max_size=300) | syntax_text

json_scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
json_value = st.recursive(
    json_scalar,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- corpus / question JSONL


def _row_bytes(rows: list) -> bytes:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode("utf-8", "surrogatepass")


corpus_row = st.fixed_dictionaries(
    {},
    optional={"id": json_value, "text": json_value, "title": json_value, "metadata": json_value, "x": json_value},
)
question_row = st.fixed_dictionaries(
    {},
    optional={
        k: json_value
        for k in ("id", "question", "answers", "answer", "supporting_passage_ids", "hops", "type", "topic_entity")
    },
)


@FUZZ
@given(data=st.binary(max_size=400) | any_text.map(lambda s: s.encode("utf-8", "surrogatepass")))
@example(data=b"\xef\xbb\xbf" + b'{"id": "a", "text": "t"}')
@example(data=b'{"id": "a", "text": "caf\xe9"}')
def test_fuzz_corpus_and_question_bytes(workdir, data):
    path = _write(workdir / "rows.jsonl", data)
    for loader, kind in ((load_corpus_jsonl, Passage), (load_questions_jsonl, Question)):
        try:
            out = loader(path)
        except CorpusFormatError as e:
            assert str(e).startswith(f"{path}:") and "\n" not in str(e)
        else:
            assert all(isinstance(x, kind) for x in out)


@FUZZ
@given(rows=st.lists(corpus_row, max_size=4), qrows=st.lists(question_row, max_size=4))
def test_fuzz_corpus_and_question_rows(workdir, rows, qrows):
    path = _write(workdir / "corpus.jsonl", _row_bytes(rows))
    try:
        passages = load_corpus_jsonl(path)
    except CorpusFormatError as e:
        assert e.line is not None and f":{e.line}: " in str(e)
    else:
        assert all(isinstance(p.id, str) and isinstance(p.text, str) and isinstance(p.title, str) for p in passages)
    path = _write(workdir / "questions.jsonl", _row_bytes(qrows))
    try:
        questions = load_questions_jsonl(path)
    except CorpusFormatError as e:
        assert e.line is not None and f":{e.line}: " in str(e)
    else:
        for q in questions:
            assert isinstance(q.question, str) and all(isinstance(a, str) for a in q.answers)
            assert q.hops is None or isinstance(q.hops, int)
            assert q.topic_entity is None or isinstance(q.topic_entity, str)


@pytest.mark.parametrize("text", NASTY[:4])
def test_fuzz_corpus_nasty_json_is_a_line_error(workdir, text):
    path = _write(workdir / "nasty.jsonl", ('{"id": "a", "text": "ok"}\n' + text).encode())
    with pytest.raises(CorpusFormatError, match=r":2: malformed JSON"):
        load_corpus_jsonl(path)


# --------------------------------------------------------------------------- KG importers

kg_line = st.lists(
    st.sampled_from(["Q1", "Q22", "P5", "Q", "P", "x", "|", "\t", " ", "", "é", "\x00", "subject", "relation"])
    | st.text(max_size=5),
    max_size=8,
).map("".join)
kg_text = st.lists(kg_line, max_size=12).map("\n".join).map(lambda s: s.encode("utf-8", "surrogatepass"))
kg_bytes = st.binary(max_size=300) | kg_text


def _check_load(call, path: Path) -> None:
    """A graph with content (OpenIE may hold linked entities only), or a KGFormatError naming the file."""
    try:
        g, rep = call()
    except KGFormatError as e:
        assert str(path) in str(e)
    else:
        assert isinstance(g, KnowledgeGraph) and isinstance(rep, LoadReport)
        assert g.num_triples > 0 or (rep.format == "openie" and g.num_entities > 0)


@FUZZ
@given(data=kg_bytes, fmt=st.sampled_from(["metaqa", "tsv"]), on_error=st.sampled_from(["skip", "raise"]))
@example(data=b"\xef\xbb\xbfa|r|b\n\xff|r|c", fmt="metaqa", on_error="skip")
def test_fuzz_line_kg_importers(workdir, data, fmt, on_error):
    path = _write(workdir / f"kb.{fmt}", data)
    _check_load(lambda: load_kg(path, fmt, on_error=on_error, progress=False), path)


openie_row = st.fixed_dictionaries(
    {}, optional={"passage_id": json_value, "title": json_value, "entities": json_value, "triples": json_value}
)


@FUZZ
@given(
    data=st.binary(max_size=300) | st.lists(openie_row, max_size=4).map(_row_bytes),
    on_error=st.sampled_from(["skip", "raise"]),
)
@example(data=b'{"passage_id": "p", "triples": [["a", "r", "b"]]}\n' + NASTY[0].encode(), on_error="skip")
def test_fuzz_openie_importer(workdir, data, on_error):
    path = _write(workdir / "openie.jsonl", data)
    _check_load(lambda: load_kg(path, "openie", on_error=on_error, progress=False), path)


@FEW
@given(
    triples=kg_bytes,
    entities=st.none() | kg_bytes,
    relations=st.none() | kg_bytes,
    descriptions=st.none() | kg_bytes,
    on_error=st.sampled_from(["skip", "raise"]),
)
@example(
    triples=b"Q1\tP1\tQ2\nQ2\tP1\tQ1\n", entities=b"Q1\tA\nQ2\tB\n", relations=None, descriptions=None, on_error="raise"
)
@example(triples=b"\n", entities=None, relations=b"\x80", descriptions=None, on_error="skip")  # IndexError before
def test_fuzz_wikidata5m_importer(workdir, triples, entities, relations, descriptions, on_error):
    paths = {"triples_path": _write(workdir / "w5m_triples.txt", triples)}
    for name, data in (("entities_path", entities), ("relations_path", relations), ("descriptions_path", descriptions)):
        if data is not None:
            paths[name] = _write(workdir / f"w5m_{name}.txt", data)
    try:
        g, rep = load_wikidata5m(**paths, on_error=on_error, progress=False, chunk_bytes=64)
    except KGFormatError as e:
        assert any(str(p) in str(e) for p in paths.values())
    else:
        assert isinstance(g, KnowledgeGraph) and isinstance(rep, LoadReport) and g.num_triples > 0


@pytest.fixture(scope="module")
def parsekg_dir(workdir):
    kg = ParseKG()
    kg.save(workdir / "pkg")
    return workdir / "pkg"


@FEW
@given(data=st.binary(max_size=200) | json_value.map(lambda v: json.dumps(v).encode()))
@example(data=b'{"passage_ids": [], "sentences": [], "hyperrelations": []}')
@example(data=b"[]")
def test_fuzz_parsekg_json(parsekg_dir, data):
    _write(parsekg_dir / "parsekg.json", data)
    try:
        kg = ParseKG.load(parsekg_dir)
    except ValueError as e:
        assert str(parsekg_dir) in str(e)
    else:
        assert isinstance(kg, ParseKG)


# --------------------------------------------------------------------------- LLM reply parsers


@FUZZ
@given(text=any_text, candidates=st.none() | st.dictionaries(any_text, st.integers(0, 1000), max_size=4))
@example(text="<a | b | c>\n(a | b | c)\n<a> | <b> | <c>", candidates={"<a | b | c>": 3})
@example(text="<|||>\n<,,>\n( | )", candidates=None)
def test_fuzz_parse_triples(text, candidates):
    out = parse_triples(text, candidates)
    assert isinstance(out, list) and all(isinstance(t, ParsedTriple) for t in out)
    for t in out:
        assert all(isinstance(f, str) for f in t[:3])
        assert (t.index is None) == (candidates is None) or t.index in (candidates or {}).values()


@FUZZ
@given(text=any_text | json_value.map(json.dumps))
@example(text=NASTY[0])
@example(text=NASTY[1])
@example(text='```json\n{"a": True}\n```')
def test_fuzz_parse_json_object(text):
    out = parse_json_object(text)
    assert out is None or isinstance(out, dict)


@FUZZ
@given(text=any_text | json_value.map(json.dumps))
@example(text=NASTY[0])
@example(text="```json\n" + NASTY[1])
@example(text='[["a", "r", "b"], ["c", "r"')
def test_fuzz_llm_extraction_replies(text):
    ents = llm_replies.parse_entities(text)
    assert ents is None or (isinstance(ents, list) and all(isinstance(e, dict) for e in ents))
    triples = llm_replies.parse_triples(text)
    assert triples is None or all(isinstance(t, list) and len(t) == 3 for t in triples)
    value = llm_replies.parse_json(text)
    assert value is None or isinstance(value, (list, dict))


@FUZZ
@given(text=any_text, max_words=st.integers(1, 20), overlap=st.integers(0, 25))
def test_fuzz_chunk_words(text, max_words, overlap):
    if overlap >= max_words:  # the one documented error; any other ValueError fails the test
        with pytest.raises(ValueError, match=r"overlap must be in \[0, max_words\)"):
            chunk_words(text, max_words=max_words, overlap=overlap)
        return
    chunks = chunk_words(text, max_words=max_words, overlap=overlap)
    assert isinstance(chunks, list) and all(isinstance(c, str) for c in chunks)
    words = text.split()
    assert (chunks == []) == (words == [])  # an empty text gives no chunks, any other at least one
    assert all(1 <= len(c.split()) <= max_words for c in chunks)
    if chunks:  # windows cover the text from its first word to its last
        assert chunks[0].split()[0] == words[0] and chunks[-1].split()[-1] == words[-1]


@FUZZ
@given(text=any_text)
@example(text="a -> b <- c -> d")
@example(text="[[]] [x] ]")
def test_fuzz_frag_text_helpers(text):
    hops = count_hops(text)
    assert isinstance(hops, int) and count_hops(text + " x -> y <- z") == hops + 1  # two more arrows: one hop
    assert heuristic_route(text + " which who whom") == "complex"  # three more relational cues
    assert heuristic_route("".join(ch for ch in text if not ch.isalpha())) == "simple"  # no words, no cues
    assert isinstance(strip_topic_marks(text), str)
    assert isinstance(normalize_question(text), str)
    feats = question_stats(text)
    assert isinstance(feats, np.ndarray) and np.isfinite(feats).all()


@FUZZ
@given(text=st.none() | any_text)
@example(text="Note:\nAnswer: ### </s>")
@example(text="\u0130Note: x")
def test_fuzz_postprocess(text):
    out = postprocess(text)
    assert isinstance(out, str) and out == out.strip()
