"""KG-Translator SFT data (App. F.1) and the training recipe (issue 14 item 6)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_llm import tiny_llama

from kgrag_plugins.train.translator import (
    HopStep,
    build_sft_data,
    musique_steps,
    remove_entities,
    tail_windows,
    train_translator,
)

#: Hand-written items shaped like MuSiQue / 2Wiki rows of ``questions.jsonl``.
ROWS = {
    "musique": [
        {
            "id": "2hop__1_2",
            "answerable": True,
            "question": "Where was the director of Big born?",
            "candidate_passage_ids": ["x0", "x1", "x2"],
            "question_decomposition": [
                {"id": 1, "question": "Who directed Big?", "answer": "Penny Marshall", "paragraph_support_idx": 0},
                {"id": 2, "question": "Where was #1 born?", "answer": "The Bronx", "paragraph_support_idx": 1},
                {"id": 3, "question": "Warsaw >> country", "answer": "Poland", "paragraph_support_idx": 2},
                {"id": 4, "question": "Who painted #9?", "answer": "Nobody", "paragraph_support_idx": 7},
            ],
        },
        {"id": "2hop__x", "answerable": False, "question_decomposition": [], "candidate_passage_ids": []},
    ],
    "2wikimultihopqa": [
        {
            "id": "w1",
            "candidate_passage_ids": ["x1", "x0"],
            "evidences": [["Penny Marshall", "place of birth", "The Bronx"], ["Nobody", "father", "X"]],
        }
    ],
}
CORPUS = {
    "x0": (
        "Big (film)",
        "Big is a 1988 American fantasy comedy film directed by Penny Marshall and starring Tom Hanks "
        "in the lead role.",
    ),
    "x1": (
        "Penny Marshall",
        "Penny Marshall was an American actress. She was born in The Bronx, New York City, and she died in 2018.",
    ),
    "x2": ("Warsaw", "Warsaw is the capital and largest city of Poland, on the Vistula River."),
}


@pytest.fixture(scope="module")
def built():
    """Windows chosen by torch MiniLM, the embedder the expected pairs were checked by hand with
    (ONNX int8 vectors can move a near-tie between two windows)."""
    from kgrag_plugins.models.embed import torch_embedder

    return build_sft_data(["musique", "2wiki"], rows=ROWS, corpus=CORPUS, embedder=torch_embedder())


def test_musique_steps_resolve_references_and_heads():
    titles = {k: t for k, (t, _x) in CORPUS.items()}
    steps, skips = musique_steps(ROWS["musique"][0], titles)
    assert steps == [
        HopStep("Who directed Big?", "Big", "Penny Marshall", "x0", "musique:2hop__1_2:1"),  # title "Big (film)"
        HopStep("Where was Penny Marshall born?", "Penny Marshall", "The Bronx", "x1", "musique:2hop__1_2:2"),
        HopStep("Warsaw >> country", "Warsaw", "Poland", "x2", "musique:2hop__1_2:3"),
    ]
    assert skips == ["no supporting paragraph"]
    assert musique_steps(ROWS["musique"][1], titles) == ([], ["unanswerable"])


def test_sft_pairs_hand_verified(built):
    """Expected pairs checked by hand against F.1: NER entities other than the answer removed
    (American, New York City, 2018, Tom Hanks, 1988, Vistula River, ...), a 10-word window around
    the answer chosen by MiniLM, the answer deleted."""
    examples, stats = built
    got = [(e.question, e.completion, e.window) for e in examples]
    assert got == [
        (
            "Who directed Big?",
            "Big@@ directed by and starring in the lead role.",
            "directed by Penny Marshall and starring in the lead role.",
        ),
        (
            "Where was Penny Marshall born?",
            "Penny Marshall@@ an actress. She was born in , , and",
            "an actress. She was born in The Bronx, , and",
        ),
        (
            "Warsaw >> country",
            "Warsaw@@ is the capital and largest city of , on .",
            "is the capital and largest city of Poland, on .",
        ),
        (
            "What is the place of birth of Penny Marshall?",
            "Penny Marshall@@ an actress. She was born in , , and",
            "an actress. She was born in The Bronx, , and",
        ),
    ]
    for e in examples:
        assert e.tail.lower() not in e.relation.lower()
        assert e.tail in e.window and len(e.window.split()) <= 10
        assert "<query>" in e.prompt and e.question in e.prompt and "ENTITY@@RELATION" in e.prompt
    assert stats.examples == 4 and stats.skipped == {"no supporting paragraph": 2, "unanswerable": 1}


def test_remove_entities_keeps_the_answer():
    text = "Penny Marshall was born in The Bronx, New York City."
    spans = [(0, 14), (27, 36), (38, 51)]
    assert remove_entities(text, spans, "The Bronx") == "was born in The Bronx, ."
    assert remove_entities(text, spans, "The Bronx", placeholder="##") == "## was born in The Bronx, ## ."


def test_tail_windows_exact():
    text = "a b c d e f g h i j k l"
    wins = tail_windows(text, "k", width=3)
    assert wins == [("i j k", "i j"), ("j k l", "j l")]
    assert tail_windows("short text here", "text", width=10) == [("short text here", "short here")]
    assert tail_windows("no answer", "missing") == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "x,", "y."]), min_size=1, max_size=30),
    st.integers(min_value=1, max_value=12),
    st.data(),
)
def test_tail_windows_properties(words, width, data):
    i = data.draw(st.integers(min_value=0, max_value=len(words) - 1))
    tail = words[i]
    text = " ".join(words)
    wins = tail_windows(text, tail, width=width)
    assert wins, "a single-word tail always fits a window"
    for window, relation in wins:
        assert window in text and tail.lower() in window.lower()
        assert len(window.split()) <= width
        assert len(relation.split()) == len(window.split()) - 1  # exactly one word deleted


def test_unknown_dataset_is_a_clear_error(sample_index):
    with pytest.raises(ValueError, match="hotpotqa"):
        build_sft_data(["hotpotqa"], rows={}, corpus={}, embedder=sample_index.embedder)


def test_real_musique_and_2wiki_smoke(data_dir, sample_index):
    examples, stats = build_sft_data(["musique", "2wikimultihopqa"], data_dir, limit=5, embedder=sample_index.embedder)
    assert len(examples) >= 10 and stats.examples == len(examples)
    sources = {e.source.split(":")[0] for e in examples}
    assert sources == {"musique", "2wikimultihopqa"}
    for e in examples:
        assert e.completion.startswith(e.head + "@@ ") and e.relation and e.tail.lower() not in e.relation.lower()
    first = next(e for e in examples if e.source.startswith("musique:2hop__150763_14904:1"))
    assert first.head == "Journal of Psychotherapy Integration" and first.tail == "American Psychological Association"
    assert first.passage_id == "mq-7976b1e35e0a"


def _tiny_model(path, texts):
    model, hf_tok = tiny_llama(texts, vocab_size=300, hidden_size=32, num_heads=2, max_positions=512)
    model.save_pretrained(path)
    hf_tok.save_pretrained(path)
    return path


def test_training_smoke_on_a_tiny_local_llama(built, tmp_path):
    import trl  # noqa: F401  (the `train` extra, part of `all`: make test installs it; fails, not skips, without)

    examples, _ = built
    base = _tiny_model(tmp_path / "base", [e.prompt + "\n" + e.completion for e in examples])
    out = tmp_path / "sft"
    path = train_translator(
        examples,
        base,
        out,
        batch_size=2,
        per_device_batch_size=2,
        max_steps=3,
        max_length=512,
        use_cpu=True,
        logging_steps=1,
    )
    assert path == out
    report = json.loads((out / "train_report.json").read_text())
    assert report["examples"] == 4 and report["global_steps"] == 3 and math.isfinite(report["train_loss"])
    assert report["effective_batch"] == 2 and report["chat_template"] is False
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    rows = [json.loads(line) for line in (out / "sft_data.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in rows] == [e.completion for e in examples]
    # the fine-tuned model loads back and its weights moved
    import torch
    from transformers import AutoModelForCausalLM

    a, b = AutoModelForCausalLM.from_pretrained(base), AutoModelForCausalLM.from_pretrained(out)
    assert any(not torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_build_only_needs_no_model(built, tmp_path):
    examples, _ = built
    assert train_translator(examples, None, tmp_path, build_only=True) == tmp_path
    report = json.loads((tmp_path / "train_report.json").read_text())
    assert report["examples"] == 4 and len(report["sample"]) == 3
    with pytest.raises(ValueError, match="base_model"):
        train_translator(examples, None, tmp_path)
