"""Valid-reply rate of every structured LLM step with SmolLM2-135M-Instruct in-process, with schema
constraints on vs off (``TransformersLLM("smollm2", structured=False)``).

    .venv/bin/python benchmarks/structured_steps.py [--n 10] [--json /tmp/structured_steps.json]
        [--md /tmp/structured_steps.md] [--steps reasoning,answer,...]

Valid rate = valid replies / replies (a retried step counts both replies). Inputs: the bundled
sample dataset's questions with their supporting passages (``--n`` of them, recycled when fewer).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from kgrag_plugins.datasets import load_dataset
from kgrag_plugins.eval.structured_steps import STEPS, RecordingLLM, run_step, samples

logger = logging.getLogger("benchmarks.structured_steps")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--json", default="/tmp/structured_steps.json")
    ap.add_argument("--md", default="/tmp/structured_steps.md")
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--index", default="/tmp/structured_steps_index")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.models.local_llm import TransformersLLM

    ds = load_dataset("sample")
    index = KnowledgeIndex.build(ds.corpus, args.index, builder="mentions", progress=False)
    base = samples(ds, index, len(ds.questions))
    inputs = [base[i % len(base)] for i in range(args.n)]
    names = [s for s in args.steps.split(",") if s]
    results: dict[str, dict[str, dict[str, float]]] = {}
    for structured in (True, False):
        mode = "on" if structured else "off"
        llm = RecordingLLM(TransformersLLM("smollm2", structured=structured, deadline=120))
        for name in names:
            t0 = time.perf_counter()
            got: list[tuple[str, bool, bool]] = []
            for s in inputs:
                try:
                    got += run_step(name, llm, s)
                except Exception as exc:  # noqa: BLE001 - a crashing step counts as no valid reply
                    logger.warning("%s (%s): %s: %s", name, mode, type(exc).__name__, exc)
                    got.append((name, False, structured))
            valid = sum(v for _, v, _ in got)
            results.setdefault(name, {})[mode] = {
                "replies": len(got),
                "valid": valid,
                "rate": round(valid / len(got), 3) if got else 0.0,
                "seconds": round(time.perf_counter() - t0, 1),
            }
            logger.info("%s constraints %s: %s", name, mode, results[name][mode])
    Path(args.json).write_text(json.dumps(results, indent=2))
    rows = ["| step | valid (on) | valid (off) | s (on) | s (off) |", "|---|---|---|---|---|"]
    for name, r in results.items():
        on, off = r.get("on", {}), r.get("off", {})
        rows.append(
            f"| {name} | {on.get('valid', 0)}/{on.get('replies', 0)} | {off.get('valid', 0)}/{off.get('replies', 0)} "
            f"| {on.get('seconds', 0)} | {off.get('seconds', 0)} |"
        )
    Path(args.md).write_text("\n".join(rows) + "\n")
    logger.info("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
