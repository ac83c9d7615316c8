"""``kgrag train TASK``: one sub-command per training task, each with its own options.

``hop-classifier`` and ``path-ranker`` (FRAG), ``translator`` (KG-Translator's clue translator, SFT),
``generator-dpo`` (KG-Infused RAG's generator, DPO), ``kge`` (Know³'s KG embedding) and
``export-merged`` (fold a LoRA adapter into its base). docs/training.md, docs/frag.md, docs/kge.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .cli_common import HelpFormatter

TASKS = ("hop-classifier", "path-ranker", "translator", "generator-dpo", "kge", "export-merged")


_FMT = HelpFormatter


def _need_out(args: argparse.Namespace) -> Path:
    if args.out is None:
        raise ValueError(f"kgrag train {args.task} needs --out")
    return args.out


def _print_report(report: dict[str, Any], path: Path | None = None) -> None:
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    print(text)


# ------------------------------------------------------------------------------------ handlers


def _cmd_kge(args: argparse.Namespace) -> int:
    from .train.presets import apply_preset

    keys = ("model", "dim", "epochs", "lr", "threads", "reg", "batch_size", "device", "time_budget")
    # an unset flag is None, so a preset may fill it and no preset leaves it out
    given: dict[str, Any] = {k: getattr(args, k) for k in keys} | {"full_softmax": args.full_softmax or None}
    try:
        opts = apply_preset("kge", args.preset, given)
    except ValueError as e:
        print(f"kgrag train kge: error: {e}", file=sys.stderr)
        return 2
    if str(opts.get("device", "")).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(
                f"kgrag train kge: error: device {opts['device']!r} (--device or --preset gpu) but torch sees no "
                "CUDA GPU; use --preset cpu or --device cpu",
                file=sys.stderr,
            )
            return 2
    if args.index is not None:
        from .train.kge import train_kge_index

        report = train_kge_index(args.index, **opts)
    else:
        if args.dataset != "metaqa":
            raise ValueError(f"kgrag train kge: --dataset must be metaqa (or use --index DIR), got {args.dataset!r}")
        from .train.kge import train_kge_metaqa

        report = train_kge_metaqa(args.out, data_dir=args.data_dir, **opts)
    _print_report(report, args.report)
    return 0


def _tuning_options(args: argparse.Namespace, recipe: str) -> dict[str, Any]:
    """The fine-tuning flags ``translator`` and ``generator-dpo`` share, completed by ``--preset``
    (:mod:`kgrag_plugins.train.presets`; an option given on the command line wins)."""
    from .train.presets import apply_preset

    given = {
        "lora": args.lora,
        "lora_r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "qlora": args.qlora,
        "merge": args.merge,
        "max_steps": args.max_steps,
        "epochs": args.epochs,
        "learning_rate": args.learning_rate,
        "resume": args.resume,
        "progress": not args.quiet,
    }
    return apply_preset(recipe, args.preset, given)


def _cmd_translator(args: argparse.Namespace) -> int:
    from .train.lora import QLoRAUnavailableError
    from .train.sft_pairs import load_sft_data
    from .train.translator import train_translator

    out = _need_out(args)
    try:
        examples = load_sft_data(args.sft_data) if args.sft_data is not None else None
    except (OSError, ValueError) as e:
        print(f"kgrag train translator: error: {e}", file=sys.stderr)
        return 2
    try:
        out = train_translator(
            examples,
            args.base_model,
            out,
            data=[d.strip() for d in args.data.split(",") if d.strip()],
            data_dir=args.data_dir,
            limit=args.limit,
            build_only=args.build_only,
            **_tuning_options(args, "translator"),
        )
    except QLoRAUnavailableError as e:
        print(f"kgrag train translator: error: {e}", file=sys.stderr)
        return 2
    print((out / "train_report.json").read_text(encoding="utf-8"), end="")
    return 0


def _dpo_data(args: argparse.Namespace, out: Path, data_path: Path) -> bool:
    """Build what ``generator-dpo`` was asked for; ``True`` when training may follow (pairs were written)."""
    from .eval.qa_llm import resolve_llm
    from .train.dpo import build_dpo_dataset, load_jsonl, pairs_from_candidates, save_dpo_data, save_jsonl

    closers: list[Any] = []
    try:
        llm, description = None, None
        if args.candidates is None or args.judge_llm in (None, "same"):
            llm, description, close = resolve_llm(args.llm, args.llm_model, deadline=args.llm_deadline)
            closers.append(close)
        judge = llm
        if args.judge_llm == "gold":
            judge = None
        elif args.judge_llm not in (None, "same"):
            judge, _jd, jclose = resolve_llm(
                args.judge_llm, args.judge_model or args.llm_model, deadline=args.llm_deadline
            )
            closers.append(jclose)
        if args.candidates is not None:  # candidates sampled elsewhere (a GPU): judge them here
            inputs_path = args.inputs or out / "ka_inputs.jsonl"
            pairs, stats = pairs_from_candidates(load_jsonl(inputs_path), load_jsonl(args.candidates), judge=judge)
            sources = {"inputs": str(inputs_path), "candidates": str(args.candidates)}
        else:
            built, stats = build_dpo_dataset(
                args.dataset,
                llm,
                judge=judge,
                data_dir=args.data_dir,
                limit=args.limit,
                index=args.index,
                cache_dir=args.cache_dir,
                progress=not args.quiet,
                rounds=[int(r) for r in args.rounds.split(",") if r.strip()],
                workers=args.workers,
                inputs_only=args.inputs_only,
            )
            sources = {"llm": description}
            if args.inputs_only:
                path = save_jsonl(built, out / "ka_inputs.jsonl")
                report = {"inputs": str(path), "llm": description, **stats.to_dict()}
                (out / "ka_inputs_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
                print(json.dumps(report, indent=2))
                return False
            pairs = built
    finally:
        for close in reversed(closers):
            close()
    save_dpo_data(pairs, data_path)
    report = {"data": str(data_path), **sources, **stats.to_dict()}
    (out / "dpo_data_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return not args.build_only


def _cmd_dpo(args: argparse.Namespace) -> int:
    """KG-Infused RAG's KA-stage DPO data, then DPO (docs/training.md)."""
    from .train.dpo_train import train_generator_dpo
    from .train.lora import QLoRAUnavailableError, qlora_quantization

    out = _need_out(args)
    trains = not (args.build_only or args.inputs_only)
    if args.inputs_only and (args.candidates is not None or args.dpo_data is not None):
        raise ValueError("--inputs-only builds the KA inputs; it cannot be combined with --candidates or --dpo-data")
    if trains and args.base_model is None:
        raise ValueError(
            "kgrag train generator-dpo needs --base-model (the generator to tune), or --build-only / --inputs-only"
        )
    if args.qlora and trains:
        try:
            qlora_quantization()  # before the data is built
        except QLoRAUnavailableError as e:
            print(f"kgrag train generator-dpo: error: {e}", file=sys.stderr)
            return 2
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / "dpo_data.jsonl"
    if args.dpo_data is not None:
        data_path = args.dpo_data
    elif not _dpo_data(args, out, data_path):
        return 0
    if not trains:
        return 0
    try:
        trained = train_generator_dpo(data_path, args.base_model, out, **_tuning_options(args, "generator-dpo"))
    except QLoRAUnavailableError as e:
        print(f"kgrag train generator-dpo: error: {e}", file=sys.stderr)
        return 2
    print((trained / "train_report.json").read_text(encoding="utf-8"), end="")
    return 0


def _cmd_export_merged(args: argparse.Namespace) -> int:
    from .train.lora import export_merged

    if args.out_dir is None:
        raise ValueError("usage: kgrag train export-merged ADAPTER_DIR OUT_DIR")
    print(f"merged model written to {export_merged(args.adapter, args.out_dir, base_model=args.base_model)}")
    return 0


def _cmd_path_ranker(args: argparse.Namespace) -> int:
    from .train.path import PATH_RANKER_LIMIT, train_path_ranker_cli

    report = train_path_ranker_cli(
        _need_out(args), dataset=args.dataset, data_dir=args.data_dir, limit=args.limit or PATH_RANKER_LIMIT,
        holdout=args.holdout,
    )  # fmt: skip
    _print_report(report)
    return 0


def _cmd_hop_classifier(args: argparse.Namespace) -> int:
    from .train.hop import train_hop_classifier

    report = train_hop_classifier(
        _need_out(args),
        datasets=[d.strip() for d in args.datasets.split(",") if d.strip()],
        data_dir=args.data_dir,
        limit=args.limit,
        holdout=args.holdout,
        test_only=[d.strip() for d in (args.test_only or "").split(",") if d.strip()],
        labels=args.labels,
    )
    _print_report(report)
    return 0


# ------------------------------------------------------------------------------------ parsers


def _data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir", type=Path, default=None, help="benchmark data (default: $KGRAG_DATA_DIR or ~/.cache/kgrag/data)"
    )


def _fine_tuning(p: argparse.ArgumentParser, recipe: str) -> None:
    from .train.presets import PRESETS

    p.add_argument(
        "--base-model",
        default=None,
        help="the causal LM to fine-tune: a known name (smollm2), a local folder, a .gguf file or a hub id",
    )
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS[recipe]),
        default=None,
        help="settings sized for a machine (cpu: LoRA on 2 cores within an hour for smollm2; "
        "docs/training.md); options given here win",
    )
    p.add_argument("--build-only", action="store_true", help="only build and write the training data")
    p.add_argument("--max-steps", type=int, default=None, help="stop after N optimizer steps (default: one epoch)")
    p.add_argument("--epochs", type=float, default=None, help="passes over the data (default: the recipe's, 1)")
    p.add_argument("--learning-rate", type=float, default=None, help="default: the recipe's (or the preset's)")
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of all parameters")
    p.add_argument("--lora-r", type=int, default=None, help="LoRA rank (default: the recipe's, 16)")
    p.add_argument("--lora-alpha", type=int, default=None, help="LoRA alpha (default: the recipe's, 32)")
    p.add_argument("--qlora", action="store_true", help="LoRA on a 4-bit base (needs bitsandbytes and a CUDA GPU)")
    p.add_argument("--merge", action="store_true", help="also write the adapter merged into the base to OUT/merged")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint under --out")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_train_parser(sub: Any) -> None:
    """``kgrag train TASK ...`` (``sub``: the top-level sub-parsers)."""
    t = sub.add_parser(
        "train",
        help="train FRAG's hop classifier / path ranker, KG-Translator's clue translator, KG-Infused RAG's "
        "generator (DPO), Know3's KG embedding, or fold a LoRA adapter into its base (docs/training.md)",
        description="Training tasks; `kgrag train TASK --help` lists each one's options.",
    )
    tasks = t.add_subparsers(dest="task", required=True, metavar="TASK")

    h = tasks.add_parser("hop-classifier", help="FRAG's hop-range classifier (simple / complex)", formatter_class=_FMT)
    h.add_argument("--out", type=Path, default=None, help="where to save the classifier (.npz)")
    h.add_argument("--datasets", default="metaqa,musique,2wikimultihopqa,hotpotqa,popqa", help="training sets")
    h.add_argument("--test-only", default=None, help="datasets only evaluated, never trained on (cross-dataset)")
    h.add_argument("--limit", type=int, default=2000, help="questions per dataset, balanced over hops")
    h.add_argument("--holdout", type=float, default=0.3, help="held-out share")
    h.add_argument(
        "--labels",
        choices=["dataset", "hmin"],
        default="dataset",
        help="the datasets' hop counts, or FRAG's h_min (KG shortest path topic -> nearest answer, FRAG §3) "
        "where the dataset has a KG (MetaQA); both are reported for KG datasets",
    )
    _data_dir(h)
    h.set_defaults(func=_cmd_hop_classifier)

    pr = tasks.add_parser("path-ranker", help="FRAG's path ranker on a KGQA dataset", formatter_class=_FMT)
    pr.add_argument("--out", type=Path, default=None, help="where to save the ranker (.npz)")
    pr.add_argument("--dataset", default="metaqa", help="the KGQA dataset")
    pr.add_argument("--limit", type=int, default=None, help="questions, balanced over hops (default: 9000)")
    pr.add_argument("--holdout", type=float, default=0.2, help="held-out share")
    _data_dir(pr)
    pr.set_defaults(func=_cmd_path_ranker)

    tr = tasks.add_parser(
        "translator", help="KG-Translator's clue translator: App. F.1 SFT data, then SFT (extra [train])",
        formatter_class=_FMT,
    )  # fmt: skip
    tr.add_argument("--out", type=Path, default=None, help="output folder (data, adapter or model, report)")
    tr.add_argument("--data", default="musique,2wikimultihopqa", help="SFT sources (App. F.1)")
    tr.add_argument("--limit", type=int, default=None, help="first N questions per source (default: all)")
    tr.add_argument(
        "--sft-data", type=Path, default=None,
        help="train on this JSONL of pairs (a run's OUT/sft_data.jsonl; no data build, no benchmark data needed)",
    )  # fmt: skip
    _fine_tuning(tr, "translator")
    _data_dir(tr)
    tr.set_defaults(func=_cmd_translator)

    g = tasks.add_parser(
        "generator-dpo", help="KG-Infused RAG's generator: KA-stage preference pairs, then DPO (extra [train])",
        formatter_class=_FMT,
    )  # fmt: skip
    g.add_argument("--out", type=Path, default=None, help="output folder (pairs, adapter or model, report)")
    g.add_argument("--dataset", default="musique", help="musique, 2wikimultihopqa or hotpotqa")
    g.add_argument("--limit", type=int, default=None, help="first N questions (default: all)")
    g.add_argument(
        "--llm",
        default=None,
        help="the generator writing the KA candidates: URL (OpenAI-compatible), vllm:PATH, local:MODEL, "
        "ollama:MODEL[@URL], litellm:MODEL or scripted (default: $KGRAG_LLM_BASE_URL)",
    )
    g.add_argument("--llm-model", default=None, help="model name at the --llm URL")
    g.add_argument(
        "--llm-deadline",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds per LLM call (default: $KGRAG_LLM_DEADLINE, else 30; raise it with --workers on a CPU server)",
    )
    g.add_argument(
        "--judge-llm", default="same", help="the judge: same (the --llm), URL, vllm:PATH, or gold (gold answers)"
    )
    g.add_argument("--judge-model", default=None, help="model name at the --judge-llm URL")
    g.add_argument("--rounds", default="1,2", help="activation rounds whose KA inputs are sampled")
    g.add_argument("--workers", type=int, default=1, help="questions built at once (a vLLM server batches their calls)")
    g.add_argument("--dpo-data", type=Path, default=None, help="train on this JSONL (no data build)")
    g.add_argument(
        "--inputs-only",
        action="store_true",
        help="only the KA inputs (OUT/ka_inputs.jsonl): sample their candidates elsewhere, e.g. a GPU",
    )
    g.add_argument(
        "--candidates",
        type=Path,
        default=None,
        help="JSONL of candidates sampled elsewhere ({input_id, text, temperature, top_p}): judge them into pairs",
    )
    g.add_argument(
        "--inputs", type=Path, default=None, help="with --candidates: the KA inputs (default OUT/ka_inputs.jsonl)"
    )
    g.add_argument("--index", type=Path, default=None, metavar="DIR", help="run KG-Infused on this saved index")
    g.add_argument("--cache-dir", type=Path, default=None, help="where dataset indexes are cached")
    _fine_tuning(g, "generator-dpo")
    _data_dir(g)
    g.set_defaults(func=_cmd_dpo)

    k = tasks.add_parser("kge", help="Know3's KG embedding (our torch code)", formatter_class=_FMT)
    k.add_argument(
        "--index", type=Path, default=None, metavar="DIR", help="train on this saved index's graph, store it there"
    )
    k.add_argument("--dataset", default="metaqa", help="without --index: the KGQA protocol's dataset")
    k.add_argument("--out", type=Path, default=None, help="without --index: where to save the KGE (a directory)")
    k.add_argument("--report", type=Path, default=None, help="also write the JSON report to this file")
    k.add_argument(
        "--model",
        choices=["complex", "rotate", "transe", "distmult"],
        default=None,
        help="the KGE model (default: complex)",
    )
    k.add_argument("--dim", type=int, default=None, help="embedding size (real numbers per entity)")
    k.add_argument("--epochs", type=int, default=None, help="most epochs (early stopping on validation MRR)")
    k.add_argument("--lr", type=float, default=None, help="learning rate")
    k.add_argument("--reg", type=float, default=None, help="N3 regularisation weight (ComplEx / DistMult)")
    k.add_argument("--batch-size", type=int, default=None, help="queries per batch")
    k.add_argument(
        "--full-softmax",
        action="store_true",
        help="score every query against all entities (1-N) instead of sampled negatives",
    )
    k.add_argument("--device", default=None, help="torch device: cpu or cuda (default: cuda when torch sees one)")
    k.add_argument(
        "--preset",
        choices=["cpu", "gpu"],
        default=None,
        help="settings chosen on MetaQA's half KB (docs/kge.md): cpu = ComplEx 256, N3 0.1, early stopping; "
        "gpu = ComplEx 1000, N3 0.1, 1-N at batch 100 on cuda (options given explicitly win)",
    )
    k.add_argument("--time-budget", type=float, default=None, help="stop after the epoch that passes this many seconds")
    k.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: what the load average leaves idle)"
    )
    _data_dir(k)
    k.set_defaults(func=_cmd_kge)

    e = tasks.add_parser(
        "export-merged", help="fold a LoRA adapter into its base: a plain HF folder for vllm serve",
        formatter_class=_FMT,
    )  # fmt: skip
    e.add_argument("adapter", type=Path, metavar="ADAPTER_DIR", help="the LoRA adapter folder (as training wrote it)")
    e.add_argument(
        "out_dir", type=Path, nargs="?", default=None, metavar="OUT_DIR", help="where to write the merged model"
    )
    e.add_argument("--base-model", default=None, help="override the base model recorded in the adapter")
    e.set_defaults(func=_cmd_export_merged)
