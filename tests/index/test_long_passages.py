"""Long documents (issue 34 item 1): a passage longer than the embedder's input is embedded as
overlapping windows beside its own vector, its dense score is its best window's, and the
passage stays the unit every retriever returns (kgrag_plugins/index/windows.py)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.datasets.loaders import sample_corpus as load_sample_corpus
from kgrag_plugins.index.errors import IndexCorruptError
from kgrag_plugins.index.passages import CHROMA_DOC_CHARS
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.activation import ActivationRetriever
from kgrag_plugins.methods.baselines import DenseRetriever, HybridRetriever
from kgrag_plugins.models.embed import default_embedder
from kgrag_plugins.models.embed_windows import max_tokens, window_texts
from kgrag_plugins.types import Passage

FACT = "The Zorvath lighthouse on Kelmoor Island was designed by the architect Imelda Franssen in 1887."
QUESTION = "Who designed the Zorvath lighthouse on Kelmoor Island?"


def long_document(chars: int, fact_at: float = 0.995) -> str:
    """About ``chars`` characters of the sample corpus's prose with :data:`FACT` at ``fact_at``."""
    filler = " ".join(p.text for p in load_sample_corpus())
    body = (filler + " ") * (chars // (len(filler) + 1) + 2)
    head = body[: int(chars * fact_at)]
    head = head[: head.rfind(". ") + 1]  # the fact starts a sentence
    return f"{head} {FACT} {body[: chars - len(head) - len(FACT) - 2]}"


def rank_of(retriever, pid: str = "long") -> int | None:
    ids = [sp.passage.id for sp in retriever.retrieve(QUESTION, k=5).passages]
    return ids.index(pid) + 1 if pid in ids else None


@pytest.fixture(scope="module")
def long_index(tmp_path_factory):
    """The 69 sample passages plus one 200 kB document whose fact sits in its last 1%."""
    text = long_document(200_000)
    assert text.index(FACT) / len(text) > 0.99
    passages = load_sample_corpus() + [Passage("long", text, title="Collected notes")]
    path = tmp_path_factory.mktemp("long") / "ix"
    return KnowledgeIndex.build(passages, path, builder="mentions", progress=False)


def test_long_passage_fact_in_the_last_percent_is_rank_1(long_index):
    assert long_index.manifest["windows"] == len(long_index.passages.windows) > 100
    for retriever in (DenseRetriever(long_index), HybridRetriever(long_index), ActivationRetriever(long_index)):
        assert rank_of(retriever) == 1, retriever.name
    # without its windows the passage is out of dense's top 5 (what the windows fix)
    store = long_index.passages
    plain = store.vectors @ long_index.embed_query(QUESTION)
    assert (plain > plain[store.position("long")]).sum() >= 5


def test_long_passage_windows_survive_reopen_add_and_delete(long_index, tmp_path):
    saved = long_index.save(tmp_path / "copy")
    with KnowledgeIndex.open(tmp_path / "copy") as idx:
        assert len(idx.passages.windows) == len(long_index.passages.windows)
        assert rank_of(DenseRetriever(idx)) == 1
        idx.add_passages([Passage("lh", "Lighthouses guide ships along rocky coasts.", "Lighthouse")], progress=False)
        assert rank_of(DenseRetriever(idx)) == 1  # the long passage kept its windows
        idx.delete_passages(["s-001"])
        assert rank_of(DenseRetriever(idx)) == 1
        assert set(idx.passages.windows.owners) == {"long"}
        idx.delete_passages(["long"])
        assert idx.passages.windows is None and idx.manifest["windows"] == 0
    saved.close()


def test_long_passage_chroma_search_agrees_with_exact_search(long_index):
    store = long_index.passages
    for q in (QUESTION, "Marie Curie Nobel Prize", "Imelda Franssen architect 1887"):
        qv = long_index.embed_query(q)
        fast = [(p.id, round(s, 4)) for p, s in store.dense_search(qv, 5)]
        exact = [(p.id, round(s, 4)) for p, s in store.exact_dense_search(qv, 5)]
        assert fast == exact
        rows = np.array([store.position("long"), store.position("s-002")])
        assert np.allclose(store.dense_scores(qv, rows), store.dense_scores(qv)[rows])


def test_long_passage_chroma_document_is_capped_with_its_length(long_index):
    got = long_index.passages._collection.get(ids=["long", "s-001"], include=["documents", "metadatas"])
    docs = dict(zip(got["ids"], got["documents"]))
    meta = dict(zip(got["ids"], got["metadatas"]))
    assert len(docs["long"]) == CHROMA_DOC_CHARS and meta["long"]["truncated"] is True
    assert meta["long"]["chars"] == len(long_index.passages.get("long").text)
    assert "truncated" not in meta["s-001"]
    assert long_index.passages.get("long").text.startswith(docs["long"])  # the full text stays in passages.jsonl


def test_long_passage_windows_fit_and_cover_the_text():
    emb = default_embedder()
    text = long_document(30_000, fact_at=0.5)
    wins = window_texts(emb, "Collected notes", text)
    limit = max_tokens(emb)
    assert wins and all(len(emb.token_spans(w)) <= limit for w in wins)
    assert all(w.startswith("Collected notes\n") for w in wins)
    body = [w.split("\n", 1)[1] for w in wins]
    assert text.rstrip().endswith(body[-1].rstrip())  # the last window reaches the end
    # consecutive windows overlap, and the first overlaps what the passage's own vector reads
    assert all(b[:40] in a for a, b in zip(body, body[1:]))
    head = text[: emb.token_spans(text)[limit - 10][1]]
    assert body[0][:40] in head
    assert window_texts(emb, "T", "A short passage.") == []


_WORD = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Zs", "Zl", "Zp", "Cc", "Cf")), max_size=10)


@settings(max_examples=40, deadline=None)
@given(st.lists(_WORD, max_size=700))
def test_long_passage_word_windows_keep_every_word(words):
    """An embedder without a tokenizer is windowed by whitespace words: windows are contiguous
    runs of the text's words within the word budget, each overlapping the one before, the first
    starting inside what the passage's own vector reads, the last ending at the text's end."""
    emb = HashEmbedder()
    seen = [f"{i}{w}" for i, w in enumerate(words)]  # unique words: a window's place is unambiguous
    text = " ".join(seen)
    wins = window_texts(emb, None, text)
    budget = int((max_tokens(emb) - 4) * 0.625)
    if not wins:
        assert len(seen) <= budget
        return
    starts = []
    for w in wins:
        ws = w.split()
        assert len(ws) <= budget
        start = seen.index(ws[0])
        assert seen[start : start + len(ws)] == ws
        starts.append((start, start + len(ws)))
    assert starts[0][0] <= budget
    assert all(b[0] < a[1] for a, b in zip(starts, starts[1:]))
    assert starts[-1][1] == len(seen)


def test_long_passage_damaged_window_files_are_one_line_errors(long_index, tmp_path):
    long_index.save(tmp_path / "ix").close()
    gen = json.loads((tmp_path / "ix" / "manifest.json").read_text())["generation"]
    d = tmp_path / "ix" / gen / "passages"
    (d / "window_ids.json").write_text(json.dumps(["nope"] * len(long_index.passages.windows)))
    with pytest.raises(IndexCorruptError, match=r"windows\.npy .*window_ids\.json.*rebuild the index"):
        KnowledgeIndex.open(tmp_path / "ix")
    (d / "window_ids.json").write_text("{not json")
    with pytest.raises(IndexCorruptError, match="cannot be read"):
        KnowledgeIndex.open(tmp_path / "ix")


def test_long_passage_index_without_window_files_still_opens(long_index, tmp_path):
    """An index built before windows existed opens, and scores long passages by their vector."""
    long_index.save(tmp_path / "ix").close()
    gen = json.loads((tmp_path / "ix" / "manifest.json").read_text())["generation"]
    for name in ("windows.npy", "window_ids.json"):
        (tmp_path / "ix" / gen / "passages" / name).unlink()
    with KnowledgeIndex.open(tmp_path / "ix") as idx:
        assert idx.passages.windows is None
        assert rank_of(DenseRetriever(idx)) != 1


def test_long_passage_given_vectors_without_windows_warn(caplog):
    caplog.set_level(logging.WARNING)
    passages = [Passage("a", "word " * 3000), Passage("b", "Johnny Cash was born in Kingsland.")]
    emb = HashEmbedder()
    KnowledgeIndex.build(passages, embedder=emb, vectors=emb.embed([p.text for p in passages]), progress=False)
    assert any("without windows" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_long_passage_of_2_mb_fact_in_the_last_percent_is_rank_1(tmp_path):
    """The acceptance case: a 2 MB passage (about 2,200 windows; minutes to embed on 2 cores)."""
    text = long_document(2_000_000)
    assert text.index(FACT) / len(text) > 0.99
    idx = KnowledgeIndex.build(
        load_sample_corpus() + [Passage("long", text, title="Collected notes")],
        tmp_path / "ix",
        builder="mentions",
        progress=False,
    )
    for retriever in (DenseRetriever(idx), HybridRetriever(idx), ActivationRetriever(idx)):
        assert rank_of(retriever) == 1, retriever.name


def test_long_passage_prompt_is_clipped_with_a_marker():
    """A 2 MB passage put in front of a model: head and tail around a marker that says how much
    was cut, within the per-passage budget; short passages and fields are unchanged."""
    from kgrag_plugins.agents.prompts import sub_answer_messages
    from kgrag_plugins.methods.answer import format_evidence
    from kgrag_plugins.models.prompting import DATA_FIELD_CHARS, PASSAGE_PROMPT_CHARS, clip_text, data_block
    from kgrag_plugins.types import Evidence, ScoredPassage

    text = long_document(2_000_000)
    ev = Evidence(QUESTION, [ScoredPassage(Passage("long", text, "Notes"), 1.0), ScoredPassage(SHORT, 0.5)])
    for prompt in (format_evidence(ev), sub_answer_messages(QUESTION, ev)[-1]["content"]):
        assert len(prompt) < 2 * PASSAGE_PROMPT_CHARS
        assert "characters cut to fit the prompt" in prompt and SHORT.text in prompt
        assert text[:200] in prompt and text[-200:] in prompt  # head and tail kept
    clipped = clip_text(text)
    assert len(clipped) <= PASSAGE_PROMPT_CHARS
    n = int(clipped.split("[... ")[1].split(" characters")[0])
    assert len(clipped) - len(clipped.split(" [... ")[0]) < PASSAGE_PROMPT_CHARS and n == len(text) - (
        len(clipped) - len(f" [... {n} characters cut to fit the prompt ...] ")
    )
    assert clip_text(SHORT.text) == SHORT.text
    block = data_block("passages", [text])  # any one data field is bounded too
    assert len(block) < DATA_FIELD_CHARS + 100 and "characters cut to fit the prompt" in block


SHORT = Passage("short", "Marie Curie won the Nobel Prize in Physics in 1903.", "Marie Curie")


def test_passage_budget_sets_every_prompts_clip_and_restores_it(monkeypatch):
    """``passage_budget`` (and ``KGRAG_PASSAGE_CHARS``) change what every prompt builder shows of a
    passage; the block restores the previous budget, nested blocks included; bad budgets raise."""
    from kgrag_plugins.agents.prompts import sub_answer_messages
    from kgrag_plugins.methods.answer import format_evidence
    from kgrag_plugins.models.prompting import PASSAGE_PROMPT_CHARS, passage_budget, passage_chars
    from kgrag_plugins.types import Evidence, ScoredPassage

    text = long_document(20_000)
    ev = Evidence(QUESTION, [ScoredPassage(Passage("long", text, "Notes"), 1.0)])
    assert passage_chars() == PASSAGE_PROMPT_CHARS
    with passage_budget(1000):
        with passage_budget(300):
            assert passage_chars() == 300
        assert passage_chars() == 1000
        for prompt in (format_evidence(ev), sub_answer_messages(QUESTION, ev)[-1]["content"]):
            assert "characters cut to fit the prompt" in prompt and len(prompt) < 1000 + 600
            assert text[:300] in prompt and text[-150:] in prompt
    assert passage_chars() == PASSAGE_PROMPT_CHARS and len(format_evidence(ev)) > PASSAGE_PROMPT_CHARS - 100
    monkeypatch.setenv("KGRAG_PASSAGE_CHARS", "800")
    assert passage_chars() == 800 and len(format_evidence(ev)) < 800 + 200
    monkeypatch.setenv("KGRAG_PASSAGE_CHARS", "50")
    with pytest.raises(ValueError, match="KGRAG_PASSAGE_CHARS"):
        passage_chars()
    for bad in (10, 1.5, True):
        with pytest.raises(ValueError, match="at least 200"):
            with passage_budget(bad):
                pass
