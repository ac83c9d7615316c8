"""Mined rules beside the KGE on MetaQA's half KB: filtered MRR on validation triples (issue 35).

Keeps the Know³ half-KB protocol's fixed-seed half of MetaQA's KB (``keep_kb``), trains the best
CPU setting of ``kge_half_kb_sweep.py`` (ComplEx 256, N3 0.1, early stopping) on the kept triples
(or loads ``--model DIR``), mines :class:`~kgrag_plugins.models.kge_rules.PathRules` from the
model's *training* triples only (the kept triples minus its validation split) and ranks the
validation triples (head and tail queries, filtered by every kept triple) with
:func:`~kgrag_plugins.models.kge_rules.rule_augmented_scores` for a grid of rule and prior
weights. The weights are chosen on one random half of the queries and reported on the other::

    python benchmarks/kge_rules_half_kb.py --kb ../shared/data/metaqa/kb.txt --out report.json

``--train-config JSON`` trains other ``train_kge`` options instead (``--device cuda``, ``--time-budget``
seconds); ``--grid small`` tries 6 of the 15 weight pairs (rules off / first x prior 0, 0.5, 1).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("kge_rules_half_kb")

#: (rule weight, prior weight) grid; rule weight 1000 = rule-predicted entities first.
GRID: list[tuple[float, float]] = [(w, b) for b in (0.0, 0.5, 1.0) for w in (0.0, 1.0, 4.0, 16.0, 1000.0)]
#: ``--grid small``: the KGE alone, the prior alone, and rules first with each prior weight
SMALL_GRID: list[tuple[float, float]] = [(w, b) for w in (0.0, 1000.0) for b in (0.0, 0.5, 1.0)]
TRAIN = {"epochs": 200, "patience": 3, "reg": 0.1}


def main(argv: list[str] | None = None) -> int:
    import torch

    from kgrag_plugins.eval.kgqa_know3 import kb_triples, keep_kb
    from kgrag_plugins.index.importers import load_kg
    from kgrag_plugins.models.kge import KGEModel, train_kge
    from kgrag_plugins.models.kge_eval import KnownTails, both_directions, filtered_ranks
    from kgrag_plugins.models.kge_rules import PathRules, role_counts, rule_augmented_scores

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, required=True, help="MetaQA kb.txt")
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--model", type=Path, default=None, help="a KGE saved by an earlier run (else train one)")
    ap.add_argument("--save-model", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train-config", default=None, help="train_kge options as JSON (default: TRAIN)")
    ap.add_argument("--device", default=None, help="cuda / cpu for training (default: cuda when available)")
    ap.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds")
    ap.add_argument("--grid", choices=("full", "small"), default="full", help="rule x prior weights tried")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    full, _ = load_kg(args.kb, "metaqa", progress=False)
    graph, kb_report = keep_kb(full, args.keep, seed=0)
    triples = kb_triples(graph)
    report: dict[str, Any] = {"kb_keep": kb_report, "kept_triples": len(triples), "threads": args.threads}
    t = time.perf_counter()
    if args.model:
        kge = KGEModel.load(args.model)
        report["kge"] = {"loaded_from": str(args.model), "valid_mrr": kge.report.get("valid_mrr")}
    else:
        config = json.loads(args.train_config) if args.train_config else TRAIN
        kge, rep = train_kge(
            triples, progress=False, threads=args.threads, device=args.device, time_budget=args.time_budget, **config
        )
        report["kge"] = {
            "config": config,
            "device": rep.get("device"),
            "best_epoch": rep.get("best_epoch"),
            "epochs_run": rep.get("epochs_run"),
            "history": rep.get("history"),
            "valid_mrr": rep.get("valid_mrr"),
            "train_seconds": round(time.perf_counter() - t, 1),
        }
        if args.save_model:
            kge.save(args.save_model)
    ent = {e: i for i, e in enumerate(kge.entity_ids)}
    rel = {r: i for i, r in enumerate(kge.relation_ids)}
    rows = np.array([(ent[h], rel[r], ent[tl]) for h, r, tl in triples], dtype=np.int64)
    valid = kge.valid_rows
    vkeys = set(map(tuple, valid.tolist()))
    train = rows[[tuple(x) not in vkeys for x in rows.tolist()]]
    n, R = kge.num_entities, kge.num_relations
    rules = PathRules.mine(train[:, 0], train[:, 1], train[:, 2], num_entities=n, num_relations=R, names=kge.entity_ids)
    counts = role_counts(train[:, 0], train[:, 1], train[:, 2], n, R)
    report["rules"] = rules.to_dict(kge.relation_ids)
    report["train_triples"], report["valid_triples"] = int(len(train)), int(len(valid))
    known = KnownTails(rows, n, R)
    queries = both_directions(valid, R)
    half = np.random.default_rng(0).permutation(len(queries)) < len(queries) // 2
    scorer = kge._scorer

    def make(rule_w: float, prior_w: float):
        def score_all(h: torch.Tensor, r: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
            s = rule_augmented_scores(
                scorer.score_all(h, r).numpy(), h.numpy(), r.numpy(),
                rules=rules, rule_weight=rule_w, counts=counts, prior_weight=prior_w,
            )  # fmt: skip
            return torch.from_numpy(s[:, lo:hi])

        def score_pairs(h: torch.Tensor, r: torch.Tensor, tl: torch.Tensor) -> torch.Tensor:
            key = h * (2 * R) + r  # one all-entity row per distinct query
            uk, inv = torch.unique(key, return_inverse=True)
            full_rows = score_all(uk // (2 * R), uk % (2 * R), 0, n)
            return full_rows[inv, tl] if tl.dim() == 1 else full_rows[inv].gather(1, tl)

        return score_all, score_pairs

    results: dict[str, Any] = {}
    ranks_by: dict[str, np.ndarray] = {}
    grid = GRID if args.grid == "full" else SMALL_GRID
    for rule_w, prior_w in grid:
        name = f"rules {rule_w:g}, prior {prior_w:g}"
        t = time.perf_counter()
        ranks = filtered_ranks(*make(rule_w, prior_w), queries, known)
        rr = 1.0 / ranks
        ranks_by[name] = ranks
        results[name] = {
            "rule_weight": rule_w, "prior_weight": prior_w,
            "mrr_choose_half": round(float(rr[half].mean()), 4), "mrr_report_half": round(float(rr[~half].mean()), 4),
            "mrr": round(float(rr.mean()), 4), "hits@1": round(float((ranks <= 1).mean()), 4),
            "hits@10": round(float((ranks <= 10).mean()), 4), "seconds": round(time.perf_counter() - t, 1),
        }  # fmt: skip
        log.info("%s: %s", name, results[name])
    base = "rules 0, prior 0"
    chosen = max(
        results,
        key=lambda k: (
            results[k]["mrr_choose_half"],
            -grid.index((results[k]["rule_weight"], results[k]["prior_weight"])),
        ),
    )
    # per relation and query direction: the KGE alone against the chosen setting
    by_rel: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, (hq, rq, _) in enumerate(queries.tolist()):
        label = kge.relation_ids[rq % R] + (" (tail query)" if rq < R else " (head query)")
        by_rel[label]["kge"].append(1.0 / ranks_by[base][i])
        by_rel[label]["chosen"].append(1.0 / ranks_by[chosen][i])
    report.update(
        grid=results,
        chosen=chosen,
        kge_alone=results[base],
        chosen_result=results[chosen],
        by_relation={k: {"queries": len(v["kge"]), "kge_mrr": round(float(np.mean(v["kge"])), 4),
                         "chosen_mrr": round(float(np.mean(v["chosen"])), 4)} for k, v in sorted(by_rel.items())},
    )  # fmt: skip
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    log.info("chosen on one half: %s; the other half %.4f (KGE alone %.4f); all %.4f (KGE alone %.4f)",
             chosen, results[chosen]["mrr_report_half"], results[base]["mrr_report_half"],
             results[chosen]["mrr"], results[base]["mrr"])  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
