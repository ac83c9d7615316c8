"""``kgrag bench-load --graphs-dev`` over HTTP: the clients run a ``graphs/`` app that ``langgraph dev``
(:mod:`.dev_server`) serves, through ``langgraph_sdk`` (stateless ``runs.wait``); the writer opens its
own index object in this process and the server follows its commits (``graphs/_common.py``:
:meth:`~kgrag_plugins.index.store.KnowledgeIndex.follow` before each run; ``--pin-generation`` turns
that off). The core (:mod:`kgrag_plugins.eval.bench_load`) reaches :func:`run_graphs_dev` through the
adapter hook ``graphs_load_runner`` (:func:`kgrag_plugins.integrations.register_adapters`) and hands
it its own module as ``bench`` (the query record, the run clock, the writer, the summary): the
benchmark sits on a higher floor than this package, so it is passed in, not imported."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from ...types import Passage
from .dev_server import REPO, RSSSampler, start_server, stop_server, wait_ready

__all__ = ["graphs_client", "run_graphs_dev"]


async def graphs_client(
    bench: Any, run: Any, client: Any, graph: str, questions: list[str], probe_every: int, out: list
) -> None:
    """One client: runs ``graph`` on the server without pause until ``run.seconds``, appending a
    ``bench.Query`` (:mod:`kgrag_plugins.eval.bench_load`) per run to ``out``."""
    n = 0
    while run.now() < run.seconds:
        kind, text, asked = bench.pick_query(run, n, questions, probe_every)
        q = bench.Query(run.now(), 0.0, kind, asked=asked)
        try:
            state = await client.runs.wait(None, graph, input={"question": text})
            if not isinstance(state, dict) or "__error__" in state:
                err = state.get("__error__") if isinstance(state, dict) else None
                q.error = f"RunError:{err.get('error', '?') if isinstance(err, dict) else type(state).__name__}"
            else:
                q.found = bench.sentinel_batches(
                    [d.get("id") for d in state.get("documents") or [] if isinstance(d, dict)]
                )
        except Exception as e:  # HTTP and client errors, counted by type
            q.error, q.detail = type(e).__name__, str(e)[:300]
        q.t_done = run.now()
        out.append(q)
        n += 1


async def run_graphs_dev(
    args: argparse.Namespace, work: Path, index_dir: Path, questions: list[str], pool: list[Passage], bench: Any
) -> dict[str, Any]:
    """The ``--graphs-dev`` run: start the server on ``index_dir``, warm the ``args.method`` graph up,
    then ``args.clients`` clients query while the writer commits; returns the run's summary with a
    ``server`` entry (URL, graph, start-up, peak RSS of its process tree)."""
    from langgraph_sdk import get_client

    from ...index.store import KnowledgeIndex

    graph = args.method.replace("-", "_")
    served = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    if graph not in served:
        raise ValueError(f"--graphs-dev: no graph {graph!r} in langgraph.json; one of: {', '.join(served)}")
    proc, url, logfile = start_server(work, index_dir, args.clients, follow=not args.pin_generation)
    sampler = RSSSampler(proc.pid)
    sampler.start()
    index, res = None, {}
    try:
        t = time.perf_counter()
        await wait_ready(proc, url, logfile)
        client = get_client(url=url, timeout=300.0)
        state = await client.runs.wait(None, graph, input={"question": questions[0]})  # loads index + models
        if not isinstance(state, dict) or "__error__" in state:
            raise RuntimeError(f"langgraph dev: the warm-up run of {graph!r} failed: {state}")
        warm = time.perf_counter() - t
        index = KnowledgeIndex.open(index_dir)  # the writer's own object; the server follows its commits
        base = index.revision
        run, queries, werr = bench.Run(args.seconds, uuid.uuid4().hex[:6]), [], Counter()
        clients = [
            graphs_client(bench, run, client, graph, questions, args.probe_every, queries) for _ in range(args.clients)
        ]
        wtask = asyncio.create_task(bench.writer(run, index, args.write_every, args.batch, pool, werr))
        await asyncio.gather(*clients)
        elapsed = run.now()
        run.stop.set()
        await wtask
        res = bench.summarize(queries, run.commits, elapsed, base, werr)  # staleness: the probes (no revision)
        res["server"] = {
            "url": url,
            "graph": graph,
            "startup_and_warmup_s": round(warm, 2),
            "n_jobs_per_worker": max(10, args.clients),
            "follows_commits": not args.pin_generation,
        }
    finally:
        if index is not None:
            index.close()
        stop_server(proc)
        peak = sampler.close()
    res["server"]["peak_rss_mb"] = peak
    return res
