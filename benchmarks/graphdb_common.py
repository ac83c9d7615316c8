"""Helpers shared by the graph-database benchmarks (``graphdb_*.py``)."""

from __future__ import annotations


def ms_percentile(seconds: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank, from below) of ``seconds``, in milliseconds, rounded to 0.1."""
    xs = sorted(seconds)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3, 1) if xs else float("nan")
