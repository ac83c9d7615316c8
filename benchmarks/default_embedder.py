"""The default embedder of new indexes (issue 36 item 1): ONNX Runtime int8 MiniLM against torch MiniLM.

Two measurements, each embedder in the same run:

* ``--speed``: ``kgrag index --corpus F --out D --embedder E`` (a subprocess, as a user runs it) on
  the first ``--n`` MuSiQue corpus passages, ``--runs`` times per embedder, interleaved so load drift
  hits both; wall seconds and CPU seconds (user + system, of the child) of the whole command and the
  manifest's ``embed_passages_s``. On a shared machine the CPU seconds are the stable measure.
* ``--recall``: ``kgrag bench``'s own ``run_bench`` with ``--retrievers dense,activation`` per dataset,
  once with ``KGRAG_EMBEDDER=torch`` and once with the default (``auto``), into ``--cache-dir``
  (torch indexes already there are reused; the default's are built).

    KGRAG_DATA_DIR=../shared/data nice -n 10 .venv/bin/python benchmarks/default_embedder.py \\
        --speed --recall --json docs/benchmarks/default-embedder.json

``--bench-table`` prints the R@5 tables of the ``kgrag bench`` reports run with each embedder
(``docs/benchmarks/default-embedder-bench/default-embedder-bench[-kg][-torch]-DATASET.json``,
docs/embeddings.md; a folder of its own, so the benchmarks page does not list them).
``--kg-infused-paths JSON`` reruns KG-Infused's LLM-free path on both embedders' cached indexes and
records, per question, the first stage where the two runs part (seeds, a round's triples, a search).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgrag_plugins.config import setup_offline_env
from kgrag_plugins.datasets.metrics import sign_test_p

sys.path.insert(0, str(Path(__file__).resolve().parent))  # question_folds (the bootstrap)

KGRAG = [sys.executable, "-m", "kgrag_plugins.cli"]
EMBEDDERS = {"torch": "torch", "default": "auto"}
#: ``--speed`` also times ONNX fp32 (same vectors as torch to 1e-7, docs/embeddings.md)
SPEED_EMBEDDERS = {"torch": "torch", "onnx": "onnx", "default": "auto"}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def speed(n: int, runs: int) -> dict[str, Any]:
    from kgrag_plugins.datasets import load_dataset

    ds = load_dataset("musique")
    rows = [{"id": p.id, "title": p.title, "text": p.text} for p in (ds.corpus or [])[:n]]
    out: dict[str, Any] = {"passages": len(rows), "runs": runs, "load_start": _load()}
    times: dict[str, list[float]] = {k: [] for k in SPEED_EMBEDDERS}
    cpu: dict[str, list[float]] = {k: [] for k in SPEED_EMBEDDERS}
    embed_s: dict[str, list[float]] = {k: [] for k in SPEED_EMBEDDERS}
    names: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="kgrag-embspeed-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        for run in range(runs):
            for label, choice in SPEED_EMBEDDERS.items():
                target = Path(tmp) / f"{label}-{run}"
                cmd = [*KGRAG, "index", "--corpus", str(corpus), "--out", str(target), "--embedder", choice]
                t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                times[label].append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[label].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
                manifest = json.loads((target / "manifest.json").read_text())
                names[label] = manifest["embedder"]["name"]
                embed_s[label].append(float(manifest["timings"].get("embed_passages_s", 0.0)))
                print(
                    json.dumps({"run": run, "embedder": label, "wall_s": times[label][-1], "cpu_s": cpu[label][-1]}),
                    flush=True,
                )
    for label in SPEED_EMBEDDERS:
        med = statistics.median(times[label])
        out[label] = {
            "embedder": names[label],
            "wall_s": [round(t, 2) for t in times[label]],
            "cpu_s": [round(t, 2) for t in cpu[label]],
            "passages_per_cpu_s": round(len(rows) / statistics.median(cpu[label]), 2),
            "embed_passages_s": [round(t, 2) for t in embed_s[label]],
            "passages_per_s_wall": round(len(rows) / med, 2),
            "passages_per_s_embed": round(len(rows) / statistics.median(embed_s[label]), 2),
        }
    out["throughput_ratio_cpu"] = round(out["default"]["passages_per_cpu_s"] / out["torch"]["passages_per_cpu_s"], 2)
    out["throughput_ratio_wall"] = round(out["default"]["passages_per_s_wall"] / out["torch"]["passages_per_s_wall"], 2)
    out["throughput_ratio_embed"] = round(
        out["default"]["passages_per_s_embed"] / out["torch"]["passages_per_s_embed"], 2
    )
    out["load_end"] = _load()
    return out


def rise_fall(before: dict[str, float], after: dict[str, float]) -> tuple[int, int]:
    """How many of the questions both scored rose and fell from ``before`` to ``after``."""
    ids = before.keys() & after.keys()
    return sum(after[i] > before[i] for i in ids), sum(after[i] < before[i] for i in ids)


def paired(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Per-question R@5 of the default (``after``) against torch (``before``) on the questions both
    scored: how many moved each way, the two-sided sign test, and a 95 % bootstrap interval of the
    mean change in points (2,000 resamples of the questions, fixed seed; ``question_folds.bootstrap``)."""
    from question_folds import bootstrap

    ids = sorted(set(before) & set(after))
    diff = [100.0 * (after[i] - before[i]) for i in ids]
    better, worse = rise_fall(before, after)
    p = sign_test_p(better, worse)
    lo, hi = bootstrap(diff)
    return {
        "questions": len(ids),
        "better": better,
        "worse": worse,
        "sign_p": round(p, 4),
        "delta_points": round(sum(diff) / len(diff), 2) if diff else 0.0,
        "ci95_points": [round(lo, 2), round(hi, 2)],
    }


def recall(datasets: list[str], cache_dir: Path) -> dict[str, Any]:
    from kgrag_plugins.eval.bench import run_bench

    res: dict[str, Any] = {}
    for ds in datasets:
        row: dict[str, Any] = {}
        per_q: dict[str, dict[str, dict[str, float]]] = {}
        for label, choice in EMBEDDERS.items():
            os.environ["KGRAG_EMBEDDER"] = choice
            t0 = time.perf_counter()
            rep = run_bench(ds, ["dense", "activation"], cache_dir=cache_dir, progress=False)
            row[label] = {
                "embedder": rep["embedder"],
                "index_reused": rep["index_reused"],
                "seconds": round(time.perf_counter() - t0, 1),
                **{
                    name: {k: r[k] for k in ("recall@2", "recall@5", "n_scored")} | {"p50_ms": r["latency_ms"]["p50"]}
                    for name, r in rep["results"].items()
                },
            }
            per_q[label] = {
                name: {q["id"]: q["recall@5"] for q in r["per_question"] if "recall@5" in q}
                for name, r in rep["results"].items()
            }
            print(json.dumps({"dataset": ds, "embedder": label, "seconds": row[label]["seconds"]}), flush=True)
        row["delta_points"] = {
            f"{name} R@{k}": round(100 * (row["default"][name][f"recall@{k}"] - row["torch"][name][f"recall@{k}"]), 2)
            for name in ("dense", "activation")
            for k in (2, 5)
        }
        row["paired_r5"] = {
            name: paired(per_q["torch"][name], per_q["default"][name]) for name in ("dense", "activation")
        }
        res[ds] = row
    os.environ.pop("KGRAG_EMBEDDER", None)
    return res


def markdown(report: dict[str, Any]) -> str:
    lines: list[str] = []
    sp = report.get("speed")
    if sp:
        lines += [
            f"`kgrag index` on {sp['passages']} MuSiQue passages, median of {sp['runs']} runs per embedder "
            f"(interleaved; load {sp['load_start']} -> {sp['load_end']}):",
            "",
            "| embedder | wall s (runs) | CPU s (runs) | passages/s (wall) | passages per CPU-s "
            "| passages/s (embedding step, wall) |",
            "|---|---|---|---|---|---|",
        ]
        for label in [k for k in SPEED_EMBEDDERS if k in sp]:
            r = sp[label]
            lines.append(
                f"| {r['embedder']} | {', '.join(map(str, r['wall_s']))} | {', '.join(map(str, r['cpu_s']))} "
                f"| {r['passages_per_s_wall']} | {r['passages_per_cpu_s']} | {r['passages_per_s_embed']} |"
            )
        lines += [
            "",
            f"Default / torch throughput: **{sp['throughput_ratio_cpu']}x** per CPU-second, "
            f"{sp['throughput_ratio_wall']}x wall, {sp['throughput_ratio_embed']}x in the embedding step (wall).",
            "",
        ]
    rc = report.get("recall")
    if rc:
        lines += [
            "| dataset | dense R@5 torch | dense R@5 default | Δ | activation R@5 torch | activation R@5 default | Δ "
            "| Δ dense R@2 | Δ activation R@2 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for ds, row in rc.items():
            d = row["delta_points"]
            lines.append(
                f"| {ds} | {row['torch']['dense']['recall@5']:.4f} | {row['default']['dense']['recall@5']:.4f} "
                f"| {d['dense R@5']:+.2f} | {row['torch']['activation']['recall@5']:.4f} "
                f"| {row['default']['activation']['recall@5']:.4f} | {d['activation R@5']:+.2f} "
                f"| {d['dense R@2']:+.2f} | {d['activation R@2']:+.2f} |"
            )
        pairs = [
            (ds, name, row["paired_r5"][name])
            for ds, row in rc.items()
            if "paired_r5" in row
            for name in row["paired_r5"]
        ]
        if pairs:
            lines += [
                "",
                "Per question (R@5, default against torch; 95 % bootstrap interval of the change, 2,000 resamples):",
                "",
                "| dataset | retriever | questions | better | worse | sign p | Δ points | 95 % interval |",
                "|---|---|---|---|---|---|---|---|",
            ]
            lines += [
                f"| {ds} | {name} | {p['questions']} | {p['better']} | {p['worse']} | {p['sign_p']:.3f} "
                f"| {p['delta_points']:+.2f} | [{p['ci95_points'][0]:+.2f}, {p['ci95_points'][1]:+.2f}] |"
                for ds, name, p in pairs
            ]
    return "\n".join(lines) + "\n"


#: ``--bench-table``: the ``kgrag bench`` reports run once per embedder (docs/embeddings.md)
BENCH_REPORTS = "docs/benchmarks/default-embedder-bench/default-embedder-bench{variant}-{dataset}.json"
#: SA-RAG, FRAG and Know³ (``--retrievers sa-rag,frag,know3``), run after the first eight reports
BENCH_KG_REPORTS = "docs/benchmarks/default-embedder-bench/default-embedder-bench-kg{variant}-{dataset}.json"
BENCH_DATASETS = ("musique", "2wikimultihopqa", "hotpotqa", "popqa")


def _bench_runs(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Per dataset, ``[torch results, default results]`` of every paired report (rows of the
    ``-kg`` reports merged in). A dataset or report group without both embedders is left out."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for ds in BENCH_DATASETS:
        for pattern in (BENCH_REPORTS, BENCH_KG_REPORTS):
            pair = [root / pattern.format(variant=v, dataset=ds) for v in ("-torch", "")]
            if all(f.is_file() for f in pair):
                got = [json.loads(f.read_text())["results"] for f in pair]
                have = runs.setdefault(ds, [{}, {}])
                for side, res in zip(have, got):
                    side.update(res)
    return runs


def bench_table(root: Path) -> str:
    """R@5 of every retriever the two ``kgrag bench`` runs share, torch -> default (Δ points), per set,
    then a second table: per question, how many rose / fell and the two-sided sign test.

    The reports: ``kgrag bench --dataset D --retrievers ... --embedder torch`` and ``--embedder
    onnx-int8`` with ``--out`` = :data:`BENCH_REPORTS` / :data:`BENCH_KG_REPORTS` (``variant``
    ``-torch`` and ``""``)."""
    runs = _bench_runs(root)
    sets = list(runs)
    names = [n for n in runs[sets[0]][0] if all(n in t and n in d for t, d in runs.values())]
    head = ["| retriever | " + " | ".join(sets) + " |", "|---" * (len(sets) + 1) + "|"]
    lines, moves = list(head), list(head)
    for n in names:
        cells, moved = [], []
        for ds in sets:
            t, d = (r[n]["recall@5"] for r in runs[ds])
            cells.append(f"{t:.3f} → {d:.3f} ({100 * (d - t):+.1f})")
            up, down = rise_fall(*({q["id"]: q["recall@5"] for q in r[n]["per_question"]} for r in runs[ds]))
            moved.append(f"{up} ↑ {down} ↓ (p {sign_test_p(up, down):.2f})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
        moves.append(f"| {n} | " + " | ".join(moved) + " |")
    return "\n".join(lines) + "\n\nQuestions whose R@5 rose / fell, two-sided sign test:\n\n" + "\n".join(moves) + "\n"


def kg_infused_paths(datasets: list[str], cache_dir: Path) -> dict[str, Any]:
    """Where KG-Infused's LLM-free path under torch and under the default first part, per question.

    Both runs use the cached ``mentions`` indexes of the paired reports (the same graph; only the
    vectors differ). The stages, in the order the retriever takes them (docs/methods.md §1): the
    seed entities (Eq. 4), each activation round's selected triples (Eq. 5/6), the question's own
    top 3 passages, the expanded query's top 6. The questions whose R@5 moved in the paired reports
    are listed with the stage where the two runs parted."""
    from kgrag_plugins.datasets import dataset_index, load_dataset
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever
    from kgrag_plugins.models.embed import embedder_for_name

    root = Path(__file__).resolve().parents[1]
    out: dict[str, Any] = {}
    for ds in datasets:
        reports = [json.loads((root / BENCH_REPORTS.format(variant=v, dataset=ds)).read_text()) for v in ("-torch", "")]
        data = load_dataset(ds)
        retr = []
        for rep in reports:
            emb = embedder_for_name(rep["embedder"])
            index, _ = dataset_index(data, cache_dir=cache_dir, embedder=emb, builder="mentions", progress=False)
            retr.append(KGInfusedRetriever(index))
        r5 = [{q["id"]: q["recall@5"] for q in rep["results"]["kg-infused"]["per_question"]} for rep in reports]
        stages: dict[str, int] = {}
        moved = []
        for q in data.questions:
            if q.id not in r5[0]:
                continue
            paths = [_kgi_path(r, q.question) for r in retr]
            stage = _first_difference(*paths)
            stages[stage] = stages.get(stage, 0) + 1
            if r5[1][q.id] != r5[0][q.id]:
                moved.append({"id": q.id, "delta": round(r5[1][q.id] - r5[0][q.id], 4), "stage": stage})
        up, down = sum(m["delta"] > 0 for m in moved), sum(m["delta"] < 0 for m in moved)
        out[ds] = {
            "questions": sum(stages.values()),
            "first_difference": stages,
            "moved": moved,
            "better": up,
            "worse": down,
            "sign_p": round(sign_test_p(up, down), 4),
        }
    return out


def _kgi_path(retriever: Any, question: str) -> dict[str, Any]:
    memory = retriever.seed(question)
    seeds = sorted(memory.explored)
    memory = retriever.activate(question, memory)
    expanded = retriever.expand_query(question, retriever.summarize(question, memory), memory)
    return {
        "seeds": seeds,
        "rounds": [list(rt.selected) for rt in memory.rounds],
        "question_top3": [sp.passage.id for sp in retriever._search(question, 3)],
        "expanded_top6": [sp.passage.id for sp in retriever._search(expanded, 6)],
    }


def _first_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["seeds"] != b["seeds"]:
        return "seeds"
    for i in range(max(len(a["rounds"]), len(b["rounds"]))):
        if a["rounds"][i : i + 1] != b["rounds"][i : i + 1]:
            return f"round {i}"
    for key in ("question_top3", "expanded_top6"):
        if a[key] != b[key]:
            return key
    return "same"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--recall", action="store_true")
    ap.add_argument("--n", type=int, default=2000, help="--speed: MuSiQue passages")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--datasets", default="musique,2wikimultihopqa,hotpotqa,popqa")
    ap.add_argument("--cache-dir", type=Path, default=Path(".kgrag_cache"))
    ap.add_argument("--json", type=Path, help="merge results into this JSON (and .md beside it)")
    ap.add_argument("--bench-table", action="store_true", help="print the R@5 table of the paired kgrag bench reports")
    ap.add_argument(
        "--kg-infused-paths",
        type=Path,
        metavar="JSON",
        help="write where KG-Infused's torch and default runs first part, per question, to JSON",
    )
    args = ap.parse_args()
    if args.bench_table:
        sys.stdout.write(bench_table(Path(__file__).resolve().parents[1]))
        return
    if args.kg_infused_paths:
        setup_offline_env()
        result = kg_infused_paths([d.strip() for d in args.datasets.split(",") if d.strip()], args.cache_dir)
        report = {"command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"), "datasets": result}
        args.kg_infused_paths.write_text(json.dumps(report, indent=2) + "\n")
        for ds, r in result.items():
            moved = f"R@5 {r['better']} up {r['worse']} down (p {r['sign_p']})"
            sys.stdout.write(f"{ds}: {r['first_difference']}; {moved}\n")
        return
    if args.json is None:
        ap.error("--json is required with --speed / --recall")
    setup_offline_env()
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    report.update({"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()})
    report.pop("command", None)
    report["commands"] = [*report.get("commands", []), "python " + " ".join(sys.argv)]  # each merged run
    if args.speed:
        report["speed"] = speed(args.n, args.runs)
    if args.recall:
        report["recall"] = {  # datasets not run now keep their earlier rows
            **report.get("recall", {}),
            **recall([d.strip() for d in args.datasets.split(",") if d.strip()], args.cache_dir),
        }
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    args.json.with_suffix(".md").write_text(markdown(report))
    sys.stdout.write(markdown(report))


if __name__ == "__main__":
    main()
