"""``kgrag bench-scale --kg``: a Wikidata5M-size KG imported, saved and opened memory-mapped.

Phases, each in a fresh Python process so its time and peak RSS are its own:

1. **generate** (:func:`generate`): a synthetic KG in the Wikidata5M release format
   (``wikidata5m_entity.txt``, ``wikidata5m_relation.txt``, ``wikidata5m_all_triplet.txt``,
   ``wikidata5m_text.txt``) at the release's scale by default: 4.6M entities, 822 relations,
   21M triple lines. Q-ids scattered over ``1..13 * n_entities`` in shuffled file order, 1-3 word
   names, 0-3 aliases, 40-80 character descriptions, power-law degrees (Zipf-like heads and
   tails over random rankings of the entities mixed with uniform draws; Zipf-like relations)
   and ~0.5% repeated triple lines. Reused when ``manifest.json`` matches the sizes.
2. **import**: ``load_kg(dir, "wikidata5m")`` (streamed, progress bar) and
   ``KnowledgeIndex.build([], DIR/index, graph=...)`` (no passages; the graph is saved in the
   memory-mapped format of :mod:`kgrag_plugins.index.graph_mmap`).
3. **query**: ``KnowledgeIndex.open(DIR/index)`` (``open_seconds``, ``open_peak_rss_mb`` =
   the process's ``VmHWM`` right after the open, interpreter and imports included), then
   - **2-hop activation** from 100 random seed entities: :func:`~.bench_scale_common.activation_2hop`, the
     spreading step of :class:`~kgrag_plugins.methods.activation.ActivationRetriever`
     (personalized PageRank with damping 0.5 over the undirected entity graph) truncated at
     two hops and computed on the seed's neighbourhood only, with the facts joining the most
     activated entities. The full retriever is not run at this size: it also needs passages
     and builds an entity+passage matrix and a name index over all entities at construction;
   - **FRAG**: the real LLM-free :class:`~kgrag_plugins.methods.frag.FRAGRetriever` (simple
     route, 2 hops, topic entity given, zero-shot relation/path scoring with MiniLM) on
     ``--frag-queries`` random seeds; its construction time is reported apart.

``kgrag bench-scale --corpus`` (a large passage corpus built, extended and
queried) is :mod:`kgrag_plugins.eval.bench_scale_corpus`.

Generated files are large (~1.2 GB at full scale): keep ``--out-dir`` under /tmp, never in a
repository. Example::

    kgrag bench-scale --kg --out-dir /tmp/kgrag_w5m --json docs/benchmarks/bench-scale-kg.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .bench_scale_common import dir_bytes, open_and_walk, pcts, rss_mb, run_phase

log = logging.getLogger("kgrag_plugins.eval.bench_scale")

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


# =========================================================================== measurements
# =========================================================================== phases (fresh processes)
def _phase_import(src: str, index_dir: str, out: str) -> None:
    import shutil

    from ..index.graph import KnowledgeGraph
    from ..index.importers import load_kg
    from ..index.store import KnowledgeIndex

    t0 = time.perf_counter()
    graph, rep = load_kg(src, "wikidata5m", progress=True)
    t1 = time.perf_counter()
    counts = {"entities": graph.num_entities, "triples": graph.num_triples, "relations": len(graph.relations)}
    # Written mapped at every size (the format measured here), then reopened mapped: the index
    # build copies the mapped files, and the parsed in-memory graph is freed first.
    staging = Path(index_dir).parent / "graph.staging"
    shutil.rmtree(staging, ignore_errors=True)
    graph.save(staging, mapped=True)
    del graph
    mapped = KnowledgeGraph.load(staging)
    index = KnowledgeIndex.build([], index_dir, graph=mapped, settings={"kg": src, "kg_load": rep.to_dict()})
    index.close()
    shutil.rmtree(staging, ignore_errors=True)
    t2 = time.perf_counter()
    result = {
        "import_seconds": round(t1 - t0, 2),
        "save_seconds": round(t2 - t1, 2),
        "import_peak_rss_mb": round(rss_mb()["hwm"] or 0.0, 1),
        "graph": counts,
        "import_report": rep.to_dict(),
        "index_bytes": dir_bytes(index_dir),
        "graph_mapped_format": any(Path(index_dir).glob("gen-*/graph/graph_format.json")),
    }
    Path(out).write_text(json.dumps(result))


def _phase_query(index_dir: str, out: str, queries: int, frag_queries: int, seed: int) -> None:
    index, seeds, result = open_and_walk(index_dir, queries, seed)
    g = index.graph
    after_act = rss_mb()
    from ..methods.frag import FRAGRetriever

    t = time.perf_counter()
    frag = FRAGRetriever(index, mode="simple")
    frag_setup = time.perf_counter() - t
    frag_ms, frag_graph_ms, frag_paths = [], [], []
    for s in seeds[:frag_queries]:
        q = f"What is {g.name_of(s)} related to?"
        t = time.perf_counter()
        ev = frag.evidence(q, topic_entities=[s])
        frag_ms.append((time.perf_counter() - t) * 1e3)
        tm = ev.trace.get("timings_ms", {})
        frag_graph_ms.append(tm.get("subgraph_ms", 0.0) + tm.get("search_ms", 0.0))
        frag_paths.append(len(ev.facts))
    if frag_ms:  # the first query also embeds the relation vocabulary once (stored in the index)
        first_frag_ms = frag_ms.pop(0)
        frag_graph_ms.pop(0)
    fr, fg = pcts(frag_ms), pcts(frag_graph_ms)
    result |= {
        "peak_rss_after_activation_mb": round(after_act["hwm"] or 0.0, 1),
        "frag_setup_seconds": round(frag_setup, 2),
        "frag_first_query_ms": round(first_frag_ms, 1) if frag_paths else None,
        "frag_p50_ms": fr["p50"],
        "frag_p95_ms": fr["p95"],
        "frag_graph_p50_ms": fg["p50"],
        "frag_graph_p95_ms": fg["p95"],
        "frag_queries": len(frag_ms),
        "frag_median_paths": int(statistics.median(frag_paths)) if frag_paths else 0,
        "peak_rss_after_frag_mb": round(rss_mb()["hwm"] or 0.0, 1),
    }
    index.close()
    Path(out).write_text(json.dumps(result))


def _child(args: list[str]) -> None:
    """Run one phase of this module in a fresh interpreter (its own peak RSS, no warm caches)."""
    run_phase("kgrag_plugins.eval.bench_scale", args)


def run_kg_bench(
    out_dir: str | os.PathLike[str],
    *,
    n_entities: int = 4_600_000,
    n_triples: int = 21_000_000,
    n_relations: int = 822,
    queries: int = 100,
    frag_queries: int = 100,
    seed: int = 0,
) -> dict:
    """Generate (unless ``manifest.json`` matches), import and save ``out_dir/index``, open it
    in a fresh process and measure; returns the result dict (see the module docstring)."""
    d = Path(out_dir)
    src = d / "wikidata5m"
    man_path = src / MANIFEST
    manifest = json.loads(man_path.read_text()) if man_path.is_file() else None
    generated = False
    if not manifest or [manifest.get(k) for k in ("n_entities", "n_triples", "n_relations", "seed")] != [
        n_entities,
        n_triples,
        n_relations,
        seed,
    ]:
        log.info("generating %d entities, %d triples into %s", n_entities, n_triples, src)
        _child(["_generate", str(src), str(n_entities), str(n_relations), str(n_triples), str(seed)])
        manifest = json.loads(man_path.read_text())
        generated = True
    index_dir = d / "index"
    res_import, res_query = d / "import_result.json", d / "query_result.json"
    for f in (res_import, res_query):
        f.unlink(missing_ok=True)
    _child(["_import", str(src), str(index_dir), str(res_import)])
    _child(["_query", str(index_dir), str(res_query), str(queries), str(frag_queries), str(seed + 1)])
    imp, qry = json.loads(res_import.read_text()), json.loads(res_query.read_text())
    try:
        load = os.getloadavg()
    except OSError:  # pragma: no cover
        load = None
    return {
        "n_entities": manifest["n_entities"],
        "n_relations": manifest["n_relations"],
        "n_triples": manifest["n_triples"],
        "n_unique_triples": manifest["n_unique_triples"],
        "generated_now": generated,
        "generate_seconds": manifest["generate_seconds"],
        "index": str(index_dir),
        **imp,
        **qry,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
            "load_average_at_end": [round(x, 2) for x in load] if load else None,
        },
    }


def markdown_table(res: dict) -> str:
    """The headline numbers as a markdown table."""
    rows = [
        ("KG", f"{res['graph']['entities']:,} entities, {res['graph']['triples']:,} triples"),
        ("import (parse) s", res["import_seconds"]),
        ("save index s", res["save_seconds"]),
        ("import peak RSS MB", res["import_peak_rss_mb"]),
        (
            "open s (MiniLM load + index open)",
            f"{res['open_seconds']} ({res['open_embedder_seconds']} + {res['open_index_seconds']})",
        ),
        ("open peak RSS MB", res["open_peak_rss_mb"]),
        ("2-hop activation p50 / p95 ms", f"{res['activation_2hop_p50_ms']} / {res['activation_2hop_p95_ms']}"),
        ("FRAG setup s", res["frag_setup_seconds"]),
        ("FRAG query p50 / p95 ms", f"{res['frag_p50_ms']} / {res['frag_p95_ms']}"),
        (
            "FRAG graph part (subgraph + PPR + paths) p50 / p95 ms",
            f"{res['frag_graph_p50_ms']} / {res['frag_graph_p95_ms']}",
        ),
        ("peak RSS after FRAG MB", res["peak_rss_after_frag_mb"]),
    ]
    lines = ["| measure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines) + "\n"


# =========================================================================== CLI
def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``bench-scale`` on the ``kgrag`` sub-command parsers."""
    p = sub.add_parser(
        "bench-scale",
        help="scale benchmarks: --kg (a Wikidata5M-size KG, memory-mapped), --corpus (100k passages), "
        "--curve (cost curves over sizes)",
    )
    p.add_argument(
        "--kg", action="store_true", help="the large-KG benchmark: a synthetic Wikidata5M-size KG (docs/scale.md)"
    )
    p.add_argument(
        "--corpus",
        action="store_true",
        help="the large-corpus benchmark: synthetic passages from the shared corpora (docs/scale.md)",
    )
    p.add_argument(
        "--curve",
        action="store_true",
        help="cost curves: build/query cost over --sizes passages, KG open over --kg-sizes entities (docs/scale.md)",
    )
    p.add_argument("--out-dir", type=Path, required=True, help="generated files and DIR/index (keep under /tmp)")
    p.add_argument(
        "--json", type=Path, default=None, help="write the result JSON here (--curve: also the resume state)"
    )
    p.add_argument("--markdown", type=Path, default=None, help="write the table here (default: JSON path .md)")
    p.add_argument("--entities", type=int, default=4_600_000, help="--kg: entities of the synthetic KG")
    p.add_argument("--triples", type=int, default=21_000_000, help="--kg: triple lines of the synthetic KG")
    p.add_argument("--relations", type=int, default=822, help="--kg: relations of the synthetic KG")
    p.add_argument(
        "--queries", type=int, default=100, help="--kg: 2-hop activation seeds; --corpus: questions per retriever"
    )
    p.add_argument("--passages", type=int, default=100_000, help="--corpus: synthetic passages in the index")
    p.add_argument("--add", type=int, default=1_000, help="--corpus: passages added incrementally")
    p.add_argument("--dense-build", action="store_true", help="--corpus: also time a dense-only build")
    p.add_argument(
        "--phases",
        default=None,
        help="--corpus: comma-separated phases to run (embed,build,add,query); the others' results "
        "are read from an earlier run in --out-dir. --curve: only these phases (build,parsekg_build,query,"
        "frag,translator,import,open); with --force only these are measured again",
    )
    p.add_argument(
        "--embedder",
        default="default",
        choices=("default", "onnx", "onnx-int8"),
        help="--corpus, --curve: passage embedder for every phase (default: the index default)",
    )
    p.add_argument(
        "--sizes",
        default=",".join(map(str, curve_sizes())),
        help="--curve: corpus sizes in passages, comma-separated ('' for none)",
    )
    p.add_argument(
        "--kg-sizes",
        default=",".join(map(str, curve_sizes(kg=True))),
        help="--curve: KG sizes in entities, comma-separated ('' for none)",
    )
    p.add_argument("--force", action="store_true", help="--curve: measure again the points already in --json")
    p.add_argument(
        "--slow-timeout",
        type=float,
        default=1800.0,
        help="--curve: seconds for FRAG's and the translator's phase per point (past it: recorded as skipped)",
    )
    p.add_argument("--img-dir", type=Path, default=None, help="--curve: where the PNG plots go (default: by --json)")
    p.add_argument("--no-plots", action="store_true", help="--curve: fit and write the JSON, draw no plots")
    p.add_argument("--frag-queries", type=int, default=100, help="FRAG queries measured (after one warm-up query)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the generated data and the queries")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    if args.kg + args.corpus + getattr(args, "curve", False) != 1:
        raise ValueError(
            "bench-scale: give exactly one of --kg (large KG), --corpus (large corpus) or --curve (cost curves)"
        )
    if getattr(args, "curve", False):
        from . import bench_scale_curve as curve

        path = args.json or args.out_dir / "bench-scale-curve.json"
        res = curve.run_curve(
            args.out_dir,
            path,
            sizes=_ints(args.sizes),
            kg_sizes=_ints(args.kg_sizes),
            queries=args.queries,
            seed=args.seed,
            embedder=args.embedder,
            force=args.force,
            slow_timeout=args.slow_timeout,
            img_dir=args.img_dir,
            plots=not args.no_plots,
            phases=_names(args.phases) if args.phases else None,
        )
        table = curve.markdown_table(res)
        (args.markdown or path.with_suffix(".md")).write_text(table)
        sys.stdout.write(table)
        return 0
    if args.corpus:
        from . import bench_scale_corpus as corpus

        res = corpus.run_corpus_bench(
            args.out_dir,
            passages=args.passages,
            add=args.add,
            queries=args.queries,
            seed=args.seed,
            dense_build=args.dense_build,
            embedder=args.embedder,
            phases=_names(args.phases) if args.phases else None,
        )
        return _write(args, res, corpus.markdown_table(res))
    res = run_kg_bench(
        args.out_dir,
        n_entities=args.entities,
        n_triples=args.triples,
        n_relations=args.relations,
        queries=args.queries,
        frag_queries=args.frag_queries + 1,
        seed=args.seed,
    )
    return _write(args, res, markdown_table(res))


def curve_sizes(kg: bool = False) -> tuple[int, ...]:
    """The default ``--curve`` sizes (passages, or entities with ``kg``)."""
    from .bench_scale_curve import KG_SIZES, SIZES

    return KG_SIZES if kg else SIZES


def _ints(text: str) -> list[int]:
    """``"5000,20000"`` -> ``[5000, 20000]`` (``""`` -> ``[]``)."""
    return [int(x) for x in text.replace("_", "").split(",") if x.strip()]


def _names(text: str | None) -> list[str]:
    """``"query, frag"`` -> ``["query", "frag"]`` (``None`` / ``""`` -> ``[]``)."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def _write(args: argparse.Namespace, res: dict, table: str) -> int:
    """Write the result JSON (and its table next to it) and echo both."""
    text = json.dumps(res, indent=1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
        md = args.markdown or args.json.with_suffix(".md")
        md.write_text(table)
    elif args.markdown:
        args.markdown.write_text(table)
    sys.stdout.write(text + "\n" + table)
    return 0


def _main(argv: list[str]) -> None:
    """Hidden phase entry points (``python -m kgrag_plugins.eval.bench_scale _phase ...``)."""
    logging.basicConfig(level=logging.WARNING)
    phase, rest = argv[0], argv[1:]
    if phase == "_generate":
        d, e, r, t, s = rest
        generate(d, n_entities=int(e), n_relations=int(r), n_triples=int(t), seed=int(s))
    elif phase == "_import":
        _phase_import(*rest)
    elif phase == "_query":
        d, out, q, fq, s = rest
        _phase_query(d, out, int(q), int(fq), int(s))
    else:
        raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    _main(sys.argv[1:])
