"""Command line: ``kgrag demo | bench | index | show-graph | linking | ask | train | serve-llm | models``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .config import setup_offline_env
from .models.llm import LLMError


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.llm:
        from .demo_llm import run_llm_demo

        run_llm_demo(sys.stdout, args.llm)
        return 0
    from .demo import run_demo

    run_demo(sys.stdout, index_dir=args.index_dir, k=args.k)
    return 0


def _cmd_bench_qa(args: argparse.Namespace) -> int:
    """``bench --qa``: end-to-end QA systems with an LLM (eval/qa.py, docs/qa.md)."""
    from .eval.qa import qa_markdown_table, run_qa_bench
    from .eval.qa_llm import resolve_llm

    llm_options = {"model": args.llm_model, "deadline": args.llm_deadline, "max_tokens": args.max_tokens}
    llm, description, close = resolve_llm(
        args.llm, args.llm_model, deadline=args.llm_deadline, max_tokens=args.max_tokens
    )
    try:
        report = run_qa_bench(
            args.dataset,
            [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None,
            llm=llm,
            llm_name=description,
            data_dir=args.data_dir,
            limit=args.limit,
            out=args.out,
            cache_dir=args.cache_dir,
            progress=not args.quiet,
            retriever_opts=args.retriever_opt or (),
            concurrency=args.concurrency[0] if len(args.concurrency) == 1 else args.concurrency,
            journal=args.journal,
            resume=args.resume,
            llm_retries=args.llm_retries,
            llm_options={k: v for k, v in llm_options.items() if v is not None},
        )
    finally:
        close()
    print(qa_markdown_table(report))
    if args.out:
        print(f"wrote {args.out}")
    return 0


def _int_list(text: str) -> list[int]:
    """``"1,8"`` -> ``[1, 8]`` (argparse type of ``--concurrency``)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,N,... (integers), got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def _cmd_bench(args: argparse.Namespace) -> int:
    from .eval.bench import markdown_table, run_bench

    if args.qa and args.slice_corpus:
        raise ValueError("--slice-corpus applies to retrieval benchmarks, not --qa")
    if args.qa:
        return _cmd_bench_qa(args)
    qa_only = (args.llm, args.systems, args.llm_model, args.llm_deadline, args.max_tokens, args.journal, args.resume)
    if any(v not in (None, False) for v in qa_only) or args.concurrency != [1] or args.llm_retries != 2:
        raise ValueError(
            "--llm, --llm-model, --systems, --llm-deadline, --max-tokens, --concurrency, --journal, --resume "
            "and --llm-retries apply to --qa only"
        )
    retrievers = [r.strip() for r in (args.retrievers or "dense,bm25,hybrid").split(",") if r.strip()]
    report = run_bench(
        args.dataset,
        retrievers,
        data_dir=args.data_dir,
        limit=args.limit,
        out=args.out,
        cache_dir=args.cache_dir,
        progress=not args.quiet,
        per_hop=args.per_hop,
        train_per_hop=args.train_per_hop,
        labels=args.labels,
        retriever_opts=args.retriever_opt or (),
        kb_keep=args.kb_keep,
        slice_corpus=args.slice_corpus,
    )
    print(markdown_table(report))
    if args.out:
        print(f"wrote {args.out}")
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    from .datasets.loaders import load_corpus_jsonl
    from .index.store import KnowledgeIndex

    if not args.corpus and not args.kg:
        raise ValueError("give --corpus FILE.jsonl (documents) and/or --kg FILE --format F (a curated KG)")
    passages = load_corpus_jsonl(args.corpus) if args.corpus else []
    if args.corpus and not passages:
        raise ValueError(f"{args.corpus} contains no passages")
    graph, load_report, llm = None, None, None
    if args.kg:
        from .index.importers import load_kg

        if not args.format:
            raise ValueError("--kg needs --format (metaqa, tsv, openie, wikidata5m)")
        if args.builder:
            raise ValueError("use either --kg (import a graph) or --builder (build one from --corpus), not both")
        graph, load_report = load_kg(args.kg, args.format, on_error=args.on_error)
        print(f"loaded {args.format} KG: {load_report.to_dict()}", file=sys.stderr)
    elif args.builder == "llm":
        from .models.llm import OpenAICompatibleLLM

        llm = OpenAICompatibleLLM.from_env()
    settings = {"corpus": str(args.corpus) if args.corpus else None, "kg": str(args.kg) if args.kg else None}
    if load_report is not None:
        settings["kg_load"] = load_report.to_dict()
    if args.engine == "ray":  # per-passage work on Ray, merged into one index (docs/ray.md)
        from .index.ray_build import build_index_cli

        index = build_index_cli(args, passages, graph, llm is not None, settings)
    else:
        index = KnowledgeIndex.build(
            passages,
            args.out,
            builder=args.builder,
            graph=graph,
            llm=llm,
            entity_vectors=args.entity_vectors,
            settings=settings,
            progress=True,
        )
    summary = {
        "path": str(index.path),
        "builder": args.builder,
        "counts": index.counts,
        "timings": {k: round(v, 2) for k, v in index.manifest["timings"].items()},
    }
    print(json.dumps(summary, indent=2))
    return 0


def _cmd_show_graph(args: argparse.Namespace) -> int:
    from .explain.draw import draw_neighbourhood
    from .index.store import KnowledgeIndex

    index = KnowledgeIndex.open(args.index)
    info = draw_neighbourhood(index.graph, args.entity, args.out, hops=args.hops, max_nodes=args.max_nodes)
    print(json.dumps(info, indent=2, ensure_ascii=False))
    return 0


def _cmd_linking(args: argparse.Namespace) -> int:
    from .datasets.indexes import dataset_index
    from .datasets.loaders import load_dataset
    from .eval.linking import linking_quality

    out = {}
    for name in args.dataset.split(","):
        ds = load_dataset(name.strip(), data_dir=args.data_dir, limit=args.limit)
        index, _ = dataset_index(ds, cache_dir=args.cache_dir, builder=args.builder)
        out[ds.name] = linking_quality(index, ds, hops=args.hops)
        out[ds.name]["builder"] = args.builder
        out[ds.name]["graph_s"] = round(index.manifest["timings"].get("graph_s", 0.0), 2)
        print(json.dumps({ds.name: out[ds.name]}, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


def _cmd_ask(args: argparse.Namespace) -> int:
    from .eval.bench import RETRIEVERS
    from .index.store import KnowledgeIndex

    index = KnowledgeIndex.open(args.index)
    if not len(index.passages) and args.retriever != "frag":
        raise ValueError(
            f"{args.index} has no passages (a KG-only index: {index.graph.num_entities} entities, "
            f"{index.graph.num_triples} triples), so --retriever {args.retriever} finds nothing; "
            "use --retriever frag for paths and answers over its graph, or index a --corpus"
        )
    retriever = RETRIEVERS[args.retriever][0](index)
    ev = retriever.retrieve(args.question, args.k)
    if args.draw:
        from .explain.clues import draw_evidence

        info = draw_evidence(index, ev, args.draw)
        print(f"drew {info['nodes']} {info['what']}, {info['edges']} edges -> {info['out']}", file=sys.stderr)
    if args.json:
        print(json.dumps(ev.to_dict(), indent=2, ensure_ascii=False))
        return 0
    for sp in ev.passages:
        print(f"{sp.score:8.4f}  [{sp.passage.id}] {sp.passage.title}: {sp.passage.text[:160]}")
    for f in ev.facts:
        print(f"  {f.kind} {f.score:6.3f}  {f.text[:160]}")
    if ev.trace.get("answers"):
        print("answers:", ", ".join(ev.trace["answers"][: args.k]))
    if not ev.passages and not ev.facts:
        why = ev.trace.get("error") or ev.trace.get("reason") or ev.trace.get("note") or "nothing matched the question"
        print(f"kgrag ask: no evidence from --retriever {args.retriever}: {why}", file=sys.stderr)
        return 1
    if args.generate:
        return _generate(args, ev)
    return 0


def _generate(args: argparse.Namespace, ev: Any) -> int:
    """``ask --generate``: the LLM's answer; on a dead / hanging endpoint (one deadline,
    ``KGRAG_LLM_DEADLINE``) or an invalid reply, the LLM-free answer if there is one, one line on
    stderr, exit 1."""
    import logging

    from .methods.answer import generate_answer
    from .models.llm import OpenAICompatibleLLM

    quiet = logging.NullHandler()  # the one stderr line below says it; no logging noise
    log = logging.getLogger("kgrag_plugins.models.replies")
    log.addHandler(quiet)
    try:
        ans = generate_answer(OpenAICompatibleLLM.from_env(), args.question, ev)
    finally:
        log.removeHandler(quiet)
    if not ans.metadata.get("fallback"):
        print("answer:", ans.text)
        return 0
    if ans.text:
        print("answer (LLM-free):", ans.text)
    errors = ans.metadata.get("llm_error") or [{"error": "no valid reply"}]
    print(f"kgrag ask: error: no answer from the LLM: {errors[-1]['error']}", file=sys.stderr)
    return 1


def _cmd_train_kge(args: argparse.Namespace) -> int:
    opts = {k: v for k, v in (("model", args.model), ("dim", args.dim), ("epochs", args.epochs)) if v is not None}
    opts.update({k: v for k, v in (("lr", args.lr), ("threads", args.threads)) if v is not None})
    if args.index is not None:
        from .train.kge import train_kge_index

        report = train_kge_index(args.index, **opts)
    else:
        if args.dataset != "metaqa":
            raise ValueError(f"kgrag train kge: --dataset must be metaqa (or use --index DIR), got {args.dataset!r}")
        from .train.kge import train_kge_metaqa

        report = train_kge_metaqa(args.out, data_dir=args.data_dir, **opts)
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def _tuning_options(args: argparse.Namespace) -> dict:
    """The fine-tuning flags ``train translator`` and ``train generator-dpo`` share (LoRA / QLoRA,
    merged export, steps, resume, progress), as keyword arguments of their train functions."""
    return {
        "lora": args.lora,
        "lora_r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "qlora": args.qlora,
        "merge": args.merge,
        "max_steps": args.max_steps,
        "resume": args.resume,
        "progress": not args.quiet,
    }


def _cmd_train_translator(args: argparse.Namespace) -> int:
    from .train.lora import QLoRAUnavailableError
    from .train.translator import train_translator

    try:
        out = train_translator(
            None,
            args.base_model,
            args.out,
            data=[d.strip() for d in args.data.split(",") if d.strip()],
            data_dir=args.data_dir,
            limit=args.limit,
            build_only=args.build_only,
            **_tuning_options(args),
        )
    except QLoRAUnavailableError as e:
        print(f"kgrag train translator: error: {e}", file=sys.stderr)
        return 2
    print((out / "train_report.json").read_text(encoding="utf-8"), end="")
    return 0


def _cmd_train_dpo(args: argparse.Namespace) -> int:
    """``kgrag train generator-dpo``: KG-Infused RAG's KA-stage DPO data, then DPO (docs/training.md)."""
    from .eval.qa_llm import resolve_llm
    from .train.dpo import build_dpo_dataset, save_dpo_data, train_generator_dpo
    from .train.lora import QLoRAUnavailableError

    if not args.build_only and args.base_model is None:
        raise ValueError("kgrag train generator-dpo needs --base-model (the generator to tune), or --build-only")
    if args.qlora and not args.build_only:
        from .train.lora import qlora_quantization

        try:
            qlora_quantization()  # before the data is built
        except QLoRAUnavailableError as e:
            print(f"kgrag train generator-dpo: error: {e}", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    data_path = args.out / "dpo_data.jsonl"
    if args.dpo_data is not None:
        data_path = args.dpo_data
    else:
        llm, description, close = resolve_llm(args.llm, args.llm_model)
        judge, jclose = llm, (lambda: None)
        try:
            if args.judge_llm == "gold":
                judge = None
            elif args.judge_llm not in (None, "same"):
                judge, _jd, jclose = resolve_llm(args.judge_llm, args.judge_model or args.llm_model)
            pairs, stats = build_dpo_dataset(
                args.dataset,
                llm,
                judge=judge,
                data_dir=args.data_dir,
                limit=args.limit,
                index=args.index,
                cache_dir=args.cache_dir,
                progress=not args.quiet,
                rounds=[int(r) for r in args.rounds.split(",") if r.strip()],
            )
        finally:
            jclose()
            close()
        save_dpo_data(pairs, data_path)
        report = {"data": str(data_path), "llm": description, **stats.to_dict()}
        (args.out / "dpo_data_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(report, indent=2))
    if args.build_only:
        return 0
    try:
        out = train_generator_dpo(
            data_path,
            args.base_model,
            args.out,
            **_tuning_options(args),
        )
    except QLoRAUnavailableError as e:
        print(f"kgrag train generator-dpo: error: {e}", file=sys.stderr)
        return 2
    print((out / "train_report.json").read_text(encoding="utf-8"), end="")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    if args.what == "kge":
        args.dataset = args.dataset or "metaqa"
        return _cmd_train_kge(args)
    if args.what == "export-merged":
        if len(args.paths) != 2:
            raise ValueError("usage: kgrag train export-merged ADAPTER_DIR OUT_DIR")
        from .train.lora import export_merged

        print(f"merged model written to {export_merged(args.paths[0], args.paths[1], base_model=args.base_model)}")
        return 0
    if args.paths:
        raise ValueError(f"kgrag train {args.what}: unexpected arguments {args.paths}")
    if args.out is None:
        raise ValueError(f"kgrag train {args.what} needs --out")
    if args.what == "translator":
        return _cmd_train_translator(args)
    if args.what == "generator-dpo":
        args.dataset = args.dataset or "musique"
        return _cmd_train_dpo(args)
    args.dataset = args.dataset or "metaqa"
    if args.what == "path-ranker":
        from .train.path import PATH_RANKER_LIMIT, train_path_ranker_cli

        report = train_path_ranker_cli(
            args.out,
            dataset=args.dataset,
            data_dir=args.data_dir,
            limit=args.limit or PATH_RANKER_LIMIT,
            holdout=0.2 if args.holdout is None else args.holdout,
        )
        print(json.dumps(report, indent=2))
        return 0
    from .train.hop import train_hop_classifier

    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    report = train_hop_classifier(
        args.out,
        datasets=datasets,
        data_dir=args.data_dir,
        limit=args.limit or 2000,
        holdout=0.3 if args.holdout is None else args.holdout,
        test_only=[d.strip() for d in (args.test_only or "").split(",") if d.strip()],
        labels=args.labels,
    )
    print(json.dumps(report, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .eval.bench import RETRIEVERS
    from .eval.kgqa import KGQA_RETRIEVERS, TRAIN_PER_HOP

    p = argparse.ArgumentParser(prog="kgrag", description="Knowledge-graph RAG plug-ins: demo, benchmarks, indexing.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="index the bundled sample corpus and answer its questions (offline)")
    d.add_argument("--index-dir", type=Path, default=None, help="keep the demo index here (default: a temp dir)")
    d.add_argument("-k", type=int, default=3, help="passages shown per retriever")
    d.add_argument(
        "--llm",
        default=None,
        metavar="MODEL",
        help="answer sample questions with a real LLM, from activation-retrieved passages and closed-book "
        "(smollm2 = SmolLM2-135M-Instruct in-process; or local:PATH, vllm:PATH, an endpoint URL)",
    )
    d.set_defaults(func=_cmd_demo)

    b = sub.add_parser("bench", help="measure retrievers on a benchmark dataset")
    b.add_argument("--dataset", required=True, help="musique, hotpotqa, 2wikimultihopqa, popqa, ...")
    b.add_argument(
        "--retrievers",
        default=None,
        help=f"comma list of: {', '.join(RETRIEVERS)}; KGQA datasets (metaqa): {', '.join(KGQA_RETRIEVERS)} "
        "(default: dense,bm25,hybrid)",
    )
    b.add_argument(
        "--qa", action="store_true", help="end-to-end QA (EM/F1/Acc) of the papers' systems with an LLM (docs/qa.md)"
    )
    b.add_argument(
        "--llm",
        default=None,
        metavar="URL|vllm:PATH|local:MODEL|scripted",
        help="--qa: an OpenAI-compatible endpoint, a model for a managed `vllm serve`, an in-process model "
        "(local:smollm2), or the scripted LLM (default: $KGRAG_LLM_BASE_URL)",
    )
    b.add_argument("--llm-deadline", type=float, default=None, metavar="SECONDS", help="--qa: seconds per LLM call")
    b.add_argument("--max-tokens", type=int, default=None, metavar="N", help="--qa: default reply budget in tokens")
    b.add_argument(
        "--concurrency",
        type=_int_list,
        default=[1],
        metavar="N[,N]",
        help="--qa: questions of one system in flight at once; several values (1,8) give one row each",
    )
    b.add_argument(
        "--journal",
        type=Path,
        default=None,
        help="--qa: one JSON line per finished question (default: OUT.journal.jsonl with --out, else under "
        "the cache dir)",
    )
    b.add_argument("--resume", action="store_true", help="--qa: continue the journal: finished questions are not rerun")
    b.add_argument(
        "--llm-retries",
        type=int,
        default=2,
        metavar="N",
        help="--qa: reruns of a question whose LLM was unavailable / timed out (after the cool-down) "
        "before the run stops (default 2)",
    )
    b.add_argument("--llm-model", default=None, help="--qa with --llm URL: model name (default: $KGRAG_LLM_MODEL)")
    b.add_argument(
        "--systems",
        default=None,
        help="--qa: comma list of no-retrieval, vanilla-rag, vanilla-qe, qe-only, ka-only, full, "
        f"vanilla-rag:RETRIEVER (RETRIEVER one of {', '.join(RETRIEVERS)}) and the agents "
        "(self-ask, self-ask+kg-infused, self-rag, ..., cot-rag, sa-rag+cot, decomposition, sa-rag+decomposition); "
        "default: all but vanilla-rag:RETRIEVER",
    )
    b.add_argument(
        "--data-dir", type=Path, default=None, help="benchmark data (default: $KGRAG_DATA_DIR or ../shared/data)"
    )
    b.add_argument("--limit", type=int, default=None, help="first N questions only")
    b.add_argument(
        "--slice-corpus",
        action="store_true",
        help="retrieve from the kept questions' candidate paragraphs only (with --limit: a small fixed slice "
        "built the way the split's corpus is)",
    )
    b.add_argument("--per-hop", type=int, default=300, help="KGQA: held-out questions evaluated per hop count")
    b.add_argument("--train-per-hop", type=int, default=TRAIN_PER_HOP, help="KGQA: training questions per hop count")
    b.add_argument(
        "--labels",
        choices=["dataset", "hmin"],
        default="dataset",
        help="KGQA: hop classifier labels, the dataset's hop counts or FRAG's KG shortest-path h_min (FRAG §3)",
    )
    b.add_argument(
        "--kb-keep",
        type=float,
        default=1.0,
        metavar="F",
        help="KGQA: keep a fixed-seed random fraction F (0 < F <= 1) of the KB's triples (incomplete-KG test)",
    )
    b.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    b.add_argument(
        "--cache-dir", type=Path, default=None, help="index cache (default: $KGRAG_CACHE_DIR or .kgrag_cache)"
    )
    b.add_argument(
        "--retriever-opt",
        action="append",
        default=None,
        metavar="R.OPT=V1,V2",
        help="retriever option values, one run per combination (e.g. translator.alpha=1,3,5 translator.beta=1,3; "
        "--qa: kg-infused.rounds=1,2,3, sa-rag.relation_threshold=0.4,0.5, or SYSTEM.OPTION)",
    )
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=_cmd_bench)

    i = sub.add_parser(
        "index",
        help="build a knowledge index from a corpus JSONL ({id,title,text} per line) and/or a curated KG",
    )
    i.add_argument("--corpus", type=Path, default=None, help="passages, one JSON object per line")
    i.add_argument(
        "--builder",
        choices=["mentions", "parsekg", "llm"],
        default=None,
        help="build a graph from the corpus: mentions/parsekg (spaCy, no LLM) or llm ($KGRAG_LLM_BASE_URL)",
    )
    i.add_argument("--kg", type=Path, default=None, help="import a curated KG file (or Wikidata5M directory)")
    i.add_argument("--format", choices=["metaqa", "tsv", "openie", "wikidata5m"], default=None)
    i.add_argument(
        "--on-error", choices=["skip", "raise"], default="skip", help="bad KG lines: skip and count, or stop"
    )
    i.add_argument("--entity-vectors", action="store_true", help="embed entities now (default: on first use)")
    i.add_argument("--out", type=Path, required=True)
    i.add_argument("--engine", choices=["local", "ray"], default="local", help="ray: on Ray (extra 'ray', docs/ray.md)")
    i.add_argument("--address", help="--engine ray: Ray cluster address (default: start a local Ray)")
    i.add_argument("--partitions", type=int, help="--engine ray: Ray Data blocks (default 2 x CPUs)")
    i.add_argument("--num-cpus", type=int, help="--engine ray: CPUs of the local Ray (default: all)")
    i.set_defaults(func=_cmd_index)

    g = sub.add_parser("show-graph", help="draw an entity's neighbourhood from a saved index (PNG or HTML)")
    g.add_argument("index", type=Path)
    g.add_argument("--entity", required=True, help="entity name (or id)")
    g.add_argument("--hops", type=int, default=2)
    g.add_argument("--max-nodes", type=int, default=60)
    g.add_argument("--out", type=Path, required=True, help="FILE.png or FILE.html")
    g.set_defaults(func=_cmd_show_graph)

    lq = sub.add_parser("linking", help="gold-title reachability of a dataset's questions in a built graph")
    lq.add_argument("--dataset", required=True, help="comma list, e.g. musique,hotpotqa,2wikimultihopqa")
    lq.add_argument("--builder", choices=["mentions", "parsekg"], default="mentions")
    lq.add_argument("--hops", type=int, default=2)
    lq.add_argument("--limit", type=int, default=None)
    lq.add_argument("--data-dir", type=Path, default=None)
    lq.add_argument("--cache-dir", type=Path, default=None)
    lq.add_argument("--out", type=Path, default=None)
    lq.set_defaults(func=_cmd_linking)

    a = sub.add_parser("ask", help="retrieve evidence for a question from a saved index")
    a.add_argument("--index", type=Path, required=True)
    a.add_argument("--retriever", default="hybrid", choices=sorted(RETRIEVERS))
    a.add_argument("-k", type=int, default=5)
    a.add_argument("--json", action="store_true", help="print the Evidence as JSON")
    a.add_argument("--draw", type=Path, default=None, help="draw the activated subgraph (FILE.png or FILE.html)")
    a.add_argument("--generate", action="store_true", help="also answer with the LLM at $KGRAG_LLM_BASE_URL")
    a.add_argument("question")
    a.set_defaults(func=_cmd_ask)

    t = sub.add_parser(
        "train",
        help="train FRAG's hop-classifier / path-ranker, KG-Translator's clue translator (SFT, needs [train]), "
        "KG-Infused RAG's generator (DPO, needs [train]) or Know3's KG embedding (kge); export-merged: fold a "
        "LoRA adapter into its base model (docs/training.md)",
    )
    t.add_argument(
        "what", choices=["hop-classifier", "path-ranker", "translator", "generator-dpo", "export-merged", "kge"]
    )
    t.add_argument("paths", nargs="*", metavar="DIR", help="export-merged: ADAPTER_DIR OUT_DIR")
    t.add_argument(
        "--out", type=Path, default=None, help="where to save the model (.npz; translator, kge: a directory)"
    )
    t.add_argument(
        "--index",
        type=Path,
        default=None,
        help="kge: train on this saved index's graph, store it there; generator-dpo: run KG-Infused on this index",
    )
    t.add_argument("--report", type=Path, default=None, help="kge: also write the JSON report to this file")
    t.add_argument("--model", choices=["complex", "rotate", "transe", "distmult"], default=None, help="kge: model")
    t.add_argument("--dim", type=int, default=None, help="kge: embedding size (real numbers per entity)")
    t.add_argument("--epochs", type=int, default=None, help="kge: most epochs (early stopping on validation MRR)")
    t.add_argument("--lr", type=float, default=None, help="kge: learning rate")
    t.add_argument(
        "--threads",
        type=int,
        default=None,
        help="kge: torch CPU threads while training (default: what the load average leaves idle)",
    )
    t.add_argument("--data", default="musique,2wikimultihopqa", help="translator: SFT sources (App. F.1)")
    t.add_argument(
        "--base-model",
        default=None,
        help="translator, generator-dpo: a known name (smollm2), a local folder, a .gguf file or a hub id of the "
        "causal LM to fine-tune "
        "(export-merged: override the adapter's base)",
    )
    t.add_argument(
        "--build-only", action="store_true", help="translator, generator-dpo: only build and write the training data"
    )
    t.add_argument(
        "--max-steps", type=int, default=None, help="translator, generator-dpo: stop after N optimizer steps"
    )
    t.add_argument("--lora", action="store_true", help="translator, generator-dpo: train a LoRA adapter")
    t.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default 16)")
    t.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (default 32)")
    t.add_argument("--qlora", action="store_true", help="LoRA on a 4-bit base (needs bitsandbytes and a CUDA GPU)")
    t.add_argument("--merge", action="store_true", help="also write the adapter merged into the base to OUT/merged")
    t.add_argument("--resume", action="store_true", help="continue from the newest checkpoint under --out")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    t.add_argument(
        "--llm",
        default=None,
        help="generator-dpo: the generator writing the KA candidates: URL (OpenAI-compatible), vllm:PATH or "
        "scripted (default $KGRAG_LLM_BASE_URL)",
    )
    t.add_argument("--llm-model", default=None, help="generator-dpo: model name at the --llm URL")
    t.add_argument(
        "--judge-llm",
        default="same",
        help="generator-dpo: the judge: same (the --llm, default), URL, vllm:PATH, or gold (LLM-free: gold answers)",
    )
    t.add_argument("--judge-model", default=None, help="generator-dpo: model name at the --judge-llm URL")
    t.add_argument("--rounds", default="1,2", help="generator-dpo: activation rounds whose KA inputs are sampled")
    t.add_argument("--dpo-data", type=Path, default=None, help="generator-dpo: train on this JSONL (no data build)")
    t.add_argument("--cache-dir", type=Path, default=None, help="generator-dpo: where dataset indexes are cached")
    t.add_argument(
        "--datasets", default="metaqa,musique,2wikimultihopqa,hotpotqa,popqa", help="hop-classifier: training sets"
    )
    t.add_argument(
        "--test-only", default=None, help="hop-classifier: datasets only evaluated, never trained on (cross-dataset)"
    )
    t.add_argument(
        "--dataset",
        default=None,
        help="path-ranker, kge: the KGQA dataset (default metaqa); generator-dpo: musique (default), "
        "2wikimultihopqa or hotpotqa",
    )
    t.add_argument(
        "--limit", type=int, default=None, help="questions per dataset, balanced over hops (default 2000 / 9000)"
    )
    t.add_argument("--holdout", type=float, default=None, help="held-out share (default 0.3 / 0.2)")
    t.add_argument(
        "--labels",
        choices=["dataset", "hmin"],
        default="dataset",
        help="hop-classifier: the datasets' hop counts, or FRAG's h_min (KG shortest path topic -> nearest "
        "answer, FRAG §3) where the dataset has a KG (MetaQA); both are reported for KG datasets",
    )
    t.add_argument("--data-dir", type=Path, default=None)
    t.set_defaults(func=_cmd_train)

    from .cli_models import add_model_parsers

    add_model_parsers(sub)

    from .eval.bench_scale import add_parser as add_bench_scale

    add_bench_scale(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    setup_offline_env()
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"kgrag {args.command}: error: {e}", file=sys.stderr)
        return 2
    except LLMError as e:
        print(f"kgrag {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
