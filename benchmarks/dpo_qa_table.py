"""KG-Infused ``full`` with the base SmolLM2 against ``full`` with the DPO-tuned one (docs/training.md).

Reads the QA journals of ``kgrag bench --qa --systems full`` runs (one JSON line per question) and
compares the two generators on the questions both runs finished, the first ``min(limit)`` of the set
(a 100-question base run is compared with a 50-question tuned run on its first 50)::

    python benchmarks/dpo_qa_table.py popqa docs/benchmarks/qa/dpo-base-popqa.journal.jsonl \
        docs/benchmarks/qa/dpo-tuned-popqa.journal.jsonl hotpotqa ... --json docs/benchmarks/dpo/qa.json

Prints a markdown table (Acc, EM, F1, fallbacks; Acc = a gold alias inside the reply) and, with
``--json``, writes the same numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from kgrag_plugins.eval.qa_run import read_journal

logger = logging.getLogger("dpo_qa_table")


def full_rows(path: Path) -> tuple[dict, dict[int, dict]]:
    """``(config, {question index: its last row})`` of a QA journal's ``full`` row; the config is
    the header's, with the limit of any later ``extend`` line (a resume that raised ``--limit``)."""
    config, records = read_journal(path)
    rows = {int(r["i"]): r for r in records if r.get("type") == "question" and r.get("row") == "full"}
    return config, rows


def compare(dataset: str, base: Path, tuned: Path, *, partial: bool = False) -> dict:
    """Acc / EM / F1 / fallbacks of both runs on the first ``min(limit)`` questions of ``dataset``
    (``partial``: on those of them both runs finished, for runs stopped early)."""
    bcfg, brows = full_rows(base)
    tcfg, trows = full_rows(tuned)
    n = min(int(bcfg.get("n_questions") or len(brows)), int(tcfg.get("n_questions") or len(trows)))
    missing = [i for i in range(n) if i not in brows or i not in trows]
    if missing and not partial:
        raise ValueError(f"{dataset}: questions {missing[:5]} are not finished in both journals")
    ids = [i for i in range(n) if i in brows and i in trows]
    if not ids:
        raise ValueError(f"{dataset}: no question is finished in both journals")

    def scores(rows: dict[int, dict]) -> dict:
        qs = [rows[i] for i in ids]
        mean = lambda key: round(sum(q["scores"][key] for q in qs) / len(qs), 3)  # noqa: E731
        return {
            "acc": mean("acc"),
            "em": mean("em"),
            "f1": mean("f1"),
            "fallbacks": sum(bool(q["fallback"]) for q in qs),
        }

    b, t = scores(brows), scores(trows)
    return {
        "dataset": dataset,
        "questions": len(ids),
        "of_first": n,
        "base": b,
        "dpo": t,
        "base_llm": bcfg.get("llm"),
        "dpo_llm": tcfg.get("llm"),
    }


def _count(row: dict) -> str:
    n, of = row["questions"], row.get("of_first", row["questions"])
    return str(n) if n == of else f"{n} of the first {of}"


def markdown(rows: list[dict]) -> str:
    head = (
        "| set | questions | Acc base | Acc DPO | Δ Acc (points) | EM base / DPO | F1 base / DPO "
        "| fallbacks base / DPO |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, t = r["base"], r["dpo"]
        delta = round((t["acc"] - b["acc"]) * 100, 1)
        lines.append(
            f"| {r['dataset']} | {_count(r)} | {b['acc']:.2f} | {t['acc']:.2f} | {delta:+.1f} | "
            f"{b['em']:.2f} / {t['em']:.2f} | {b['f1']:.3f} / {t['f1']:.3f} | {b['fallbacks']} / {t['fallbacks']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("triples", nargs="+", help="DATASET BASE_JOURNAL TUNED_JOURNAL, repeated")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--partial", action="store_true", help="compare on the questions both runs finished")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if len(args.triples) % 3:
        ap.error("give DATASET BASE_JOURNAL TUNED_JOURNAL triples")
    t = args.triples
    rows = [compare(t[i], Path(t[i + 1]), Path(t[i + 2]), partial=args.partial) for i in range(0, len(t), 3)]
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(markdown(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
