"""Passages handed to an index build (issue 13 item 7): empty ones skipped with a warning and a
count, long ones kept whole and windowed (and parsed by spaCy in chunks), bad ones refused
with one clear error naming the passage."""

from __future__ import annotations

import logging
import re

import pytest
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.builders import nlp
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.index.validate import LONG_PASSAGE_CHARS, PassageError, validate_passages
from kgrag_plugins.types import Passage

CASH = Passage("cash", "Johnny Cash was born in Kingsland, Arkansas.", "Johnny Cash")
SNOW = Passage("snow", "Hank Snow was born in Liverpool, Nova Scotia.", "Hank Snow")


def _build(passages, path=None, **kw):
    return KnowledgeIndex.build(passages, path, embedder=HashEmbedder(), progress=False, **kw)


def _warnings(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == name]


def test_validate_empty_passages_are_skipped_with_warning_and_count(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    empties = [Passage("e1", ""), Passage("e2", " \n\t ", "A title only")]
    idx = _build([CASH, *empties, SNOW], tmp_path / "idx")
    assert idx.passages.ids == ["cash", "snow"] and "e1" not in idx.passages
    (msg,) = _warnings(caplog, "kgrag_plugins.index.validate")
    assert "skipped 2 empty passage(s)" in msg and "'e1', 'e2'" in msg
    checked = validate_passages([CASH, *empties])
    assert checked == [CASH] and checked.skipped_empty == ["e1", "e2"]
    assert checked.stats() == {"skipped_empty_passages": 2, "long_passages": 0}


def test_validate_add_passages_skips_empty_ones(tmp_path, caplog):
    idx = _build([CASH], tmp_path / "idx")
    caplog.set_level(logging.WARNING)
    added = idx.add_passages([SNOW, Passage("blank", "   ")], progress=False)
    assert added["passages"] == 1 and idx.passages.ids == ["cash", "snow"]
    assert any(
        "skipped 1 empty passage(s)" in m and "'blank'" in m for m in _warnings(caplog, "kgrag_plugins.index.validate")
    )


def test_validate_all_empty_corpus_is_refused(tmp_path):
    with pytest.raises(PassageError, match=r"no passage to index: all 2 passage\(s\) are empty \('a', 'b'\)"):
        _build([Passage("a", ""), Passage("b", "  ")], tmp_path / "idx")
    assert not (tmp_path / "idx" / "manifest.json").exists()


@pytest.mark.parametrize(
    "passages,match",
    [
        ([CASH, SNOW, Passage("cash", "other")], r"duplicate passage id 'cash' \(items 0 and 2\); passage ids must be"),
        ([Passage("bad", "caf\udce9")], r"passage 'bad': field 'text' is not valid Unicode .*surrogate"),
        ([Passage("bad", "text", "ti\ud800tle")], r"passage 'bad': field 'title' is not valid Unicode"),
        ([Passage("bad", None)], r"passage 'bad': field 'text' is a NoneType, expected a string"),
        ([Passage("bad", "text", 3)], r"passage 'bad': field 'title' is a int, expected a string"),
        ([Passage(7, "text")], r"passage 0 has a int id 7; ids must be strings"),
    ],
)
def test_validate_bad_passages_are_one_clear_error(tmp_path, passages, match):
    with pytest.raises(PassageError, match=match) as exc:
        _build(passages, tmp_path / "idx")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_validate_long_passage_is_kept_whole_and_windowed(caplog):
    caplog.set_level(logging.INFO)
    long_text = "Hank Snow recorded many songs in Nashville. " * (LONG_PASSAGE_CHARS // 40 + 5)
    idx = _build([CASH, Passage("long", long_text, "Hank Snow")])
    assert idx.passages.get("long").text == long_text  # not truncated, not split
    assert not _warnings(caplog, "kgrag_plugins.index.validate")  # handled: no longer a warning
    (msg,) = [r.getMessage() for r in caplog.records if r.name == "kgrag_plugins.index.validate"]
    assert "1 passage(s) are longer than" in msg and "'long'" in msg and "windows" in msg
    assert set(idx.passages.windows.owners) == {"long"}


# --------------------------------------------------------------------------- spaCy and long texts


@pytest.fixture
def short_spacy_limit(monkeypatch):
    """spaCy's ``max_length`` lowered to 3,000 characters, so a 10 kB passage trips E088."""
    for parse in (False, True):
        monkeypatch.setattr(nlp.load_spacy(parse), "max_length", 3000)


def test_validate_spacy_parses_texts_over_max_length_in_chunks(short_spacy_limit, caplog):
    caplog.set_level(logging.WARNING)
    para = "Hank Snow was born in Liverpool. He moved to Nashville in 1950.\n\n"
    text = para * 150 + "Johnny Cash sang in Memphis."
    assert len(text) > 3 * 3000
    for parse in (False, True):
        (parsed,) = nlp.parse_passages([Passage("long", text, "Hank Snow")], parse=parse, progress=False)
        assert parsed.sentences[-1][1] == len(text)
        assert all(text[m.start : m.end] == m.text for m in parsed.mentions)
        assert all(
            parsed.sentences[m.sent][0] <= m.start < m.end <= parsed.sentences[m.sent][1] for m in parsed.mentions
        )
        assert parsed.mentions[-1].text == "Memphis" and len(parsed.mentions) > 300
    assert any("parsed in chunks" in m and "'long'" in m for m in _warnings(caplog, "kgrag_plugins.index.builders.nlp"))


def test_validate_mentions_build_over_a_text_longer_than_spacy_limit(short_spacy_limit):
    text = "Hank Snow sang in Nashville. " * 300 + "Johnny Cash was born in Kingsland, Arkansas."
    idx = _build([SNOW, Passage("long", text, "Country music")], builder="mentions")
    names = {idx.graph.name_of(e) for e in idx.graph.entities_of("long")}
    assert {"Johnny Cash", "Kingsland"} <= names


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(st.sampled_from(["word", " ", "\n", "\n\n", ". ", "Sentence.", "x" * 7]), max_size=60).map("".join),
    limit=st.integers(1, 40),
)
def test_validate_split_long_text_keeps_every_character(text, limit):
    pieces = nlp.split_long_text(text, limit)
    assert "".join(pieces) == text
    assert pieces == [""] if not text else all(0 < len(p) <= limit for p in pieces)
    offset = 0
    for piece in pieces[:-1]:  # a cut lands on a paragraph break whenever the window has one
        if re.search(r"\n\s*\n", text[offset : offset + limit]):
            assert re.search(r"\n\s*\n\s*\Z", piece), (piece, text[offset : offset + limit])
        offset += len(piece)


def test_validate_skipped_count_reaches_the_manifest(tmp_path):
    from kgrag_plugins.index.store import read_manifest

    passages = [Passage("a", "Warsaw stands on the Vistula."), Passage("b", "   "), Passage("c", "")]
    _build(passages, tmp_path / "idx")
    stats = read_manifest(tmp_path / "idx")["passage_stats"]
    assert stats == {"skipped_empty_passages": 2, "long_passages": 0}
