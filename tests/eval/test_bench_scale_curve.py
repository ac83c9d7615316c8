"""``kgrag bench-scale --curve`` (kgrag_plugins.eval.bench_scale_curve; issue 36 item 3)."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

import pytest

from kgrag_plugins.eval import bench_scale
from kgrag_plugins.eval import bench_scale_curve as bc


def test_fit_exponent_on_known_power_laws():
    xs = [5_000, 20_000, 50_000, 100_000]
    assert bc.fit_exponent(xs, [3.0 * x**1.5 for x in xs]) == pytest.approx(1.5, abs=1e-4)
    assert bc.fit_exponent(xs, [7.0 for _ in xs]) == pytest.approx(0.0, abs=1e-4)
    # missing or non-positive values are left out; fewer than two distinct x: no fit
    assert bc.fit_exponent(xs, [None, 2.0 * 20_000**0.5, 0.0, 2.0 * 100_000**0.5]) == pytest.approx(0.5, abs=1e-4)
    assert bc.fit_exponent(xs, [None, None, None, 4.0]) is None
    assert bc.fit_exponent([10, 10], [1.0, 2.0]) is None


def _fake_runner(calls: list, fail: dict | None = None):
    """A stand-in for the child processes: writes what each phase would, values ``y = c * x**e``."""
    fail = fail or {}

    def run(module: str, args: list[str], timeout: float | None = None) -> None:
        phase = args[0]
        calls.append((module.rsplit(".", 1)[1], phase, args[4] if phase == "_slow" else None))
        if phase in fail:
            raise fail[phase]
        if module == bc._CORPUS and phase == "_generate":
            d, n, add, q, seed = args[1:]
            Path(d).mkdir(parents=True, exist_ok=True)
            man = {"passages": int(n), "add": int(add), "queries": int(q), "seed": int(seed)}
            (Path(d) / "manifest.json").write_text(json.dumps(man))
            return
        if module == bc._KG and phase == "_generate":
            src, n, r, t, seed = args[1:]
            Path(src).mkdir(parents=True, exist_ok=True)
            man = {"n_entities": int(n), "n_relations": int(r), "n_triples": int(t), "seed": int(seed)}
            man.update(n_unique_triples=int(t) - 1, generate_seconds=1.0)
            (Path(src) / "manifest.json").write_text(json.dumps(man))
            return
        if phase == "_slow":
            index, _, out, name = args[1:5]
            n = json.loads((Path(index) / "manifest.json").read_text())["counts"]["passages"]
            Path(out).write_text(json.dumps({f"{name}_p50_ms": 0.1 * n**0.8, f"{name}_p95_ms": 1.0}))
            return
        if phase in ("_build", "_parsekg"):
            d, out = Path(args[1]), Path(args[2])
            n = json.loads((d / "manifest.json").read_text())["passages"]
            sub = d / ("index" if phase == "_build" else "index_parsekg")
            sub.mkdir(exist_ok=True)
            man = {"counts": {"passages": n}, "embedder": {"name": "test/fake"}}
            (sub / "manifest.json").write_text(json.dumps(man))
            if phase == "_build":
                res = {"build_seconds": 0.01 * n, "build_peak_rss_mb": 500 + n / 10, "index_bytes": 2**20 * n}
            else:
                res = {"parsekg_build_seconds": 0.02 * n, "parsekg_index_bytes": 2**19 * n}
            out.write_text(json.dumps(res))
            return
        if phase == "_query":
            d, out = Path(args[1]), Path(args[2])
            n = json.loads((d / "manifest.json").read_text())["passages"]
            res = {f"{r}_p50_ms": 2.0 * n**0.5 for r in ("dense", "activation")}
            res.update(bm25_p50_ms=0.5 * n**0.2, dense_p95_ms=1.0, activation_p95_ms=1.0, bm25_p95_ms=1.0)
            out.write_text(json.dumps(res))
            return
        if phase == "_import":
            index, out = Path(args[2]), Path(args[3])
            index.mkdir(parents=True, exist_ok=True)
            (index / "manifest.json").write_text("{}")
            n = json.loads((Path(args[1]) / "manifest.json").read_text())["n_entities"]
            out.write_text(json.dumps({"graph": {"entities": n, "triples": 4 * n}, "index_bytes": 300 * n}))
            return
        if phase == "_kg_open":
            index, out = Path(args[1]), Path(args[2])
            n = json.loads((index.parent / "wikidata5m" / "manifest.json").read_text())["n_entities"]
            res = {"open_seconds": 1 + 1e-5 * n, "open_index_seconds": 1e-5 * n, "open_peak_rss_mb": 0.01 * n}
            out.write_text(json.dumps({**res, "open_embedder_seconds": 1.0, "activation_2hop_p50_ms": 1.0}))
            return
        raise AssertionError(f"unexpected phase {module} {args}")

    return run


def test_run_curve_resumes_point_by_point(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(bc, "_run", _fake_runner(calls))
    out, js = tmp_path / "w", tmp_path / "docs" / "curve.json"
    res = bc.run_curve(out, js, sizes=[400, 200], kg_sizes=[2000], queries=4, img_dir=tmp_path / "img")
    assert calls.count(("bench_scale_corpus", "_build", None)) == 2 and ("bench_scale", "_import", None) in calls
    assert list(res["corpus"]) == ["200", "400"] and list(res["kg"]) == ["2000"]
    pt = res["corpus"]["200"]
    assert pt["params"] == {"passages": 200, "queries": 4, "seed": 0, "embedder_option": "default"}
    assert pt["embedder"] == "test/fake" and set(bc.CORPUS_PHASES) <= set(pt)
    assert {"start_utc", "end_utc", "load_start", "load_end"} <= set(pt["stamps"]["build"])
    assert res["kg"]["2000"]["params"]["triples"] == round(2000 * 21_000_000 / 4_600_000)
    fit = res["fits"]
    assert fit["build_seconds"]["exponent"] == pytest.approx(1.0, abs=1e-3)
    assert fit["dense_p50_ms"]["exponent"] == pytest.approx(0.5, abs=1e-3)
    assert fit["frag_p50_ms"]["exponent"] == fit["translator_p50_ms"]["exponent"] == pytest.approx(0.8, abs=1e-3)
    assert fit["index_mb"]["exponent"] == pytest.approx(1.0, abs=1e-3) and fit["build_seconds"]["range"] == [200, 400]
    assert "kg_open_seconds" not in fit  # one KG point: no fit
    assert res["activation_dense_exponent_ratio"] == pytest.approx(1.0)
    assert json.loads(js.read_text()) == res
    for p in res["plots"]:
        assert Path(p).parent == tmp_path / "img" and Path(p).stat().st_size > 1000
    assert sorted(Path(p).name for p in res["plots"]) == ["curve-build.png", "curve-kg.png", "curve-query.png"]
    # resumed: nothing measured again, a new size only measures that size
    calls.clear()
    res2 = bc.run_curve(out, js, sizes=[200, 400], kg_sizes=[2000], queries=4, plots=False)
    assert calls == [] and res2["corpus"] == res["corpus"]
    bc.run_curve(out, js, sizes=[800], kg_sizes=[2000, 4000], queries=4, plots=False)
    assert [c[1] for c in calls if c[0] == "bench_scale_corpus"] == ["_generate", "_build", "_query"]
    assert sum(c[1] == "_import" for c in calls) == 1
    res3 = json.loads(js.read_text())
    assert list(res3["corpus"]) == ["200", "400", "800"]  # points outside --sizes are kept
    assert res3["fits"]["build_seconds"]["points"] == 3 and res3["fits"]["kg_open_seconds"]["points"] == 2
    # other parameters or --force: measured again
    calls.clear()
    bc.run_curve(out, js, sizes=[200], kg_sizes=[], queries=8, plots=False)
    assert ("bench_scale_corpus", "_build", None) in calls
    assert json.loads(js.read_text())["corpus"]["200"]["params"]["queries"] == 8
    calls.clear()
    bc.run_curve(out, js, sizes=[], kg_sizes=[2000], queries=4, force=True, plots=False)
    assert [c[1] for c in calls] == ["_import", "_kg_open"]  # the generated KG is reused
    # --force --phases: only those phases of every point again
    calls.clear()
    before = json.loads(js.read_text())["corpus"]["200"]
    bc.run_curve(out, js, sizes=[200], kg_sizes=[2000], queries=8, force=True, phases=["query"], plots=False)
    assert calls == [("bench_scale_corpus", "_query", None)]
    after = json.loads(js.read_text())["corpus"]["200"]
    assert after["build"] == before["build"] and after["query"] == before["query"]  # the fake measures the same
    with pytest.raises(ValueError, match="unknown phase"):
        bc.run_curve(out, js, sizes=[200], kg_sizes=[], phases=["nope"], plots=False)


def test_a_lost_index_is_rebuilt_and_a_slow_phase_records_why(tmp_path, monkeypatch):
    calls: list = []
    timeout = subprocess.TimeoutExpired(["python"], 5)
    monkeypatch.setattr(bc, "_run", _fake_runner(calls, {"_slow": timeout}))
    out, js = tmp_path / "w", tmp_path / "curve.json"
    res = bc.run_curve(out, js, sizes=[200], kg_sizes=[], queries=4, slow_timeout=5, plots=False)
    for name in bc.SLOW:
        assert res["corpus"]["200"][name] == {"skipped": "not finished after 5 s (--slow-timeout)"}
    assert "frag_p50_ms" not in res["fits"]
    table = bc.markdown_table(res)
    assert "not measured: not finished after 5 s" in table
    # the same timeout: not retried; a longer one: retried, with nothing else measured again
    calls.clear()
    bc.run_curve(out, js, sizes=[200], kg_sizes=[], queries=4, slow_timeout=5, plots=False)
    assert calls == []
    monkeypatch.setattr(bc, "_run", _fake_runner(calls))
    bc.run_curve(out, js, sizes=[200], kg_sizes=[], queries=4, slow_timeout=60, plots=False)
    assert calls == [("bench_scale_curve", "_slow", "frag"), ("bench_scale_curve", "_slow", "translator")]
    assert json.loads(js.read_text())["corpus"]["200"]["frag"]["frag_p50_ms"] > 0
    # the index is gone but a phase that reads it is still to measure: the build runs again
    import shutil

    shutil.rmtree(out / "corpus-200" / "index")
    pt = json.loads(js.read_text())
    del pt["corpus"]["200"]["query"]
    js.write_text(json.dumps(pt))
    calls.clear()
    bc.run_curve(out, js, sizes=[200], kg_sizes=[], queries=4, slow_timeout=60, plots=False)
    assert [c[1] for c in calls] == ["_build", "_query"]


def test_curve_command_writes_json_and_table(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(bc, "_run", _fake_runner(calls))
    js = tmp_path / "c.json"
    p = argparse.ArgumentParser()
    bench_scale.add_parser(p.add_subparsers())
    args = p.parse_args(
        ["bench-scale", "--curve", "--out-dir", str(tmp_path / "w"), "--json", str(js), "--img-dir", str(tmp_path)]
        + ["--sizes", "200,400", "--kg-sizes", "1000,2_000", "--queries", "3", "--no-plots"]
    )
    assert args.func(args) == 0
    res = json.loads(js.read_text())
    assert list(res["corpus"]) == ["200", "400"] and list(res["kg"]) == ["1000", "2000"]
    md = js.with_suffix(".md").read_text()
    assert "| 200 | 2.0 | 520.0 | 200.0 | 4.0 |" in md and "| build_seconds | 1.0 | 2 | 200–400 passages |" in md
    assert "activation / dense p50 exponent ratio: 1.000" in md
    with pytest.raises(ValueError, match="exactly one of --kg"):
        args = p.parse_args(["bench-scale", "--curve", "--kg", "--out-dir", str(tmp_path)])
        args.func(args)


def _hash_embedder(monkeypatch):
    from conftest import HashEmbedder

    from kgrag_plugins.index import store
    from kgrag_plugins.models import embed

    emb = HashEmbedder()
    monkeypatch.setattr(embed, "default_embedder", lambda: emb)
    monkeypatch.setattr(store, "default_embedder", lambda: emb)


def test_kg_open_phase_in_process(tmp_path, monkeypatch):
    """The KG point's open phase on a tiny imported KG (a hashing embedder stands in for MiniLM)."""
    _hash_embedder(monkeypatch)
    src, idx = tmp_path / "w", tmp_path / "kg" / "index"
    bench_scale.generate(src, n_entities=800, n_relations=20, n_triples=3000, seed=2)
    bench_scale._phase_import(str(src), str(idx), str(tmp_path / "imp.json"))
    bc._phase_kg_open(str(idx), str(tmp_path / "open.json"), 5, 1)
    o = json.loads((tmp_path / "open.json").read_text())
    assert o["graph_mapped"] and o["activation_2hop_queries"] == 5 and o["open_peak_rss_mb"] > 0
    assert o["open_seconds"] >= o["open_index_seconds"]


@pytest.mark.slow
def test_corpus_phases_in_process(tmp_path, monkeypatch, data_dir):
    """The module's corpus phases (ParseKG build with reused vectors, FRAG / translator queries) on
    60 passages; a hashing embedder stands in for MiniLM. (Slow: two spaCy builds, ~30 s idle.)"""
    from kgrag_plugins.eval import bench_scale_corpus

    monkeypatch.setenv("KGRAG_DATA_DIR", str(data_dir))
    _hash_embedder(monkeypatch)
    d = tmp_path / "c"
    bench_scale_corpus.generate(d, 60, 0, 4, seed=1)
    bench_scale_corpus._phase_build(d, d / "b.json", False)
    bc._phase_parsekg(d, d / "p.json", "default")
    p = json.loads((d / "p.json").read_text())
    assert p["parsekg_counts"]["passages"] == 60 and p["parsekg_index_bytes"] > 0
    assert "embed_passages_s" not in p["parsekg_build_timings"]  # the vectors were reused, not embedded
    for name, index in (("frag", d / "index"), ("translator", d / "index_parsekg")):
        bc._slow_query(index, d / "questions.jsonl", d / f"{name}.json", name, 4, "default")
        r = json.loads((d / f"{name}.json").read_text())
        assert r[f"{name}_queries"] == 4 and r[f"{name}_p50_ms"] > 0 and 0 <= r[f"{name}_fallbacks"] <= 4
        assert 1 <= r[f"{name}_warmup_questions"] <= 4 and not math.isnan(r[f"{name}_p95_ms"])
    assert "relation_windows" in json.loads((d / "translator.json").read_text())["translator_prepare"]
    # FRAG's vectors were stored before its questions: none of them embedded a relation
    assert json.loads((d / "frag.json").read_text())["frag_precompute_seconds"].keys() == {"entities", "relations"}
    gen = d / "index" / json.loads((d / "index" / "manifest.json").read_text())["generation"]
    assert (gen / "relation_vectors.npy").is_file() and not list(gen.glob("relation_rows.*"))


@pytest.mark.slow
def test_curve_end_to_end_tiny(tmp_path, data_dir, monkeypatch):
    """The command with the real embedder, every phase a fresh process: two corpus sizes, two KG
    sizes, then a resumed run that measures nothing. (Slow: ~20 interpreters load the embedder.)"""
    monkeypatch.setenv("KGRAG_DATA_DIR", str(data_dir))
    js = tmp_path / "c.json"
    argv = ["bench-scale", "--curve", "--out-dir", str(tmp_path / "w"), "--json", str(js)]
    argv += ["--sizes", "200,400", "--kg-sizes", "2000,4000", "--queries", "5"]
    p = argparse.ArgumentParser()
    bench_scale.add_parser(p.add_subparsers())
    args = p.parse_args(argv)
    assert args.func(args) == 0
    res = json.loads(js.read_text())
    for x in ("200", "400"):
        pt = res["corpus"][x]
        assert pt["build"]["build_counts"]["passages"] == int(x) and pt["query"]["queries"] == 5
        for r in bc.RETRIEVERS:
            src = pt[r if r in bc.SLOW else "query"]
            assert f"{r}_p50_ms" in src or "skipped" in src, (x, r)
    for x in ("2000", "4000"):
        assert res["kg"][x]["open"]["graph_mapped"] and res["kg"][x]["import"]["graph"]["entities"] == int(x)
    for c in ("build_seconds", "index_mb", "dense_p50_ms", "activation_p50_ms", "kg_open_peak_rss_mb"):
        assert res["fits"][c]["points"] == 2, c
    assert all(Path(p).is_file() for p in res["plots"])
    stamps = res["corpus"]["200"]["stamps"]
    assert args.func(args) == 0  # resumed: every point measured already
    assert json.loads(js.read_text())["corpus"]["200"]["stamps"] == stamps


def test_plots_draw_the_three_figures_from_the_committed_curve_json(tmp_path):
    """``plot`` redraws the build, query and KG figures (log-log) from a curve JSON, into tmp."""
    import json
    from pathlib import Path

    from PIL import Image

    from kgrag_plugins.eval.bench_scale_curve import plot

    res = json.loads((Path(__file__).resolve().parents[2] / "docs/benchmarks/bench-scale-curve.json").read_text())
    paths = plot(res, tmp_path)
    assert [p.name for p in paths] == [f"bench-scale-curve-{s}.png" for s in ("build", "query", "kg")]
    sizes = [Image.open(p).size for p in paths]
    assert sizes[0][0] > sizes[2][0] > sizes[1][0] > 300  # three panels, two, one
