"""Helpers shared by the graph-database benchmarks (``graphdb_*.py``)."""

from __future__ import annotations


def ms_percentile(seconds: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank, from below) of ``seconds``, in milliseconds, rounded to 0.1."""
    xs = sorted(seconds)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3, 1) if xs else float("nan")


def finish(report: dict, json_path: str | None) -> dict:
    """Record the load average at the end in ``report["machine"]`` and write ``report`` as JSON
    to ``json_path`` (when given); returns ``report``."""
    import json
    import os
    from pathlib import Path

    report["machine"]["load_end"] = os.getloadavg()
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1) + "\n")
    return report
