"""Dataset loaders against the real staged benchmark files (counts from SOURCES.md).

These tests use the ``data_dir`` fixture from conftest.py, which FAILS when the data is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag_plugins.datasets.loaders import (
    DATASETS,
    Dataset,
    Question,
    load_corpus_jsonl,
    load_dataset,
    load_questions_jsonl,
)

# (questions, passages) for the shared half, from SOURCES.md "Counts".
TEXT_COUNTS = {
    "musique": (251, 4516),
    "hotpotqa": (205, 2027),
    "2wikimultihopqa": (338, 2250),
    "popqa": (500, 772),
}
METAQA_COUNTS = {"metaqa-1hop": 4974, "metaqa-2hop": 7436, "metaqa-3hop": 7137}


def test_datasets_names():
    assert set(DATASETS) == {
        "sample",
        "musique",
        "hotpotqa",
        "2wikimultihopqa",
        "popqa",
        "metaqa",
        "metaqa-1hop",
        "metaqa-2hop",
        "metaqa-3hop",
        "webqsp",
        "musique-hipporag",
        "2wikimultihopqa-dev1000",
    }


def test_the_bundled_sample_needs_no_data_dir(tmp_path):
    ds = load_dataset("sample", data_dir=tmp_path / "missing")
    assert len(ds.corpus) >= 45 and len(ds.questions) >= 20
    ids = {p.id for p in ds.corpus}
    assert all(set(q.supporting_passage_ids) <= ids for q in ds.questions)
    assert load_dataset("sample", limit=3).questions == ds.questions[:3]


def _check_questions(ds: Dataset) -> None:
    ids = [q.id for q in ds.questions]
    assert len(ids) == len(set(ids)), f"{ds.name}: duplicate question ids"
    for q in ds.questions:
        assert isinstance(q, Question)
        assert isinstance(q.id, str) and q.id
        assert isinstance(q.question, str) and q.question
        assert isinstance(q.answers, list) and q.answers
        assert all(isinstance(a, str) for a in q.answers)
        assert q.hops is None or type(q.hops) is int


@pytest.mark.parametrize("name", sorted(TEXT_COUNTS))
def test_text_datasets(data_dir: Path, name: str):
    ds = load_dataset(name, data_dir)
    n_q, n_p = TEXT_COUNTS[name]
    assert ds.name == name
    assert len(ds.questions) == n_q
    assert ds.corpus is not None and len(ds.corpus) == n_p
    assert ds.kb_path is None
    _check_questions(ds)
    ids = {p.id for p in ds.corpus}
    assert len(ids) == n_p
    for q in ds.questions:
        assert q.supporting_passage_ids, f"{q.id}: no gold passages"
        missing = [pid for pid in q.supporting_passage_ids if pid not in ids]
        assert not missing, f"{name} {q.id}: gold passages not in corpus: {missing}"
        assert type(q.hops) is int and q.hops >= 1
        # other fields survive in metadata
        assert "source" in q.metadata and "candidate_passage_ids" in q.metadata
    for p in ds.corpus:
        assert p.text and isinstance(p.title, str)
    h = ds.corpus_hash()
    assert isinstance(h, str) and len(h) == 16
    int(h, 16)


def test_hops_values(data_dir: Path):
    # SOURCES.md: MuSiQue hops 2/3/4, HotpotQA 2, 2Wiki 2 or 4, PopQA 1.
    assert {q.hops for q in load_dataset("musique", data_dir).questions} <= {2, 3, 4}
    assert {q.hops for q in load_dataset("hotpotqa", data_dir).questions} == {2}
    assert {q.hops for q in load_dataset("2wiki", data_dir).questions} <= {2, 4}
    assert {q.hops for q in load_dataset("popqa", data_dir).questions} == {1}


def test_metadata_keeps_extra_fields(data_dir: Path):
    mq = load_dataset("musique", data_dir, limit=1).questions[0]
    assert "question_decomposition" in mq.metadata and "answerable" in mq.metadata
    w = load_dataset("2wikimultihopqa", data_dir, limit=1).questions[0]
    assert "evidences" in w.metadata and "supporting_facts" in w.metadata


def test_aliases(data_dir: Path):
    assert load_dataset("2wiki", data_dir, limit=3).name == "2wikimultihopqa"
    assert load_dataset("hotpot", data_dir, limit=3).name == "hotpotqa"
    assert load_dataset("HotpotQA", data_dir, limit=3).name == "hotpotqa"


@pytest.mark.parametrize("name", sorted(METAQA_COUNTS))
def test_metaqa_by_hop(data_dir: Path, name: str):
    ds = load_dataset(name, data_dir)
    hop = int(name.split("-")[1][0])
    assert len(ds.questions) == METAQA_COUNTS[name]
    assert ds.corpus is None and ds.corpus_hash() is None
    assert ds.kb_path == data_dir / "metaqa" / "kb.txt" and ds.kb_path.is_file()
    _check_questions(ds)
    for q in ds.questions:
        assert q.hops == hop
        assert q.topic_entity and f"[{q.topic_entity}]" in q.question
        assert "qtype" in q.metadata
        assert isinstance(q.metadata["answers_reachable_in_kb"], float)


def test_metaqa_pooled(data_dir: Path):
    ds = load_dataset("metaqa", data_dir)
    assert len(ds.questions) == sum(METAQA_COUNTS.values())  # 4974 + 7436 + 7137 = 19547
    assert {q.hops for q in ds.questions} == {1, 2, 3}
    _check_questions(ds)


def test_webqsp(data_dir: Path):
    ds = load_dataset("webqsp", data_dir)
    assert len(ds.questions) == 814
    assert ds.corpus is None and ds.kb_path is None
    _check_questions(ds)
    assert all(isinstance(q.metadata["candidate_paths"], list) for q in ds.questions)


def test_musique_hipporag(data_dir: Path):
    ds = load_dataset("musique-hipporag", data_dir)
    assert len(ds.questions) == 100
    assert ds.corpus is not None and len(ds.corpus) == 1890
    _check_questions(ds)
    ids = {p.id for p in ds.corpus}
    for q in ds.questions:
        assert q.metadata["source"].startswith("OSU-NLP-Group/HippoRAG")
        assert set(q.supporting_passage_ids) <= ids
        assert set(q.metadata["candidate_passage_ids"]) <= ids
    # a subset of the full musique corpus, and a different hash
    full = load_dataset("musique", data_dir)
    assert ids <= {p.id for p in full.corpus}
    assert ds.corpus_hash() != full.corpus_hash()


def test_2wiki_dev1000(data_dir: Path):
    ds = load_dataset("2wikimultihopqa-dev1000", data_dir)
    assert ds.corpus is not None and len(ds.corpus) == 6119
    assert 0 < len(ds.questions) < 338
    ids = {p.id for p in ds.corpus}
    for q in ds.questions:
        assert q.supporting_passage_ids and set(q.supporting_passage_ids) <= ids


def test_limit(data_dir: Path):
    full = load_dataset("popqa", data_dir)
    ds = load_dataset("popqa", data_dir, limit=7)
    assert [q.id for q in ds.questions] == [q.id for q in full.questions[:7]]
    assert len(ds.corpus) == len(full.corpus) == 772  # corpus stays whole
    assert ds.corpus_hash() == full.corpus_hash()
    assert load_dataset("popqa", data_dir, limit=0).questions == []
    assert len(load_dataset("metaqa", data_dir, limit=5).questions) == 5
    with pytest.raises(ValueError):
        load_dataset("popqa", data_dir, limit=-1)


@pytest.mark.parametrize("name", ["musique", "2wikimultihopqa", "hotpotqa", "popqa"])
def test_slice_corpus_is_the_kept_questions_candidates(data_dir: Path, name: str):
    whole = load_dataset(name, data_dir, limit=10)
    sliced = load_dataset(name, data_dir, limit=10, slice_corpus=True)
    assert [q.id for q in sliced.questions] == [q.id for q in whole.questions]
    want = {p for q in whole.questions for p in q.metadata["candidate_passage_ids"] + q.supporting_passage_ids}
    assert {p.id for p in sliced.corpus} == want and len(want) < len(whole.corpus)
    order = [p.id for p in whole.corpus if p.id in want]  # corpus order kept
    assert [p.id for p in sliced.corpus] == order
    assert sliced.corpus_hash() != whole.corpus_hash()  # a separate index cache entry


def test_slice_corpus_needs_candidates_and_a_corpus(data_dir: Path):
    with pytest.raises(ValueError, match="lists no candidate_passage_ids"):
        load_dataset("sample", limit=3, slice_corpus=True)
    with pytest.raises(ValueError, match="no passage corpus to slice"):
        load_dataset("metaqa-1hop", data_dir, limit=3, slice_corpus=True)


def test_default_data_dir_from_env(data_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KGRAG_DATA_DIR", str(data_dir))
    assert len(load_dataset("hotpotqa", limit=2).questions) == 2


# ----------------------------------------------------------------------------- error cases


def test_unknown_dataset(tmp_path: Path):
    with pytest.raises(ValueError, match="valid names") as exc:
        load_dataset("nope", tmp_path)
    assert "musique" in str(exc.value) and "webqsp" in str(exc.value)


def test_missing_data_dir(tmp_path: Path):
    missing = tmp_path / "does-not-exist"
    with pytest.raises(FileNotFoundError, match="KGRAG_DATA_DIR") as exc:
        load_dataset("musique", missing)
    assert str(missing) in str(exc.value)


def test_missing_dataset_dir_and_file(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="KGRAG_DATA_DIR") as exc:
        load_dataset("popqa", tmp_path)  # root exists, popqa/ does not
    assert str(tmp_path / "popqa") in str(exc.value)
    (tmp_path / "popqa").mkdir()
    (tmp_path / "popqa" / "questions.jsonl").write_text(
        json.dumps({"id": "1", "question": "q?", "answers": ["a"]}) + "\n"
    )
    with pytest.raises(FileNotFoundError, match="corpus.jsonl"):
        load_dataset("popqa", tmp_path)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_malformed_jsonl_line_number(tmp_path: Path):
    p = tmp_path / "corpus.jsonl"
    good = json.dumps({"id": "a", "title": "A", "text": "x"})
    p.write_text(good + "\n\n" + '{"id": "b", "text": ' + "\n")  # line 3 is broken (line 2 blank)
    with pytest.raises(ValueError, match=r"corpus\.jsonl:3") as exc:
        load_corpus_jsonl(p)
    assert str(p) in str(exc.value)
    q = tmp_path / "questions.jsonl"
    q.write_text(json.dumps({"id": "1", "question": "q", "answers": ["a"]}) + "\n[1, 2\n")
    with pytest.raises(ValueError, match=r"questions\.jsonl:2"):
        load_questions_jsonl(q)


def test_corpus_duplicate_and_missing_text(tmp_path: Path):
    p = _write_jsonl(
        tmp_path / "dup.jsonl",
        [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"id": "a", "text": "z"}],
    )
    with pytest.raises(ValueError, match=r"dup\.jsonl:3.*duplicate passage id 'a'"):
        load_corpus_jsonl(p)
    p = _write_jsonl(tmp_path / "notext.jsonl", [{"id": "a", "text": "x"}, {"id": "b", "title": "B"}])
    with pytest.raises(ValueError, match=r"notext\.jsonl:2.*no 'text'"):
        load_corpus_jsonl(p)


def test_duplicate_question_ids(tmp_path: Path):
    p = _write_jsonl(
        tmp_path / "q.jsonl",
        [{"id": "1", "question": "a?", "answers": ["x"]}, {"id": "1", "question": "b?", "answers": ["y"]}],
    )
    with pytest.raises(ValueError, match=r"q\.jsonl:2.*duplicate question id"):
        load_questions_jsonl(p)


def test_user_files_roundtrip(tmp_path: Path):
    c = _write_jsonl(
        tmp_path / "c.jsonl",
        [{"id": 7, "title": "T", "text": "body", "url": "http://x"}, {"id": "b", "text": "no title"}],
    )
    passages = load_corpus_jsonl(c)
    assert passages[0].id == "7" and passages[0].metadata == {"url": "http://x"}
    assert passages[1].title == ""
    q = _write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": 1, "question": "q1", "answers": "single", "hops": "2", "foo": 1},
            {"id": "x", "question": "q2", "answer": ["a", "b"], "hops": "3hop"},
        ],
    )
    qs = load_questions_jsonl(q)
    assert qs[0].id == "1" and qs[0].answers == ["single"] and qs[0].hops == 2
    assert qs[0].metadata == {"foo": 1}
    assert qs[1].answers == ["a", "b"] and qs[1].hops == 3 and qs[1].metadata == {}
    ds = Dataset("mine", qs, passages)
    # hash is independent of passage order
    assert ds.corpus_hash() == Dataset("mine", qs, list(reversed(passages))).corpus_hash()
