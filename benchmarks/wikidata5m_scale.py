"""Wikidata5M-scale parse benchmark for ``kgrag_plugins.index.importers`` (synthetic data, offline).

This measures parsing the release's text files; ``kgrag bench-scale --kg``
(:mod:`kgrag_plugins.eval.bench_scale`) measures opening the saved, memory-mapped index.

``generate(dir)`` (from :mod:`kgrag_plugins.eval.bench_scale`, whose docstring describes the
shapes) writes a synthetic KG in the Wikidata5M release format at the release's scale by default:
4.6M entities, 822 relations, 21M triple lines; ``manifest.json`` records the expected counts.

``main()`` generates the files when missing, then loads them with ``load_kg(dir, "wikidata5m")`` in a
fresh subprocess (so ``peak_rss_mb`` is the load's own), builds the CSR adjacency in both directions and
times ``KnowledgeGraph.k_hop([seed], 2)`` for 100 random seeds::

    python benchmarks/wikidata5m_scale.py --out-dir /tmp/kgrag_w5m --json /tmp/kgrag_w5m.json

Generated files are large (~1.2 GB at full scale): keep them under /tmp, never in the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# The generator lives in the library (``kgrag bench-scale --kg`` uses it too).
from kgrag_plugins.eval.bench_scale import (  # noqa: F401  (file names re-exported for tests)
    ENTITY_FILE,
    MANIFEST,
    RELATION_FILE,
    TEXT_FILE,
    TRIPLE_FILE,
    generate,
)


def _vm_hwm_mb() -> float | None:
    """This process's own peak RSS (Linux ``VmHWM``; unlike ``ru_maxrss`` it does not inherit the parent's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _worker(directory: str, out: str) -> None:
    """Load in this (fresh) process and write the measurements to ``out``."""
    from kgrag_plugins.index.importers import load_kg, peak_rss_mb

    base_rss = peak_rss_mb()
    base_hwm = _vm_hwm_mb()
    t0 = time.perf_counter()
    g, rep = load_kg(directory, "wikidata5m", progress=False)
    load_s = time.perf_counter() - t0
    load_rss = peak_rss_mb()
    load_hwm = _vm_hwm_mb()
    t1 = time.perf_counter()
    out_deg = np.diff(g.adjacency("out").indptr)
    in_deg = np.diff(g.adjacency("in").indptr)
    csr_s = time.perf_counter() - t1
    degrees = {
        "max_out": int(out_deg.max()),
        "max_in": int(in_deg.max()),
        "median_total": float(np.median(out_deg + in_deg)),
        "isolated": int(np.count_nonzero(out_deg + in_deg == 0)),
    }
    del out_deg, in_deg
    rng = np.random.default_rng(1)
    ids = g.entity_ids
    seeds = [ids[i] for i in rng.integers(0, len(ids), size=100)]
    del ids
    times, sizes = [], []
    for s in seeds:
        t2 = time.perf_counter()
        res = g.k_hop([s], 2)
        times.append((time.perf_counter() - t2) * 1000)
        sizes.append(len(res))
    times.sort()
    result = {
        "load_seconds": round(load_s, 2),
        "peak_rss_mb": round(load_rss, 1),
        "peak_vm_hwm_mb": round(load_hwm, 1) if load_hwm is not None else None,
        "baseline_rss_mb": round(base_rss, 1),
        "baseline_vm_hwm_mb": round(base_hwm, 1) if base_hwm is not None else None,
        "graph": {"entities": g.num_entities, "triples": g.num_triples, "relations": len(g.relations)},
        "report": rep.to_dict(),
        "csr_build_seconds": round(csr_s, 2),
        "degrees": degrees,
        "k_hop_2_ms": round(statistics.median(times), 2),
        "k_hop_2_ms_p90": round(times[89], 2),
        "k_hop_2_median_size": int(statistics.median(sizes)),
        "peak_rss_after_queries_mb": round(peak_rss_mb(), 1),
    }
    Path(out).write_text(json.dumps(result))


def run(out_dir: str | os.PathLike[str], n_entities: int, n_triples: int, n_relations: int = 822) -> dict:
    """Generate (if missing or different) and measure; returns the result dict."""
    d = Path(out_dir)
    man_path = d / MANIFEST
    manifest = json.loads(man_path.read_text()) if man_path.is_file() else None
    generated = False
    if not manifest or (manifest["n_entities"], manifest["n_triples"], manifest["n_relations"]) != (
        n_entities,
        n_triples,
        n_relations,
    ):
        # in a subprocess too, so this process stays small: a child's ru_maxrss starts at its parent's peak
        subprocess.run(
            [sys.executable, __file__, "--_generate", str(d), str(n_entities), str(n_relations), str(n_triples)],
            check=True,
        )
        manifest = json.loads(man_path.read_text())
        generated = True
    res_file = d / "load_result.json"
    res_file.unlink(missing_ok=True)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, __file__, "--_worker", str(d), str(res_file)], check=True, env=env)
    load = json.loads(res_file.read_text())
    return {
        "n_entities": manifest["n_entities"],
        "n_relations": manifest["n_relations"],
        "n_triples": manifest["n_triples"],
        "n_unique_triples": manifest["n_unique_triples"],
        "generated_now": generated,
        "generate_seconds": manifest["generate_seconds"],
        "file_bytes": manifest["bytes"],
        **load,
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count()},
    }


def main(argv: list[str] | None = None) -> dict | None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default="/tmp/kgrag_w5m", help="where the synthetic files go (default %(default)s)")
    ap.add_argument("--entities", type=int, default=4_600_000)
    ap.add_argument("--triples", type=int, default=21_000_000)
    ap.add_argument("--relations", type=int, default=822)
    ap.add_argument("--json", dest="json_out", default=None, help="also write the result JSON here")
    ap.add_argument("--_worker", nargs=2, metavar=("DIR", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--_generate", nargs=4, metavar=("DIR", "E", "R", "T"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._generate:
        d, e, r, t = args._generate
        generate(d, n_entities=int(e), n_relations=int(r), n_triples=int(t))
        return None
    if args._worker:
        _worker(*args._worker)
        return None
    res = run(args.out_dir, args.entities, args.triples, args.relations)
    text = json.dumps(res, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    return res


if __name__ == "__main__":
    main()
