"""``kgrag bench-scale --corpus`` (kgrag_plugins.eval.bench_scale_corpus; issue 19 items 2 and 6)."""

from __future__ import annotations

import argparse
import json

import pytest

from kgrag_plugins.eval import bench_scale, bench_scale_corpus
from kgrag_plugins.types import Passage

KEYS = (
    "embed_only_seconds",
    "build_seconds",
    "build_throughput_ratio",
    "build_peak_rss_mb",
    "add_seconds",
    "add_no_full_rebuild",
    "query_open_seconds",
    "dense_p50_ms",
    "dense_p95_ms",
    "bm25_p50_ms",
    "activation_p50_ms",
    "activation_p95_ms",
    "activation_dense_p50_ratio",
    "query_peak_rss_mb",
)


def _sources() -> dict[str, list[Passage]]:
    a = [Passage(f"a{i}", f"Alpha {i} is a town. It has {i} parks. Its mayor is M{i}.", f"A{i}") for i in range(5)]
    b = [Passage(f"b{i}", f"Beta {i} was a ship. It sank in 19{i}0.", f"B{i}") for i in range(3)]
    b.append(Passage("b9", "One sentence only.", "B9"))
    return {"a": a, "b": b}


def test_synthesize_gives_distinct_deterministic_passages():
    src = _sources()
    out = bench_scale_corpus.synthesize(src, 60, seed=4)
    assert out == bench_scale_corpus.synthesize(src, 60, seed=4)
    assert out != bench_scale_corpus.synthesize(src, 60, seed=5)
    assert len({p.id for p in out}) == len({p.text for p in out}) == len({p.title for p in out}) == 60
    originals = {p.id: p for ps in src.values() for p in ps}
    sentences = {name: {s for p in ps for s in bench_scale_corpus.split_sentences(p.text)} for name, ps in src.items()}
    first = out[:9]  # copy 0 of every source passage, verbatim, sources mixed
    assert sorted(p.metadata["base"] for p in first) == sorted(originals)
    for p in first:
        assert (p.text, p.title) == (originals[p.metadata["base"]].text, originals[p.metadata["base"]].title)
    for p in out[9:]:  # copies: sentences of the same source only, title "<title> (copy)"
        base = originals[p.metadata["base"]]
        assert p.title == f"{base.title} ({p.metadata['copy']})"
        assert set(bench_scale_corpus.split_sentences(p.text)) <= sentences[p.metadata["source"]]
        assert (
            abs(len(bench_scale_corpus.split_sentences(p.text)) - len(bench_scale_corpus.split_sentences(base.text)))
            <= 1
        )


def test_bench_scale_needs_exactly_one_mode(tmp_path):
    p = argparse.ArgumentParser()
    bench_scale.add_parser(p.add_subparsers())
    args = p.parse_args(["bench-scale", "--kg", "--corpus", "--out-dir", str(tmp_path)])
    with pytest.raises(ValueError, match="exactly one of --kg"):
        args.func(args)


def test_phases_in_process(tmp_path, monkeypatch, data_dir):
    """generate / embed / build / add / query on 60 + 12 real passages; a fast hashing embedder
    stands in for MiniLM (the slow end-to-end test below runs MiniLM in fresh processes)."""
    from conftest import HashEmbedder

    from kgrag_plugins.index import store
    from kgrag_plugins.models import embed

    monkeypatch.setenv("KGRAG_DATA_DIR", str(data_dir))
    emb = HashEmbedder()
    monkeypatch.setattr(embed, "default_embedder", lambda: emb)
    monkeypatch.setattr(store, "default_embedder", lambda: emb)
    d = tmp_path / "c"
    man = bench_scale_corpus.generate(d, 60, 12, 6, seed=2)
    assert man["distinct_texts"] == 72 and sum(man["source_passages"].values()) > 9000
    assert len((d / "questions.jsonl").read_text().splitlines()) == 6
    bench_scale_corpus._phase_embed(d, d / "e.json")
    e = json.loads((d / "e.json").read_text())
    # the phase embedded every passage with the embedder it was given (its time rounds to 0.0 s here)
    assert e["embed_rows"] == 60 and e["embedder"] == emb.name == "test/hash-bow"
    bench_scale_corpus._phase_build(d, d / "b.json", True)
    b = json.loads((d / "b.json").read_text())
    assert b["build_counts"]["passages"] == 60 and b["build_counts"]["entities"] > 60
    assert b["dense_build_seconds"] > 0 and b["build_peak_rss_mb"] > 0
    bench_scale_corpus._phase_add(d, d / "a.json")
    a = json.loads((d / "a.json").read_text())
    # the new passages and the windows of the long ones among them: nothing of the old corpus
    assert a["add_no_full_rebuild"] and a["add_parsed_passages"] == 12
    assert a["add_embedded_texts"] == 12 + a["add_embedded_windows"]
    assert a["add_entity_rows_unchanged"] and a["add_counts_after"]["passages"] == 72
    assert a["add_counts_after"]["entities"] == a["add_counts_before"]["entities"] + a["add_result"]["entities"]
    assert a["add_reopened_passages"] == 72 and a["add_found_bm25_top1"] == a["add_found_dense_top1"] == 12
    bench_scale_corpus._phase_query(d, d / "q.json", 6)
    q = json.loads((d / "q.json").read_text())
    assert q["queries"] == 6 and q["query_passages"] == 72
    assert q["activation_dense_p50_ratio"] == round(q["activation_p50_ms"] / q["dense_p50_ms"], 3)


def args_list(tmp_path, out):
    return ["bench-scale", "--corpus", "--out-dir", str(tmp_path / "c"), "--json", str(out)] + [
        "--passages",
        "300",
        "--add",
        "30",
        "--queries",
        "10",
    ]


def test_phase_selection_is_checked_before_anything_runs(tmp_path):
    run = bench_scale_corpus.run_corpus_bench
    with pytest.raises(ValueError, match="unknown phase"):
        run(tmp_path / "c", passages=10, add=2, queries=2, phases=["nope"])
    with pytest.raises(ValueError, match="no earlier result"):
        run(tmp_path / "c", passages=10, add=2, queries=2, phases=["query"])
    assert not (tmp_path / "c").exists()  # nothing generated, nothing run


@pytest.mark.slow
def test_bench_scale_corpus_end_to_end(tmp_path, data_dir, monkeypatch):
    """The command with MiniLM, every phase a fresh process: JSON fields, no full rebuild on add.
    (Slow: five interpreters load torch and MiniLM, 300 passages embedded twice.)"""
    monkeypatch.setenv("KGRAG_DATA_DIR", str(data_dir))
    out = tmp_path / "res.json"
    p = argparse.ArgumentParser()
    bench_scale.add_parser(p.add_subparsers())
    args = p.parse_args(args_list(tmp_path, out))
    assert args.func(args) == 0
    res = json.loads(out.read_text())
    for k in KEYS:
        assert k in res, k
    assert res["n_passages"] == 300 and res["n_add"] == 30 and res["queries"] == 10
    assert res["build_throughput_ratio"] == round(res["embed_only_seconds"] / res["build_seconds"], 3)
    assert res["add_no_full_rebuild"] and res["add_parsed_passages"] == 30
    assert res["add_embedded_texts"] == 30 + res["add_embedded_windows"]
    assert res["add_entity_rows_unchanged"] and res["add_counts_after"]["passages"] == 330
    assert res["add_found_dense_top1"] == 30 and res["add_found_bm25_top1"] >= 29  # near-duplicate sources can tie
    assert res["query_passages"] == 330 and res["build_counts"]["entities"] > 300
    assert "| activation / dense p50 |" in out.with_suffix(".md").read_text()
    assert res["add_store_reindex_seconds"]["chroma_reused"] == 1.0  # the add copied Chroma
    # --phases query: re-measure the queries only; the other phases' results are the earlier ones
    again = p.parse_args([*args_list(tmp_path, out), "--phases", "query"])
    assert again.func(again) == 0
    res2 = json.loads(out.read_text())
    assert res2["phases_run"] == ["query"] and res["phases_run"] == ["embed", "build", "add", "query"]
    for k in ("embed_only_seconds", "build_seconds", "add_seconds", "add_found_dense_top1"):
        assert res2[k] == res[k], k
    assert res2["query_passages"] == 330
    with pytest.raises(ValueError, match="index holds more: run build too"):
        bench_scale_corpus.run_corpus_bench(tmp_path / "c", passages=300, add=30, queries=10, phases=["add"])
