"""``kgrag bench-scale --kg`` (kgrag_plugins.eval.bench_scale; issue 19 items 1 and 6)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

from kgrag_plugins.eval import bench_scale
from kgrag_plugins.eval.bench_scale_common import activation_2hop
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.types import Entity

KEYS = ("open_seconds", "open_peak_rss_mb", "activation_2hop_p50_ms", "frag_p50_ms")


def _graph(n: int = 60, m: int = 240, seed: int = 0) -> KnowledgeGraph:
    rng = np.random.default_rng(seed)
    g = KnowledgeGraph()
    for i in range(n):
        g.add_entity(Entity(f"e{i}", f"E {i}"))
    for j in range(m):
        a, b = rng.integers(0, n, 2).tolist()
        g.add_triple(f"e{a}", f"r{j % 5}", f"e{b}")  # self-loops and parallel edges included
    g.add_entity(Entity("lonely", "Lonely"))
    return g


def _dense_2hop(g: KnowledgeGraph, seed: str, d: float) -> np.ndarray:
    """Reference: (1 - d) (x0 + x1 + x2) with x_{k+1} = d P^T x_k, P = D^-1 (A + A^T)."""
    a = g.adjacency("out").copy()
    a.data = np.ones_like(a.data, dtype=np.float64)
    sym = (a + a.T).toarray()
    deg = sym.sum(axis=1)
    p = np.divide(sym, deg[:, None], out=np.zeros_like(sym), where=deg[:, None] > 0)
    x = np.zeros(len(g))
    x[g.index_of(seed)] = 1.0
    total = x.copy()
    for _ in range(2):
        x = d * p.T @ x
        total += x
    return (1 - d) * total


@pytest.mark.parametrize("seed", ["e0", "e7", "e33"])
def test_activation_2hop_equals_the_truncated_pagerank_series(tmp_path, seed):
    g = _graph()
    g.save(tmp_path / "g", mapped=True)
    for graph in (g, KnowledgeGraph.load(tmp_path / "g")):
        res = activation_2hop(graph, seed, damping=0.5, top=1000, max_facts=5)
        ref = _dense_2hop(g, seed, 0.5)
        got = np.zeros(len(g))
        for eid, v in res["activated"].items():
            got[g.index_of(eid)] = v
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
        assert res["reached"] == int(np.count_nonzero(ref))
        assert list(res["activated"].values()) == sorted(res["activated"].values(), reverse=True)
        top = set(res["activated"])
        assert len(res["facts"]) == 5
        for ti in res["facts"]:
            t = g.triple(ti)
            assert t.head in top and t.tail in top and t.head != t.tail
    iso = activation_2hop(g, "lonely")
    assert iso == {"activated": {"lonely": 0.5}, "facts": [], "reached": 1}


def test_markdown_table_lists_the_headline_numbers():
    res = {
        "graph": {"entities": 4_600_000, "triples": 20_881_808},
        "import_seconds": 41.0,
        "save_seconds": 30.5,
        "import_peak_rss_mb": 2900.0,
        "open_seconds": 7.5,
        "open_embedder_seconds": 5.0,
        "open_index_seconds": 2.5,
        "open_peak_rss_mb": 650.0,
        "activation_2hop_p50_ms": 12.5,
        "activation_2hop_p95_ms": 150.0,
        "frag_setup_seconds": 60.0,
        "frag_p50_ms": 900.0,
        "frag_p95_ms": 1500.0,
        "frag_graph_p50_ms": 700.0,
        "frag_graph_p95_ms": 800.0,
        "peak_rss_after_frag_mb": 4000.0,
    }
    table = bench_scale.markdown_table(res)
    assert "| KG | 4,600,000 entities, 20,881,808 triples |" in table
    assert "| open s (MiniLM load + index open) | 7.5 (5.0 + 2.5) |" in table
    assert "| 2-hop activation p50 / p95 ms | 12.5 / 150.0 |" in table


def test_bench_scale_needs_kg(tmp_path):
    p = argparse.ArgumentParser()
    bench_scale.add_parser(p.add_subparsers())
    args = p.parse_args(["bench-scale", "--out-dir", str(tmp_path)])
    with pytest.raises(ValueError, match="--kg"):
        args.func(args)


def test_phases_in_process(tmp_path, monkeypatch):
    """The import and query phases (run in fresh processes by the command) on a tiny KG; a fast
    hashing embedder stands in for MiniLM (the slow end-to-end test below runs MiniLM)."""
    from conftest import HashEmbedder

    from kgrag_plugins.index import store
    from kgrag_plugins.models import embed

    emb = HashEmbedder()
    monkeypatch.setattr(embed, "default_embedder", lambda: emb)
    monkeypatch.setattr(store, "default_embedder", lambda: emb)
    src, idx = tmp_path / "w", tmp_path / "index"
    man = bench_scale.generate(src, n_entities=1500, n_relations=40, n_triples=6000, seed=3)
    assert man["n_unique_triples"] <= 6000 and (src / bench_scale.TRIPLE_FILE).is_file()
    bench_scale._phase_import(str(src), str(idx), str(tmp_path / "imp.json"))
    imp = json.loads((tmp_path / "imp.json").read_text())
    assert imp["graph"] == {"entities": 1500, "triples": man["n_unique_triples"], "relations": 40}
    assert imp["graph_mapped_format"] and not (tmp_path / "graph.staging").exists()
    bench_scale._phase_query(str(idx), str(tmp_path / "q.json"), 8, 3, 1)
    q = json.loads((tmp_path / "q.json").read_text())
    assert q["graph_mapped"] and q["activation_2hop_queries"] == 8 and q["frag_queries"] == 2
    assert all(q[k] > 0 for k in KEYS) and q["frag_median_paths"] > 0
    assert q["open_seconds"] >= q["open_index_seconds"]


@pytest.mark.slow
def test_bench_scale_end_to_end_tiny(tmp_path):
    """Generate, import, save, open in a fresh process, query: the JSON, the table, the index.
    (Slow: four fresh interpreters load torch and MiniLM; ~1 min on an idle 2-core machine.)"""
    out = tmp_path / "res.json"
    p = argparse.ArgumentParser()
    bench_scale.add_parser(p.add_subparsers())
    args = p.parse_args(
        ["bench-scale", "--kg", "--out-dir", str(tmp_path / "w"), "--json", str(out)]
        + ["--entities", "2000", "--triples", "10000", "--queries", "10", "--frag-queries", "1"]
    )
    assert args.func(args) == 0
    res = json.loads(out.read_text())
    for k in KEYS + ("import_seconds", "activation_2hop_p95_ms", "frag_p95_ms", "machine"):
        assert k in res
    assert res["graph"]["entities"] == 2000 and res["graph"]["relations"] == 822
    assert res["graph"]["triples"] == res["n_unique_triples"] <= 10000
    assert res["graph_mapped_format"] and res["graph_mapped"]
    assert res["activation_2hop_queries"] == 10 and res["frag_queries"] == 1
    assert res["open_seconds"] > 0 and res["open_peak_rss_mb"] > res["baseline_rss_mb"] > 0
    assert "| open peak RSS MB |" in out.with_suffix(".md").read_text()
    # the saved index opens in another fresh process, memory-mapped, with the generated entities
    code = (
        "import sys; from kgrag_plugins.index.store import KnowledgeIndex;"
        "i = KnowledgeIndex.open(sys.argv[1]); print(i.graph.mapped, i.graph.num_entities, i.graph.num_triples)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, res["index"]], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.split() == ["True", "2000", str(res["graph"]["triples"])]
    first = (tmp_path / "w" / "wikidata5m" / "wikidata5m_entity.txt").read_text().split("\n", 1)[0].split("\t")
    back = KnowledgeGraph.load(next((tmp_path / "w" / "index").glob("gen-*/graph")))
    assert back.name_of(first[0]) == first[1]
