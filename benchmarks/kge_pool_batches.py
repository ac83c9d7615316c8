"""One training epoch of the corpus-graph KGE with and without mixed batches for rare relations.

    python benchmarks/kge_pool_batches.py [--dataset 2wikimultihopqa] [--out FILE.json]

Opens (or builds) the bench's cached ``mentions`` index of the dataset, then trains ComplEx for
one epoch on its graph with ``pool_below=256`` and ``pool_below=0`` in the same process
(docs/kge.md "Relation canonicalisation").
"""

from __future__ import annotations

import argparse
import json
import logging
import time

from kgrag_plugins.datasets import dataset_index, load_dataset
from kgrag_plugins.models.kge import train_kge

log = logging.getLogger("kgrag_plugins.benchmarks")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    index, _ = dataset_index(load_dataset(args.dataset), builder="mentions", progress=False)
    graph = index.graph
    out: dict = {"dataset": args.dataset, "triples": graph.num_triples, "runs": {}}
    for pool in (256, 0):
        t = time.perf_counter()
        _, rep = train_kge(graph, epochs=1, canonicalize=True, pool_below=pool, progress=False, threads=1, patience=5)
        out["runs"][str(pool)] = {
            "seconds_with_validation": round(time.perf_counter() - t, 1),
            "train_seconds": rep.get("train_seconds"),
            "valid_mrr": rep.get("valid_mrr"),
            "relations": rep.get("num_relations"),
        }
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)  # noqa: T201 - a script


if __name__ == "__main__":
    main()
