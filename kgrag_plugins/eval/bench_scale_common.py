"""What both ``kgrag bench-scale`` benchmarks measure with: a phase run in a fresh interpreter, the
process's resident set, latency percentiles (:mod:`.bench_scale` for ``--kg``,
:mod:`.bench_scale_corpus` for ``--corpus``; both import this module, neither the other's helpers)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path


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


def pcts(ms: list[float]) -> dict[str, float]:
    """``{"p50", "p95"}`` of latencies ``ms`` (NaN for none), rounded to 0.01."""
    xs = sorted(ms)
    if not xs:
        return {"p50": float("nan"), "p95": float("nan")}
    return {"p50": round(statistics.median(xs), 2), "p95": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))], 2)}
