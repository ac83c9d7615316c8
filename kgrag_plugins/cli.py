"""Command line: ``kgrag demo | bench | index | ask``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .config import setup_offline_env


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(sys.stdout, index_dir=args.index_dir, k=args.k)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .eval.bench import markdown_table, run_bench

    retrievers = [r.strip() for r in args.retrievers.split(",") if r.strip()]
    report = run_bench(
        args.dataset,
        retrievers,
        data_dir=args.data_dir,
        limit=args.limit,
        out=args.out,
        cache_dir=args.cache_dir,
        progress=not args.quiet,
    )
    print(markdown_table(report))
    if args.out:
        print(f"wrote {args.out}")
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    from .eval.datasets import load_corpus_jsonl
    from .index.store import KnowledgeIndex

    passages = load_corpus_jsonl(args.corpus)
    index = KnowledgeIndex.build(passages, args.out, settings={"corpus": str(args.corpus)}, progress=True)
    print(json.dumps({"path": str(index.path), "counts": index.counts, "timings": index.manifest["timings"]}, indent=2))
    return 0


def _cmd_ask(args: argparse.Namespace) -> int:
    from .eval.bench import RETRIEVERS
    from .index.store import KnowledgeIndex

    index = KnowledgeIndex.open(args.index)
    retriever = RETRIEVERS[args.retriever][0](index)
    ev = retriever.retrieve(args.question, args.k)
    if args.json:
        print(json.dumps(ev.to_dict(), indent=2, ensure_ascii=False))
        return 0
    for sp in ev.passages:
        print(f"{sp.score:8.4f}  [{sp.passage.id}] {sp.passage.title}: {sp.passage.text[:160]}")
    if args.generate:
        from .methods.answer import generate_answer
        from .models.llm import OpenAICompatibleLLM

        print("answer:", generate_answer(OpenAICompatibleLLM.from_env(), args.question, ev).text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .eval.bench import RETRIEVERS

    p = argparse.ArgumentParser(prog="kgrag", description="Knowledge-graph RAG plug-ins: demo, benchmarks, indexing.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="index the bundled sample corpus and answer its questions (offline)")
    d.add_argument("--index-dir", type=Path, default=None, help="keep the demo index here (default: a temp dir)")
    d.add_argument("-k", type=int, default=3, help="passages shown per retriever")
    d.set_defaults(func=_cmd_demo)

    b = sub.add_parser("bench", help="measure retrievers on a benchmark dataset")
    b.add_argument("--dataset", required=True, help="musique, hotpotqa, 2wikimultihopqa, popqa, ...")
    b.add_argument("--retrievers", default="dense,bm25,hybrid", help=f"comma list of: {', '.join(RETRIEVERS)}")
    b.add_argument(
        "--data-dir", type=Path, default=None, help="benchmark data (default: $KGRAG_DATA_DIR or ../shared/data)"
    )
    b.add_argument("--limit", type=int, default=None, help="first N questions only")
    b.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    b.add_argument(
        "--cache-dir", type=Path, default=None, help="index cache (default: $KGRAG_CACHE_DIR or .kgrag_cache)"
    )
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=_cmd_bench)

    i = sub.add_parser("index", help="build a knowledge index from a corpus JSONL ({id,title,text} per line)")
    i.add_argument("--corpus", type=Path, required=True)
    i.add_argument("--out", type=Path, required=True)
    i.set_defaults(func=_cmd_index)

    a = sub.add_parser("ask", help="retrieve evidence for a question from a saved index")
    a.add_argument("--index", type=Path, required=True)
    a.add_argument("--retriever", default="hybrid", choices=sorted(RETRIEVERS))
    a.add_argument("-k", type=int, default=5)
    a.add_argument("--json", action="store_true", help="print the Evidence as JSON")
    a.add_argument("--generate", action="store_true", help="also answer with the LLM at $KGRAG_LLM_BASE_URL")
    a.add_argument("question")
    a.set_defaults(func=_cmd_ask)
    return p


def main(argv: list[str] | None = None) -> int:
    setup_offline_env()
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"kgrag {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
