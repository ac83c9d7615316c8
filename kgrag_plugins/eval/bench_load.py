"""``kgrag bench-load``: a soak benchmark, concurrent readers while a writer commits (issue 34 item 4).

For ``--seconds`` (default 300), ``--clients`` (default 32) asyncio clients query one index without
pause while a writer, every ``--write-every`` seconds (default 10), adds a batch of ``--batch``
passages (``add_passages``) and then deletes the batch before it (``delete_passages``): two commits
per tick, each a new generation under the index's writer lock (docs/reliability.md §1-2).

* **Python API** (default): one :class:`~kgrag_plugins.index.store.KnowledgeIndex` opened from a
  temporary copy of the index, one retriever (``--method``, default ``activation``) called with
  ``aretrieve``; the writer runs ``add_passages`` / ``delete_passages`` on the same object in its own
  thread (the in-process protocol: ``revision``, the retrievers' ``_refresh``, and
  :meth:`KnowledgeIndex.reading`, which ``retrieve`` holds so that a read sees one generation).
* **Dev server** (``--graphs-dev``): the graphs/ app served by its dev server (``make graphs-dev``),
  from a temporary copy of the checkout's app config and ``graphs/`` (``KGRAG_INDEX_DIR`` = the
  temporary index copy); the clients run the ``--method`` graph over HTTP (stateless runs); the
  writer opens its own index object in this process, and the server follows its commits
  (``graphs/_common.py``: :meth:`KnowledgeIndex.follow` before each run; ``--pin-generation`` turns
  that off, a control run where stale answers are expected). The runner is an adapter, reached
  through the hook ``graphs_load_runner`` (:mod:`kgrag_plugins.adapters`).

Index: ``--index DIR`` (copied, never written), else the bundled sample corpus (69 passages) built
with the ``--builder`` (default ``mentions``). Each batch is ``--batch - 1`` sample passages under new
ids plus one **sentinel** passage whose text carries a token unique to the batch and run.

Queries: each client asks the sample questions in turn; every ``--probe-every``-th query is a
**probe**, the sentinel text of the newest batch whose add had returned when the probe was issued.

Staleness (a generation is one writer commit):

* ``stale_after_commit`` (must be 0): a query issued after a commit returned answered from an older
  generation. Python API: the index revision the retriever answered from (recorded by a bench-local
  wrapper of the retriever's ``_retrieve``: its refreshed revision at the start) is below the
  commit's; any mode: a probe returned no sentinel of the batch it asked for or a newer one (a newer
  one answers when the probe waited while later commits landed), or any query returned the sentinel
  of a batch whose delete had returned.
* ``stale_share``: share of answers from a generation older than the newest one committed when the
  answer came back (Python API; a commit landed while the query ran); ``stale_gt1``: older by more
  than one generation. Dev server (no revision in the HTTP answer): both from the probes, in batches.

Report (``--out DIR``, default ``docs/benchmarks/load``): ``bench-load-<mode>.json`` (queries per
second, p50/p95/p99 latency, errors by type, writer commits, staleness, peak RSS of this process
and, with ``--graphs-dev``, of the server's process tree), ``.md`` (one table row) and ``.png`` (latency over
time with the writer's commits)::

    kgrag bench-load --seconds 300 --clients 32 --out docs/benchmarks/load
    kgrag bench-load --graphs-dev --seconds 120 --out docs/benchmarks/load
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import logging
import os
import platform
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..adapters import require_hook
from ..types import Passage
from .bench_scale_common import rss_mb

log = logging.getLogger("kgrag_plugins.eval.bench_load")

DEFAULT_OUT = Path("docs/benchmarks/load")
_SENTINEL_ID = re.compile(r"^load-(\d{5})-s$")


@dataclass
class Commit:
    """One writer commit: what it did and when it returned (seconds since the start)."""

    seq: int
    kind: str  # "add" | "delete"
    batch: int
    t: float
    ms: float
    revision: int | None
    generation: str | None


@dataclass
class Query:
    """One client query (times in seconds since the start)."""

    t_issue: float
    t_done: float
    kind: str  # "question" | "probe"
    error: str | None = None  # the exception's type
    detail: str | None = None  # its message (the first of each type goes into the report)
    asked: int | None = None  # probe: the sentinel batch asked for
    found: list[int] = field(default_factory=list)  # sentinel batches returned
    revision: int | None = None  # Python API: revision answered from
    revision_end: int | None = None


class Run:
    """Shared state of one run: the clock, the writer's commits, the newest batch added."""

    def __init__(self, seconds: float, tag: str) -> None:
        self.t0 = time.monotonic()
        self.seconds = seconds
        self.tag = tag
        self.commits: list[Commit] = []
        self.newest_batch = 0  # updated after the add's commit time is recorded
        self.stop = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0


# ---------------------------------------------------------------------------- batches and writer
def sentinel_text(batch: int, tag: str) -> str:
    """The sentinel passage of ``batch`` (and the probe asking for it): a token unique per run."""
    return f"Load sentinel kgload{tag}b{batch:05d} records writer batch {batch} of benchmark run {tag}."


def make_batch(batch: int, size: int, pool: list[Passage], tag: str) -> list[Passage]:
    """``size - 1`` passages of ``pool`` (in turn) under new ids, then the batch's sentinel."""
    start = (batch - 1) * (size - 1)
    picked = [pool[(start + i) % len(pool)] for i in range(size - 1)]
    out = [Passage(id=f"load-{batch:05d}-{i}", title=p.title, text=p.text) for i, p in enumerate(picked)]
    out.append(Passage(id=f"load-{batch:05d}-s", title=f"Load sentinel {batch}", text=sentinel_text(batch, tag)))
    return out


async def writer(run: Run, index: Any, every: float, size: int, pool: list[Passage], errors: Counter) -> None:
    """Every ``every`` s: add batch ``b`` then delete batch ``b - 1``, each commit timed and logged."""
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-load-writer")
    loop = asyncio.get_running_loop()

    def commit(kind: str, batch: int) -> None:
        t = time.monotonic()
        if kind == "add":
            index.add_passages(make_batch(batch, size, pool, run.tag), progress=False)
        else:
            index.delete_passages([p.id for p in make_batch(batch, size, pool, run.tag)])
        done = run.now()
        run.commits.append(
            Commit(len(run.commits) + 1, kind, batch, done, (time.monotonic() - t) * 1000,
                   getattr(index, "revision", None), index.manifest.get("generation"))
        )  # fmt: skip
        if kind == "add":
            run.newest_batch = batch  # after the commit time: a probe that sees it was issued later

    batch, due = 0, every
    try:
        while True:
            try:
                await asyncio.wait_for(run.stop.wait(), timeout=max(0.0, due - run.now()))
                return
            except asyncio.TimeoutError:
                pass
            batch += 1
            for kind, b in (("add", batch), ("delete", batch - 1)):
                if b < 1:
                    continue
                try:
                    await loop.run_in_executor(thread, commit, kind, b)
                except Exception as e:  # counted and reported: the run goes on
                    errors[type(e).__name__] += 1
                    log.warning("writer: %s of batch %d failed: %s: %s", kind, b, type(e).__name__, e)
            due += every
    finally:
        thread.shutdown(wait=True)


# ---------------------------------------------------------------------------- clients
def pick_query(run: Run, n: int, questions: list[str], probe_every: int) -> tuple[str, str, int | None]:
    """The ``n``-th query of a client: ``(kind, text, asked batch)``."""
    newest = run.newest_batch
    if probe_every > 0 and n % probe_every == probe_every - 1 and newest > 0:
        return "probe", sentinel_text(newest, run.tag), newest
    return "question", questions[n % len(questions)], None


def sentinel_batches(ids: list[str]) -> list[int]:
    """The batches whose sentinel passage is among ``ids``, ascending."""
    return sorted({int(m.group(1)) for i in ids if (m := _SENTINEL_ID.match(str(i)))})


def instrument(retriever: Any) -> None:
    """Bench-local hook: each Evidence's ``trace["load_revision"]`` is the index revision the
    retriever answered from (its derived state's, after the refresh ``retrieve`` ran first; the
    lower of that and the index's), ``trace["load_revision_end"]`` the index's when it finished."""
    inner = retriever._retrieve

    def traced(query: str, k: int) -> Any:
        revs = [r for r in (retriever._index_revision, getattr(retriever.index, "revision", None)) if r is not None]
        ev = inner(query, k)
        ev.trace["load_revision"] = min(revs) if revs else None
        ev.trace["load_revision_end"] = getattr(retriever.index, "revision", None)
        return ev

    retriever._retrieve = traced


async def python_client(run: Run, retriever: Any, k: int, questions: list[str], probe_every: int, out: list) -> None:
    n = 0
    while run.now() < run.seconds:
        kind, text, asked = pick_query(run, n, questions, probe_every)
        q = Query(run.now(), 0.0, kind, asked=asked)
        try:
            ev = await retriever.aretrieve(text, k)
            q.found = sentinel_batches(ev.passage_ids)
            q.revision, q.revision_end = ev.trace.get("load_revision"), ev.trace.get("load_revision_end")
        except Exception as e:  # counted by type in the report
            q.error, q.detail = type(e).__name__, str(e)[:300]
        q.t_done = run.now()
        out.append(q)
        n += 1


# ---------------------------------------------------------------------------- analysis
def _pct(xs: list[float], p: float) -> float | None:
    return round(float(np.percentile(xs, p)), 2) if xs else None


def staleness(queries: list[Query], commits: list[Commit], base_revision: int | None) -> dict[str, Any]:
    """The staleness counts of the module docstring (``base_revision``: the index's before any commit)."""
    commits = sorted(commits, key=lambda c: c.t)
    times = [c.t for c in commits]
    deleted_at = {c.batch: c.t for c in commits if c.kind == "delete"}

    def committed_rev(t: float) -> int | None:
        i = bisect.bisect_right(times, t)
        return commits[i - 1].revision if i else base_revision

    ok = [q for q in queries if q.error is None]
    by_rev = [q for q in ok if q.revision is not None and base_revision is not None]
    after_rev = {id(q) for q in by_rev if q.revision < (committed_rev(q.t_issue) or 0)}
    lag = [(committed_rev(q.t_done) or 0) - q.revision for q in by_rev]
    probes = [q for q in ok if q.kind == "probe"]
    missed = [q for q in probes if not q.found or max(q.found) < (q.asked or 0)]
    ghosts = [q for q in ok if any(deleted_at.get(b, float("inf")) <= q.t_issue for b in q.found)]
    after_content = {id(q) for q in missed + ghosts}
    probe_lag = [(q.asked or 0) - max(q.found) if q.found else None for q in missed]
    if by_rev:
        basis, share = "revision", sum(x >= 1 for x in lag) / len(by_rev)
        gt1 = sum(x >= 2 for x in lag)
    else:  # dev server: no revision in the answer; the probes, in batches behind
        stale = sum(id(q) in after_content for q in probes)
        basis, share = "sentinel probes", (stale / len(probes) if probes else 0.0)
        gt1 = sum(x is None or x >= 2 for x in probe_lag)
    return {
        "basis": basis,
        "checked": len(by_rev) if by_rev else len(probes),
        "stale_after_commit": len(after_rev | after_content),
        "stale_share": round(share, 6),
        "stale_gt1": gt1,
        "revision_stale_after_commit": len(after_rev),
        "straddled_a_commit": sum(q.revision_end is not None and q.revision_end != q.revision for q in by_rev),
        "probes": len(probes),
        "probe_older_than_asked": len(missed),
        "probe_newer_than_asked": sum(bool(q.found) and max(q.found) > (q.asked or 0) for q in probes),
        "returned_deleted_sentinel": len(ghosts),
    }


def summarize(
    queries: list[Query], commits: list[Commit], seconds: float, base_revision: int | None, writer_errors: Counter
) -> dict[str, Any]:
    """Throughput, latency, errors, writer commits and staleness of one run."""
    lat = [(q.t_done - q.t_issue) * 1000 for q in queries if q.error is None]
    qerr = Counter(q.error for q in queries if q.error is not None)
    bins = max(1.0, seconds / 100)
    binned: dict[int, list[float]] = {}
    for q in queries:
        if q.error is None:
            binned.setdefault(int(q.t_issue / bins), []).append((q.t_done - q.t_issue) * 1000)
    timeline = []
    for i in range(int(np.ceil(seconds / bins))):
        xs = binned.get(i, [])
        row = {"t": round(i * bins, 1), "queries": len(xs), "p50_ms": _pct(xs, 50), "p95_ms": _pct(xs, 95)}
        timeline.append({**row, "max_ms": _pct(xs, 100)})
    cms = [c.ms for c in commits]
    return {
        "measured_seconds": round(seconds, 2),
        "queries": len(queries),
        "answered": len(lat),
        "qps": round(len(lat) / seconds, 2),
        "latency_ms": {"p50": _pct(lat, 50), "p95": _pct(lat, 95), "p99": _pct(lat, 99), "max": _pct(lat, 100)},
        "errors": {
            "total": sum(qerr.values()) + sum(writer_errors.values()),
            "queries": dict(qerr),
            "writer": dict(writer_errors),
            "examples": {q.error: q.detail for q in reversed(queries) if q.error is not None},
        },
        "writer": {
            "commits": len(commits),
            "adds": sum(c.kind == "add" for c in commits),
            "deletes": sum(c.kind == "delete" for c in commits),
            "commit_ms": {"p50": _pct(cms, 50), "p95": _pct(cms, 95), "max": _pct(cms, 100)},
        },
        "staleness": staleness(queries, commits, base_revision),
        "timeline": timeline,
        "commit_log": [asdict(c) for c in commits],
    }


# ---------------------------------------------------------------------------- modes
def _method(index: Any, name: str) -> Any:
    from .bench import DATASET_AWARE, RETRIEVERS

    make = RETRIEVERS[name][0]
    return make(index, dataset="") if name in DATASET_AWARE else make(index)


async def _run_python(args: argparse.Namespace, index_dir: Path, questions: list[str], pool: list[Passage]) -> dict:
    from ..index.store import KnowledgeIndex

    index = KnowledgeIndex.open(index_dir)
    try:
        retriever = _method(index, args.method)
        instrument(retriever)
        t = time.perf_counter()
        await retriever.aretrieve(questions[0], args.k)  # models and derived state loaded before the clock
        warm = time.perf_counter() - t
        base = index.revision
        run, queries, werr = Run(args.seconds, uuid.uuid4().hex[:6]), [], Counter()
        clients = [
            python_client(run, retriever, args.k, questions, args.probe_every, queries) for _ in range(args.clients)
        ]
        wtask = asyncio.create_task(writer(run, index, args.write_every, args.batch, pool, werr))
        await asyncio.gather(*clients)
        elapsed = run.now()
        run.stop.set()
        await wtask
        res = summarize(queries, run.commits, elapsed, base, werr)
        res["warmup_s"] = round(warm, 2)
        res["executor_workers"] = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default pool (aretrieve)
        return res
    finally:
        index.close()


def _reset_peak_rss() -> bool:
    """Reset this process's ``VmHWM`` (Linux: ``5`` to ``/proc/self/clear_refs``), so the peak is
    the load's, not the index build's; ``False`` where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def run_load(args: argparse.Namespace) -> dict[str, Any]:
    """Run one load benchmark (Python API, or ``args.graphs_dev``: the hook ``graphs_load_runner``)
    and return its report."""
    from ..datasets import sample_corpus, sample_questions
    from ..index.store import KnowledgeIndex

    if args.seconds <= 0 or args.clients < 1 or args.write_every <= 0 or args.batch < 1:
        raise ValueError("bench-load: --seconds, --clients, --write-every and --batch must be positive")
    graphs_runner = require_hook("graphs_load_runner", "kgrag bench-load --graphs-dev") if args.graphs_dev else None
    pool = sample_corpus()
    questions = [q.question for q in sample_questions()]
    work = Path(tempfile.mkdtemp(prefix="kgrag-bench-load-"))
    try:
        index_dir, t = work / "index", time.perf_counter()
        if args.index is not None:
            if not (Path(args.index) / "manifest.json").is_file():
                raise FileNotFoundError(f"{args.index} is not a saved index (no manifest.json)")
            shutil.copytree(args.index, index_dir, ignore=shutil.ignore_patterns(".lock"))
            source = str(args.index)
        else:
            KnowledgeIndex.build(pool, index_dir, builder=args.builder, progress=False).close()
            source = f"bundled sample corpus ({args.builder} builder)"
        prepare = time.perf_counter() - t
        with KnowledgeIndex.open(index_dir) as idx:
            counts = dict(idx.counts)
        mode = "graphs-dev" if graphs_runner else "python"
        reset = _reset_peak_rss()
        if graphs_runner is not None:
            runner = graphs_runner(args, work, index_dir, questions, pool, sys.modules[__name__])
        else:
            runner = _run_python(args, index_dir, questions, pool)
        res = asyncio.run(runner)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = {
        "benchmark": "bench-load",
        "mode": mode,
        "method": args.method,
        "k": args.k,
        "clients": args.clients,
        "seconds": args.seconds,
        "write_every_s": args.write_every,
        "batch": args.batch,
        "probe_every": args.probe_every,
        "index": {"source": source, "prepare_s": round(prepare, 2), "counts": counts},
        "peak_rss_mb": {
            "bench_process": round(rss_mb()["hwm"] or 0.0, 1),
            "bench_process_scope": "the load (VmHWM reset after the index copy)" if reset else "the whole process",
            "server_tree": res.get("server", {}).get("peak_rss_mb"),
            "server_tree_scope": "sampled every 0.5 s: the dev server and its children" if graphs_runner else None,
        },
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d"),
    }
    return {**head, **res}


# ---------------------------------------------------------------------------- report
def markdown_table(res: dict) -> str:
    """One row of the soak benchmark's table (``res`` from :func:`run_load`)."""
    lat, st, rss = res["latency_ms"], res["staleness"], res["peak_rss_mb"]
    server = f" / {rss['server_tree']:.0f}" if rss.get("server_tree") else ""
    return (
        "| mode | method | clients | s | answered | QPS | p50 ms | p95 ms | p99 ms | errors | commits "
        "| stale after commit | stale share | stale >1 gen | peak RSS MB (bench / server) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        f"| {res['mode']} | {res['method']} | {res['clients']} | {res['seconds']:g} | {res['answered']} "
        f"| {res['qps']} | {lat['p50']} | {lat['p95']} | {lat['p99']} | {res['errors']['total']} "
        f"| {res['writer']['commits']} | {st['stale_after_commit']} | {st['stale_share']:.2%} | {st['stale_gt1']} "
        f"| {rss['bench_process']:.0f}{server} |\n"
    )


def plot(res: dict, out: Path) -> Path:
    """Latency over time (per-bin p50 / p95) with the writer's commits as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=120)
    tl = [b for b in res["timeline"] if b["queries"]]
    ax.plot([b["t"] for b in tl], [b["p50_ms"] for b in tl], marker=".", label="p50")
    ax.plot([b["t"] for b in tl], [b["p95_ms"] for b in tl], marker=".", label="p95")
    ax.plot([b["t"] for b in tl], [b.get("max_ms") for b in tl], linewidth=0.6, color="grey", label="max")
    labelled: set[str] = set()
    for c in res["commit_log"]:
        kind = c["kind"]
        ax.axvline(c["t"], color="tab:green" if kind == "add" else "tab:red", alpha=0.4, linewidth=0.8,
                   label=None if kind in labelled else f"{kind} commit returned")  # fmt: skip
        labelled.add(kind)
    ax.set_xlabel("query issued at (s since start; per-bin latency)")
    ax.set_ylabel("latency (ms)")
    st = res["staleness"]
    ax.set_title(
        f"bench-load {res['mode']} {res['method']}: {res['clients']} clients, {res['qps']} q/s, "
        f"p95 {res['latency_ms']['p95']} ms, errors {res['errors']['total']}, "
        f"stale after commit {st['stale_after_commit']}",
        fontsize=8,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def write_report(res: dict, out_dir: Path) -> dict[str, Path]:
    """``bench-load-<mode>.json``, ``.md`` and ``.png`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"bench-load-{res['mode']}"
    paths = {"json": stem.with_suffix(".json"), "md": stem.with_suffix(".md"), "png": stem.with_suffix(".png")}
    paths["json"].write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown_table(res), encoding="utf-8")
    plot(res, paths["png"])
    return paths


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``bench-load`` on the ``kgrag`` sub-command parsers."""
    from .bench import RETRIEVERS

    p = sub.add_parser("bench-load", help="soak benchmark: concurrent clients query while a writer commits")
    p.add_argument("--seconds", type=float, default=300.0, help="how long the clients query")
    p.add_argument("--clients", type=int, default=32, help="concurrent asyncio clients")
    p.add_argument("--write-every", type=float, default=10.0, help="seconds between writer ticks (add + delete)")
    p.add_argument("--batch", type=int, default=5, help="passages per added batch (the last one a sentinel)")
    p.add_argument(
        "--method", default="activation", choices=sorted(RETRIEVERS), metavar="METHOD",
        help="retriever (Python API) or graph (--graphs-dev: activation, kg-infused, sa-rag, frag, translator, know3)",
    )  # fmt: skip
    p.add_argument("-k", type=int, default=5, help="passages per query")
    p.add_argument(
        "--index", type=Path, default=None, metavar="DIR", help="a saved index (copied; default: the sample)"
    )
    p.add_argument("--builder", choices=["mentions", "parsekg"], default="mentions", help="graph of the sample index")
    p.add_argument("--probe-every", type=int, default=4, help="every N-th query of a client is a sentinel probe")
    p.add_argument(
        "--graphs-dev",
        action="store_true",
        help="query the graphs/ app served over HTTP by the dev server that `make graphs-dev` starts, instead of "
        "the Python API",
    )
    p.add_argument(
        "--pin-generation",
        action="store_true",
        help="--graphs-dev: serve with KGRAG_INDEX_FOLLOW=0 (the server keeps the generation it opened: a control "
        "run, stale answers expected)",
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report directory (JSON, Markdown, PNG)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """``kgrag bench-load``: run, write the report, log one summary line, echo the table."""
    res = run_load(args)
    paths = write_report(res, args.out)
    st, err = res["staleness"], res["errors"]
    bad = err["total"] or st["stale_after_commit"]
    (log.warning if bad else log.info)(
        "bench-load %s: %d answered in %.0f s (%.1f q/s), p50/p95/p99 %s/%s/%s ms, errors %s, %d commits, "
        "stale after commit %d, stale share %.2f%%, stale >1 gen %d; wrote %s",
        res["mode"], res["answered"], res["seconds"], res["qps"], res["latency_ms"]["p50"], res["latency_ms"]["p95"],
        res["latency_ms"]["p99"], err["queries"] or err["writer"] or 0, res["writer"]["commits"],
        st["stale_after_commit"], 100 * st["stale_share"], st["stale_gt1"], paths["json"],
    )  # fmt: skip
    sys.stdout.write(markdown_table(res))
    return 1 if bad else 0
