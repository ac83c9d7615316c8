"""The demo's bundled sample (multi-hop, with distractors), its readable facts and the
real-dataset numbers it prints beside the sample's (issue 12)."""

import io
import json
import re

from conftest import REPO_ROOT

from kgrag_plugins import demo

BENCH_DIR = REPO_ROOT / "docs" / "benchmarks"


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 3}


def test_sample_is_multi_hop_with_non_lexical_bridges(sample_corpus, sample_questions):
    passages = {p.id: p for p in sample_corpus}
    assert [p.id for p in sample_corpus[:45]] == [f"s-{i:03d}" for i in range(1, 46)]  # the original 45 stay
    assert len(sample_questions) >= 20 and len({q.id for q in sample_questions}) == len(sample_questions)
    assert sum(q.hops >= 2 for q in sample_questions) >= len(sample_questions) - 1
    assert (
        sum(q.hops == 3 for q in sample_questions) >= 3 and sum(q.type == "comparison" for q in sample_questions) >= 1
    )
    for q in sample_questions:
        gold = [passages[pid] for pid in q.supporting_passage_ids]
        assert len(gold) == q.hops and len(set(q.supporting_passage_ids)) == q.hops, q.id
        assert any(a in " ".join(p.text for p in gold) for a in q.answers), q.id  # the gold passages hold the answer
        if q.type == "compositional":
            first, *bridges = gold
            assert (
                first.title in q.question
                or q.hops == 3
                or any(  # the question names (or describes) hop one
                    w in q.question.lower() for w in _words(first.text)
                )
            ), q.id
            for p in bridges:  # ... but never the entity of a later hop
                assert p.title not in q.question, (q.id, p.title)
    assert sample_questions[0].supporting_passage_ids == ["s-001", "s-005"]  # Curie -> Warsaw -> Vistula
    assert sample_questions[-1].hops == 1 and "Magic Flute" in sample_questions[-1].question


def test_unmask_sentence_fills_the_mentions_builder_masks():
    text = "Born in Ulm, he trained as a teacher at ETH Zurich, graduating in 1900. His dramas include The Robbers."
    assert (
        demo.unmask_sentence("Born in ##, he trained as a teacher at ##, graduating in 1900.", ["x", text])
        == "Born in Ulm, he trained as a teacher at ETH Zurich, graduating in 1900."
    )
    # a mask at the start of a sentence matches from that sentence's start only
    assert demo.unmask_sentence("## dramas include ##.", [text]) == "His dramas include The Robbers."
    assert demo.unmask_sentence("a plain relation phrase", [text]) is None
    assert demo.unmask_sentence("Never ## written.", [text]) is None


def test_readable_fact_uses_the_source_passage(sample_mentions_index):
    from kgrag_plugins.methods.activation import triple_fact

    idx = sample_mentions_index
    g = idx.graph
    masked = [i for i, t in enumerate(g.triples()) if "##" in t.relation]
    assert masked
    for i in masked:
        text = demo.readable_fact(idx, triple_fact(g, i, 1.0))
        assert "##" not in text and "…" not in text.split(": ", 1)[0], text


def test_packaged_benchmark_summary_matches_the_committed_reports():
    """kgrag_plugins/data/benchmarks_summary.json (what an installed package shows) is in sync
    with docs/benchmarks; regenerate with `python benchmarks/demo_summary.py`."""
    live = demo.summarize_benchmark_dir(BENCH_DIR)
    packaged = json.loads((REPO_ROOT / "kgrag_plugins" / "data" / demo.BENCHMARKS_SUMMARY).read_text())["files"]
    assert {n: {k: v for k, v in f.items() if k != "committed"} for n, f in packaged.items()} == live
    assert {"activation-musique.json", "frag-metaqa.json", "graph-baselines-2wikimultihopqa.json"} <= set(live)
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", f["committed"] or "") for f in packaged.values())


def test_summary_prints_real_numbers_or_points_to_the_readme(monkeypatch, sample_questions):
    summary = {"dense": 0.5, "activation": 0.75, "frag": 0.6}
    checkout = demo.benchmark_numbers()
    assert checkout["source"] == "docs/benchmarks/*.json"
    assert all(f["committed"] for f in checkout["files"].values())
    act = checkout["files"]["activation-bm25-musique.json"]["results"]["activation"]
    buf = io.StringIO()
    demo._print_summary(buf, summary, sample_questions, 3)
    out = buf.getvalue()
    assert f"{act['recall@2']:.3f}/{act['recall@5']:.3f}" in out and "committed 20" in out
    # an installed package has no docs/: the packaged copy, then a pointer to the README
    installed = demo.benchmark_numbers(None)
    assert installed["source"].startswith("kgrag_plugins/data/") and installed["files"] == checkout["files"]
    monkeypatch.setattr(demo, "benchmark_numbers", lambda *a, **k: None)
    buf = io.StringIO()
    demo._print_summary(buf, summary, sample_questions, 3)
    lines = buf.getvalue().splitlines()
    assert (
        lines[-1].startswith("Real-dataset numbers") and "README" in lines[-1] and "activation 0.750" in buf.getvalue()
    )
    assert demo._kgqa_benchmark_lines() == []


def test_llm_demo_with_smollm2_answers_side_by_side():
    """`kgrag demo --llm smollm2`: the real model answers from activation-retrieved passages and
    closed-book; a reply that fails validation would be shown as such, never as an answer."""
    import io

    from kgrag_plugins.demo_llm import run_llm_demo

    out = io.StringIO()
    acc = run_llm_demo(out, "smollm2", n=1)
    text = out.getvalue()
    assert "passages (activation):" in text and "answer with passages :" in text and "answer closed-book   :" in text
    assert set(acc) == {"retrieved", "closed_book"} and all(0.0 <= v <= 1.0 for v in acc.values())
    assert "Gold answer contained:" in text
