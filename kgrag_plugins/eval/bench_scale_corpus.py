"""``kgrag bench-scale --corpus``: a large passage corpus built, extended and queried.

Phases, each in a fresh Python process so its time and peak RSS (``VmHWM``) are its own:

1. **generate** (:func:`synthesize`): ``N + A`` distinct passages synthesised from the shared
   corpora (MuSiQue, HotpotQA, 2WikiMultihopQA, PopQA ``corpus.jsonl`` under ``KGRAG_DATA_DIR``,
   9,565 passages) by sentence-level recombination, seed ``--seed``:

   - the pool is the source passages (musique, hotpotqa, 2wikimultihopqa, popqa) in one seeded
     random order, so any prefix mixes the four; synthetic passage ``k`` is based on pool
     passage ``b = k mod |pool|``, copy ``c = k div |pool|``;
   - copy 0 is the source passage itself (its text and title), with id ``syn-<k>``;
   - copy ``c >= 1`` keeps ``b``'s sentences (split at ``. ! ?`` followed by whitespace) in
     order, drops one at random (when it has two or more) and inserts at a random position one
     sentence drawn at random from another passage of the *same* source corpus (the "donor"),
     so lengths stay those of the source; its title is ``"<b's title> (c)"`` (unique);
   - a text already produced is redrawn (new donor, up to 20 times, then one more donor
     sentence is appended), so every text is distinct; ids and titles are unique.

   The first ``N`` passages are the corpus, the next ``A`` the incremental batch. ``Q`` questions
   are drawn at random (same seed) from the four datasets' ``questions.jsonl``, in turn.
2. **embed**: the embedding-only denominator: the default embedder (MiniLM, the same
   ``embed`` call and batch size the index build uses) over the ``N`` ``embed_text`` s.
3. **build**: ``KnowledgeIndex.build(passages, DIR/index, builder="mentions")`` (the graph the
   ``activation`` retriever reads; embedding overlapped with spaCy as in every build), time and
   peak RSS; ``build_throughput_ratio = embed_only_seconds / build_seconds`` (issue target
   >= 0.7). With ``--dense-build`` also a dense-only build (no graph) into ``DIR/index_dense``.
4. **add**: ``KnowledgeIndex.open(DIR/index)`` and ``add_passages`` of the ``A`` new passages. No
   full rebuild is checked, not assumed: the embedder and spaCy are instrumented to count the
   texts they see (must equal ``A``), the old entity rows must be unchanged (the graph is
   extended, not rebuilt), the passage count grows by ``A``; the index is then reopened and
   each new passage must be found (BM25 top-1 on its own text, dense top-1 on its own vector).
5. **query**: open in a fresh process, construct ``dense``, ``bm25`` and ``activation``
   (:class:`~kgrag_plugins.methods.activation.ActivationRetriever`), one warm-up question each,
   then the ``Q`` questions, retrievers interleaved per question (same machine state);
   p50/p95 per retriever and ``activation_dense_p50_ratio`` (target <= 2), peak RSS.

Every phase uses one embedder, ``--embedder`` (``default`` = MiniLM on sentence-transformers;
``onnx`` / ``onnx-int8`` = the same MiniLM on ONNX Runtime, :mod:`kgrag_plugins.models.embed_onnx`).

Generated files and indexes live under ``--out-dir`` (keep it under /tmp, never in a
repository). Example::

    kgrag bench-scale --corpus --out-dir /tmp/kgrag_corpus --json docs/benchmarks/bench-scale-corpus.json
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..types import Passage
from .bench_scale_common import dir_bytes, pcts, rss_mb, run_phase

log = logging.getLogger("kgrag_plugins.eval.bench_scale_corpus")

SOURCES = ("musique", "hotpotqa", "2wikimultihopqa", "popqa")
MANIFEST = "manifest.json"
PHASES = ("embed", "build", "add", "query")
_SENT = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` split at ``. ! ?`` followed by whitespace (no empty pieces)."""
    return [s for s in (x.strip() for x in _SENT.split(text)) if s]


def synthesize(sources: dict[str, Sequence[Passage]], n: int, seed: int = 0) -> list[Passage]:
    """``n`` distinct passages from ``sources`` (corpus name -> passages); see the module doc, step 1."""
    rng = np.random.default_rng(seed)
    pool = [(name, j) for name in sources for j in range(len(sources[name]))]
    if not pool:
        raise ValueError("synthesize needs at least one source passage")
    pool = [pool[i] for i in rng.permutation(len(pool)).tolist()]  # any prefix mixes the sources
    sents = {name: [split_sentences(p.text) or [p.text.strip()] for p in ps] for name, ps in sources.items()}
    out: list[Passage] = []
    seen: set[str] = set()
    for k in range(n):
        b, c = k % len(pool), k // len(pool)
        name, j = pool[b]
        src = sources[name][j]
        if c == 0:
            text, title = src.text, src.title
        else:
            own = list(sents[name][j])
            docs = sents[name]
            text = ""
            for attempt in range(21):
                donor = int(rng.integers(0, len(docs)))
                if len(docs) > 1 and donor == j:
                    donor = (donor + 1) % len(docs)
                ds = docs[donor]
                pick = ds[int(rng.integers(0, len(ds)))]
                parts = list(own)
                if len(parts) >= 2:
                    parts.pop(int(rng.integers(0, len(parts))))
                parts.insert(int(rng.integers(0, len(parts) + 1)), pick)
                if attempt == 20:  # practically never: append one more donor sentence
                    parts.append(docs[int(rng.integers(0, len(docs)))][0])
                text = " ".join(parts)
                if text not in seen:
                    break
            title = f"{src.title} ({c})" if src.title else ""
        if text in seen:
            text = f"{text} ({k})"
        seen.add(text)
        out.append(Passage(f"syn-{k:07d}", text, title, {"source": name, "base": src.id, "copy": c}))
    return out


def _write_jsonl(path: Path, rows: Sequence[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _read_passages(path: Path) -> list[Passage]:
    with open(path, encoding="utf-8") as f:
        return [Passage.from_dict(json.loads(line)) for line in f if line.strip()]


def generate(out_dir: str | os.PathLike[str], n: int, add: int, queries: int, seed: int = 0) -> dict:
    """Write ``corpus.jsonl`` (``n``), ``add.jsonl`` (``add``), ``questions.jsonl`` (``queries``)
    and ``manifest.json`` into ``out_dir``; return the manifest."""
    from ..datasets.loaders import load_dataset

    t0 = time.perf_counter()
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    data = {name: load_dataset(name) for name in SOURCES}
    sources = {name: ds.corpus or [] for name, ds in data.items()}
    allp = synthesize(sources, n + add, seed)
    _write_jsonl(d / "corpus.jsonl", [p.to_dict() for p in allp[:n]])
    _write_jsonl(d / "add.jsonl", [p.to_dict() for p in allp[n:]])
    rng = np.random.default_rng(seed + 1)
    qs = {name: [q.question for q in ds.questions] for name, ds in data.items()}
    picks = {name: rng.permutation(len(v)).tolist() for name, v in qs.items()}
    chosen = []
    for i in range(queries):
        name = SOURCES[i % len(SOURCES)]
        chosen.append({"source": name, "question": qs[name][picks[name][(i // len(SOURCES)) % len(qs[name])]]})
    _write_jsonl(d / "questions.jsonl", chosen)
    lengths = [len(p.text) for p in allp[:n]]
    manifest = {
        "passages": n,
        "add": add,
        "queries": queries,
        "seed": seed,
        "source_passages": {k: len(v) for k, v in sources.items()},
        "distinct_texts": len({p.text for p in allp}),
        "mean_chars": round(float(np.mean(lengths)), 1) if lengths else 0.0,
        "generate_seconds": round(time.perf_counter() - t0, 2),
    }
    (d / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


# =========================================================================== phases (fresh processes)
def _embedder(name: str):
    """The phase's embedder: ``default`` (MiniLM, sentence-transformers) or an ``as_embedder``
    name (``onnx``, ``onnx-int8``); every phase of one run uses the same one."""
    from ..models.embed import as_embedder, default_embedder

    return default_embedder() if name == "default" else as_embedder(name)


def _phase_embed(d: Path, out: Path, emb_name: str = "default") -> None:
    from ..index.embedding import embed_passages

    passages = _read_passages(d / "corpus.jsonl")
    t0 = time.perf_counter()
    emb = _embedder(emb_name)
    load_s = time.perf_counter() - t0
    vecs, _, embed_t = embed_passages(emb, passages, False)  # the build's own call: same texts, batch size
    secs = embed_t["embed_passages_s"] + embed_t.get("embed_windows_s", 0.0)
    res = {
        "embedder": emb.name,
        "embed_batch_size": getattr(emb, "batch_size", None),
        "embedder_load_seconds": round(load_s, 2),
        "embed_only_seconds": round(secs, 2),
        "embed_passages_per_s": round(len(passages) / secs, 2) if secs else None,
        "embed_peak_rss_mb": round(rss_mb()["hwm"] or 0.0, 1),
        "embed_rows": int(len(vecs)),
    }
    out.write_text(json.dumps(res))


def _phase_build(d: Path, out: Path, dense: bool, emb_name: str = "default") -> None:
    from ..index.store import KnowledgeIndex

    passages = _read_passages(d / "corpus.jsonl")
    emb = _embedder(emb_name)  # loaded outside the timed build (the denominator excludes it too)
    t0 = time.perf_counter()
    index = KnowledgeIndex.build(passages, d / "index", embedder=emb, builder="mentions", progress=False)
    secs = time.perf_counter() - t0
    tm = index.manifest.get("timings", {})
    stats = index.manifest.get("build_stats") or {}
    res: dict[str, Any] = {
        "build_seconds": round(secs, 2),
        "build_peak_rss_mb": round(rss_mb()["hwm"] or 0.0, 1),
        "build_timings": {k: round(v, 2) for k, v in tm.items()},
        "build_spacy_wait_seconds": round(stats.get("spacy_s", 0.0), 2),
        "build_counts": index.counts,
        "index_bytes": dir_bytes(d / "index"),
    }
    index.close()
    del index
    if dense:
        t0 = time.perf_counter()
        dix = KnowledgeIndex.build(passages, d / "index_dense", embedder=emb, progress=False)
        res["dense_build_seconds"] = round(time.perf_counter() - t0, 2)
        res["dense_build_timings"] = {k: round(v, 2) for k, v in dix.manifest.get("timings", {}).items()}
        res["peak_rss_after_dense_build_mb"] = round(rss_mb()["hwm"] or 0.0, 1)
        dix.close()
    out.write_text(json.dumps(res))


def _phase_add(d: Path, out: Path, emb_name: str = "default") -> None:
    from ..index.builders import mentions
    from ..index.store import KnowledgeIndex

    new = _read_passages(d / "add.jsonl")
    emb = _embedder(emb_name)
    t0 = time.perf_counter()
    index = KnowledgeIndex.open(d / "index", embedder=emb)
    open_s = time.perf_counter() - t0
    before = dict(index.counts)
    old_ids = list(index.graph.entity_ids)
    # Instrumentation (benchmark only): count what the embedder and spaCy are given during the add.
    seen = {"embedded": 0, "parsed": 0}
    embed, parse = emb.embed, mentions.parse_passages

    def counting_embed(texts, **kw):
        texts = list(texts)
        seen["embedded"] += len(texts)
        return embed(texts, **kw)

    def counting_parse(passages, **kw):
        seen["parsed"] += len(passages)
        return parse(passages, **kw)

    emb.embed, mentions.parse_passages = counting_embed, counting_parse
    try:
        t0 = time.perf_counter()
        added = index.add_passages(new, progress=False)
        add_s = time.perf_counter() - t0
    finally:
        emb.embed, mentions.parse_passages = embed, parse
    after = dict(index.counts)
    ids_now = index.graph.entity_ids
    rows_kept = len(ids_now) >= len(old_ids) and all(ids_now[i] == e for i, e in enumerate(old_ids))
    tm = index.manifest.get("timings", {})
    index.close()
    del index
    t0 = time.perf_counter()
    again = KnowledgeIndex.open(d / "index", embedder=emb)
    reopen_s = time.perf_counter() - t0
    found_bm25 = found_dense = 0
    store = again.passages
    new_ids = {p.id for p in new}
    new_windows = sum(o in new_ids for o in store.windows.owners) if store.windows is not None else 0
    for p in new:
        hit = store.bm25_search(f"{p.title}\n{p.text}", 1)
        found_bm25 += bool(hit) and hit[0][0].id == p.id
        hit = store.dense_search(store.vectors[store.position(p.id)], 1)
        found_dense += bool(hit) and hit[0][0].id == p.id
    res = {
        "add_passages": len(new),
        "add_open_seconds": round(open_s, 2),
        "add_seconds": round(add_s, 2),
        "add_result": added,
        "add_store_reindex_seconds": {k: round(tm[k], 2) for k in ("chroma_s", "bm25_s", "chroma_reused") if k in tm},
        "add_counts_before": before,
        "add_counts_after": after,
        "add_embedded_texts": seen["embedded"],
        "add_embedded_windows": new_windows,  # of the new passages longer than the embedder's input
        "add_parsed_passages": seen["parsed"],
        "add_entity_rows_unchanged": bool(rows_kept),
        "add_reopen_seconds": round(reopen_s, 2),
        "add_reopened_passages": len(store),
        "add_found_bm25_top1": int(found_bm25),
        "add_found_dense_top1": int(found_dense),
        "add_peak_rss_mb": round(rss_mb()["hwm"] or 0.0, 1),
    }
    res["add_no_full_rebuild"] = bool(
        seen["embedded"] == len(new) + new_windows
        and seen["parsed"] == len(new)
        and rows_kept
        and after["passages"] == before["passages"] + len(new)
    )
    again.close()
    out.write_text(json.dumps(res))


def _phase_query(d: Path, out: Path, queries: int, emb_name: str = "default") -> None:
    from ..index.store import KnowledgeIndex
    from ..methods.activation import ActivationRetriever
    from ..methods.baselines import BM25Retriever, DenseRetriever

    with open(d / "questions.jsonl", encoding="utf-8") as f:
        qs = [json.loads(line)["question"] for line in f if line.strip()][:queries]
    t0 = time.perf_counter()
    emb = _embedder(emb_name)
    t1 = time.perf_counter()
    index = KnowledgeIndex.open(d / "index", embedder=emb)
    t2 = time.perf_counter()
    open_rss = rss_mb()
    setup: dict[str, float] = {}
    rets = {}
    for name, cls in (("dense", DenseRetriever), ("bm25", BM25Retriever), ("activation", ActivationRetriever)):
        t = time.perf_counter()
        rets[name] = cls(index)
        setup[name] = round(time.perf_counter() - t, 3)
    for r in rets.values():  # warm-up (first Chroma query, first BM25 tokenisation, ...)
        r.retrieve("warm-up question about a city", k=5)
    ms: dict[str, list[float]] = {name: [] for name in rets}
    for q in qs:
        for name, r in rets.items():
            t = time.perf_counter()
            r.retrieve(q, k=5)
            ms[name].append((time.perf_counter() - t) * 1e3)
    pct = {name: pcts(v) for name, v in ms.items()}
    res: dict[str, Any] = {
        "query_open_seconds": round(t2 - t0, 2),
        "query_open_embedder_seconds": round(t1 - t0, 2),
        "query_open_index_seconds": round(t2 - t1, 2),
        "query_open_peak_rss_mb": round(open_rss["hwm"] or 0.0, 1),
        "query_retriever_setup_seconds": setup,
        "queries": len(qs),
        "query_passages": len(index.passages),
    }
    for name, p in pct.items():
        res[f"{name}_p50_ms"], res[f"{name}_p95_ms"] = p["p50"], p["p95"]
    res["activation_dense_p50_ratio"] = round(pct["activation"]["p50"] / pct["dense"]["p50"], 3)
    res["query_peak_rss_mb"] = round(rss_mb()["hwm"] or 0.0, 1)
    index.close()
    out.write_text(json.dumps(res))


def _index_passages(d: Path) -> int | None:
    """Passages in ``d/index`` per its manifest (None when there is no index)."""
    man = d / "index" / "manifest.json"
    return json.loads(man.read_text()).get("counts", {}).get("passages") if man.is_file() else None


def _load() -> list[float] | None:
    """The 1/5/15-minute load averages (the machine is shared: timings depend on them)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not Unix
        return None


def _child(args: list[str]) -> None:
    """Run one phase of this module in a fresh interpreter (bench_scale's runner)."""
    run_phase("kgrag_plugins.eval.bench_scale_corpus", args)


def run_corpus_bench(
    out_dir: str | os.PathLike[str],
    *,
    passages: int = 100_000,
    add: int = 1_000,
    queries: int = 100,
    seed: int = 0,
    dense_build: bool = False,
    embedder: str = "default",
    phases: Sequence[str] | None = None,
) -> dict:
    """Generate, embed-only, build, add, query (each a fresh process); the result dict.

    ``phases``: run only these (e.g. ``["query"]`` after a retriever change) and take the
    others' results from their files of an earlier run in ``out_dir`` (an error if missing).
    """
    d = Path(out_dir)
    bad = sorted(set(phases or ()) - set(PHASES))
    if bad:
        raise ValueError(f"unknown phase(s) {bad}; phases: {', '.join(PHASES)}")
    run = list(PHASES) if phases is None else [p for p in PHASES if p in phases]
    files = {p: d / f"{p}_result.json" for p in PHASES}
    man_path = d / MANIFEST
    old = json.loads(man_path.read_text()) if man_path.is_file() else {}
    regenerate = [old.get(k) for k in ("passages", "add", "queries", "seed")] != [passages, add, queries, seed]
    if run != list(PHASES):
        stale = [p for p in PHASES if p not in run and not files[p].is_file()]
        if regenerate or stale:
            raise ValueError(
                f"no earlier result for phase(s) {stale or list(PHASES)} with these settings in {d}; run every phase"
            )
        if "add" in run and "build" not in run and _index_passages(d) != passages:
            raise ValueError("the add phase extends a fresh build and the index holds more: run build too")
        if "build" in run and not {"add", "query"} <= set(run):
            raise ValueError("a new build needs new add and query phases")
    d.mkdir(parents=True, exist_ok=True)
    if regenerate:
        log.info("generating %d + %d passages into %s", passages, add, d)
        _child(["_generate", str(d), str(passages), str(add), str(queries), str(seed)])
    manifest = json.loads(man_path.read_text())
    for p in run:
        files[p].unlink(missing_ok=True)
    stamps_path = d / "phase_stamps.json"
    stamps: dict[str, dict[str, Any]] = json.loads(stamps_path.read_text()) if stamps_path.is_file() else {}
    steps = (("embed", []), ("build", ["1" if dense_build else "0"]), ("add", []), ("query", [str(queries)]))
    for phase, extra in steps:
        if phase not in run:
            continue
        log.info("phase %s", phase)
        stamps[phase] = {"start_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_start": _load()}
        _child([f"_{phase}", str(d), str(files[phase]), *extra, embedder])
        stamps[phase]["load_end"] = _load()
        stamps_path.write_text(json.dumps(stamps))
    res: dict[str, Any] = {"n_passages": passages, "n_add": add, "embedder_option": embedder, **manifest}
    res["phases_run"] = run
    for f in files.values():
        res.update(json.loads(f.read_text()))
    res["build_throughput_ratio"] = round(res["embed_only_seconds"] / res["build_seconds"], 3)
    res["add_vs_build_time"] = round(res["add_seconds"] / res["build_seconds"], 4)
    res["index"] = str(d / "index")
    res["machine"] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "phases": stamps,
        "load_average_at_end": _load(),
    }
    return res


def markdown_table(res: dict) -> str:
    """The headline numbers as a markdown table."""
    rows = [
        ("passages (+ added)", f"{res['n_passages']:,} (+ {res['n_add']:,})"),
        ("embedder", res.get("embedder", "")),
        ("embed-only s", res["embed_only_seconds"]),
        ("build (mentions) s", res["build_seconds"]),
        ("build throughput ratio (embed-only / build)", res["build_throughput_ratio"]),
        ("build peak RSS MB", res["build_peak_rss_mb"]),
        (f"add {res['n_add']:,} s (no full rebuild: {res['add_no_full_rebuild']})", res["add_seconds"]),
        (
            "open s (embedder + index)",
            f"{res['query_open_seconds']} ({res['query_open_embedder_seconds']} + {res['query_open_index_seconds']})",
        ),
        ("dense p50 / p95 ms", f"{res['dense_p50_ms']} / {res['dense_p95_ms']}"),
        ("bm25 p50 / p95 ms", f"{res['bm25_p50_ms']} / {res['bm25_p95_ms']}"),
        ("activation p50 / p95 ms", f"{res['activation_p50_ms']} / {res['activation_p95_ms']}"),
        ("activation / dense p50", res["activation_dense_p50_ratio"]),
        ("query peak RSS MB", res["query_peak_rss_mb"]),
    ]
    lines = ["| measure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines) + "\n"


def _main(argv: list[str]) -> None:
    """Hidden phase entry points (``python -m kgrag_plugins.eval.bench_scale_corpus _phase ...``)."""
    logging.basicConfig(level=logging.WARNING)
    phase, rest = argv[0], argv[1:]
    if phase == "_generate":
        d, n, a, q, s = rest
        generate(d, int(n), int(a), int(q), int(s))
    elif phase == "_embed":
        _phase_embed(Path(rest[0]), Path(rest[1]), *rest[2:3])
    elif phase == "_build":
        _phase_build(Path(rest[0]), Path(rest[1]), rest[2] == "1", *rest[3:4])
    elif phase == "_add":
        _phase_add(Path(rest[0]), Path(rest[1]), *rest[2:3])
    elif phase == "_query":
        _phase_query(Path(rest[0]), Path(rest[1]), int(rest[2]), *rest[3:4])
    else:
        raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    _main(sys.argv[1:])
