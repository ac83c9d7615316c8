"""``kgrag bench``: build (or reuse) a dataset's index, run retrievers, write JSON + markdown.

Output JSON (the contract later plug-ins and reviewers rely on)::

    {"dataset", "n_questions", "corpus_size",
     "results": {RETRIEVER: {"recall@2", "recall@5", "answer_recall@5",
                             "latency_ms": {"p50", "p95"}, "index_seconds", ...,
                             "llm_usage"?: {"steps": {STEP: {"calls", "prompt_tokens",
                                            "completion_tokens", "seconds"}}, "total": {...}},
                             "per_question": [{"id", "retrieved": [passage ids, top k],
                                               "recall@2", "recall@5", "answer_hit@5"}, ...]}}}

``per_question`` lets a reader (and ``tests/test_headline_numbers.py``) recompute any figure on
any subset of the questions; ``recall@k`` is absent for a question without gold passages and
``answer_hit@5`` for one without answers.

Recall@k is HippoRAG/GFM-RAG's: the fraction of a question's gold supporting passages in
the top k, averaged over questions that have gold passages. answer_recall@5 is DPR's
has-answer over the top 5 passage texts. Latency is per ``retrieve`` call, query embedding
included, after one warm-up query per retriever.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..config import progress_enabled
from ..datasets.indexes import dataset_index
from ..datasets.loaders import Dataset, load_dataset
from ..datasets.metrics import answer_recall_at_k, mean, percentile, recall_at_k
from ..index.store import KnowledgeIndex
from ..methods.activation import ActivationRetriever
from ..methods.base import Retriever
from ..methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever
from ..methods.frag import FRAGRetriever
from ..methods.kg_infused import KGInfusedRetriever
from ..methods.sa_rag import SARAGRetriever
from ..methods.sa_rag.retriever import SPEED_MAX_EDGES
from ..methods.translator import TranslatorRetriever
from ..models.usage import LLM_USAGE_KEY, add_usage, usage_line
from ..names import resolve_name, resolve_names


def _sa_rag(index: KnowledgeIndex, dataset: str | None = None) -> Retriever:
    """SA-RAG with the paper's per-dataset k / h and no subgraph cap (docs/methods.md §4(a)-(b)); LLM-free."""
    return SARAGRetriever.for_dataset(dataset or "", index)


def _sa_rag_capped(index: KnowledgeIndex, dataset: str | None = None) -> Retriever:
    """SA-RAG as :func:`_sa_rag` plus the speed option ``max_edges=2000`` (not in the paper; tuned
    on MuSiQue, see :data:`~kgrag_plugins.methods.sa_rag.retriever.SPEED_MAX_EDGES`)."""
    r = SARAGRetriever.for_dataset(dataset or "", index, max_edges=SPEED_MAX_EDGES)
    r.name = "sa-rag-cap2000"
    return r


#: name -> (factory, build-timing keys the retriever's index parts cost, graph builder it needs).
RETRIEVERS: dict[str, tuple[Callable[[KnowledgeIndex], Retriever], tuple[str, ...], str | None]] = {
    "dense": (DenseRetriever, ("embed_passages_s", "chroma_s"), None),
    "bm25": (BM25Retriever, ("bm25_s",), None),
    "hybrid": (HybridRetriever, ("embed_passages_s", "chroma_s", "bm25_s"), None),
    "ppr": (PPRRetriever, ("embed_passages_s", "chroma_s", "graph_s"), "mentions"),
    "activation": (ActivationRetriever, ("embed_passages_s", "chroma_s", "graph_s"), "mentions"),
    "sa-rag": (_sa_rag, ("embed_passages_s", "chroma_s", "graph_s"), "mentions"),
    # the same with the subgraph capped at 2000 triples: a speed option, not the paper's
    "sa-rag-cap2000": (_sa_rag_capped, ("embed_passages_s", "chroma_s", "graph_s"), "mentions"),
    # KG-Infused RAG with paper defaults and its LLM-free substitutes (docs/methods.md §1(e))
    "kg-infused": (KGInfusedRetriever, ("embed_passages_s", "chroma_s", "graph_s"), "mentions"),
    # FRAG on a corpus graph: heuristic router, bi-encoder chain scores, passages of path entities
    "frag": (FRAGRetriever, ("embed_passages_s", "chroma_s", "graph_s"), "mentions"),
    # KG-Translator, LLM-free: clue translation into the ParseKG, tracing, MiniLM ranking
    "translator": (TranslatorRetriever, ("embed_passages_s", "chroma_s", "graph_s"), "parsekg"),
}
#: Retrievers whose paper defaults depend on the dataset (their factory takes ``dataset=``).
DATASET_AWARE = {"sa-rag", "sa-rag-cap2000", "translator"}


def _translator_llm(untuned: bool) -> Callable[..., Retriever]:
    """KG-Translator with an LM clue translator (:mod:`.translator_llm`; loaded on first use)."""

    def factory(index: KnowledgeIndex, dataset: str | None = None, **opts: Any) -> Retriever:
        from . import translator_llm as T

        return (T.translator_llm_untuned if untuned else T.translator_llm)(index, dataset, **opts)

    return factory


# the fine-tuned clue translator (model=DIR) and the base model untuned, constrained to the ParseKG by default
for _name, _untuned in (("translator-llm", False), ("translator-llm-untuned", True)):
    RETRIEVERS[_name] = (_translator_llm(_untuned), ("embed_passages_s", "chroma_s", "graph_s"), "parsekg")
    DATASET_AWARE.add(_name)


def _know3_factory(base: str) -> Callable[..., Retriever]:
    """Know³-RAG's LLM-free loop (KG-verified retrieval, docs/methods.md §5(e)) around ``base``; the
    KGE of the index graph is loaded or trained on first use (``prepare``)."""

    def factory(index: KnowledgeIndex, dataset: str | None = None, **opts: Any) -> Retriever:
        from ..methods.know3 import Know3Retriever

        make = RETRIEVERS[base][0]
        inner = make(index, dataset=dataset or "") if base in DATASET_AWARE else make(index)
        return Know3Retriever(index, inner, name="know3" if base == "activation" else f"know3:{base}", **opts)

    return factory


# ``know3`` wraps activation; ``know3:<base>`` any corpus retriever above (the verifier needs a graph:
# bases without one read the ``mentions`` index, which holds the same passages and vectors).
for _base in [r for r in RETRIEVERS if not r.startswith("translator-llm")]:  # (an LM translator: no wrapper)
    _parts, _builder = RETRIEVERS[_base][1], RETRIEVERS[_base][2] or "mentions"
    _parts = _parts + (("graph_s",) if "graph_s" not in _parts else ())
    RETRIEVERS[f"know3:{_base}"] = (_know3_factory(_base), _parts, _builder)
    DATASET_AWARE.add(f"know3:{_base}")
RETRIEVERS["know3"] = (_know3_factory("activation"), RETRIEVERS["activation"][1], "mentions")
DATASET_AWARE.add("know3")


def parse_retriever_opts(specs: Sequence[str], known: Sequence[str] = ()) -> dict[str, dict[str, list[Any]]]:
    """``["translator.alpha=1,3,5", "translator.beta=1,3"]`` -> ``{"translator": {"alpha": [1, 3, 5],
    "beta": [1, 3]}}`` (values parsed as int, float, true/false, none, else kept as strings).
    A name spelling one of ``known`` with ``_`` for ``-`` (``kg_infused.rounds=2``) is keyed by
    the ``known`` spelling."""
    out: dict[str, dict[str, list[Any]]] = {}
    usage = "use RETRIEVER.OPTION=V1[,V2...], e.g. translator.alpha=1,3,5"
    for spec in specs:
        if not isinstance(spec, str):
            raise ValueError(f"--retriever-opt {spec!r}: expected a string; {usage}")
        name, sep, rest = spec.partition(".")
        key, eq, values = rest.partition("=")
        name, key = name.strip(), key.strip()
        if not (sep and eq and name and key and values):
            raise ValueError(f"--retriever-opt {spec!r}: {usage}")
        if not key.isidentifier():
            raise ValueError(f"--retriever-opt {spec!r}: the option name {key!r} is not a Python identifier; {usage}")
        parsed = [_opt_value(v.strip()) for v in values.split(",") if v.strip()]
        if not parsed:
            raise ValueError(f"--retriever-opt {spec!r}: no values after '='; {usage}")
        out.setdefault(resolve_name(name, known), {})[key] = parsed
    return out


def build_with_opts(label: str, combo: Mapping[str, Any], build: Callable[[], Any]) -> Any:
    """``build()`` for a run with ``--retriever-opt`` values ``combo``: a ``TypeError`` or
    ``ArithmeticError`` (an option the method does not take, a value of the wrong type or range,
    e.g. ``hybrid.rrf_k=-1``) becomes a one-line ``ValueError`` naming the run; without options
    errors pass unchanged."""
    try:
        return build()
    except (TypeError, ArithmeticError) as e:
        if not combo:
            raise
        raise ValueError(
            f"--retriever-opt {label}: {type(e).__name__}: {e} (check the option names and value types)"
        ) from e


def _opt_value(v: str) -> Any:
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    if v.lower() in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def _opt_grid(opts: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the option values (one empty dict when there are none)."""
    grid: list[dict[str, Any]] = [{}]
    for key, values in opts.items():
        grid = [{**g, key: v} for g in grid for v in values]
    return grid


K_VALUES = (2, 5)


def evaluate_retriever(retriever: Retriever, dataset: Dataset, *, k: int = 5, progress: bool = True) -> dict[str, Any]:
    """Recall@2/@5, answer_recall@5 and latency of one retriever over a dataset's questions."""
    questions = dataset.questions
    if questions:
        retriever.retrieve(questions[0].question, k)  # warm-up (lazy loads, caches)
        reset = getattr(retriever, "bench_reset", None)  # counters that must not include the warm-up
        if callable(reset):
            reset()
    recalls: dict[int, list[float]] = {kk: [] for kk in K_VALUES}
    answer_recall: list[float] = []
    latencies: list[float] = []
    components: dict[str, list[float]] = {}
    returned: list[int] = []
    turns: list[int] = []  # Know³: the turn at which each question's loop stopped
    per_question: list[dict[str, Any]] = []
    usage: dict[str, Any] | None = None  # LLM calls / tokens / seconds per step, summed over questions
    no_gold = 0
    for q in tqdm(questions, desc=f"{retriever.name}", disable=not progress_enabled(progress), leave=False):
        t0 = time.perf_counter()
        ev = retriever.retrieve(q.question, k)
        latencies.append((time.perf_counter() - t0) * 1000)
        for comp, ms in (ev.trace.get("timings") or {}).items() if isinstance(ev.trace, dict) else ():
            components.setdefault(comp, []).append(float(ms))
        if isinstance(ev.trace, dict):
            usage = add_usage(usage, ev.trace.get(LLM_USAGE_KEY))
        ids = ev.passage_ids
        returned.append(len(ids))
        k3 = ev.trace.get("know3") if isinstance(ev.trace, dict) else None
        if isinstance(k3, dict) and "final_turn" in k3:
            turns.append(int(k3["final_turn"]))
        row: dict[str, Any] = {"id": q.id, "retrieved": list(ids[:k])}
        if q.supporting_passage_ids:
            for kk in K_VALUES:
                recalls[kk].append(recall_at_k(ids, q.supporting_passage_ids, kk))
                row[f"recall@{kk}"] = round(recalls[kk][-1], 4)
        else:
            no_gold += 1
        if q.answers:
            answer_recall.append(answer_recall_at_k([sp.passage.text for sp in ev.passages], q.answers, 5))
            row["answer_hit@5"] = bool(answer_recall[-1])
        per_question.append(row)
    out: dict[str, Any] = {f"recall@{kk}": round(mean(v), 4) for kk, v in recalls.items()}
    out["answer_recall@5"] = round(mean(answer_recall), 4)
    out["latency_ms"] = {"p50": round(percentile(latencies, 50), 2), "p95": round(percentile(latencies, 95), 2)}
    out["n_scored"] = len(recalls[K_VALUES[0]])
    # methods without a top-k cut (SA-RAG's thresholds) may return fewer than k passages
    out["passages_returned_p50"] = float(np.median(returned)) if returned else 0.0
    if no_gold:
        out["n_without_gold"] = no_gold
    if turns:  # Know³ Table 5: share of questions whose loop stopped at turn t
        counts = {f"t={t}": turns.count(t) for t in range(max(turns) + 1)}
        out["turns"] = {t: round(n / len(turns), 4) for t, n in counts.items()}
        out["turn_counts"] = counts
    if components:  # per-component latency (KG-Translator Table 9): mean ms over questions
        n = max(len(questions), 1)
        out["component_ms"] = {c: round(sum(v) / n, 2) for c, v in components.items()}
    if usage is not None:
        out[LLM_USAGE_KEY] = usage
    out["per_question"] = per_question
    return out


def llm_usage_total(report: dict[str, Any]) -> dict[str, Any] | None:
    """The ``llm_usage`` totals of a bench report's rows summed (``None``: no row called an LLM)."""
    usage = None
    for r in (report.get("results") or {}).values():
        if isinstance(r, dict):
            usage = add_usage(usage, {"total": (r.get(LLM_USAGE_KEY) or {}).get("total") or {}})
    total = (usage or {}).get("total") or {}
    return total if total.get("calls") else None


def llm_usage_summary(report: dict[str, Any]) -> str:
    """``kgrag bench``'s closing line: LLM calls, prompt / completion tokens and seconds in LLM
    calls over all rows (``""`` when no LLM was called)."""
    total = llm_usage_total(report)
    return usage_line(total) if total else ""


def run_bench(
    dataset: str,
    retrievers: Sequence[str],
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    out: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    per_hop: int = 300,
    train_per_hop: int | None = None,
    labels: str = "dataset",
    retriever_opts: Sequence[str] = (),
    kb_keep: float = 1.0,
    kb_seed: int = 0,
    tune_per_hop: int | None = None,
    slice_corpus: bool = False,
) -> dict[str, Any]:
    """Run ``retrievers`` on ``dataset``; write JSON to ``out`` (if given) and return it.

    ``slice_corpus`` (with ``limit``) retrieves from the kept questions' candidate paragraphs only
    (:func:`~kgrag_plugins.datasets.loaders.load_dataset`): a small, fixed slice of a benchmark
    whose indexes build in seconds (what ``tests/test_headline_numbers.py`` recomputes).

    ``retriever_opts`` (``"translator.alpha=1,3,5"``) runs the named retriever once per
    combination of option values, reported as ``translator[alpha=1]`` ... (an α/β sweep in one run).

    KGQA datasets (a KG and no corpus, e.g. ``metaqa``) go to
    :func:`~kgrag_plugins.eval.kgqa.run_kgqa_bench` (``per_hop`` / ``train_per_hop``, default
    ``kgqa.TRAIN_PER_HOP``, and the hop
    classifier's training ``labels``, ``"dataset"`` or ``"hmin"``, and ``kb_keep``, the fraction
    of the KB's triples kept, chosen with ``kb_seed``, and ``tune_per_hop``, the training questions
    per hop ``know3:frag`` chooses its merge rules on, apply there)."""
    if not retrievers:
        raise ValueError("no retrievers given")
    ds0 = load_dataset(dataset, data_dir=data_dir, limit=limit, slice_corpus=slice_corpus)
    if ds0.corpus is None and ds0.kb_path is not None:
        from .kgqa import TRAIN_PER_HOP, run_kgqa_bench

        report = run_kgqa_bench(
            ds0, retrievers, per_hop=per_hop, train_per_hop=TRAIN_PER_HOP if train_per_hop is None else train_per_hop,
            progress=progress, labels=labels, kb_keep=kb_keep, kb_seed=kb_seed, cache_dir=cache_dir,
            tune_per_hop=tune_per_hop,
        )  # fmt: skip
        _write(report, out)
        return report
    if ds0.corpus is None:
        raise ValueError(f"{dataset} has neither a corpus nor a knowledge graph to retrieve from")
    retrievers = resolve_names(retrievers, RETRIEVERS)  # kg_infused -> kg-infused
    unknown = [r for r in retrievers if r not in RETRIEVERS]
    if unknown:
        raise ValueError(f"unknown retriever(s) {unknown}; available: {', '.join(RETRIEVERS)}")
    ds = ds0
    t0 = time.perf_counter()
    index, reused = dataset_index(ds, cache_dir=cache_dir, progress=progress)
    indexes: dict[str | None, KnowledgeIndex] = {None: index}
    report: dict[str, Any] = {
        "dataset": ds.name,
        "n_questions": len(ds.questions),
        "corpus_size": len(index.passages),
        "corpus": "the questions' candidate paragraphs" if slice_corpus else "whole split",
        "embedder": index.embedder.name,
        "index_path": str(index.path),
        "index_reused": reused,
        "index_open_or_build_seconds": round(time.perf_counter() - t0, 2),
        "results": {},
    }
    opts = parse_retriever_opts(retriever_opts, retrievers)
    for name in [n for n in opts if n not in retrievers]:
        raise ValueError(f"--retriever-opt names {name!r}, which is not among --retrievers")
    for name in retrievers:
        factory, parts, builder = RETRIEVERS[name]
        if builder not in indexes:
            indexes[builder], _ = dataset_index(ds, cache_dir=cache_dir, builder=builder, progress=progress)
            report.setdefault("graphs", {})[builder] = {
                "counts": indexes[builder].counts,
                "graph_s": round(indexes[builder].manifest["timings"].get("graph_s", 0.0), 2),
            }
        idx = indexes[builder]
        # a graph index reuses the plain index's passage vectors: their cost is in its manifest
        timings = {**index.manifest.get("timings", {}), **idx.manifest.get("timings", {})}
        for combo in _opt_grid(opts.get(name, {})):
            kw = {"dataset": ds.name} if name in DATASET_AWARE else {}
            label = name + ("[" + ",".join(f"{k}={v}" for k, v in combo.items()) + "]" if combo else "")
            t_init = time.perf_counter()
            retriever = build_with_opts(label, combo, lambda: factory(idx, **kw, **combo))
            prepare = getattr(retriever, "prepare", None)
            prepared = prepare() if callable(prepare) else None  # one-off derived indexes
            init_s = time.perf_counter() - t_init
            try:
                result = build_with_opts(label, combo, lambda: evaluate_retriever(retriever, ds, progress=progress))
                extras = getattr(retriever, "bench_extras", None)  # e.g. translator-llm's kg_valid_share
                if callable(extras):
                    result.update(extras())
            finally:
                close = getattr(retriever, "close", None)  # a managed server (translator-llm backend=vllm)
                if callable(close):
                    close()
            # Build cost of the index parts this retriever reads, measured when the index was built.
            result["index_seconds"] = round(sum(float(timings.get(p, 0.0)) for p in parts), 2)
            if prepared:
                result["prepare"] = prepared
                result["prepare_seconds"] = round(init_s, 2)
            if builder:
                result["builder"] = builder
            report["results"][label] = result
    _write(report, out)
    return report


def _write(report: dict[str, Any], out: str | Path | None) -> None:
    if out:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(json.dumps(report, indent=2), encoding="utf-8")
        tmp.replace(out)


def markdown_table(report: dict[str, Any]) -> str:
    """A retrieval or KGQA report as a markdown table (one row per retriever); a QA report's table is
    :func:`~kgrag_plugins.eval.qa.qa_markdown_table`."""
    if report.get("task") == "kgqa":
        from .kgqa import kgqa_markdown_table

        return kgqa_markdown_table(report)
    if report.get("task") == "qa":  # qa sits above this module: it reads RETRIEVERS and run_bench's helpers
        raise ValueError("a `kgrag bench --qa` report: render it with kgrag_plugins.eval.qa.qa_markdown_table")
    head = (
        f"**{report['dataset']}**: {report['n_questions']} questions, {report['corpus_size']} passages\n\n"
        "| retriever | Recall@2 | Recall@5 | AnswerRecall@5 | p50 ms | p95 ms | index s |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {name} | {r['recall@2']:.3f} | {r['recall@5']:.3f} | {r['answer_recall@5']:.3f} | "
        f"{r['latency_ms']['p50']:.1f} | {r['latency_ms']['p95']:.1f} | {r['index_seconds']:.1f} |"
        for name, r in report["results"].items()
    ]
    return head + "\n".join(rows) + "\n" + _component_table(report) + _turn_table(report)


def _turn_table(report: dict[str, Any]) -> str:
    """Know³ turn distribution (paper Table 5): share of questions output at turn t."""
    with_t = {n: r["turns"] for n, r in report["results"].items() if r.get("turns")}
    if not with_t:
        return ""
    cols = sorted({t for v in with_t.values() for t in v}, key=lambda x: int(x.split("=")[1]))
    head = "\n| retriever | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols) + "\n"
    rows = [f"| {n} | " + " | ".join(f"{v.get(c, 0.0):.3f}" for c in cols) + " |" for n, v in with_t.items()]
    return head + "\n".join(rows) + "\n"


def _component_table(report: dict[str, Any]) -> str:
    """Per-component mean latency (ms) of retrievers that report ``trace["timings"]``."""
    with_c = {n: r["component_ms"] for n, r in report["results"].items() if r.get("component_ms")}
    if not with_c:
        return ""
    comps = list(dict.fromkeys(c for v in with_c.values() for c in v))
    head = "\n| retriever | " + " | ".join(comps) + " |\n|---|" + "---|" * len(comps) + "\n"
    rows = [f"| {n} | " + " | ".join(f"{v.get(c, 0.0):.1f}" for c in comps) + " |" for n, v in with_c.items()]
    return head + "\n".join(rows) + "\n"
