"""Command line: ``kgrag demo | bench | index | show-graph | linking | ask | train | serve-llm | models | mcp``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ._secrets import RedactingFilter, redact
from .cli_common import HelpFormatter, deprecated_index, use_formatter
from .config import setup_offline_env
from .models.llm import LLMError


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.llm:
        from .demo_llm import run_llm_demo

        run_llm_demo(sys.stdout, args.llm)
        return 0
    from .demo import run_demo

    index = deprecated_index(args.index, args.index_dir, command="demo", old_form="--index-dir", required=False)
    run_demo(sys.stdout, index_dir=index, k=args.k, verbose=args.verbose)
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
            passage_chars=args.passage_chars,
        )
    finally:
        close()
    print(qa_markdown_table(report))
    _print_llm_usage(report)
    if args.out:
        print(f"wrote {args.out}")
    return 0


def _print_llm_usage(report: dict) -> None:
    """The bench's closing line when any LLM was called: calls, tokens, seconds in LLM calls."""
    from .eval.bench import llm_usage_summary

    line = llm_usage_summary(report)
    if line:
        print(line)


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

    _use_embedder(args.embedder)
    if args.qa and args.slice_corpus:
        raise ValueError("--slice-corpus applies to retrieval benchmarks, not --qa")
    if args.qa:
        return _cmd_bench_qa(args)
    qa_only = (
        args.llm,
        args.systems,
        args.llm_model,
        args.llm_deadline,
        args.max_tokens,
        args.passage_chars,
        args.journal,
        args.resume,
    )
    if any(v not in (None, False) for v in qa_only) or args.concurrency != [1] or args.llm_retries != 2:
        raise ValueError(
            "--llm, --llm-model, --systems, --llm-deadline, --max-tokens, --passage-chars, --concurrency, "
            "--journal, --resume and --llm-retries apply to --qa only"
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
        kb_seed=args.kb_seed,
        tune_per_hop=args.tune_per_hop,
        slice_corpus=args.slice_corpus,
    )
    print(markdown_table(report))
    _print_llm_usage(report)
    if args.out:
        print(f"wrote {args.out}")
    return 0


def _use_embedder(choice: str | None) -> None:
    """``--embedder``: the bundled MiniLM variant for every index this command builds (through
    ``KGRAG_EMBEDDER``, so QA, KGQA and Ray workers follow; :func:`main` restores the variable when
    the command returns); checked before any work starts."""
    if choice:
        from .models.embed import resolve_embedder

        os.environ["KGRAG_EMBEDDER"] = choice
        resolve_embedder(choice)  # an explicit onnx choice without onnxruntime fails here, not mid-run


def _cmd_index(args: argparse.Namespace) -> int:
    from .datasets.loaders import load_corpus_jsonl
    from .index.store import KnowledgeIndex
    from .index.vector_cache import check_kinds, precompute

    _use_embedder(args.embedder)
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
    kinds = [k.strip() for k in args.precompute.split(",") if k.strip()]
    check_kinds(kinds)  # before the build, not after it
    if args.engine == "ray":  # per-passage work on Ray, merged into one index (docs/ray.md)
        from .index.ray_build import build_index_cli

        index = build_index_cli(args, passages, graph, llm is not None, settings)
        index.manifest["timings"].update({f"precompute_{k}_s": v for k, v in precompute(index, kinds).items()})
    else:
        index = KnowledgeIndex.build(
            passages,
            args.out,
            builder=args.builder,
            graph=graph,
            llm=llm,
            entity_vectors=args.entity_vectors,
            precompute=kinds,
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


def _embedder_arg(p: argparse.ArgumentParser) -> None:
    from .models.embed import EMBEDDER_CHOICES

    p.add_argument(
        "--embedder",
        choices=EMBEDDER_CHOICES,
        default=None,
        help="the MiniLM variant of new indexes: torch (sentence-transformers), onnx (ONNX Runtime fp32), "
        "onnx-int8 (int8, outlier channels in fp32) or onnx-int8-v1 (the first int8 recipe); default "
        "$KGRAG_EMBEDDER or auto (onnx-int8 when onnxruntime is installed, else torch). "
        "An existing index always uses the embedder it was built with",
    )


def _cmd_show_graph(args: argparse.Namespace) -> int:
    from .explain.draw import draw_neighbourhood
    from .index.store import KnowledgeIndex

    path = deprecated_index(args.index, args.legacy_index, command="show-graph", old_form="the positional INDEX")
    index = KnowledgeIndex.open(path)
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

    llm = _ask_llm() if args.generate else None  # fail fast: before opening the index or retrieving
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
    if ev.passages or ev.facts:
        _print_ask_header(args.retriever, ev)
    for sp in ev.passages:
        print(f"{sp.score:8.4f}  [{sp.passage.id}] {sp.passage.title}: {sp.passage.text[:160]}")
    for f in ev.facts:
        print(f"  {f.kind} {f.score:6.3f}  {f.display[:160]}")
    if ev.trace.get("answers"):
        print("answers:", ", ".join(ev.trace["answers"][: args.k]))
    if not ev.passages and not ev.facts:
        why = ev.trace.get("error") or ev.trace.get("reason") or ev.trace.get("note") or "nothing matched the question"
        print(f"kgrag ask: no evidence from --retriever {args.retriever}: {why}", file=sys.stderr)
        return 1
    if llm is not None:
        return _generate(args, ev, llm)
    return 0


def _ask_llm() -> Any:
    """The LLM ``ask --generate`` answers with (``KGRAG_LLM_BASE_URL``, ``KGRAG_LLM_MODEL``),
    resolved before anything is retrieved; without one a ``ValueError`` naming what to set (exit 2)."""
    from .config import env
    from .models.llm import OpenAICompatibleLLM

    missing = [f"KGRAG_{name}" for name in ("LLM_BASE_URL", "LLM_MODEL") if not env(name)]
    if missing:
        raise ValueError(
            f"--generate needs an LLM, and {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
            "set KGRAG_LLM_BASE_URL to an OpenAI-compatible endpoint (e.g. http://localhost:8000/v1) and "
            "KGRAG_LLM_MODEL to its model name, or leave out --generate"
        )
    return OpenAICompatibleLLM.from_env()


def _print_ask_header(name: str, ev: Any) -> None:
    """``ask``'s first lines: the retriever and what its scores are, then any fallback it took."""
    counts = f"{len(ev.passages)} passage(s), {len(ev.facts)} fact(s)"
    print(f"retriever: {name}  {counts}  scores: {ev.score_kind or 'retriever score'}, higher is better")
    if ev.fallback:
        print(f"note: {ev.fallback}")


def _generate(args: argparse.Namespace, ev: Any, llm: Any) -> int:
    """``ask --generate``: the LLM's answer; on a dead / hanging endpoint (one deadline,
    ``KGRAG_LLM_DEADLINE``) or an invalid reply, the LLM-free answer if there is one, one line on
    stderr, exit 1."""
    import logging

    from .methods.answer import generate_answer

    quiet = logging.NullHandler()  # the one stderr line below says it; no logging noise
    log = logging.getLogger("kgrag_plugins.models.replies")
    log.addHandler(quiet)
    try:
        ans = generate_answer(llm, args.question, ev)
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


def _retriever_name(text: str) -> str:
    """``--retriever``'s type: the registered spelling (``kg_infused`` -> ``kg-infused``)."""
    from .eval.bench import RETRIEVERS
    from .names import resolve_name

    return resolve_name(text, RETRIEVERS)


def build_parser() -> argparse.ArgumentParser:
    from .eval.bench import RETRIEVERS
    from .eval.kgqa import KGQA_RETRIEVERS, TRAIN_PER_HOP

    p = argparse.ArgumentParser(prog="kgrag", description="Knowledge-graph RAG plug-ins: demo, benchmarks, indexing.")
    p.add_argument(
        "-v",
        "--log-verbose",
        dest="log_verbosity",
        action="count",
        default=0,
        help="log INFO (-v) or DEBUG (-vv) to stderr, libraries (Ray, Chroma, httpx, ...) included; "
        "without it: warnings only",
    )
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="index the bundled sample corpus and answer its questions (offline)")
    d.add_argument(
        "--index", type=Path, default=None, metavar="DIR", help="keep the demo index in DIR (default: a temp dir)"
    )
    d.add_argument("--index-dir", type=Path, default=None, help=argparse.SUPPRESS)  # deprecated: --index
    d.add_argument("-k", type=int, default=3, help="passages shown per retriever")
    d.add_argument(
        "--verbose",
        action="store_true",
        help="print every sample question's evidence and FRAG's paths (default: two questions, one screen)",
    )
    d.add_argument(
        "--llm",
        default=None,
        metavar="MODEL",
        help="answer sample questions with a real LLM, from activation-retrieved passages and closed-book "
        "(smollm2 = SmolLM2-135M-Instruct in-process; or local:PATH, vllm:PATH, ollama:MODEL[@URL], "
        "litellm:MODEL, an endpoint URL)",
    )
    d.set_defaults(func=_cmd_demo)

    b = sub.add_parser("bench", help="measure retrievers on a benchmark dataset")
    b.add_argument("--dataset", required=True, help="musique, hotpotqa, 2wikimultihopqa, popqa, ...")
    b.add_argument(
        "--retrievers",
        default=None,
        help=f"comma list of: {', '.join(RETRIEVERS)}; KGQA datasets (metaqa): {', '.join(KGQA_RETRIEVERS)} "
        "('-' and '_' alike; default: dense,bm25,hybrid)",
    )
    b.add_argument(
        "--qa", action="store_true", help="end-to-end QA (EM/F1/Acc) of the papers' systems with an LLM (docs/qa.md)"
    )
    b.add_argument(
        "--llm",
        default=None,
        metavar="URL|vllm:PATH|local:MODEL|ollama:MODEL[@URL]|litellm:MODEL|scripted",
        help="--qa: an OpenAI-compatible endpoint, a model for a managed `vllm serve`, an in-process model "
        "(local:smollm2), an Ollama model (ollama:smollm2:135m), a LiteLLM model string, or the scripted LLM "
        "(default: $KGRAG_LLM_BASE_URL)",
    )
    b.add_argument(
        "--llm-deadline",
        type=float,
        default=None,
        metavar="SECONDS",
        help="--qa: seconds per LLM call, retries included (HTTP backends: one attempt may use all of it)",
    )
    b.add_argument("--max-tokens", type=int, default=None, metavar="N", help="--qa: default reply budget in tokens")
    b.add_argument(
        "--passage-chars",
        type=int,
        default=None,
        metavar="N",
        help="--qa: characters of each passage a prompt shows, head and tail (default: $KGRAG_PASSAGE_CHARS or 4000)",
    )
    b.add_argument(
        "--concurrency",
        type=_int_list,
        default=[1],
        metavar="N[,N]",
        help="--qa: questions of one system in flight at once; several values (1,8) give one row each (default: 1)",
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
        "before the run stops",
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
        "--data-dir", type=Path, default=None, help="benchmark data (default: $KGRAG_DATA_DIR or ~/.cache/kgrag/data)"
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
    b.add_argument(
        "--kb-seed",
        type=int,
        default=0,
        metavar="S",
        help="KGQA with --kb-keep: the seed that picks the kept triples (another S: another half)",
    )
    b.add_argument(
        "--tune-per-hop",
        type=int,
        default=None,
        metavar="N",
        help="KGQA know3:frag: training questions per hop its merge rules are chosen on (default 1000)",
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
    _embedder_arg(b)
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
    i.add_argument(
        "--format", choices=["metaqa", "tsv", "openie", "wikidata5m"], default=None, help="the --kg file's format"
    )
    i.add_argument(
        "--on-error", choices=["skip", "raise"], default="skip", help="bad KG lines: skip and count, or stop"
    )
    i.add_argument("--entity-vectors", action="store_true", help="embed entities now (default: on first use)")
    i.add_argument(
        "--precompute",
        default="",
        metavar="KINDS",
        help="vectors to embed and store now instead of on a first query, comma-separated: entities, triples, "
        "relations, translator (default: none; see docs/scale.md, 'First query after open')",
    )
    i.add_argument(
        "--out", "--index", dest="out", type=Path, required=True, metavar="DIR", help="the index directory to write"
    )
    i.add_argument("--engine", choices=["local", "ray"], default="local", help="ray: on Ray (extra 'ray', docs/ray.md)")
    i.add_argument("--address", help="--engine ray: Ray cluster address (default: start a local Ray)")
    i.add_argument("--partitions", type=int, help="--engine ray: Ray Data blocks (default: 2 x CPUs)")
    i.add_argument("--num-cpus", type=int, help="--engine ray: CPUs of the local Ray (default: all)")
    _embedder_arg(i)
    i.set_defaults(func=_cmd_index)

    g = sub.add_parser("show-graph", help="draw an entity's neighbourhood from a saved index (PNG or HTML)")
    g.add_argument("--index", type=Path, default=None, metavar="DIR", help="the saved index (required)")
    g.add_argument("legacy_index", nargs="?", type=Path, default=None, help=argparse.SUPPRESS)  # deprecated: --index
    g.add_argument("--entity", required=True, help="entity name (or id)")
    g.add_argument("--hops", type=int, default=2, help="neighbourhood radius in hops")
    g.add_argument("--max-nodes", type=int, default=60, help="most entities drawn (the closest kept)")
    g.add_argument("--out", type=Path, required=True, help="FILE.png or FILE.html")
    g.set_defaults(func=_cmd_show_graph)

    lq = sub.add_parser("linking", help="gold-title reachability of a dataset's questions in a built graph")
    lq.add_argument("--dataset", required=True, help="comma list, e.g. musique,hotpotqa,2wikimultihopqa")
    lq.add_argument("--builder", choices=["mentions", "parsekg"], default="mentions", help="the graph builder")
    lq.add_argument("--hops", type=int, default=2, help="hops from the question's entities a gold title may be")
    lq.add_argument("--limit", type=int, default=None, help="first N questions only")
    lq.add_argument(
        "--data-dir", type=Path, default=None, help="benchmark data (default: $KGRAG_DATA_DIR or ~/.cache/kgrag/data)"
    )
    lq.add_argument(
        "--cache-dir", type=Path, default=None, help="index cache (default: $KGRAG_CACHE_DIR or .kgrag_cache)"
    )
    lq.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    lq.set_defaults(func=_cmd_linking)

    a = sub.add_parser("ask", help="retrieve evidence for a question from a saved index")
    a.add_argument("--index", type=Path, required=True, metavar="DIR", help="the saved index")
    a.add_argument(
        "--retriever",
        default="hybrid",
        type=_retriever_name,
        choices=sorted(RETRIEVERS),
        metavar="RETRIEVER",
        help=f"the retrieval method, one of: {', '.join(sorted(RETRIEVERS))} ('-' and '_' alike)",
    )
    a.add_argument("-k", type=int, default=5, help="passages (and facts) to retrieve")
    a.add_argument("--json", action="store_true", help="print the Evidence as JSON")
    a.add_argument("--draw", type=Path, default=None, help="draw the activated subgraph (FILE.png or FILE.html)")
    a.add_argument("--generate", action="store_true", help="also answer with the LLM at $KGRAG_LLM_BASE_URL")
    a.add_argument("question", help="the question (quote it)")
    a.set_defaults(func=_cmd_ask)

    from .cli_train import add_train_parser

    add_train_parser(sub)

    from .cli_models import add_model_parsers

    add_model_parsers(sub)

    from .cli_mcp import add_mcp_parser

    add_mcp_parser(sub)

    from .eval.bench_scale import add_parser as add_bench_scale

    add_bench_scale(sub)
    from .eval.bench_load import add_parser as add_bench_load

    add_bench_load(sub)
    use_formatter(p, HelpFormatter)  # every command's help shows its defaults
    return p


#: Libraries whose INFO chatter stays out of a command's output unless ``-v``.
_CHATTY = ("ray", "ray.data", "chromadb", "httpx", "httpcore", "urllib3", "transformers", "sentence_transformers")


def _configure_logging(verbosity: int) -> None:
    """Warnings only by default (ours and the libraries'); ``-v`` INFO, ``-vv`` DEBUG. A handler the
    caller installed already (a test, an application) is left as it is."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        for handler in root.handlers:  # ours: mask secrets in any library's records (httpx logs URLs)
            handler.addFilter(RedactingFilter())
    elif verbosity > 0:
        root.setLevel(level)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING if verbosity <= 0 else level)


def main(argv: list[str] | None = None) -> int:
    setup_offline_env()
    args = build_parser().parse_args(argv)
    _configure_logging(args.log_verbosity)
    embedder_env = os.environ.get("KGRAG_EMBEDDER")  # --embedder sets it for this command only
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"kgrag {args.command}: error: {redact(e)}", file=sys.stderr)
        return 2
    except LLMError as e:
        print(f"kgrag {args.command}: error: {redact(e)}", file=sys.stderr)
        return 1
    finally:
        # main() called in-process (a notebook, a test) must not leave the next index's embedder changed
        if embedder_env is None:
            os.environ.pop("KGRAG_EMBEDDER", None)
        else:
            os.environ["KGRAG_EMBEDDER"] = embedder_env


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
