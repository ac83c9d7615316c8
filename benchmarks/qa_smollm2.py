"""Answer quality with a real reader: SmolLM2-135M-Instruct on PopQA, HotpotQA, 2WikiMultihopQA and
MuSiQue (issue 30), and the throughput at concurrency 1 vs 8; writes ``docs/qa-smollm2.md``.

    KGRAG_DATA_DIR=../shared/data python benchmarks/qa_smollm2.py              # vllm:smollm2, 100 q each
    KGRAG_DATA_DIR=../shared/data python benchmarks/qa_smollm2.py --llm local:smollm2 --limit 20
    python benchmarks/qa_smollm2.py ... --page-only     # the same options: rewrite the page, run nothing

Each dataset runs through :func:`~kgrag_plugins.eval.qa.run_qa_bench` with a journal in
``--out-dir`` (``docs/benchmarks/qa``): a run that dies is continued by running the same command
again (finished questions are read back from the journal, never asked twice; the journal's config
must match). The JSON reports land beside the journals and the page is written from them, so every
number on it comes from this command. ``--llm URL --llm-model NAME`` uses a server you started
(``kgrag serve-llm smollm2``) instead of starting one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from kgrag_plugins.config import setup_offline_env
from kgrag_plugins.eval.qa import available_systems, run_qa_bench
from kgrag_plugins.eval.qa_llm import resolve_llm
from kgrag_plugins.eval.qa_run import PROMPTS_KEY, prompt_fingerprint, read_journal

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the page module beside this script
from qa_smollm2_page import (  # noqa: E402  (re-exported: what runs where, the page)
    AGENTS_MULTIHOP,
    EVERY_SYSTEM,
    FIRST_BUDGET,
    FIRST_NOTE,
    KG_RETRIEVER_SYSTEMS,
    NOTE_RERUN,
    PROSE_RERUN,
    READER_BUDGET,
    READER_RANKING,
    ROOT,
    SYSTEMS,
    THROUGHPUT,
    budget_section,
    paired_change,
    pairs,
    row_acc,
    summary_lines,
    valid_rate_lines,
    write_page,
)

__all__ = [
    "budget_section",
    "main",
    "note_systems",
    "paired_change",
    "pairs",
    "row_acc",
    "summary_lines",
    "valid_rate_lines",
    "write_page",
]

logger = logging.getLogger("benchmarks.qa_smollm2")


def _run(
    name: str, dataset: str, systems: list[str], llm: Any, desc: str, args: argparse.Namespace, **kw: Any
) -> dict[str, Any]:
    """One resumable bench run: ``OUT_DIR/NAME.json`` and its journal ``OUT_DIR/NAME.journal.jsonl``.

    A journal written under other prompts (its header's fingerprint is not today's
    :func:`~kgrag_plugins.eval.qa_run.prompt_fingerprint`) cannot be resumed; when its report is
    there, the report that run wrote is read back as it is (``earlier_prompts`` set, said on the
    page) instead of failing the whole page. Move the journal aside to rerun it."""
    out = args.out_dir / f"{name}.json"
    journal = args.out_dir / f"{name}.journal.jsonl"
    earlier = _journal_prompts(journal)
    if earlier is not None and earlier != prompt_fingerprint() and out.is_file():
        logger.info("%s: run under earlier prompts (%s); reading its report %s", journal.name, earlier, out.name)
        return _read_back(args.out_dir, name, earlier)
    if getattr(args, "page_only", False):
        if not out.is_file():
            raise SystemExit(f"--page-only: {out} is missing; run the same command without --page-only to measure it")
        return json.loads(out.read_text(encoding="utf-8"))  # what a run resuming every question would return
    return run_qa_bench(
        dataset,
        systems,
        llm=llm,
        llm_name=desc,
        limit=kw.pop("limit", args.limit),
        out=out,
        journal=journal,
        resume=journal.is_file(),
        progress=not args.quiet,
        llm_options={k: v for k, v in (("model", args.llm_model), ("deadline", args.llm_deadline)) if v is not None},
        **kw,
    )


def _read_back(out_dir: Path, name: str, prompts: str | None = None) -> dict[str, Any]:
    """The report ``OUT_DIR/NAME.json`` an earlier run wrote, marked with its journal's prompt
    fingerprint ``prompts`` (``earlier_prompts``; read from the journal when not given, ``"unknown"``
    when it records none)."""
    report = json.loads((out_dir / f"{name}.json").read_text(encoding="utf-8"))
    prompts = prompts or _journal_prompts(out_dir / f"{name}.journal.jsonl")
    return {**report, "earlier_prompts": prompts or "unknown"}


def _journal_prompts(journal: Path) -> str | None:
    """The prompt fingerprint in ``journal``'s header (``None``: no journal, or one from before
    journals recorded it, or not a journal)."""
    if not journal.is_file():
        return None
    try:
        return read_journal(journal)[0].get(PROMPTS_KEY)
    except (ValueError, UnicodeDecodeError):
        return None


def note_systems(spec: str | None) -> dict[str, list[str]]:
    """``--note-systems``: ``"2wikimultihopqa=vanilla-rag:frag+vanilla-rag:translator;..."`` ->
    ``{dataset: rows}``; each row must be one of :data:`NOTE_RERUN`'s."""
    out: dict[str, list[str]] = {}
    for part in (spec or "").split(";"):
        if not part.strip():
            continue
        ds, sep, rows = part.partition("=")
        names = [r.strip() for r in rows.split("+") if r.strip()]
        bad = [r for r in names if r not in NOTE_RERUN["systems"]]
        if not sep or not ds.strip() or not names or bad:
            raise ValueError(
                f"--note-systems: {part!r} is not DATASET=ROW+ROW with rows among {', '.join(NOTE_RERUN['systems'])}"
            )
        out[ds.strip()] = names
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", default="vllm:smollm2")
    ap.add_argument("--llm-model", default=None)
    ap.add_argument("--llm-deadline", type=float, default=300.0)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--datasets", default=",".join(SYSTEMS))
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("--every-system", action="store_true", help="also run every other system (EVERY_SYSTEM)")
    ap.add_argument("--prose-rerun", action="store_true", help="also rerun PROSE_RERUN (prose schemas)")
    ap.add_argument("--reader-budget", action="store_true", help="also run READER_BUDGET (shorter passages)")
    ap.add_argument(
        "--reader-ranking", action="store_true", help="also run READER_RANKING (activation's bridge page at place 2)"
    )
    ap.add_argument(
        "--kg-retrievers", action="store_true", help="also run KG_RETRIEVER_SYSTEMS on every dataset (own journals)"
    )
    ap.add_argument("--kg-datasets", default=None, help="with --kg-retrievers: only these datasets (default: all)")
    ap.add_argument("--agents", action="store_true", help="also run AGENTS_MULTIHOP (the agents on multi-hop sets)")
    ap.add_argument(
        "--agents-datasets", default=",".join(AGENTS_MULTIHOP["datasets"]), help="with --agents: these sets"
    )
    ap.add_argument("--note-rerun", action="store_true", help="also rerun NOTE_RERUN (the note schema)")
    ap.add_argument("--note-datasets", default=",".join(NOTE_RERUN["datasets"]), help="with --note-rerun")
    ap.add_argument(
        "--note-systems",
        default=None,
        help="with --note-rerun: DATASET=SYSTEM+SYSTEM;... runs only those rows there (default: every NOTE_RERUN row)",
    )
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "benchmarks" / "qa")
    ap.add_argument("--page", type=Path, default=ROOT / "docs" / "qa-smollm2.md")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument(
        "--page-only",
        action="store_true",
        help="no LLM, no run: rewrite the page from the reports the same command wrote (missing one: exit)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    setup_offline_env()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.page_only:
        llm, desc, close = None, "", lambda: None
    else:
        llm, desc, close = resolve_llm(args.llm, args.llm_model, deadline=args.llm_deadline)
    reports: dict[str, dict[str, Any]] = {}
    kg: dict[str, dict[str, Any]] = {}
    note: dict[str, dict[str, Any]] = {}
    note_first: dict[str, dict[str, Any]] = {}
    agents: dict[str, dict[str, Any]] = {}
    throughput = every = prose = budget = budget_first = reader = None
    try:
        for ds in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            reports[ds] = _run(f"qa-smollm2-{ds}", ds, SYSTEMS[ds], llm, desc, args, concurrency=args.concurrency)
            if args.kg_retrievers and (args.kg_datasets is None or ds in args.kg_datasets.split(",")):
                kg[ds] = _run(
                    f"qa-smollm2-{ds}-kg", ds, KG_RETRIEVER_SYSTEMS, llm, desc, args, concurrency=args.concurrency
                )
        if not args.no_throughput:
            t = THROUGHPUT
            throughput = _run(
                "qa-smollm2-throughput", t["dataset"], [t["system"]], llm, desc, args,
                limit=t["limit"], concurrency=t["levels"],
            )  # fmt: skip
        if args.every_system:
            e = EVERY_SYSTEM
            done = set(SYSTEMS[e["dataset"]])
            rest = [s for s in available_systems() if s not in done]
            every = _run(
                f"qa-smollm2-{e['dataset']}-every", e["dataset"], rest, llm, desc, args,
                limit=e["limit"], concurrency=args.concurrency,
            )  # fmt: skip
        if args.prose_rerun:
            pr = PROSE_RERUN
            prose = _run(
                f"qa-smollm2-{pr['dataset']}-prose", pr["dataset"], list(pr["systems"]), llm, desc, args,
                limit=pr["limit"], concurrency=args.concurrency,
            )  # fmt: skip
        if args.reader_budget:
            rb = READER_BUDGET
            budget = _run(
                f"qa-smollm2-{rb['dataset']}-{rb['journal']}", rb["dataset"], list(rb["systems"]), llm,
                desc, args, concurrency=args.concurrency, passage_chars=rb["passage_chars"],
            )  # fmt: skip
            first = f"qa-smollm2-{rb['dataset']}-{FIRST_BUDGET['journal']}"
            if (args.out_dir / f"{first}.json").is_file():
                budget_first = _read_back(args.out_dir, first)  # the first budget run: never rerun
        if args.reader_ranking:
            rr = READER_RANKING
            reader = _run(
                f"qa-smollm2-{rr['dataset']}-{rr['journal']}", rr["dataset"], list(rr["systems"]), llm, desc, args,
                concurrency=args.concurrency, retriever_opts=list(rr["retriever_opts"]),
            )  # fmt: skip
        if args.note_rerun:
            only = note_systems(args.note_systems)
            for ds in [d.strip() for d in args.note_datasets.split(",") if d.strip()]:
                note[ds] = _run(
                    f"qa-smollm2-{ds}-{NOTE_RERUN['journal']}", ds, only.get(ds, list(NOTE_RERUN["systems"])), llm,
                    desc, args,
                    concurrency=args.concurrency,
                )  # fmt: skip
            for path in sorted(args.out_dir.glob(f"qa-smollm2-*-{FIRST_NOTE['journal']}.json")):
                ds = path.name[len("qa-smollm2-") : -len(f"-{FIRST_NOTE['journal']}.json")]
                note_first[ds] = _read_back(args.out_dir, path.stem)  # the first note runs: never rerun
        if args.agents:
            am = AGENTS_MULTIHOP
            for ds in [d.strip() for d in args.agents_datasets.split(",") if d.strip()]:
                agents[ds] = _run(
                    f"qa-smollm2-{ds}-{am['journal']}", ds, list(am["systems"]), llm, desc, args,
                    limit=am["limit"], concurrency=args.concurrency,
                )  # fmt: skip
    finally:
        close()
    emb = os.environ.get("KGRAG_EMBEDDER")  # the index embedder is part of what was measured
    cmd = (f"KGRAG_EMBEDDER={emb} " if emb else "") + "KGRAG_DATA_DIR=../shared/data python benchmarks/qa_smollm2.py "
    cmd += " ".join(a for a in (argv or sys.argv[1:]) if a != "--page-only")  # the command that measured
    runs = dict(every=every, prose=prose, kg=kg, budget=budget, note=note, note_first=note_first, agents=agents)
    write_page(
        args.page, reports, throughput, cmd.strip(), **runs, journal_dir=args.out_dir, budget_first=budget_first,
        reader=reader,
    )  # fmt: skip
    logger.info("wrote %s", args.page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
