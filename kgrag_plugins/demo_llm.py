"""``kgrag demo --llm MODEL``: a real language model answers sample questions twice, from passages
the LLM-free spreading-activation retriever found and closed-book, side by side.

``MODEL`` is whatever ``--llm`` takes elsewhere: a known local name (``smollm2``: SmolLM2-135M-Instruct
in-process, converted once by ``kgrag models prepare smollm2``), ``local:PATH``, ``vllm:PATH`` or an
OpenAI-compatible URL. The retrieved answer uses the house answer prompt
(:func:`~kgrag_plugins.methods.answer.generate_answer`, passages inside a data block); the
closed-book one asks the same question with no evidence. A reply that fails validation is shown as
``(no valid answer: ...)``, never as an answer.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from .datasets.loaders import sample_corpus, sample_questions
from .datasets.metrics import answer_scores
from .index.store import KnowledgeIndex
from .methods.activation import ActivationRetriever
from .methods.answer import generate_answer
from .types import Evidence

__all__ = ["DEMO_QUESTIONS", "llm_for_demo", "run_llm_demo"]

#: Sample question ids the LLM demo asks (one-hop and two-hop, answerable from the sample corpus).
DEMO_QUESTIONS = 3


def llm_for_demo(spec: str) -> tuple[Any, str, Any]:
    """``(llm, description, close)`` for ``--llm``: a bare known name means ``local:NAME``."""
    from .eval.qa_llm import resolve_llm
    from .models.local_models import KNOWN_MODELS

    spec = spec.strip()
    if spec in KNOWN_MODELS:
        spec = f"local:{spec}"
    return resolve_llm(spec)


def _shown(ans: Any) -> str:
    if ans.metadata.get("llm_error"):
        why = ans.metadata["llm_error"][-1].get("error", "?")
        return f"(no valid answer: {str(why)[:80]})"
    return ans.text


def run_llm_demo(out: TextIO, spec: str, *, n: int = DEMO_QUESTIONS, k: int = 5) -> dict[str, float]:
    """Print ``n`` sample questions answered with activation-retrieved passages and closed-book;
    return the share of each that contains a gold answer (``acc``)."""
    from .models.embed import default_embedder

    llm, description, close = llm_for_demo(spec)
    questions = sample_questions()
    # one-hop control first, then multi-hop ones
    questions = sorted(questions, key=lambda q: (q.hops or 0) != 1)[:n]
    acc = {"retrieved": 0.0, "closed_book": 0.0}
    try:
        with tempfile.TemporaryDirectory(prefix="kgrag-demo-llm-") as tmp:
            t0 = time.perf_counter()
            index = KnowledgeIndex.build(
                sample_corpus(), Path(tmp) / "index", builder="mentions", embedder=default_embedder(), progress=False
            )
            print(f"Indexed the sample corpus in {time.perf_counter() - t0:.1f}s; LLM: {description}\n", file=out)
            retriever = ActivationRetriever(index)
            for q in questions:
                t1 = time.perf_counter()
                ev = retriever.retrieve(q.question, k)
                with_passages = generate_answer(llm, q.question, ev)
                closed = generate_answer(llm, q.question, Evidence(q.question))
                secs = time.perf_counter() - t1
                print(f"Q: {q.question}   (gold: {q.answers[0]})", file=out)
                print(f"  passages (activation): {', '.join(sp.passage.title for sp in ev.passages)}", file=out)
                print(f"  answer with passages : {_shown(with_passages)}", file=out)
                print(f"  answer closed-book   : {_shown(closed)}   ({secs:.1f}s for both)\n", file=out)
                acc["retrieved"] += answer_scores(with_passages.text, q.answers)["acc"]
                acc["closed_book"] += answer_scores(closed.text, q.answers)["acc"]
    finally:
        close()
    acc = {key: v / max(len(questions), 1) for key, v in acc.items()}
    print(
        f"Gold answer contained: {acc['retrieved']:.0%} with activation-retrieved passages, "
        f"{acc['closed_book']:.0%} closed-book ({len(questions)} questions; docs/qa-smollm2.md has the benchmarks)",
        file=out,
    )
    return acc
