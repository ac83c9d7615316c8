"""Corpus and question JSONL files with faults (issue 13 item 7): one-line ``FILE:LINE: reason``
errors of one class, a UTF-8 byte-order mark accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag_plugins.datasets.loaders import CorpusFormatError, load_corpus_jsonl, load_questions_jsonl

GOOD_P = {"id": "p1", "title": "Hank Snow", "text": "Hank Snow was a singer."}
GOOD_Q = {"id": "q1", "question": "Who sang?", "answers": ["Hank Snow"]}


def _jsonl(path: Path, *lines: bytes | dict) -> Path:
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines) + b"\n")
    return path


def _one_line_error(exc: pytest.ExceptionInfo, path: Path, line: int) -> str:
    msg = str(exc.value)
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, CorpusFormatError)
    assert msg.startswith(f"{path}:{line}: ") and "\n" not in msg
    assert exc.value.path == str(path) and exc.value.line == line
    return msg


@pytest.mark.parametrize("loader,good", [(load_corpus_jsonl, GOOD_P), (load_questions_jsonl, GOOD_Q)])
def test_corpus_non_utf8_names_file_line_and_fix(tmp_path, loader, good):
    path = _jsonl(tmp_path / "rows.jsonl", good, b"", b'{"id": "x", "text": "caf\xe9", "question": "q"}')
    with pytest.raises(CorpusFormatError) as exc:
        loader(path)
    msg = _one_line_error(exc, path, 3)
    assert "not valid UTF-8" in msg and "0xe9" in msg and "re-encode" in msg


@pytest.mark.parametrize("loader,good", [(load_corpus_jsonl, GOOD_P), (load_questions_jsonl, GOOD_Q)])
def test_corpus_utf8_bom_is_accepted(tmp_path, loader, good):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(good).encode() + b"\n")
    (row,) = loader(path)
    assert row.id == good["id"]


def test_corpus_bom_only_at_file_start(tmp_path):
    path = _jsonl(tmp_path / "bom2.jsonl", GOOD_P, b"\xef\xbb\xbf" + json.dumps({**GOOD_P, "id": "p2"}).encode())
    with pytest.raises(CorpusFormatError) as exc:
        load_corpus_jsonl(path)
    assert "malformed JSON" in _one_line_error(exc, path, 2)


@pytest.mark.parametrize(
    "bad,reason",
    [
        (b'{"id": "p2", "text": ', "malformed JSON"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b"[" * 5000, "malformed JSON"),  # RecursionError before
        (b'{"id": "p2", "text": "t", "n": ' + b"1" * 5000 + b"}", "malformed JSON"),  # int digit limit
        (b'{"title": "t", "text": "x"}', "has no 'id'"),
        (b'{"id": ["a"], "text": "x"}', "field 'id' must be a string, got list"),
        (b'{"id": "p2", "title": "t"}', "has no 'text'"),
        (b'{"id": "p2", "text": 5}', "field 'text' must be a string, got int"),
        (b'{"id": "p2", "text": "x", "title": {"a": 1}}', "field 'title' must be a string, got dict"),
        (b'{"id": "p2", "text": "x", "metadata": [1]}', "field 'metadata' must be an object, got list"),
        (b'{"id": "p1", "text": "again"}', "duplicate passage id 'p1' (first on line 1)"),
    ],
)
def test_corpus_bad_rows_are_one_line_errors(tmp_path, bad, reason):
    path = _jsonl(tmp_path / "c.jsonl", GOOD_P, bad)
    with pytest.raises(CorpusFormatError) as exc:
        load_corpus_jsonl(path)
    assert reason in _one_line_error(exc, path, 2)


@pytest.mark.parametrize(
    "bad,reason",
    [
        (b'{"id": "q2", "answers": ["a"]}', "has no 'question' string"),
        (b'{"id": "q2", "question": "q"}', "has no 'answers'"),
        (b'{"id": "q2", "question": "q", "answers": [{"a": 1}]}', "field 'answers' must hold strings, got a dict"),
        (b'{"id": "q2", "question": "q", "answers": {"a": 1}}', "field 'answers' must be a string or a list"),
        (b'{"id": "q2", "question": "q", "answers": "a", "hops": "' + b"9" * 5000 + b'"}', "field 'hops'"),
        (b'{"id": "q2", "question": "q", "answers": "a", "topic_entity": ["x"]}', "field 'topic_entity' must be"),
        (b'{"id": "q2", "question": "q", "answers": "a", "type": {"t": 1}}', "field 'type' must be a string"),
        (b'{"id": {"k": 1}, "question": "q", "answers": "a"}', "field 'id' must be a string, got dict"),
        (b'{"id": "q1", "question": "q", "answers": "a"}', "duplicate question id 'q1'"),
    ],
)
def test_question_bad_rows_are_one_line_errors(tmp_path, bad, reason):
    path = _jsonl(tmp_path / "q.jsonl", GOOD_Q, bad)
    with pytest.raises(CorpusFormatError) as exc:
        load_questions_jsonl(path)
    msg = _one_line_error(exc, path, 2)
    assert reason in msg and len(msg) < 300
