"""``kgrag demo``: index the bundled sample corpus and answer its questions, fully offline.

The sample corpus (``kgrag_plugins/data/sample_corpus.jsonl``) was written for this project:
45 short encyclopedic paragraphs about scientists, composers, cities and rivers that link to
each other by name, with 10 questions, 9 of them two-hop. With ``KGRAG_LLM_BASE_URL`` set the
demo also generates answers with that OpenAI-compatible endpoint.
"""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import TextIO

from .config import env
from .eval.datasets import Question, load_corpus_jsonl, load_questions_jsonl
from .eval.metrics import recall_at_k
from .index.store import KnowledgeIndex
from .methods.activation import ActivationRetriever
from .methods.baselines import BM25Retriever, DenseRetriever, HybridRetriever, PPRRetriever
from .methods.frag import FRAGRetriever
from .methods.kg_infused import KGInfusedRetriever
from .methods.sa_rag import SARAGRetriever
from .types import Passage


def sample_corpus() -> list[Passage]:
    """The bundled demo passages."""
    with resources.as_file(resources.files("kgrag_plugins") / "data" / "sample_corpus.jsonl") as p:
        return load_corpus_jsonl(p)


def sample_questions() -> list[Question]:
    """The bundled demo questions (with gold passage ids)."""
    with resources.as_file(resources.files("kgrag_plugins") / "data" / "sample_questions.jsonl") as p:
        return load_questions_jsonl(p)


def sample_kg_path() -> Path:
    """The bundled sample KG (``subject|relation|object`` lines, MetaQA format), written for
    this project from the sample corpus's facts."""
    return Path(str(resources.files("kgrag_plugins") / "data" / "sample_kg.txt"))


def sample_kgqa() -> list[Question]:
    """KGQA questions over the sample KG (``[bracketed]`` topic entities, hop counts)."""
    with resources.as_file(resources.files("kgrag_plugins") / "data" / "sample_kgqa.jsonl") as p:
        return load_questions_jsonl(p)


def _short(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _print_activation(ev, out: TextIO) -> None:
    """The explainable part of a spreading-activation trace: sources, activated entities, facts."""
    t = ev.trace
    seeds = ", ".join(f"{s['name']} ({s['weight']:.2f})" for s in t.get("seeds", [])) or "none linked"
    print(f"     trace: question entities: {seeds}; dense passage sources: {len(t.get('passage_seeds', []))}", file=out)
    acts = ", ".join(f"{a['name']} {a['activation']:.2f}" for a in t.get("activated", [])[:6])
    print(f"     activated: {acts}", file=out)
    for f in ev.facts[:3]:
        print(f"     fact: {_short(f.text, 100)}", file=out)


def run_demo(out: TextIO, *, index_dir: str | Path | None = None, k: int = 3, llm=None) -> dict[str, float]:
    """Build the sample index (with its mentions graph), run every retriever on every sample question, print evidence.

    Returns mean Recall@k per retriever (the demo's own sanity check).
    """
    corpus, questions = sample_corpus(), sample_questions()
    with tempfile.TemporaryDirectory(prefix="kgrag-demo-") as tmp:
        path = Path(index_dir) if index_dir else Path(tmp) / "index"
        t0 = time.perf_counter()
        index = KnowledgeIndex.build(
            corpus, path, builder="mentions", settings={"corpus": "kgrag sample"}, progress=False
        )
        print(f"Indexed {len(corpus)} sample passages in {time.perf_counter() - t0:.1f}s -> {index!r}\n", file=out)
        if llm is None and env("LLM_BASE_URL"):
            from .models.llm import OpenAICompatibleLLM

            llm = OpenAICompatibleLLM.from_env()
            print(f"Generating answers with {llm!r}\n", file=out)
        print(
            "Knowledge graph (LLM-free `mentions` builder: titles + spaCy NER, sentence co-occurrence): "
            f"{index.graph.num_entities} entities, {index.graph.num_triples} triples. To look at it:\n"
            f"  kgrag show-graph {path if index_dir else 'DIR'} --entity 'Marie Curie' --out curie.html"
            + ("" if index_dir else "   (after `kgrag demo --index-dir DIR`)")
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
        recalls: dict[str, list[float]] = {r.name: [] for r in retrievers}
        for q in questions:
            print(f"Q: {q.question}   (gold answer: {q.answers[0]})", file=out)
            for r in retrievers:
                ev = r.retrieve(q.question, k)
                rec = recall_at_k(ev.passage_ids, q.supporting_passage_ids, k)
                recalls[r.name].append(rec)
                print(f"  [{r.name}] recall@{k}={rec:.2f}", file=out)
                for sp in ev.passages:
                    mark = "*" if sp.passage.id in q.supporting_passage_ids else " "
                    print(f"   {mark} {sp.score:7.3f}  {sp.passage.title}: {_short(sp.passage.text)}", file=out)
                if r.name == "activation":
                    _print_activation(ev, out)
                elif r.name == "sa-rag":
                    acts = ", ".join(f"{n} {v:.2f}" for n, v in list(ev.trace.get("activation", {}).items())[:6])
                    print(
                        f"     seeds: {', '.join(s['name'] for s in ev.trace.get('seeds', []))}; activated: {acts}",
                        file=out,
                    )
                elif r.name == "kg-infused":
                    print(f"     expanded query: {_short(ev.trace.get('expanded_query', ''), 100)}", file=out)
                elif r.name == "frag":
                    top = ev.facts[0].text if ev.facts else ev.trace.get("error", "no path")
                    print(f"     route: {ev.trace.get('route')}; top path: {_short(top, 100)}", file=out)
            if llm is not None:
                from .methods.answer import generate_answer

                ans = generate_answer(llm, q.question, HybridRetriever(index).retrieve(q.question, 5))
                print(f"  answer (hybrid evidence + LLM): {ans.text}", file=out)
            print(file=out)
        summary = {name: sum(v) / len(v) for name, v in recalls.items()}
        print(f"Mean recall@{k} over {len(questions)} sample questions (* marks gold passages):", file=out)
        for name, v in summary.items():
            print(f"  {name:10s} {v:.3f}", file=out)
        summary["frag-kgqa-hits@1"] = _frag_kgqa(out, index.embedder)
        return summary


def _frag_kgqa(out: TextIO, embedder) -> float:
    """FRAG on the bundled curated KG: route, top paths and the LLM-free answer per question."""
    from .eval.metrics import hits_at_1
    from .index.load import load_kg

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
        print(f"Q: {q.question}   (gold: {', '.join(q.answers)}; {q.hops} hops)", file=out)
        print(f"   route: {ev.trace['route']}; answer: {answers[0] if answers else '-'}", file=out)
        for f in ev.facts[:2]:
            print(f"   {f.score:6.3f}  {f.text}", file=out)
    print(f"FRAG hits@1 on the sample KG: {int(sum(hits))}/{len(hits)}", file=out)
    return sum(hits) / len(hits)
