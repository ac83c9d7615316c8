"""Why MuSiQue's activation gain shrinks on new questions (issue 35, item 1): per question type,
bootstrap intervals, and cross-validation over question folds *within* a set.

For one shared half (default MuSiQue) the shipped :class:`~kgrag_plugins.methods.activation.ActivationRetriever`
and each configuration of ``CONFIGS`` (a subset of ``benchmarks/loo_activation.py``'s grid) are run on
every question with gold passages (k = 5), beside dense MiniLM search on the same cached index. The
report (``docs/benchmarks/question-folds-DATASET.json`` and ``.md``) gives:

* per question type (MuSiQue: the id's shape, ``2hop``, ``3hop1``, ... ; other sets: ``Question.type``)
  the count, dense and activation R@2 / R@5 and the R@5 gain with a 95 % bootstrap interval
  (2,000 resamples of the questions, fixed seed);
* the whole set's gain with its interval: how far a new sample of the same size may fall from it;
* ``cv``: 5 question folds (fixed shuffle); for each fold the configuration with the best mean R@5
  gain on the other four folds is chosen and scored on the held fold. The mean over folds is the
  gain a configuration choice made on these questions is expected to keep on new ones; a large gap
  between it and the in-sample best says the choice fits these questions.

Run (cached ``kgrag bench`` indexes, ``builder="mentions"``)::

    KGRAG_DATA_DIR=../shared/data python benchmarks/question_folds.py --dataset musique
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from loo_activation import GRID, _memoise, _recall  # noqa: E402

log = logging.getLogger("question_folds")

#: the configurations the folds choose among: the shipped default, the R@2 options of issue 35, and
#: the one-setting changes that moved MuSiQue most in the leave-one-dataset-out grid.
CONFIGS = (
    "default",
    "no-bm25",
    "bm25-seeds-3",
    "no-bridge",
    "damping-0.4",
    "damping-0.6",
    "dense-seeds-10",
    "bm25-mass-0.25",
    "chain-second-0.2",
    "bm25-mass-0.25-chain-second-0.2",
)
FOLDS = 5
RESAMPLES = 2000
SEED = 0


def question_type(dataset: str, q: Any) -> str:
    """MuSiQue: the id's hop shape (``2hop__1_2`` -> ``2hop``, ``3hop1__...`` -> ``3hop1``); else the
    dataset's own ``type`` field (2Wiki: comparison / compositional / inference / bridge_comparison)."""
    if dataset == "musique":
        m = re.match(r"(\dhop\d?)__", q.id)
        return m.group(1) if m else "other"
    return q.type or "untyped"


def bootstrap(values: list[float], resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """95 % percentile interval of the mean of ``values`` (resampling questions with replacement)."""
    if not values:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return (means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1])


def folds_of(n: int, k: int = FOLDS, seed: int = SEED) -> list[list[int]]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


def cross_validate(gains: dict[str, list[float]], folds: list[list[int]]) -> dict[str, Any]:
    """Per fold: the configuration with the best mean gain on the other folds (ties: ``CONFIGS``
    order), and its mean gain on the held fold; the mean of those is the CV estimate."""
    names = list(gains)
    rows = []
    for i, held in enumerate(folds):
        rest = [j for f, fold in enumerate(folds) if f != i for j in fold]

        def mean_on(name: str, idx: list[int]) -> float:
            return sum(gains[name][j] for j in idx) / len(idx)

        chosen = max(names, key=lambda n: (round(mean_on(n, rest), 6), -names.index(n)))
        rows.append(
            {
                "fold": i,
                "n": len(held),
                "chosen": chosen,
                "gain_on_rest": round(100 * mean_on(chosen, rest), 2),
                "gain_on_fold": round(100 * mean_on(chosen, held), 2),
                "default_on_fold": round(100 * mean_on("default", held), 2) if "default" in gains else None,
            }
        )
    total = sum(len(f) for f in folds)
    cv = sum(r["gain_on_fold"] * r["n"] for r in rows) / total
    best = max(names, key=lambda n: sum(gains[n]) / len(gains[n]))
    return {
        "folds": rows,
        "cv_gain@5": round(cv, 2),
        "in_sample_best": best,
        "in_sample_best_gain@5": round(100 * sum(gains[best]) / len(gains[best]), 2),
    }


def evaluate(dataset: str, configs: tuple[str, ...], k: int = 5) -> dict[str, Any]:
    from kgrag_plugins.datasets import dataset_index, load_dataset
    from kgrag_plugins.methods.activation import ActivationRetriever

    ds = load_dataset(dataset)
    index, _ = dataset_index(ds, builder="mentions", progress=False)
    _memoise(index)
    qs = [q for q in ds.questions if q.supporting_passage_ids]
    dense_ids = [[p.id for p, _ in index.passages.dense_search(index.embed_query(q.question), k)] for q in qs]
    per_q: dict[str, dict[str, list[float]]] = {
        "dense": {f"r@{kk}": [_recall(i, q.supporting_passage_ids, kk) for i, q in zip(dense_ids, qs)] for kk in (2, 5)}
    }
    seconds: dict[str, float] = {}
    for name in configs:
        t0 = time.perf_counter()
        r = ActivationRetriever(index, **GRID[name])
        ids = [r.retrieve(q.question, k).passage_ids for q in qs]
        per_q[name] = {f"r@{kk}": [_recall(i, q.supporting_passage_ids, kk) for i, q in zip(ids, qs)] for kk in (2, 5)}
        seconds[name] = round(time.perf_counter() - t0, 1)
        log.info("%s %s R@5 %.4f (%.0f s)", dataset, name, sum(per_q[name]["r@5"]) / len(qs), seconds[name])
    return {"questions": qs, "per_q": per_q, "seconds": seconds, "corpus_size": len(index.passages)}


def report(dataset: str, ev: dict[str, Any]) -> dict[str, Any]:
    qs, per_q = ev["questions"], ev["per_q"]
    configs = [c for c in per_q if c != "dense"]
    gains = {c: [a - d for a, d in zip(per_q[c]["r@5"], per_q["dense"]["r@5"])] for c in configs}
    types: dict[str, list[int]] = {}
    for i, q in enumerate(qs):
        types.setdefault(question_type(dataset, q), []).append(i)

    def row(idx: list[int]) -> dict[str, Any]:
        def mean(xs: list[float]) -> float:
            return round(sum(xs[i] for i in idx) / len(idx), 4)

        g = [gains["default"][i] for i in idx]
        lo, hi = bootstrap(g)
        return {
            "n": len(idx),
            "dense_r@2": mean(per_q["dense"]["r@2"]),
            "dense_r@5": mean(per_q["dense"]["r@5"]),
            "activation_r@2": mean(per_q["default"]["r@2"]),
            "activation_r@5": mean(per_q["default"]["r@5"]),
            "gain@5": round(100 * sum(g) / len(g), 1),
            "gain@5_ci95": [round(100 * lo, 1), round(100 * hi, 1)],
        }

    return {
        "dataset": dataset,
        "n_questions": len(qs),
        "corpus_size": ev["corpus_size"],
        "protocol": f"k=5; bootstrap {RESAMPLES} resamples (seed {SEED}); {FOLDS} question folds (seed {SEED})",
        "all": row(list(range(len(qs)))),
        "by_type": {t: row(idx) for t, idx in sorted(types.items())},
        "configs": {
            c: {
                "r@2": round(sum(per_q[c]["r@2"]) / len(qs), 4),
                "r@5": round(sum(per_q[c]["r@5"]) / len(qs), 4),
                "gain@5": round(100 * sum(gains[c]) / len(qs), 1),
                "seconds": ev["seconds"][c],
            }
            for c in configs
        },
        "cv": cross_validate(gains, folds_of(len(qs))),
    }


def markdown(rep: dict[str, Any]) -> str:
    a = rep["all"]
    lines = [
        f"# Question types and folds: {rep['dataset']} ({rep['n_questions']} questions, {rep['corpus_size']} passages)",
        "",
        "Written by `benchmarks/question_folds.py`; " + rep["protocol"] + ".",
        "",
        "| type | n | dense R@2 | dense R@5 | activation R@2 | activation R@5 | gain R@5 (pts) | 95 % interval |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t, r in [*rep["by_type"].items(), ("**all**", a)]:
        lo, hi = r["gain@5_ci95"]
        lines.append(
            f"| {t} | {r['n']} | {r['dense_r@2']:.3f} | {r['dense_r@5']:.3f} | {r['activation_r@2']:.3f} | "
            f"{r['activation_r@5']:.3f} | {r['gain@5']:+.1f} | [{lo:+.1f}, {hi:+.1f}] |"
        )
    cv = rep["cv"]
    lines += [
        "",
        "| fold | n | chosen on the other folds | gain there | gain on the fold | default on the fold |",
        "|---|---|---|---|---|---|",
    ]
    for f in cv["folds"]:
        lines.append(
            f"| {f['fold']} | {f['n']} | {f['chosen']} | {f['gain_on_rest']:+.1f} | {f['gain_on_fold']:+.1f} | "
            f"{f['default_on_fold']:+.1f} |"
        )
    lines += [
        "",
        f"Cross-validated gain: **{cv['cv_gain@5']:+.1f}** points; in-sample best `{cv['in_sample_best']}` "
        f"{cv['in_sample_best_gain@5']:+.1f}; shipped default {a['gain@5']:+.1f}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="musique")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", type=Path, default=None, help="default: docs/benchmarks/question-folds-DATASET.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configs = tuple(c.strip() for c in args.configs.split(",") if c.strip())
    unknown = [c for c in configs if c not in GRID]
    if unknown or "default" not in configs:
        ap.error(f"configurations must name GRID entries and include default; unknown: {unknown}")
    out = args.out or ROOT / "docs" / "benchmarks" / f"question-folds-{args.dataset}.json"
    rep = report(args.dataset, evaluate(args.dataset, configs))
    out.write_text(json.dumps(rep, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(rep))
    log.info("wrote %s and %s", out, out.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
