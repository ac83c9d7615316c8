"""``kgrag demo``: index the bundled sample corpus and answer its questions, fully offline.

The sample corpus (``kgrag_plugins/data/sample_corpus.jsonl``) was written for this project:
69 short encyclopedic paragraphs about scientists, composers, cities, rivers and universities.
Its 28 questions (``sample_questions.jsonl``) are multi-hop in the MuSiQue / 2WikiMultihopQA
manner: 21 two-hop and 4 three-hop compositional questions that name the first entity while
the bridge passage is reached only through an entity named in the first one (it shares few
words with the question), 2 comparisons and 1 one-hop control. Distractor passages share the
questions' surface words without being on the answer path (Irène Joliot-Curie beside Marie
Curie, Michael Haydn beside Joseph Haydn, Trinity College Dublin beside Trinity College,
Cambridge, Frankfurt (Oder) beside Frankfurt am Main, the University of Padua for Galileo).
Gold = every supporting passage; the demo reports mean Recall@k of each retriever on it.

Twenty-eight questions are too few to rank methods, so the summary prints, beside the
sample's means, the Recall@2 / Recall@5 measured on the real datasets. Those are read at run
time from the committed benchmark reports ``docs/benchmarks/*.json`` when the source tree is
there, else from ``kgrag_plugins/data/benchmarks_summary.json``, a copy of their numbers that
ships with the package (regenerate it with ``python benchmarks/demo_summary.py`` after
re-measuring; the reports carry no date, so that script records each report's git commit
date); if neither is found the demo prints one line pointing to the README's tables.

The ``mentions`` graph's relation texts are masked sentences (``##`` for each entity mention);
the demo prints facts with the source sentence filled back in (:func:`readable_fact`). With
``KGRAG_LLM_BASE_URL`` set the demo also generates answers with that OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .config import env
from .datasets.loaders import Question, bundled_file, load_questions_jsonl, sample_corpus, sample_questions
from .datasets.metrics import recall_at_k
from .index.store import KnowledgeIndex
from .methods.activation import ActivationRetriever
from .methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever
from .methods.facts import readable_facts, unmask_sentence
from .methods.frag import FRAGRetriever
from .methods.kg_infused import KGInfusedRetriever
from .methods.sa_rag import SARAGRetriever
from .types import Fact

#: the real-dataset columns of the summary, in print order (multi-hop sets first)
BENCHMARK_DATASETS = ("musique", "2wikimultihopqa", "hotpotqa", "popqa")
BENCHMARKS_SUMMARY = "benchmarks_summary.json"
_ROOT = Path(__file__).resolve().parents[1]
#: ``docs/benchmarks`` of a source checkout (``None`` in an installed package)
_REPO_BENCHMARKS = _ROOT / "docs" / "benchmarks" if (_ROOT / "pyproject.toml").is_file() else None


def sample_kg_path() -> Path:
    """The bundled sample KG (``subject|relation|object`` lines, MetaQA format), written for
    this project from the sample corpus's facts."""
    return Path(str(resources.files("kgrag_plugins") / "data" / "sample_kg.txt"))


def sample_kgqa() -> list[Question]:
    """KGQA questions over the sample KG (``[bracketed]`` topic entities, hop counts)."""
    with bundled_file("sample_kgqa.jsonl") as p:
        return load_questions_jsonl(p)


# --------------------------------------------------------------------------- benchmark numbers
def summarize_benchmark_report(report: dict[str, Any]) -> dict[str, Any] | None:
    """The numbers the demo shows from one ``kgrag bench`` JSON report: per retriever Recall@2 /
    Recall@5 (passage benchmarks) or hits@1 (KGQA), plus the dataset and its size. ``None`` for
    other JSON (graph-build timings, linking statistics, scale runs) and for a sliced corpus
    (``kgrag bench --slice-corpus``: the fixed slice ``make test`` recomputes, not a headline)."""
    results = report.get("results")
    if not isinstance(results, dict) or "dataset" not in report:
        return None
    if report.get("corpus", "whole split") != "whole split":
        return None
    keys = ("hits@1",) if report.get("task") == "kgqa" else ("recall@2", "recall@5")
    rows = {
        name: {key: r[key] for key in keys}
        for name, r in results.items()
        if isinstance(r, dict) and all(key in r for key in keys)
    }
    if not rows:
        return None
    return {
        "dataset": report["dataset"],
        "task": report.get("task", "passages"),
        "n_questions": report.get("n_questions"),
        "corpus_size": report.get("corpus_size"),
        "embedder": report.get("embedder"),
        "results": rows,
    }


def summarize_benchmark_dir(directory: str | Path) -> dict[str, dict[str, Any]]:
    """:func:`summarize_benchmark_report` of every ``*.json`` in ``directory``, keyed by file name."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(directory).glob("*.json")):
        try:
            summary = summarize_benchmark_report(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        if summary is not None:
            out[path.name] = summary
    return out


def _packaged_summary() -> dict[str, Any] | None:
    try:
        text = (resources.files("kgrag_plugins") / "data" / BENCHMARKS_SUMMARY).read_text(encoding="utf-8")
        return json.loads(text)
    except (OSError, ValueError):
        return None


def benchmark_numbers(repo_dir: str | Path | None = _REPO_BENCHMARKS) -> dict[str, Any] | None:
    """The real-dataset numbers: ``{"source": str, "files": {name: summary + "committed"}}``.

    Read from the committed reports in ``repo_dir`` (``docs/benchmarks`` of a source checkout)
    when it holds any, else from the copy packaged as ``kgrag_plugins/data/benchmarks_summary.json``;
    ``None`` when neither is there. The reports carry no date: ``committed`` (the report's git
    commit date, ``YYYY-MM-DD``) comes from the packaged copy, and only where its numbers equal
    the report's (``None`` otherwise)."""
    packaged = _packaged_summary()
    packaged_files = (packaged or {}).get("files", {})
    live = summarize_benchmark_dir(repo_dir) if repo_dir is not None and Path(repo_dir).is_dir() else {}
    if live:
        files = {}
        for name, summary in live.items():
            known = packaged_files.get(name, {})
            same = {k: v for k, v in known.items() if k != "committed"} == summary
            files[name] = {**summary, "committed": known.get("committed") if same else None}
        return {"source": "docs/benchmarks/*.json", "files": files}
    if packaged_files:
        return {
            "source": f"kgrag_plugins/data/{BENCHMARKS_SUMMARY}, a copy of docs/benchmarks/*.json",
            "files": packaged_files,
        }
    return None


def _by_dataset(files: dict[str, dict[str, Any]], task: str) -> dict[str, dict[str, Any]]:
    """Merge the per-file summaries into ``{dataset: {"size": ..., "results": {retriever: ...}}}``
    (a retriever measured in several reports keeps its first, by file name)."""
    merged: dict[str, dict[str, Any]] = {}
    for name in sorted(files):
        f = files[name]
        if f.get("task", "passages") != task:
            continue
        d = merged.setdefault(f["dataset"], {"n_questions": f.get("n_questions"), "corpus_size": f.get("corpus_size")})
        for retriever, row in f["results"].items():
            d.setdefault("results", {}).setdefault(retriever, row)
    return merged


def _dates(files: Iterable[dict[str, Any]]) -> str:
    dates = [f.get("committed") for f in files]
    if not dates or any(d is None for d in dates):
        return "dates: the reports record none; see `git log docs/benchmarks`"
    lo, hi = min(dates), max(dates)
    return f"committed {lo}" if lo == hi else f"committed {lo} to {hi}"


def _print_summary(out: TextIO, summary: dict[str, float], questions: Sequence[Question], k: int) -> None:
    n = len(questions)
    kinds = Counter(
        "comparison"
        if q.type == "comparison"
        else {1: "one-hop", 2: "two-hop", 3: "three-hop"}.get(q.hops or 0, "other")
        for q in questions
    )
    mix = ", ".join(f"{kinds[c]} {c}" for c in ("two-hop", "three-hop", "comparison", "one-hop", "other") if kinds[c])
    bench = benchmark_numbers()
    if bench is None:
        print(f"Mean recall@{k} over {n} sample questions ({mix}; * marks gold passages):", file=out)
        for name, v in summary.items():
            print(f"  {name:10s} {v:.3f}", file=out)
        print(
            "Real-dataset numbers (MuSiQue, 2WikiMultihopQA, HotpotQA, PopQA) are in the README's benchmark "
            "tables and docs/benchmarks/*.json of the source repository.",
            file=out,
        )
        return
    data = _by_dataset(bench["files"], "passages")
    cols = [d for d in BENCHMARK_DATASETS if d in data] + sorted(set(data) - set(BENCHMARK_DATASETS))
    used = [f for f in bench["files"].values() if f.get("task", "passages") == "passages" and f["dataset"] in cols]
    embedders = sorted({f["embedder"] for f in used if f.get("embedder")})
    print(f"Mean recall@{k} over {n} sample questions ({mix}; * marks gold passages),", file=out)
    print("beside Recall@2 / Recall@5 measured on the real datasets (questions / passages):", file=out)
    sizes = [f"({data[c].get('n_questions')}/{data[c].get('corpus_size')})" for c in cols]
    widths = [max(len(c), len(s), 11) for c, s in zip(cols, sizes)]

    def row(first: str, second: str, cells: Sequence[str]) -> None:
        print(
            f"  {first:10s} {second:>7s} |" + "".join(f"  {c:<{w}s}" for c, w in zip(cells, widths)).rstrip(), file=out
        )

    row("", "sample", cols)
    row("", f"R@{k}", sizes)
    for name, v in summary.items():
        results = [data[c].get("results", {}).get(name) for c in cols]
        row(name, f"{v:.3f}", [f"{r['recall@2']:.3f}/{r['recall@5']:.3f}" if r else "-" for r in results])
    print(
        f"Real-dataset numbers: {bench['source']} ({', '.join(embedders) or 'embedder not recorded'}, "
        f"LLM-free; {_dates(used)}).",
        file=out,
    )
    print(
        f"The sample's {n} questions show how each method finds (or misses) a bridge passage; one question\n"
        f"moves a mean by up to {1 / n:.3f}, so compare methods by the real-dataset columns.",
        file=out,
    )


def _kgqa_benchmark_lines() -> list[str]:
    """FRAG's hits@1 on the real KGQA sets (zero-shot as in the demo, and trained)."""
    bench = benchmark_numbers()
    lines = []
    for name, f in sorted((bench or {"files": {}})["files"].items()):
        res = f["results"]
        if f.get("task") == "kgqa" and all(r in res for r in ("frag-zeroshot", "frag")):
            shown = [f"zero-shot {res['frag-zeroshot']['hits@1']:.3f}", f"trained {res['frag']['hits@1']:.3f}"]
            where = f"docs/benchmarks/{name}" if bench["source"].startswith("docs/") else bench["source"].split(",")[0]
            lines.append(
                f"FRAG hits@1 on {f['dataset']} ({f.get('n_questions')} questions): {', '.join(shown)} "
                f"({where}, {_dates([f])})"
            )
    return lines


# --------------------------------------------------------------------------- readable facts
def readable_fact(index: KnowledgeIndex, fact: Fact) -> str:
    """A fact for people: ``head -> tail: "source sentence"`` for a triple whose relation is a
    masked sentence (:func:`~kgrag_plugins.methods.facts.readable_facts`, which every retriever
    already ran on the facts it returns; this fills a fact built by hand the same way, on a copy)."""
    if "masked" in fact.data:
        return fact.text
    return readable_facts([Fact(fact.text, fact.kind, fact.score, dict(fact.data))], index)[0].text


def _readable_path(index: KnowledgeIndex, fact: Fact) -> tuple[str, list[str]]:
    """A FRAG path as its entity chain plus one readable line per masked-sentence hop."""
    graph, store = index.graph, index.passages
    nodes, rels = fact.data.get("nodes", []), fact.data.get("relations", [])
    inverse = fact.data.get("inverse") or [False] * len(rels)
    names = [graph.name_of(n) for n in nodes]
    chain = names[0] if names else fact.text
    hops = []
    for i, (rel, back) in enumerate(zip(rels, inverse)):
        chain += f" {'<-' if back else '->'} {names[i + 1]}"
        if "##" in rel:
            shared = set(graph.passages_of(nodes[i])) & set(graph.passages_of(nodes[i + 1]))
            sentence = unmask_sentence(rel, [store.get(p).text for p in sorted(shared) if p in store])
            hops.append(f'{names[i]} - {names[i + 1]}: "{sentence}"' if sentence else rel.replace("##", "…"))
        else:
            hops.append(f"{names[i]} {'<-' if back else '->'} {rel} {'<-' if back else '->'} {names[i + 1]}")
    return chain, hops


# --------------------------------------------------------------------------- the demo
class _QuietEmbedder:
    """The demo's embedder: the default one with progress bars off (the vectors it computes on
    first use would otherwise draw bars on stderr between the demo's lines)."""

    def __init__(self, inner) -> None:
        self._inner, self.name, self.dim = inner, inner.name, inner.dim

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        return self._inner.embed(texts, progress=False)


def _short(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _print_activation(index: KnowledgeIndex, ev, out: TextIO) -> None:
    """The explainable part of a spreading-activation trace: sources, activated entities, facts."""
    t = ev.trace
    seeds = ", ".join(f"{s['name']} ({s['weight']:.2f})" for s in t.get("seeds", [])) or "none linked"
    print(f"     trace: question entities: {seeds}; dense passage sources: {len(t.get('passage_seeds', []))}", file=out)
    acts = ", ".join(f"{a['name']} {a['activation']:.2f}" for a in t.get("activated", [])[:6])
    print(f"     activated: {acts}", file=out)
    for f in ev.facts[:3]:
        print(f"     fact: {_short(readable_fact(index, f), 130)}", file=out)


#: Questions the default (quiet) demo shows in full: a one-hop question and a bridge question.
QUIET_QUESTIONS = 2


def _shown_questions(questions: Sequence[Question], verbose: bool) -> set[str]:
    """Ids whose evidence is printed: all (``verbose``), else the first one-hop and the first bridge."""
    if verbose:
        return {q.id for q in questions}
    one = next((q for q in questions if (q.hops or 0) <= 1 and q.type != "comparison"), None)
    bridge = next((q for q in questions if (q.hops or 0) >= 2 and q.type != "comparison"), None)
    picked = [q for q in (one, bridge) if q is not None] or list(questions[:QUIET_QUESTIONS])
    return {q.id for q in picked[:QUIET_QUESTIONS]}


def _print_evidence(index: KnowledgeIndex, r, ev, q: Question, rec: float, k: int, out: TextIO) -> None:
    """One retriever's evidence for one question: its passages (``*`` = gold) and what it found."""
    print(f"  [{r.name}] recall@{k}={rec:.2f}   scores: {ev.score_kind or 'method score'}", file=out)
    for sp in ev.passages:
        mark = "*" if sp.passage.id in q.supporting_passage_ids else " "
        print(f"   {mark} {sp.score:7.3f}  {sp.passage.title}: {_short(sp.passage.text)}", file=out)
    if r.name == "activation":
        _print_activation(index, ev, out)
    elif r.name == "sa-rag":
        acts = ", ".join(f"{n} {v:.2f}" for n, v in list(ev.trace.get("activation", {}).items())[:6])
        print(f"     seeds: {', '.join(s['name'] for s in ev.trace.get('seeds', []))}; activated: {acts}", file=out)
    elif r.name == "kg-infused":
        added = "; ".join(readable_fact(index, f) for f in ev.facts[:2]) or "nothing"
        print(f"     query expanded with: {_short(added, 130)}", file=out)
    elif r.name == "frag":
        paths = [f for f in ev.facts if f.kind == "path"]
        if paths:
            chain, hops = _readable_path(index, paths[0])
            print(f"     route: {ev.trace.get('route')}; top path: {_short(chain, 100)}", file=out)
            for hop in hops[:2]:
                print(f"       {_short(hop, 130)}", file=out)
        else:
            print(f"     route: {ev.trace.get('route')}; {ev.trace.get('error', 'no path')}", file=out)


def run_demo(
    out: TextIO, *, index_dir: str | Path | None = None, k: int = 3, llm=None, verbose: bool = False
) -> dict[str, float]:
    """Build the sample index (with its mentions graph), run every retriever on every sample question,
    print evidence: for two questions (a one-hop and a bridge) by default, for all with ``verbose``.

    Returns mean Recall@k per retriever (the demo's own sanity check).
    """
    from .models.embed import default_embedder

    corpus, questions = sample_corpus(), sample_questions()
    embedder = _QuietEmbedder(default_embedder())
    with tempfile.TemporaryDirectory(prefix="kgrag-demo-") as tmp:
        path = Path(index_dir) if index_dir else Path(tmp) / "index"
        t0 = time.perf_counter()
        index = KnowledgeIndex.build(
            corpus, path, builder="mentions", embedder=embedder, settings={"corpus": "kgrag sample"}, progress=False
        )
        print(f"Indexed {len(corpus)} sample passages in {time.perf_counter() - t0:.1f}s -> {index!r}\n", file=out)
        if llm is None and env("LLM_BASE_URL"):
            from .models.llm import OpenAICompatibleLLM

            llm = OpenAICompatibleLLM.from_env()
            print(f"Generating answers with {llm!r}\n", file=out)
        print(
            "Knowledge graph (LLM-free `mentions` builder: titles + spaCy NER, sentence co-occurrence): "
            f"{index.graph.num_entities} entities, {index.graph.num_triples} triples. To look at it:\n"
            f"  kgrag show-graph --index {path if index_dir else 'DIR'} --entity 'Marie Curie' --out curie.html"
            + ("" if index_dir else "   (after `kgrag demo --index DIR`)")
            + "\n",
            file=out,
        )
        retrievers = [
            DenseRetriever(index),
            BM25Retriever(index),
            HybridRetriever(index),
            PPRRetriever(index),
            ActivationRetriever(index),
            SARAGRetriever(index),
            KGInfusedRetriever(index),
            FRAGRetriever(index),
        ]
        shown = _shown_questions(questions, verbose)
        if not verbose:
            print(
                f"Evidence for {len(shown)} of the {len(questions)} sample questions (`kgrag demo --verbose`: all):\n",
                file=out,
            )
        recalls: dict[str, list[float]] = {r.name: [] for r in retrievers}
        for q in questions:
            show = q.id in shown
            if show:
                kind = "comparison" if q.type == "comparison" else f"{q.hops}-hop"
                print(f"Q: {q.question}   (gold answer: {q.answers[0]}; {kind})", file=out)
            for r in retrievers:
                ev = r.retrieve(q.question, k)
                rec = recall_at_k(ev.passage_ids, q.supporting_passage_ids, k)
                recalls[r.name].append(rec)
                if show:
                    _print_evidence(index, r, ev, q, rec, k, out)
            if llm is not None and show:
                from .methods.answer import generate_answer

                ans = generate_answer(llm, q.question, HybridRetriever(index).retrieve(q.question, 5))
                print(f"  answer (hybrid evidence + LLM): {ans.text}", file=out)
            if show:
                print(file=out)
        summary = {name: sum(v) / len(v) for name, v in recalls.items()}
        _print_summary(out, summary, questions, k)
        summary["frag-kgqa-hits@1"] = _frag_kgqa(out, index.embedder, verbose)
        return summary


def _frag_kgqa(out: TextIO, embedder, verbose: bool = True) -> float:
    """FRAG on the bundled curated KG: route, top paths and the LLM-free answer per question."""
    from .datasets.metrics import hits_at_1
    from .index.importers import load_kg

    graph, _ = load_kg(sample_kg_path(), "metaqa", progress=False)
    frag = FRAGRetriever(KnowledgeIndex.build([], graph=graph, embedder=embedder, progress=False))
    print(
        f"\nFRAG on the bundled curated KG ({graph.num_triples} triples; zero-shot: heuristic router, "
        "bi-encoder path ranking; `kgrag train` fits both on a KGQA set):",
        file=out,
    )
    hits = []
    for q in sample_kgqa():
        ev = frag.retrieve(q.question, 5)
        answers = ev.trace.get("answers", [])
        hits.append(hits_at_1(answers, q.answers))
        if not verbose:
            mark = "ok" if hits[-1] else "miss"
            got = answers[0] if answers else "-"
            print(f"  {mark:4s} {q.hops}-hop, {ev.trace['route']}: {q.question} -> {got}", file=out)
            continue
        print(f"Q: {q.question}   (gold: {', '.join(q.answers)}; {q.hops} hops)", file=out)
        print(f"   route: {ev.trace['route']}; answer: {answers[0] if answers else '-'}", file=out)
        for f in ev.facts[:2]:
            print(f"   {f.score:6.3f}  {f.text}", file=out)
    print(f"FRAG hits@1 on the sample KG: {int(sum(hits))}/{len(hits)}", file=out)
    for line in _kgqa_benchmark_lines():
        print(line, file=out)
    return sum(hits) / len(hits)
