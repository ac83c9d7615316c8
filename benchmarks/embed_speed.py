"""Embedding speed and dense recall: torch MiniLM vs ONNX fp32 vs ONNX int8 (issue 20 item 4).

Speed: in one process, passages/s (median of ``--runs``) of each embedder on the first
``--n-speed`` MuSiQue corpus passages (their ``embed_text``, what an index build embeds), with
torch threads = ORT threads = ``--threads``. Recall: dense R@2/R@5 per dataset with each
embedder, through ``kgrag bench``'s own ``dataset_index`` and ``evaluate_retriever`` (so the
torch rows equal ``kgrag bench --retrievers dense``). Each embedder re-embeds the corpus into a
fresh temp cache, unless ``--reuse-cache`` points the torch rows at ``kgrag bench``'s cache.

    nice -n 10 .venv/bin/python benchmarks/embed_speed.py --json docs/benchmarks/embed-speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kgrag_plugins.config import setup_offline_env
from kgrag_plugins.datasets import dataset_index, load_dataset
from kgrag_plugins.eval.bench import RETRIEVERS, evaluate_retriever
from kgrag_plugins.models.embed import Embedder, SentenceTransformerEmbedder
from kgrag_plugins.models.embed_onnx import OnnxEmbedder

EMBEDDERS = ("torch", "onnx", "onnx-int8")


def make_embedder(kind: str, threads: int) -> Embedder:
    if kind == "torch":
        import torch

        torch.set_num_threads(threads)
        return SentenceTransformerEmbedder()
    return OnnxEmbedder(quantize="int8" if kind == "onnx-int8" else None, threads=threads)


def load_avg() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def speed(embedders: dict[str, Embedder], texts: list[str], runs: int) -> dict[str, Any]:
    """Passages/s per embedder, median of ``runs``; runs interleave embedders to share load drift."""
    for emb in embedders.values():
        emb.embed(texts[:64], progress=False)  # warm-up
    times: dict[str, list[float]] = {k: [] for k in embedders}
    for _ in range(runs):
        for kind, emb in embedders.items():
            t0 = time.perf_counter()
            emb.embed(texts, progress=False)
            times[kind].append(time.perf_counter() - t0)
            print(json.dumps({"speed_run": kind, "seconds": round(times[kind][-1], 1)}), flush=True)
    out = {
        kind: {
            "passages_per_s": round(len(texts) / statistics.median(ts), 1),
            "runs_s": [round(t, 2) for t in ts],
        }
        for kind, ts in times.items()
    }
    if "torch" in out:
        for kind in out:
            out[kind]["speedup_vs_torch"] = round(out[kind]["passages_per_s"] / out["torch"]["passages_per_s"], 2)
    return out


def recall(emb: Embedder, dataset: str, cache_dir: Path) -> dict[str, Any]:
    ds = load_dataset(dataset)
    t0 = time.perf_counter()
    index, reused = dataset_index(ds, cache_dir=cache_dir, embedder=emb, progress=False)
    build_s = time.perf_counter() - t0
    factory = RETRIEVERS["dense"][0]
    r = evaluate_retriever(factory(index), ds, progress=False)
    return {
        "recall@2": r["recall@2"],
        "recall@5": r["recall@5"],
        "answer_recall@5": r["answer_recall@5"],
        "n_scored": r["n_scored"],
        "query_p50_ms": r["latency_ms"]["p50"],
        "index_reused": reused,
        "index_seconds": round(build_s, 1),
        "corpus_size": len(ds.corpus or []),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = []
    for run in report.get("speed_runs", []):
        lines += [
            f"Speed: {run['passages']} MuSiQue passages, {report['threads']} threads, "
            f"median of {run['runs']} runs; load before: `{run['load_before']}`, after: `{run['load_after']}`",
            "",
            "| embedder | passages/s (median) | speed-up (median) | passages/s (fastest run) | speed-up (fastest) |",
            "|---|---|---|---|---|",
        ]
        best = {k: run["passages"] / min(v["runs_s"]) for k, v in run["results"].items()}
        for k, v in run["results"].items():
            ratio = f"{best[k] / best['torch']:.2f}x" if "torch" in best else ""
            lines.append(
                f"| {k} | {v['passages_per_s']} | {v.get('speedup_vs_torch', '')}x | {best[k]:.1f} | {ratio} |"
            )
        lines.append("")
    if report.get("recall"):
        kinds = list(next(iter(report["recall"].values())))
        lines += ["| dataset | " + " | ".join(f"{k} R@2 | {k} R@5" for k in kinds) + " | ΔR@5 int8 (points) |"]
        lines += ["|---" * (1 + 2 * len(kinds) + 1) + "|"]
        for ds, row in report["recall"].items():
            cells = " | ".join(f"{row[k]['recall@2']:.4f} | {row[k]['recall@5']:.4f}" for k in kinds)
            delta = ""
            if "torch" in row and "onnx-int8" in row:
                delta = f"{100 * (row['onnx-int8']['recall@5'] - row['torch']['recall@5']):+.2f}"
            lines.append(f"| {ds} | {cells} | {delta} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedders", default=",".join(EMBEDDERS))
    ap.add_argument("--datasets", default="musique,2wikimultihopqa,hotpotqa,popqa")
    ap.add_argument("--n-speed", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--reuse-cache", type=Path, default=None, help="torch rows: kgrag bench's index cache")
    ap.add_argument("--json", type=Path, default=None, help="merge results into this JSON report")
    args = ap.parse_args()
    setup_offline_env()
    kinds = [k.strip() for k in args.embedders.split(",") if k.strip()]
    embedders = {k: make_embedder(k, args.threads) for k in kinds}
    report: dict[str, Any] = {}
    if args.json and args.json.is_file():
        report = json.loads(args.json.read_text())
        if "speed" in report:  # first format: one speed run at the top level
            old = {k: report.pop(k, None) for k in ("speed_passages", "runs", "load_before_speed", "speed")}
            report.setdefault("speed_runs", []).insert(
                0,
                {
                    "passages": old["speed_passages"],
                    "runs": old["runs"],
                    "load_before": old["load_before_speed"],
                    "results": old["speed"],
                    "load_after": report.pop("load_after_speed", None),
                },
            )
    report["threads"] = args.threads
    report.setdefault("embedder_names", {}).update({k: e.name for k, e in embedders.items()})
    if not args.skip_speed:
        corpus = load_dataset("musique").corpus or []
        texts = [p.embed_text for p in corpus[: args.n_speed]]
        run: dict[str, Any] = {"passages": len(texts), "runs": args.runs, "load_before": load_avg()}
        run["results"] = speed(embedders, texts, args.runs)
        run["load_after"] = load_avg()
        report.setdefault("speed_runs", []).append(run)
        print(json.dumps(run), flush=True)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
    if not args.skip_recall:
        rec = report.setdefault("recall", {})
        with tempfile.TemporaryDirectory() as tmp:
            for ds in [d.strip() for d in args.datasets.split(",") if d.strip()]:
                for kind, emb in embedders.items():
                    cache = args.reuse_cache if (kind == "torch" and args.reuse_cache) else Path(tmp) / kind
                    rec.setdefault(ds, {})[kind] = recall(emb, ds, cache)
                    print(json.dumps({ds: {kind: rec[ds][kind]}}), flush=True)
                    if args.json:  # partial results survive an interrupted run
                        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))


if __name__ == "__main__":
    main()
