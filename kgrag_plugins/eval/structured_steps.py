"""Every structured LLM step of the plug-ins, runnable on one sample (question + passages), and an
LLM wrapper that records each reply's validity: the real-model tests and
``benchmarks/structured_steps.py`` (valid-reply rate with constraints on vs off) share them.

Each runner calls the step's own code (or, for graph nodes, the exact ``complete_validated`` call
the node makes: prompt, parser, schema) and returns its parsed value (``None`` when invalid twice).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..models.replies import complete_validated
from ..types import Passage

__all__ = ["STEPS", "RecordingLLM", "Sample", "run_step"]


@dataclass
class Sample:
    """One input of the steps: a question, its passages, KG paths (FRAG) and an index (KG-Infused)."""

    question: str
    passages: list[Passage]
    paths: list[str] = field(default_factory=list)
    index: Any = None


class RecordingLLM:
    """``llm`` with ``record_reply(step, valid, constrained)`` (called by ``complete_validated``):
    ``replies`` keeps ``(step, valid, constrained)`` in order. Schemas, logprobs and usage pass
    through to the wrapped LLM."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.replies: list[tuple[str, bool, bool]] = []
        self._lock = threading.Lock()

    @property
    def supports_schema(self) -> bool:
        return getattr(self.llm, "supports_schema", False) is True

    def record_reply(self, step: str, valid: bool, constrained: bool) -> None:
        with self._lock:
            self.replies.append((step, bool(valid), bool(constrained)))

    def complete(self, prompt: Any, **kwargs: Any) -> str:
        return self.llm.complete(prompt, **kwargs)

    async def acomplete(self, prompt: Any, **kwargs: Any) -> str:
        return await self.llm.acomplete(prompt, **kwargs)

    def complete_logprobs(self, prompt: Any, **kwargs: Any) -> Any:
        return self.llm.complete_logprobs(prompt, **kwargs)


def _context(s: Sample) -> str:
    from ..agents.prompts import format_context
    from ..types import Evidence, ScoredPassage

    return format_context(Evidence(s.question, [ScoredPassage(p, 1.0) for p in s.passages]))


def _texts(s: Sample) -> list[str]:
    return [f"{p.title}: {p.text}" if p.title else p.text for p in s.passages]


def _kg_infused_selection(llm: Any, s: Sample) -> Any:
    from ..methods.kg_infused import KGInfusedRetriever

    kgi = KGInfusedRetriever(s.index, llm=llm, rounds=1)
    memory = kgi.activate(s.question, kgi.seed(s.question))
    return memory.rounds[0].extra.get("mode") if memory.rounds else None


def _kg_infused_expansion(llm: Any, s: Sample) -> Any:
    from ..methods.kg_infused import KGInfusedRetriever

    summary = " ".join(_texts(s))[:600]  # a stand-in for the triples summary (Eq. 7's input)
    return KGInfusedRetriever(s.index, llm=llm, rounds=1).expand_query(s.question, summary)


def _kg_infused_note(llm: Any, s: Sample) -> Any:
    from ..methods.kg_infused import KGInfusedRetriever
    from ..models.llm import LLMError

    try:
        return KGInfusedRetriever(s.index, llm=llm, rounds=1).write_note(s.question, s.passages)
    except LLMError:  # the reply stayed invalid (recorded as such)
        return None


def _kg_infused_augment(llm: Any, s: Sample) -> Any:
    from ..methods.kg_infused import KGInfusedRetriever
    from ..models.llm import LLMError

    note = " ".join(_texts(s))[:600]  # a stand-in for the note (Eq. 10's input)
    summary = "; ".join(t.split(".")[0] for t in _texts(s))[:300]
    try:
        return KGInfusedRetriever(s.index, llm=llm, rounds=1).augment(s.question, note, summary)
    except LLMError:  # the reply stayed invalid (recorded as such)
        return None


def _sa_reasoning(llm: Any, s: Sample) -> Any:
    from ..methods.sa_rag.cot import SARAGCoT

    return SARAGCoT(None, llm).reason(s.question, _context(s))  # type: ignore[arg-type]


def _sa_answer(llm: Any, s: Sample) -> Any:
    from ..agents.common import json_answer

    return json_answer(llm, s.question, _context(s), [])


def _self_ask(llm: Any, s: Sample) -> Any:
    from ..agents.prompts import SELF_ASK_SCHEMA, self_ask_prompt
    from ..agents.self_ask import STOP, parse_self_ask

    return complete_validated(  # the graph's ``ask`` node
        llm, self_ask_prompt(s.question, "", force_final=False),
        lambda r: parse_self_ask(r, question=s.question, previous=[], final_only=False),
        step="self_ask", stop=STOP, schema=SELF_ASK_SCHEMA, temperature=0.0,
    )  # fmt: skip


def _decompose(llm: Any, s: Sample) -> Any:
    from ..agents.decompose import parse_decomposition
    from ..agents.prompts import DECOMPOSE_SCHEMA, DECOMPOSE_SYSTEM

    messages = [{"role": "system", "content": DECOMPOSE_SYSTEM}, {"role": "user", "content": f"Question: {s.question}"}]
    return complete_validated(  # the graph's ``decompose`` node
        llm, messages, parse_decomposition, step="decompose", schema=DECOMPOSE_SCHEMA, temperature=0.0
    )


def _self_rag(step: str) -> Callable[[Any, Sample], Any]:
    def run(llm: Any, s: Sample) -> Any:
        from ..agents import self_rag_prompts as P
        from ..agents.self_rag import SelfRAG

        core = SelfRAG(llm, mode="prompted")
        p = s.passages[0]
        fields = {"question": s.question, "title": p.title, "text": p.text}
        if step == "retrieve?":
            return core._label(str(P.RETRIEVE_DECISION.format(question=s.question)), P.RETRIEVE_LABELS, step, [])
        if step == "relevant?":
            return core._label(str(P.RELEVANCE.format(**fields)), P.RELEVANCE_LABELS, step, [])
        answer = p.title or "unknown"
        if step == "supported?":
            return core._label(str(P.SUPPORT.format(**fields, answer=answer)), P.SUPPORT_LABELS, step, [])
        return core._label(str(P.UTILITY.format(question=s.question, answer=answer)), P.UTILITY_LABELS, step, [])

    return run


def _frag_hops(llm: Any, s: Sample) -> Any:
    from ..methods.frag.retriever import FRAGRetriever

    return FRAGRetriever.estimate_hops(SimpleNamespace(llm=llm, prompts={}), s.question, s.paths)  # type: ignore[arg-type]


def _know3_answer(llm: Any, s: Sample) -> Any:
    from ..methods.know3 import prompts as P

    return complete_validated(  # Know3Retriever._answer
        llm, P.qa_prompt(s.question, _texts(s)), P.parse_answer, step="answer", schema=P.ANSWER_SCHEMA, temperature=0.0
    )


def _know3_relevance(llm: Any, s: Sample) -> Any:
    from ..methods.know3 import prompts as P

    return complete_validated(  # the filter's relevance check
        llm, P.relevance_messages(s.question, _texts(s)[0]), P.parse_relevance,
        step="relevance_check", schema=P.RELEVANCE_SCHEMA, temperature=0.0,
    )  # fmt: skip


def _know3_extraction(llm: Any, s: Sample) -> Any:
    from ..methods.know3 import prompts as P

    return complete_validated(  # Know3Extractor.extract
        llm, P.extraction_messages(s.passages[0].text, [s.passages[0].title]), P.parse_triples,
        step="triple_extraction", schema=P.EXTRACTION_SCHEMA, temperature=0.0,
    )  # fmt: skip


def _translator(llm: Any, s: Sample) -> Any:
    from ..methods.translator.decompose import next_query

    return next_query(llm, s.question, _texts(s), [])


#: Step name (as passed to ``complete_validated``) -> runner ``(llm, sample) -> parsed or None``.
STEPS: dict[str, Callable[[Any, Sample], Any]] = {
    "triple_selection": _kg_infused_selection,
    "query_expansion": _kg_infused_expansion,
    "write_note": _kg_infused_note,
    "augment": _kg_infused_augment,
    "reasoning": _sa_reasoning,
    "answer": _sa_answer,
    "self_ask": _self_ask,
    "decompose": _decompose,
    "retrieve?": _self_rag("retrieve?"),
    "relevant?": _self_rag("relevant?"),
    "supported?": _self_rag("supported?"),
    "useful?": _self_rag("useful?"),
    "hop_estimation": _frag_hops,
    "know3.answer": _know3_answer,
    "relevance_check": _know3_relevance,
    "triple_extraction": _know3_extraction,
    "translator.decompose": _translator,
}

#: The ``step=`` each runner's structured call records (``know3.answer`` records ``answer``).
RECORDED: dict[str, str] = {name: ("answer" if name == "know3.answer" else name) for name in STEPS}


def run_step(name: str, llm: RecordingLLM, sample: Sample) -> list[tuple[str, bool, bool]]:
    """Run step ``name`` on ``sample``; the structured replies it recorded ``(step, valid, constrained)``."""
    start = len(llm.replies)
    STEPS[name](llm, sample)
    return [r for r in llm.replies[start:] if r[0] == RECORDED[name]]


def sample_paths(index: Any, question: str, n: int = 4) -> list[str]:
    """Up to ``n`` verbalised 1-2 hop paths ``a -> r -> b [-> r2 -> c]`` from the question's seed
    entities in ``index``'s graph (FRAG hop estimation's input)."""
    from ..methods.activation import out_triples, seed_entities

    g = index.graph
    out: list[str] = []
    for eid, _ in seed_entities(index, index.embed_query(question), 2):
        for t in out_triples(g, eid, 3, 0)[:3]:
            tr = g.triple(t)
            out.append(f"{g.name_of(tr.head)} -> {tr.relation} -> {g.name_of(tr.tail)}")
    return out[:n]


def samples(dataset: Any, index: Any, n: int, passages: int = 3) -> Sequence[Sample]:
    """``n`` samples from a dataset's questions with their supporting (else first) passages."""
    by_id = {p.id: p for p in (dataset.corpus or [])}
    out = []
    for q in dataset.questions[:n]:
        ps = [by_id[i] for i in q.supporting_passage_ids if i in by_id][:passages] or list(by_id.values())[:passages]
        paths = sample_paths(index, q.question) if index is not None else []
        out.append(Sample(q.question, ps, paths or [f"{ps[0].title} -> mentions -> {ps[-1].title}"], index))
    return out
