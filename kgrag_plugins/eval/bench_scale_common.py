"""What both ``kgrag bench-scale`` benchmarks measure with: a phase run in a fresh interpreter, the
process's resident set, latency percentiles, the truncated 2-hop activation (:mod:`.bench_scale` for
``--kg``, :mod:`.bench_scale_corpus` for ``--corpus``, :mod:`.bench_scale_curve` for ``--curve``; they
import this module, not each other's helpers)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np


def run_phase(module: str, args: list[str], timeout: float | None = None) -> None:
    """Run one phase of ``module`` (``python -m module *args``) in a fresh interpreter: its own peak
    RSS, no warm caches. Past ``timeout`` seconds the child is killed and
    ``subprocess.TimeoutExpired`` raised."""
    repo = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-m", module, *args], check=True, env=env, timeout=timeout)


def rss_mb() -> dict[str, float | None]:
    """This process's current (``VmRSS``) and peak (``VmHWM``) resident set in MB (Linux
    ``/proc``; unlike ``ru_maxrss``, ``VmHWM`` is not inherited from the parent of a fork)."""
    out: dict[str, float | None] = {"rss": None, "hwm": None}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out["rss" if line.startswith("VmRSS") else "hwm"] = int(line.split()[1]) / 1024
    except OSError:  # pragma: no cover - not Linux
        from ..index.importers import peak_rss_mb

        out["hwm"] = peak_rss_mb()
    return out


def dir_bytes(d: str | os.PathLike[str]) -> int:
    """Bytes of every file below ``d`` (an index's size on disk)."""
    return sum(p.stat().st_size for p in Path(d).rglob("*") if p.is_file())


def pcts(ms: list[float]) -> dict[str, float]:
    """``{"p50", "p95"}`` of latencies ``ms`` (NaN for none), rounded to 0.01."""
    xs = sorted(ms)
    if not xs:
        return {"p50": float("nan"), "p95": float("nan")}
    return {"p50": round(statistics.median(xs), 2), "p95": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))], 2)}


def activation_2hop(graph: Any, seed: str, *, damping: float = 0.5, top: int = 20, max_facts: int = 10) -> dict:
    """Spreading activation from ``seed`` truncated at two hops, on the seed's neighbourhood only.

    The activation of :class:`~kgrag_plugins.methods.activation.ActivationRetriever` is personalized
    PageRank ``r = (1 - d) Σ_k (d P)^k s`` over the undirected graph (``P`` = random-walk transition,
    here every triple an edge); this sums the terms ``k = 0, 1, 2`` (exactly, sparse vectors over
    the CSR rows of the frontier), so its cost follows the 2-hop neighbourhood, not the graph.
    Returns ``activated`` (top ``top`` entity id -> activation, strongest first), ``facts``
    (triple indices joining two of them, as the retriever's facts) and ``reached`` (entities with
    activation > 0)."""
    out, inn = graph.adjacency("out"), graph.adjacency("in")
    rows = np.array([graph.index_of(seed)], dtype=np.int64)
    vals = np.ones(1)
    total: dict[int, float] = {int(rows[0]): 1.0 - damping}
    for _ in range(2):
        parts, owners = [], []
        deg = np.zeros(len(rows), dtype=np.int64)
        for m in (out, inn):
            starts, ends = m.indptr[rows].astype(np.int64), m.indptr[rows + 1].astype(np.int64)
            counts = ends - starts
            deg += counts
            owner = np.repeat(np.arange(len(rows)), counts)
            offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            parts.append(np.asarray(m.indices[starts[owner] + offs], dtype=np.int64))
            owners.append(owner)
        nb, owner = np.concatenate(parts), np.concatenate(owners)
        if not len(nb):
            break
        contrib = damping * vals[owner] / deg[owner]
        rows, inv = np.unique(nb, return_inverse=True)
        vals = np.bincount(inv, weights=contrib, minlength=len(rows))
        for r, v in zip(rows.tolist(), ((1.0 - damping) * vals).tolist()):
            total[r] = total.get(r, 0.0) + v
    best = sorted(total.items(), key=lambda x: (-x[1], x[0]))[:top]
    val = dict(best)
    found: dict[int, float] = {}
    for u, au in best:
        lo, hi = int(out.indptr[u]), int(out.indptr[u + 1])
        for v, ti in zip(out.indices[lo:hi].tolist(), out.data[lo:hi].tolist()):
            if v in val and v != u:
                found[ti - 1] = float(np.sqrt(au * val[v]))
    facts = [ti for ti, _ in sorted(found.items(), key=lambda x: (-x[1], x[0]))[:max_facts]]
    ids = graph.entity_ids
    return {"activated": {ids[r]: v for r, v in best}, "facts": facts, "reached": len(total)}


def open_and_walk(index_dir: str, queries: int, seed: int) -> tuple[Any, list[str], dict[str, Any]]:
    """Open the KG index at ``index_dir`` in this (fresh) process and run ``queries`` 2-hop
    activations from entities drawn with ``seed``: ``(index, seed entity ids, measurements)`` with
    open seconds (embedder load and index open apart), open and baseline RSS, and activation
    p50 / p95. Both ``--kg`` and ``--curve`` measure a KG open with it."""
    import time

    from ..index.store import KnowledgeIndex
    from ..models.embed import default_embedder

    base = rss_mb()
    t0 = time.perf_counter()
    default_embedder()  # MiniLM, loaded by the open anyway: timed apart
    t1 = time.perf_counter()
    index = KnowledgeIndex.open(index_dir)
    t2 = time.perf_counter()
    after_open = rss_mb()
    g = index.graph
    ids = g.entity_ids
    seeds = [ids[int(i)] for i in np.random.default_rng(seed).integers(0, g.num_entities, size=queries)]
    act_ms, reached = [], []
    for s in seeds:
        t = time.perf_counter()
        reached.append(activation_2hop(g, s)["reached"])
        act_ms.append((time.perf_counter() - t) * 1e3)
    act = pcts(act_ms)
    return (
        index,
        seeds,
        {
            "open_seconds": round(t2 - t0, 2),
            "open_embedder_seconds": round(t1 - t0, 2),
            "open_index_seconds": round(t2 - t1, 2),
            "open_peak_rss_mb": round(after_open["hwm"] or 0.0, 1),
            "open_rss_mb": round(after_open["rss"] or 0.0, 1),
            "baseline_rss_mb": round(base["rss"] or 0.0, 1),
            "graph_mapped": bool(g.mapped),
            "activation_2hop_p50_ms": act["p50"],
            "activation_2hop_p95_ms": act["p95"],
            "activation_2hop_queries": len(act_ms),
            "activation_2hop_median_reached": int(statistics.median(reached)) if reached else 0,
        },
    )
