"""Which of PopQA's two gold pages each retriever finds, and what a real reader makes of the second.

PopQA's rows (NeuroPath's construction) have two gold passages: the subject's page ("George
Rankin") and the answer's own page ("Politician"). Issue 30's QA goal asks `vanilla-rag:activation`
to beat `vanilla-rag` (dense) by 5 points of Acc with SmolLM2-135M reading the top 6. This script
shows where that gap can come from:

1. For every PopQA question, whether each retriever's top 2 / top 6 holds the subject page and the
   answer page (``--embedder``'s cached indexes, the ones the QA run used).
2. From a QA journal holding both rows (``vanilla-rag`` and ``vanilla-rag:activation``), the
   reader's Acc split by whether activation's top 6 brings the answer page that dense's lacks.

    KGRAG_DATA_DIR=../shared/data python benchmarks/popqa_pages.py \\
        --journal docs/benchmarks/qa/qa-smollm2-popqa-rerun.journal.jsonl

Prints markdown; writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kgrag_plugins.config import setup_offline_env
from kgrag_plugins.datasets.metrics import sign_test_p

K = 6  # the vanilla RAG note reads the top 6 (kgrag_plugins/eval/qa.py)
ROWS = {"dense": "vanilla-rag", "activation": "vanilla-rag:activation"}


def top_pages(embedder: str, cache_dir: Path) -> tuple[list[Any], dict[str, dict[str, list[str]]]]:
    """PopQA's questions and, per retriever, each question's top-``K`` passage ids."""
    from kgrag_plugins.datasets import dataset_index, load_dataset
    from kgrag_plugins.methods.activation import ActivationRetriever
    from kgrag_plugins.methods.baselines import DenseRetriever
    from kgrag_plugins.models.embed import resolve_embedder

    data = load_dataset("popqa")
    emb = resolve_embedder(embedder)
    plain, _ = dataset_index(data, cache_dir=cache_dir, embedder=emb, progress=False)
    graph, _ = dataset_index(data, cache_dir=cache_dir, embedder=emb, builder="mentions", progress=False)
    retrievers = {"dense": DenseRetriever(plain), "activation": ActivationRetriever(graph)}
    tops = {
        name: {q.id: [sp.passage.id for sp in r.retrieve(q.question, K).passages] for q in data.questions}
        for name, r in retrievers.items()
    }
    return data.questions, tops


def page_table(questions: list[Any], tops: dict[str, dict[str, list[str]]]) -> str:
    n = len(questions)
    lines = [
        f"| retriever ({n} questions) | subject page in top 2 | subject page in top {K} | answer page in top {K} |",
        "|---|---|---|---|",
    ]
    for name, top in tops.items():
        subj2 = sum(q.supporting_passage_ids[0] in top[q.id][:2] for q in questions) / n
        subj = sum(q.supporting_passage_ids[0] in top[q.id] for q in questions) / n
        ans = sum(q.supporting_passage_ids[1] in top[q.id] for q in questions) / n
        lines.append(f"| {name} | {subj2:.3f} | {subj:.3f} | {ans:.3f} |")
    return "\n".join(lines) + "\n"


def reader_table(questions: list[Any], tops: dict[str, dict[str, list[str]]], journal: Path) -> str:
    acc: dict[str, dict[str, float]] = {row: {} for row in ROWS.values()}
    for line in journal.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "question" and rec.get("row") in acc:
            acc[rec["row"]][rec["id"]] = rec["scores"]["acc"]
    by_id = {q.id: q for q in questions}
    ids = [i for i in acc[ROWS["dense"]] if i in acc[ROWS["activation"]] and i in by_id]
    if not ids:
        raise SystemExit(f"{journal}: no question has both rows {sorted(ROWS.values())}")

    def adds_answer_page(i: str) -> bool:
        page = by_id[i].supporting_passage_ids[1]
        return page in tops["activation"][i] and page not in tops["dense"][i]

    groups = {
        "activation's top 6 adds the answer page": [i for i in ids if adds_answer_page(i)],
        "the rest": [i for i in ids if not adds_answer_page(i)],
    }
    lines = [
        "| questions | n | dense Acc | activation Acc | better / worse (sign p) |",
        "|---|---|---|---|---|",
    ]
    for label, group in groups.items():
        if not group:
            continue
        d = [acc[ROWS["dense"]][i] for i in group]
        a = [acc[ROWS["activation"]][i] for i in group]
        up = sum(y > x for x, y in zip(d, a))
        down = sum(y < x for x, y in zip(d, a))
        lines.append(
            f"| {label} | {len(group)} | {sum(d) / len(d):.2f} | {sum(a) / len(a):.2f} | "
            f"{up} / {down} ({sign_test_p(up, down):.2f}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--journal", type=Path, help="a QA journal with rows vanilla-rag and vanilla-rag:activation")
    ap.add_argument("--embedder", default="torch", help="the embedder of the QA run's indexes (default torch)")
    ap.add_argument("--cache-dir", type=Path, default=Path(".kgrag_cache"))
    args = ap.parse_args()
    setup_offline_env()
    questions, tops = top_pages(args.embedder, args.cache_dir)
    sys.stdout.write(page_table(questions, tops))
    if args.journal:
        sys.stdout.write("\n" + reader_table(questions, tops, args.journal))


if __name__ == "__main__":
    main()
