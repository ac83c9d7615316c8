"""Wikidata5M-scale load benchmark for ``kgrag_plugins.index.importers`` (synthetic data, offline).

``generate(dir)`` writes a synthetic KG in the Wikidata5M release format (``wikidata5m_entity.txt``,
``wikidata5m_relation.txt``, ``wikidata5m_all_triplet.txt``, ``wikidata5m_text.txt``) at the release's
scale by default: 4.6M entities, 822 relations, 21M triple lines. Shapes: Q-ids scattered over
``1..13 * n_entities`` in shuffled file order, 1-3 word names, 0-3 aliases, 40-80 character descriptions,
power-law degrees (heads and tails drawn from Zipf-like distributions over a random ranking of the
entities, mixed with uniform draws; relations Zipf-like too) and ~0.5% repeated triple lines.
``manifest.json`` records the expected counts (entities, relations, triple lines, unique triples).

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

ENTITY_FILE = "wikidata5m_entity.txt"
RELATION_FILE = "wikidata5m_relation.txt"
TRIPLE_FILE = "wikidata5m_all_triplet.txt"
TEXT_FILE = "wikidata5m_text.txt"
MANIFEST = "manifest.json"

_SYLLABLES = [
    a + b
    for a in ("", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st")
    for b in ("a", "e", "i", "o", "u", "an", "en", "in", "on", "ar", "er", "or", "al", "el", "is")
]


def _vocab(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct pseudo-words of 2-4 syllables."""
    words: dict[str, None] = {}
    syl = np.array(_SYLLABLES)
    while len(words) < n:
        k = rng.integers(2, 5, size=n)
        parts = syl[rng.integers(0, len(syl), size=(n, 4))]
        for row, m in zip(parts.tolist(), k.tolist()):
            words.setdefault("".join(row[:m]), None)
    return list(words)[:n]


def _zipf(rng: np.random.Generator, n: int, size: int, s: float, offset: float = 1.0) -> np.ndarray:
    """``size`` draws from ``P(k) ~ (k + offset) ** -s`` over ``0..n-1`` (inverse CDF)."""
    w = (np.arange(n, dtype=np.float64) + offset) ** -s
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size)), n - 1)


def _padded(strings: np.ndarray) -> np.ndarray:
    """A bytes ('S') array as a zero-padded uint8 matrix."""
    w = strings.dtype.itemsize
    return np.ascontiguousarray(strings).view(np.uint8).reshape(len(strings), w)


def generate(
    directory: str | os.PathLike[str],
    n_entities: int = 4_600_000,
    n_relations: int = 822,
    n_triples: int = 21_000_000,
    seed: int = 0,
    *,
    dup_fraction: float = 0.005,
    chunk: int = 2_000_000,
) -> dict:
    """Write the four Wikidata5M files and ``manifest.json`` into ``directory``; return the manifest."""
    t0 = time.perf_counter()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng, 40_000)
    cap = [w.capitalize() for w in vocab]

    # ---- entities: scattered Q-ids in shuffled order, names, aliases, descriptions
    qnum = np.unique(rng.integers(1, 13 * n_entities + 2, size=n_entities + n_entities // 4 + 10))
    while len(qnum) < n_entities:  # pragma: no cover - practically never
        qnum = np.unique(np.concatenate([qnum, rng.integers(1, 13 * n_entities + 2, size=n_entities)]))
    qnum = rng.permutation(qnum)[:n_entities]
    qids = np.strings.add(b"Q", qnum.astype("S"))
    nv = len(vocab)
    block = 200_000
    with open(d / ENTITY_FILE, "w", encoding="utf-8") as fe, open(d / TEXT_FILE, "w", encoding="utf-8") as ft:
        for lo in range(0, n_entities, block):
            m = min(block, n_entities - lo)
            ntok = rng.choice([1, 2, 3], size=m, p=[0.2, 0.6, 0.2]).tolist()
            toks = rng.integers(0, nv, size=(m, 3)).tolist()
            nal = rng.choice([0, 1, 2, 3], size=m, p=[0.45, 0.3, 0.15, 0.1]).tolist()
            extra = rng.integers(0, nv, size=(m, 3)).tolist()
            dtok = rng.integers(0, nv, size=(m, 12)).tolist()
            dlen = rng.integers(40, 81, size=m).tolist()
            ids = [q.decode() for q in qids[lo : lo + m].tolist()]
            ent_lines, txt_lines = [], []
            for j in range(m):
                name = " ".join([cap[x] for x in toks[j][: ntok[j]]])
                fields = [ids[j], name]
                k = nal[j]
                if k:
                    cand = (name.lower(), f"{name} {cap[extra[j][0]]}", f"{cap[extra[j][1]]} {cap[extra[j][2]]}")
                    fields.extend(cand[:k])
                ent_lines.append("\t".join(fields))
                desc = f"{cap[dtok[j][0]]} {' '.join(vocab[x] for x in dtok[j][1:])}"
                cut = desc.rfind(" ", 0, dlen[j] + 1)
                txt_lines.append(f"{ids[j]}\t{desc[: cut if cut >= 40 else dlen[j]]}")
            fe.write("\n".join(ent_lines) + "\n")
            ft.write("\n".join(txt_lines) + "\n")

    # ---- relations
    pnum = rng.permutation(np.arange(1, 12 * n_relations + 2))[:n_relations]
    pids = [f"P{int(p)}" for p in pnum]
    seen: set[str] = set()
    with open(d / RELATION_FILE, "w", encoding="utf-8") as fr:
        for i, pid in enumerate(pids):
            a, b = rng.integers(0, nv, size=2).tolist()
            name = f"{vocab[a]} {vocab[b]}"
            if name in seen:
                name = f"{name} {i}"
            seen.add(name)
            fields = [pid, name] + [f"{vocab[x]} of" for x in rng.integers(0, nv, size=int(rng.integers(0, 3)))]
            fr.write("\t".join(fields) + "\n")
    rel_s = np.array([p.encode() for p in pids])

    # ---- triples: Zipf-like heads/tails over random entity rankings, Zipf-like relations, some repeats
    head_rank = rng.permutation(n_entities).astype(np.int32)
    tail_rank = rng.permutation(n_entities).astype(np.int32)
    n_dup = int(n_triples * dup_fraction)
    n_base = n_triples - n_dup
    h = np.where(
        rng.random(n_base) < 0.7, head_rank[_zipf(rng, n_entities, n_base, 0.6)], rng.integers(0, n_entities, n_base)
    ).astype(np.int32)
    t = np.where(
        rng.random(n_base) < 0.6,
        tail_rank[_zipf(rng, n_entities, n_base, 1.0, 2.0)],
        rng.integers(0, n_entities, n_base),
    ).astype(np.int32)
    r = _zipf(rng, n_relations, n_base, 1.1).astype(np.int32)
    pick = rng.integers(0, n_base, size=n_dup)
    order = rng.permutation(n_triples)
    h, r, t = (np.concatenate([x, x[pick]])[order] for x in (h, r, t))
    del pick, order
    key = (h.astype(np.int64) * (n_relations + 1) + r) * (n_entities + 1) + t
    n_unique = int(len(np.unique(key)))
    del key

    ent_m, rel_m = _padded(qids), _padded(rel_s)
    we, wr = ent_m.shape[1], rel_m.shape[1]
    width = we + 1 + wr + 1 + we + 1
    with open(d / TRIPLE_FILE, "wb") as f:
        for lo in range(0, n_triples, chunk):
            hi = min(n_triples, lo + chunk)
            mat = np.zeros((hi - lo, width), dtype=np.uint8)
            mat[:, :we] = ent_m[h[lo:hi]]
            mat[:, we] = 9
            mat[:, we + 1 : we + 1 + wr] = rel_m[r[lo:hi]]
            mat[:, we + 1 + wr] = 9
            mat[:, we + 2 + wr : width - 1] = ent_m[t[lo:hi]]
            mat[:, -1] = 10
            f.write(mat[mat != 0].tobytes())  # drop the zero padding -> variable-width lines
    manifest = {
        "n_entities": n_entities,
        "n_relations": n_relations,
        "n_triples": n_triples,
        "n_unique_triples": n_unique,
        "seed": seed,
        "dup_fraction": dup_fraction,
        "generate_seconds": round(time.perf_counter() - t0, 2),
        "bytes": {p.name: p.stat().st_size for p in sorted(d.glob("wikidata5m_*.txt"))},
    }
    (d / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


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
