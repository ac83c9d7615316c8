"""``kgrag bench-scale --curve``: cost curves over corpus and KG sizes (issue 36 item 3).

**Corpus points** (``--sizes``, default 5k, 20k, 50k, 100k passages), each a synthetic corpus as
``--corpus`` generates it (:func:`.bench_scale_corpus.generate`, no added batch), phases each in a
fresh process (its own time and peak RSS, ``VmHWM``):

1. **build**: ``KnowledgeIndex.build(..., builder="mentions")`` with the index's embedder
   (``--embedder``; ``default``: the index default), as :func:`.bench_scale_corpus._phase_build`:
   time, peak RSS, index bytes on disk;
2. **parsekg_build**: the translator's index (``builder="parsekg"``) over the same passages, the
   passage vectors (and windows) read from the first index, so it times spaCy + graph + store;
3. **query**: dense, bm25 and activation interleaved per question
   (:func:`.bench_scale_corpus._phase_query`), one warm-up, ``--queries`` questions;
4. **frag**: :class:`~kgrag_plugins.methods.frag.FRAGRetriever` on the mentions index, its
   topic entities linked from the question as the retriever does (no ``topic_entities=``); its
   entity and relation vectors stored first (``frag_precompute_seconds`` per kind,
   :data:`FRAG_PRECOMPUTE`, as ``kgrag index --precompute`` does), then constructed
   (``frag_setup_seconds`` counts both);
5. **translator**: :class:`~kgrag_plugins.methods.translator.TranslatorRetriever` (LLM-free) on
   the ParseKG index; ``prepare()`` (entity tables, name and relation-window vectors) timed apart.

FRAG and the translator are warmed up on the questions in turn until one runs on the graph (no
dense fallback; at most :data:`WARMUP_MAX`), which does the one-time work of a first graph query
(FRAG's relation vectors, ...; timed as ``*_warmup_seconds``), then run all the questions and
count their dense fallbacks. Each runs under ``--slow-timeout`` seconds; past it (or on an error)
the point records ``{"skipped": why}`` and what it had measured instead of latencies, and a later
run with a longer ``--slow-timeout`` measures it again.

**KG points** (``--kg-sizes``, default 0.3M, 1M, 4.6M entities): a synthetic Wikidata5M KG as
``--kg`` generates it (:func:`.bench_scale.generate`, triples scaled with entities at
Wikidata5M's 21M / 4.6M), imported and saved (``bench_scale._phase_import``), then opened in a
fresh process (:func:`_phase_kg_open`): open seconds (embedder load and index open apart), open
peak RSS, and 2-hop activation p50/p95 (:func:`.bench_scale_common.activation_2hop`).

**Resumable**: every phase result is written into the JSON as soon as it is measured; a point (or
phase) already there with the same parameters is not measured again unless ``--force``. Points in
the JSON that are not in ``--sizes`` / ``--kg-sizes`` are kept. Each run refits the exponents
(least-squares slope of log y on log x over the measured points, :func:`fit_exponent`) and redraws
the plots (:func:`plot`) from the whole JSON. Generated data lives under ``--out-dir`` (``/tmp``)::

    kgrag bench-scale --curve --out-dir /tmp/kgrag_curve --json docs/benchmarks/bench-scale-curve.json \\
        --img-dir docs/img --sizes 5000,20000,50000,100000 --kg-sizes 300000,1000000,4600000
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .bench_scale_common import dir_bytes, open_and_walk, pcts, rss_mb, run_phase

log = logging.getLogger("kgrag_plugins.eval.bench_scale_curve")

SIZES = (5_000, 20_000, 50_000, 100_000)
KG_SIZES = (300_000, 1_000_000, 4_600_000)
#: Wikidata5M's triple lines per entity (21M / 4.6M): a KG point's triples.
TRIPLES_PER_ENTITY = 21_000_000 / 4_600_000
KG_RELATIONS = 822
CORPUS_PHASES = ("build", "parsekg_build", "query", "frag", "translator")
KG_PHASES = ("import", "open")
RETRIEVERS = ("dense", "bm25", "activation", "frag", "translator")
SLOW = ("frag", "translator")
#: At most this many questions warm FRAG / the translator up (see :func:`_slow_query`).
WARMUP_MAX = 20
#: FRAG's phase stores these vectors first (``vector_cache.precompute``), timed apart.
FRAG_PRECOMPUTE = ("entities", "relations")
_ME = "kgrag_plugins.eval.bench_scale_curve"
_CORPUS = "kgrag_plugins.eval.bench_scale_corpus"
_KG = "kgrag_plugins.eval.bench_scale"
#: name -> (curve x axis, y getter from a point) for every fitted curve.
Getter = Callable[[dict], "float | None"]


def _get(*path: str) -> Getter:
    def f(pt: dict) -> float | None:
        v: Any = pt
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return f


def _mb(*path: str) -> Getter:
    g = _get(*path)
    return lambda pt: None if g(pt) is None else g(pt) / 2**20


CURVES: dict[str, tuple[str, Getter]] = {
    "build_seconds": ("passages", _get("build", "build_seconds")),
    "build_peak_rss_mb": ("passages", _get("build", "build_peak_rss_mb")),
    "index_mb": ("passages", _mb("build", "index_bytes")),
    "parsekg_build_seconds": ("passages", _get("parsekg_build", "parsekg_build_seconds")),
    "parsekg_index_mb": ("passages", _mb("parsekg_build", "parsekg_index_bytes")),
    **{f"{r}_p50_ms": ("passages", _get(r if r in SLOW else "query", f"{r}_p50_ms")) for r in RETRIEVERS},
    "kg_open_seconds": ("entities", _get("open", "open_seconds")),
    "kg_open_index_seconds": ("entities", _get("open", "open_index_seconds")),
    "kg_open_peak_rss_mb": ("entities", _get("open", "open_peak_rss_mb")),
    "kg_index_mb": ("entities", _mb("import", "index_bytes")),
}


# =========================================================================== fitting
def fit_exponent(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of ``log y`` on ``log x`` (``y ~ x ** slope``) over the pairs with
    positive values; ``None`` with fewer than two distinct ``x``."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if y is not None and x > 0 and y > 0]
    if len({x for x, _ in pairs}) < 2:
        return None
    lx, ly = np.log([x for x, _ in pairs]), np.log([y for _, y in pairs])
    return round(float(np.polyfit(lx, ly, 1)[0]), 4)


def series(res: dict, curve: str) -> list[tuple[int, float]]:
    """The measured ``(x, y)`` of ``curve`` (a :data:`CURVES` name), sorted by ``x``."""
    axis, get = CURVES[curve]
    pts = res.get("corpus" if axis == "passages" else "kg", {})
    out = [(int(x), get(pt)) for x, pt in pts.items()]
    return sorted((x, y) for x, y in out if y is not None)


def fits(res: dict) -> dict[str, dict]:
    """Every curve's exponent, points and x range (curves with fewer than two points: omitted)."""
    out = {}
    for name, (axis, _) in CURVES.items():
        s = series(res, name)
        e = fit_exponent([x for x, _ in s], [y for _, y in s])
        if e is not None:
            out[name] = {"exponent": e, "x": axis, "points": len(s), "range": [s[0][0], s[-1][0]]}
    return out


def exponent_ratio(fit: dict[str, dict], a: str = "activation_p50_ms", b: str = "dense_p50_ms") -> float | None:
    """``exponent(a) / exponent(b)`` when both are fitted on the same sizes and ``b``'s is not 0."""
    if a not in fit or b not in fit or fit[a]["range"] != fit[b]["range"] or not fit[b]["exponent"]:
        return None
    return round(fit[a]["exponent"] / fit[b]["exponent"], 3)


# =========================================================================== plots
def plot(res: dict, img_dir: str | os.PathLike[str], stem: str = "bench-scale-curve") -> list[Path]:
    """Write the three log-log plots (build, query p50, KG open) into ``img_dir``; their paths.
    Needs matplotlib (the ``explain`` or ``notebooks`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - an optional extra
        raise RuntimeError("bench-scale --curve plots need matplotlib: pip install 'kgrag-plugins[explain]'") from e
    fit = res.get("fits", {})
    d = Path(img_dir)
    d.mkdir(parents=True, exist_ok=True)

    def line(ax: Any, curve: str, label: str) -> None:
        s = series(res, curve)
        if s:
            e = fit.get(curve, {}).get("exponent")
            ax.plot([x for x, _ in s], [y for _, y in s], "o-", label=f"{label} (slope {e})" if e else label)

    def finish(ax: Any, xlabel: str, ylabel: str) -> None:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)

    # one figure per (file suffix, title, panels); a panel is (curves as (key, label), x label, y label)
    figures = [
        ("build", "Index build cost vs corpus size", [
            ([("build_seconds", "build (mentions)"), ("parsekg_build_seconds", "parsekg build (vectors reused)")],
             "passages", "seconds"),
            ([("build_peak_rss_mb", "build peak RSS")], "passages", "MB"),
            ([("index_mb", "mentions index"), ("parsekg_index_mb", "parsekg index")], "passages", "MB on disk"),
        ]),
        ("query", "Query latency (p50) vs corpus size", [
            ([(f"{r}_p50_ms", r) for r in RETRIEVERS], "passages", "query p50 (ms)"),
        ]),
        ("kg", "KG open cost vs entities (memory-mapped)", [
            ([("kg_open_seconds", "open (embedder + index)"), ("kg_open_index_seconds", "index open")],
             "entities", "seconds"),
            ([("kg_open_peak_rss_mb", "open peak RSS"), ("kg_index_mb", "index on disk")], "entities", "MB"),
        ]),
    ]  # fmt: skip
    paths = []
    for suffix, title, panels in figures:
        fig, axes = plt.subplots(1, len(panels), figsize=(7, 5) if len(panels) == 1 else (5 * len(panels), 4.5))
        for ax, (curves, xlabel, ylabel) in zip(np.atleast_1d(axes), panels):
            for curve, label in curves:
                line(ax, curve, label)
            finish(ax, xlabel, ylabel)
        fig.suptitle(title)
        fig.tight_layout()
        paths.append(d / f"{stem}-{suffix}.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


# =========================================================================== phases (fresh processes)
def _write_partial(out: Path, res: dict) -> None:
    """Write ``res`` now, so a phase stopped at its timeout still reports what it measured."""
    out.write_text(json.dumps(res))


def _slow_query(index_dir: Path, questions: Path, out: Path, name: str, queries: int, emb_name: str) -> None:
    """``frag`` / ``translator`` on ``index_dir``: construction (and ``prepare``), first query,
    then the questions; writes partial results as it goes."""
    from ..index.store import KnowledgeIndex
    from .bench_scale_corpus import _embedder

    with open(questions, encoding="utf-8") as f:
        qs = [json.loads(line)["question"] for line in f if line.strip()][:queries]
    emb = _embedder(emb_name)
    t0 = time.perf_counter()
    index = KnowledgeIndex.open(index_dir, embedder=emb)
    res: dict[str, Any] = {f"{name}_open_seconds": round(time.perf_counter() - t0, 2)}
    t0 = time.perf_counter()
    if name == "frag":
        from ..index.vector_cache import precompute
        from ..methods.frag import FRAGRetriever

        # what docs/scale.md advises for a corpus graph: its entity and relation vectors stored once
        # (else each question embeds the relations it meets), timed per kind
        res["frag_precompute_seconds"] = {k: round(v, 2) for k, v in precompute(index, FRAG_PRECOMPUTE).items()}
        _write_partial(out, res)
        ret: Any = FRAGRetriever(index)
    else:
        from ..methods.translator import TranslatorRetriever

        ret = TranslatorRetriever(index)
        res["translator_prepare"] = ret.prepare()
    res[f"{name}_setup_seconds"] = round(time.perf_counter() - t0, 2)
    _write_partial(out, res)
    # Warm-up: the questions in turn until one runs on the graph (no dense fallback): the one-time
    # work of a first graph query (relation / entity vectors, stored in the index) is then done.
    t0 = time.perf_counter()
    for i, q in enumerate(qs[:WARMUP_MAX] or ["warm-up question about a city"]):
        t = time.perf_counter()
        ev = ret.retrieve(q, k=5)
        if i == 0:
            res[f"{name}_first_query_seconds"] = round(time.perf_counter() - t, 2)
        if not ev.trace.get("fallback"):
            break
    res[f"{name}_warmup_seconds"], res[f"{name}_warmup_questions"] = round(time.perf_counter() - t0, 2), i + 1
    _write_partial(out, res)
    ms, fallbacks = [], 0
    for q in qs:
        t = time.perf_counter()
        ev = ret.retrieve(q, k=5)
        ms.append((time.perf_counter() - t) * 1e3)
        fallbacks += bool(ev.trace.get("fallback"))
    p = pcts(ms)
    res.update({f"{name}_p50_ms": p["p50"], f"{name}_p95_ms": p["p95"], f"{name}_queries": len(ms)})
    # the tail a p95 hides: the slowest question and the total, so one stall shows
    res[f"{name}_max_ms"] = round(max(ms), 2) if ms else float("nan")
    res[f"{name}_total_s"] = round(sum(ms) / 1e3, 2)
    res[f"{name}_fallbacks"] = fallbacks  # questions answered by the dense fallback (no entity, no path)
    res[f"{name}_peak_rss_mb"] = round(rss_mb()["hwm"] or 0.0, 1)
    index.close()
    _write_partial(out, res)


def _phase_parsekg(d: Path, out: Path, emb_name: str) -> None:
    """The translator's ParseKG index over ``d/corpus.jsonl``, vectors and windows from ``d/index``."""
    from ..index.store import KnowledgeIndex
    from .bench_scale_corpus import _embedder, _read_passages

    passages = _read_passages(d / "corpus.jsonl")
    emb = _embedder(emb_name)
    src = KnowledgeIndex.open(d / "index", embedder=emb)
    store = src.passages
    order = [store.position(p.id) for p in passages]
    vectors, windows = np.asarray(store.vectors)[order], store.windows
    t0 = time.perf_counter()
    index = KnowledgeIndex.build(
        passages, d / "index_parsekg", embedder=emb, builder="parsekg", vectors=vectors, windows=windows, progress=False
    )
    secs = time.perf_counter() - t0
    src.close()
    res = {
        "parsekg_build_seconds": round(secs, 2),
        "parsekg_build_peak_rss_mb": round(rss_mb()["hwm"] or 0.0, 1),
        "parsekg_build_timings": {k: round(v, 2) for k, v in index.manifest.get("timings", {}).items()},
        "parsekg_counts": index.counts,
        "parsekg_index_bytes": dir_bytes(d / "index_parsekg"),
    }
    index.close()
    out.write_text(json.dumps(res))


def _phase_kg_open(index_dir: str, out: str, queries: int, seed: int) -> None:
    """Open a KG index in this fresh process: open time (embedder load apart), peak RSS, 2-hop activation."""
    index, _, res = open_and_walk(index_dir, queries, seed)
    index.close()
    Path(out).write_text(json.dumps(res))


# =========================================================================== driver
def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not Unix
        return None


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _run(module: str, args: list[str], timeout: float | None = None) -> None:
    """One phase in a fresh interpreter (tests replace this)."""
    run_phase(module, args, timeout=timeout)


def _manifest(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _index_passages(path: Path) -> int | None:
    man = _manifest(path / "manifest.json")
    return man.get("counts", {}).get("passages") if man else None


class _Curve:
    """The JSON being filled: loaded, updated phase by phase, written after every phase."""

    def __init__(self, path: Path, force: bool, phases: Sequence[str] | None = None) -> None:
        self.path, self.force, self.phases = path, force, phases
        self.res: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
        self.res.setdefault("corpus", {})
        self.res.setdefault("kg", {})

    def point(self, kind: str, x: int, params: dict) -> dict:
        old = self.res[kind].get(str(x))
        if old is None or old.get("params") != params or (self.force and self.phases is None):
            old = self.res[kind][str(x)] = {"params": params, "stamps": {}}
        elif self.force:  # --force --phases: only those are measured again
            for p in self.phases or ():
                old.pop(p, None)
        return old

    def todo(self, pt: dict, phases: Sequence[str], slow_s: float = math.inf) -> list[str]:
        """The phases of ``pt`` to measure: missing (or cut at a shorter timeout), within ``--phases``."""
        stamps = pt["stamps"]
        out = [p for p in phases if p not in pt or stamps.get(p, {}).get("timeout_s", slow_s) < slow_s]
        return [p for p in out if self.phases is None or p in self.phases]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.res, indent=1) + "\n")

    def phase(self, pt: dict, name: str, module: str, args: list[str], out: Path, timeout: float | None = None) -> None:
        """Run phase ``name`` in a child, store its result (or why it has none) in ``pt``; save."""
        out.unlink(missing_ok=True)
        stamp = pt.setdefault("stamps", {})[name] = {"start_utc": _utc(), "load_start": _load()}
        log.info("%s: phase %s", out.parent.name, name)
        why = None
        try:
            _run(module, args, timeout)
        except subprocess.TimeoutExpired:
            why = f"not finished after {timeout:.0f} s (--slow-timeout)"
            stamp["timeout_s"] = timeout
        except subprocess.CalledProcessError as e:
            if name not in SLOW:
                raise
            why = f"failed (exit status {e.returncode}; see the log)"
        stamp.update(end_utc=_utc(), load_end=_load())
        got = json.loads(out.read_text()) if out.is_file() else {}
        if why:
            got["skipped"] = why
        pt[name] = got
        self.save()


def _corpus_point(cur: _Curve, out_dir: Path, n: int, queries: int, seed: int, embedder: str, slow_s: float) -> None:
    params = {"passages": n, "queries": queries, "seed": seed, "embedder_option": embedder}
    pt = cur.point("corpus", n, params)
    todo = cur.todo(pt, CORPUS_PHASES, slow_s)  # a phase cut at a shorter timeout is measured again
    if not todo:
        log.info("corpus %d: measured already", n)
        return
    d = out_dir / f"corpus-{n}"
    man = _manifest(d / "manifest.json")
    if [man.get(k) for k in ("passages", "add", "queries", "seed")] != [n, 0, queries, seed]:
        _run(_CORPUS, ["_generate", str(d), str(n), "0", str(queries), str(seed)])
    pt["corpus"] = {k: v for k, v in _manifest(d / "manifest.json").items() if k != "add"}
    needs_index = {"parsekg_build", "query", "frag"} & set(todo)
    if "build" in todo or (needs_index and _index_passages(d / "index") != n):
        cur.phase(pt, "build", _CORPUS, ["_build", str(d), str(d / "build.json"), "0", embedder], d / "build.json")
        pt["embedder"] = _manifest(d / "index" / "manifest.json").get("embedder", {}).get("name")
        cur.save()
    if "parsekg_build" in todo or ("translator" in todo and _index_passages(d / "index_parsekg") != n):
        cur.phase(pt, "parsekg_build", _ME, ["_parsekg", str(d), str(d / "pkg.json"), embedder], d / "pkg.json")
    if "query" in todo:
        cur.phase(pt, "query", _CORPUS, ["_query", str(d), str(d / "query.json"), str(queries), embedder],
                  d / "query.json")  # fmt: skip
    for name in SLOW:
        if name in todo:
            index = d / ("index" if name == "frag" else "index_parsekg")
            args = ["_slow", str(index), str(d / "questions.jsonl"), str(d / f"{name}.json"), name, str(queries)]
            cur.phase(pt, name, _ME, [*args, embedder], d / f"{name}.json", timeout=slow_s)


def _kg_point(cur: _Curve, out_dir: Path, n: int, queries: int, seed: int) -> None:
    triples = int(round(n * TRIPLES_PER_ENTITY))
    params = {"entities": n, "triples": triples, "relations": KG_RELATIONS, "seed": seed, "queries": queries}
    pt = cur.point("kg", n, params)
    todo = cur.todo(pt, KG_PHASES)
    if not todo:
        log.info("kg %d: measured already", n)
        return
    d = out_dir / f"kg-{n}"
    src, index = d / "wikidata5m", d / "index"
    man = _manifest(src / "manifest.json")
    if [man.get(k) for k in ("n_entities", "n_triples", "n_relations", "seed")] != [n, triples, KG_RELATIONS, seed]:
        _run(_KG, ["_generate", str(src), str(n), str(KG_RELATIONS), str(triples), str(seed)])
    man = _manifest(src / "manifest.json")
    pt["kg"] = {k: man[k] for k in ("n_entities", "n_relations", "n_triples", "n_unique_triples", "generate_seconds")}
    if "import" in todo or not (index / "manifest.json").is_file():
        cur.phase(pt, "import", _KG, ["_import", str(src), str(index), str(d / "import.json")], d / "import.json")
    if "open" in todo:
        cur.phase(pt, "open", _ME, ["_kg_open", str(index), str(d / "open.json"), str(queries), str(seed + 1)],
                  d / "open.json")  # fmt: skip


def run_curve(
    out_dir: str | os.PathLike[str],
    json_path: str | os.PathLike[str],
    *,
    sizes: Sequence[int] = SIZES,
    kg_sizes: Sequence[int] = KG_SIZES,
    queries: int = 100,
    seed: int = 0,
    embedder: str = "default",
    force: bool = False,
    slow_timeout: float = 1800.0,
    img_dir: str | os.PathLike[str] | None = None,
    plots: bool = True,
    phases: Sequence[str] | None = None,
) -> dict:
    """Measure the points not yet in ``json_path`` (smallest first), refit, replot; the result.

    ``phases``: measure only these (:data:`CORPUS_PHASES`, :data:`KG_PHASES`); with ``force``,
    only these are measured again (e.g. ``["query"]``: every point's queries under one machine state).
    """
    bad = sorted(set(phases or ()) - set(CORPUS_PHASES) - set(KG_PHASES))
    if bad:
        raise ValueError(f"unknown phase(s) {bad}; phases: {', '.join(CORPUS_PHASES + KG_PHASES)}")
    out, path = Path(out_dir), Path(json_path)
    cur = _Curve(path, force, phases)
    cur.res["description"] = "kgrag bench-scale --curve: cost curves (docs/scale.md); exponents = log-log slopes"
    for n in sorted(sizes):
        _corpus_point(cur, out, int(n), queries, seed, embedder, slow_timeout)
    for n in sorted(kg_sizes):
        _kg_point(cur, out, int(n), queries, seed)
    cur.res["corpus"] = dict(sorted(cur.res["corpus"].items(), key=lambda kv: int(kv[0])))
    cur.res["kg"] = dict(sorted(cur.res["kg"].items(), key=lambda kv: int(kv[0])))
    cur.res["fits"] = fits(cur.res)
    cur.res["activation_dense_exponent_ratio"] = exponent_ratio(cur.res["fits"])
    cur.res["machine"] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "load_average_at_end": _load(),
        "written_utc": _utc(),
    }
    if plots:
        imgs = plot(cur.res, img_dir if img_dir is not None else path.parent, path.stem)
        cur.res["plots"] = [str(p) for p in imgs]
    cur.save()
    return cur.res


def _cell(v: Any, nd: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:,.{nd}f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)


def markdown_table(res: dict) -> str:
    """The measured points and the exponents as markdown tables."""
    lines = [
        "| passages | build s | build peak RSS MB | index MB | parsekg build s | "
        + " | ".join(f"{r} p50 / p95 ms" for r in RETRIEVERS)
        + " |",
        "|" + "---|" * (5 + len(RETRIEVERS)),
    ]
    for x, pt in res.get("corpus", {}).items():
        cells = [f"{int(x):,}"] + [_cell(CURVES[c][1](pt)) for c in ("build_seconds", "build_peak_rss_mb", "index_mb")]
        cells.append(_cell(CURVES["parsekg_build_seconds"][1](pt)))
        for r in RETRIEVERS:
            src = pt.get(r if r in SLOW else "query", {})
            p50, p95 = src.get(f"{r}_p50_ms"), src.get(f"{r}_p95_ms")
            why = f"not measured: {src['skipped']}" if "skipped" in src else "not run yet"
            cells.append(f"{_cell(p50)} / {_cell(p95)}" if p50 is not None else why)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| entities | triples | open s (embedder + index) | open peak RSS MB | index MB | 2-hop p50 ms |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for x, pt in res.get("kg", {}).items():
        o, g = pt.get("open", {}), pt.get("import", {}).get("graph", {})
        opened = f"{_cell(o.get('open_seconds'))} ({_cell(o.get('open_embedder_seconds'))} + "
        opened += f"{_cell(o.get('open_index_seconds'), 2)})"
        lines.append(
            f"| {int(x):,} | {_cell(g.get('triples'))} | {opened} | {_cell(o.get('open_peak_rss_mb'))} | "
            f"{_cell(CURVES['kg_index_mb'][1](pt))} | {_cell(o.get('activation_2hop_p50_ms'))} |"
        )
    lines += ["", "| curve | exponent | points | range |", "|---|---|---|---|"]
    for name, f in res.get("fits", {}).items():
        lines.append(f"| {name} | {f['exponent']} | {f['points']} | {f['range'][0]:,}–{f['range'][1]:,} {f['x']} |")
    lines += ["", f"activation / dense p50 exponent ratio: {_cell(res.get('activation_dense_exponent_ratio'), 3)}"]
    return "\n".join(lines) + "\n"


def _main(argv: list[str]) -> None:
    """Hidden phase entry points (``python -m kgrag_plugins.eval.bench_scale_curve _phase ...``)."""
    logging.basicConfig(level=logging.WARNING)
    phase, rest = argv[0], argv[1:]
    if phase == "_parsekg":
        _phase_parsekg(Path(rest[0]), Path(rest[1]), rest[2])
    elif phase == "_slow":
        idx, qs, out, name, q, emb = rest
        _slow_query(Path(idx), Path(qs), Path(out), name, int(q), emb)
    elif phase == "_kg_open":
        idx, out, q, s = rest
        _phase_kg_open(idx, out, int(q), int(s))
    else:
        raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    _main(sys.argv[1:])
