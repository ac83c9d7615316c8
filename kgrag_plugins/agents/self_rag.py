"""Self-RAG (Asai et al., ICLR 2024) as a LangGraph agent, alone or with KG-Infused RAG plugged
in (kg-infused-rag.md §4.2; docs/methods.md §6.2).

Short-form setting, as KG-Infused RAG runs it: decide whether to retrieve, retrieve ``k`` = 6
passages once, generate one answer per passage, critique each, answer = the generation of the
best-scoring passage. The score (``run_short_form.py``)::

    w_rel·P([Relevant]) + w_sup·(P([Fully supported]) + 0.5·P([Partially supported]))
        + w_use·Σ_i u_i·P([Utility:i])  (+ exp(mean token logprob) with use_seqscore)

with ``u = (-1, -0.5, 0, 0.5, 1)``, each group's probabilities renormalised over the group, and
weights ``w_rel = 1.0, w_sup = 1.0, w_use = 0.5`` (docs/methods.md §6.2; the function default in
``call_model_rerank_w_scores_batch``). **[DISCREPANCY]** ``run_short_form.py``'s argparse default
``--w_use`` is 1.0 and is passed explicitly, so the README commands score with ``w_use = 1.0``:
pass ``w_use=1.0`` to reproduce them.

Modes:

* ``mode="selfrag-tokens"`` — the released ``selfrag/selfrag_llama2_7b`` behind an
  OpenAI-compatible ``/v1/completions`` endpoint (vLLM; start it with ``skip_special_tokens`` off,
  e.g. ``OpenAICompatibleLLM(..., extra_body={"skip_special_tokens": False})``, so the reflection
  tokens also appear in the text). Prompt ``"### Instruction:\\n{q}\\n\\n### Response:\\n"`` +
  ``"[Retrieval]<paragraph>{title}\\n{text}</paragraph>"`` per passage, greedy,
  ``max_new_tokens`` = 100 (the README's short-form commands; argparse default 15). P([Relevant])
  is read at the first generated token, P(support) / P(utility) at the first generated token of
  each group, a token outside the returned alternatives counts ``exp(-100)`` (as the repository
  does). Difference: an API returns at most ``top_logprobs`` (default 20) alternatives, the
  repository reads 5,000. ``use_seqscore`` defaults to ``True`` here (the README commands).
  Adaptive retrieval: the prompt alone is generated once and retrieval runs when
  ``P([Retrieval]) / (P([Retrieval]) + P([No Retrieval])) > threshold`` at its first token
  (``threshold`` = 0.2, the README's short-form commands; the argparse default ``None`` means
  "retrieve when ``[Retrieval]`` is generated", which we use when neither token is among the
  alternatives). **[DISCREPANCY]** the repository computes that ratio on the raw *log*-probabilities
  (which inverts it); ``threshold_space="logprob"`` reproduces that, the default ``"prob"`` follows
  the paper. No retrieval: the prompt + ``"[No Retrieval]"`` is generated and its text is the answer.
* ``mode="prompted"`` (default) — any instruct model; the critiques are prompts
  (:mod:`.self_rag_prompts`). With ``complete_logprobs`` (our OpenAI client, ``ScriptedLLM``) the
  label probabilities come from ``top_logprobs`` at the label token; without them, or when no
  alternative there names a label, the parsed label gets probability 1.0. Retrieval decision: the
  same ratio on P(Yes) / (P(Yes) + P(No)).

Every reply is validated: a generation must be text (non-empty, not symbols, not a refusal, at
most 1,000 characters, reflection tokens removed); a critique must open with one of its labels.
An invalid reply is asked once more (:func:`~kgrag_plugins.models.replies.complete_validated` /
:func:`~kgrag_plugins.models.logprobs.complete_logprobs_validated`), then the documented fallback
applies with a WARNING and a ``trace["llm_error"]`` entry: a passage without a valid generation
is no candidate; a critique without a valid reply contributes 0 (as ``run_short_form.py`` does
for a group whose tokens never appear); a failed retrieval decision retrieves. No invalid reply is
ever the answer: with no valid generation, ``generation`` is ``""``.

Without an LLM (``llm=None``) the graph retrieves (always) and, with KG-Infused, runs the KG steps
LLM-free; ``generation`` is ``""``.

**+ KG-Infused** (:func:`self_rag_kg_infused_graph`): spreading activation + subgraph summary +
KG-based query expansion give q' (:class:`~kgrag_plugins.agents.kg_step.KGInfusedPlugin`, with
``kg_llm``); the agent's retrieve step gives 3 passages for q and 3 new ones for q'; KG-guided
augmentation (``KGInfusedRetriever.augment``, Eq. 10) rewrites **each passage** with the triples
summary; Self-RAG's generation and scoring then run unchanged over the 6 enhanced passages.
LLM-free (or after a failed augmentation): the passage followed by the verbalised triples
(docs/methods.md §1(e)).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.graph import END, START, StateGraph

from ..models.llm import LLMError
from ..models.logprobs import Completion, complete_logprobs_validated, supports_logprobs
from ..models.replies import check_text, complete_validated, error_kind, first_line
from ..models.structured import OutputSchema
from ..types import Evidence
from . import self_rag_prompts as P
from .common import llm_of, resolve_step
from .kg_step import KGInfusedPlugin
from .state import AgentState, add_evidence, add_llm_errors, agent_question, final_update

__all__ = [
    "Critique",
    "SelfRAG",
    "SelfRAGState",
    "critique_score",
    "self_rag_graph",
    "self_rag_kg_infused_graph",
    "selfrag_critique",
]

logger = logging.getLogger("kgrag_plugins.agents.self_rag")

UTILITY_VALUES = (-1.0, -0.5, 0.0, 0.5, 1.0)
DEFAULT_THRESHOLD = 0.2
MAX_ANSWER_CHARS = 1000
_MISSING = -100.0  # run_short_form.py: a reflection token outside the returned alternatives
MODES = ("prompted", "selfrag-tokens")


# --------------------------------------------------------------------------- scoring


@dataclass
class Critique:
    """Renormalised reflection-token probabilities of one generation (an empty group: no
    information, contributes 0), the mean token logprob, and where each group came from
    (``"logprobs"`` | ``"label"`` | ``"missing"``)."""

    relevance: dict[str, float] = field(default_factory=dict)
    support: dict[str, float] = field(default_factory=dict)
    utility: dict[str, float] = field(default_factory=dict)
    seq_logprob: float | None = None
    sources: dict[str, str] = field(default_factory=dict)


def critique_score(
    c: Critique, *, w_rel: float = 1.0, w_sup: float = 1.0, w_use: float = 0.5, use_seqscore: bool = False
) -> dict[str, float]:
    """The Self-RAG score of one generation and its parts (``score``, ``relevance``, ``support``,
    ``utility``, ``seq``)."""
    rel = c.relevance.get("[Relevant]", 0.0)
    sup = c.support.get(P.SUPPORT_TOKENS[0], 0.0) + 0.5 * c.support.get(P.SUPPORT_TOKENS[1], 0.0)
    use = sum(u * c.utility.get(tok, 0.0) for u, tok in zip(UTILITY_VALUES, P.UTILITY_TOKENS))
    seq = math.exp(c.seq_logprob) if use_seqscore and c.seq_logprob is not None else 0.0
    return {
        "score": seq + w_rel * rel + w_sup * sup + w_use * use,
        "relevance": rel,
        "support": sup,
        "utility": use,
        "seq": seq,
    }


def _norm(probs: Mapping[str, float]) -> dict[str, float]:
    total = sum(probs.values())
    return {k: v / total for k, v in probs.items()} if total > 0 else {}


def _stripped_top(top: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in top.items():
        out[k.strip()] = max(v, out.get(k.strip(), -math.inf))
    return out


def _group(completion: Completion, names: tuple[str, ...], first_token: bool) -> tuple[dict[str, float], str]:
    """One reflection group from token logprobs (at the first generated token, or at the first
    token that is one of ``names``), else from the text (1.0 on the first name found)."""
    toks = completion.tokens
    idx = 0 if (first_token and toks) else next((i for i, t in enumerate(toks) if t.token.strip() in names), None)
    if idx is not None:
        top = _stripped_top(toks[idx].top)
        return _norm({n: math.exp(top.get(n, _MISSING)) for n in names}), "logprobs"
    found = [(completion.text.find(n), n) for n in names if n in completion.text]
    if found:
        return {min(found)[1]: 1.0}, "label"
    return {}, "missing"


def selfrag_critique(completion: Completion) -> Critique:
    """``run_short_form.py``'s reflection scores of one ``selfrag_llama2_7b`` generation."""
    c = Critique(seq_logprob=completion.mean_logprob())
    c.relevance, c.sources["relevance"] = _group(completion, P.RELEVANCE_TOKENS, first_token=True)
    c.support, c.sources["support"] = _group(completion, P.SUPPORT_TOKENS, first_token=False)
    c.utility, c.sources["utility"] = _group(completion, P.UTILITY_TOKENS, first_token=False)
    return c


# --------------------------------------------------------------------------- the agent logic


def _passage_dicts(ev: Evidence, sources: list[str] | None = None) -> list[dict[str, Any]]:
    src = list(sources or [])
    return [
        {"id": sp.passage.id, "title": sp.passage.title, "text": sp.passage.text, "source": (src + ["q"] * 99)[i]}
        for i, sp in enumerate(ev.passages)
    ]


class SelfRAG:
    """The framework-free steps of both graphs (see the module docstring for the options)."""

    def __init__(
        self,
        llm: Any = None,
        *,
        mode: str = "prompted",
        retrieval: str = "adaptive",
        threshold: float = DEFAULT_THRESHOLD,
        threshold_space: str = "prob",
        w_rel: float = 1.0,
        w_sup: float = 1.0,
        w_use: float = 0.5,
        use_seqscore: bool | None = None,
        logprobs: bool = True,
        top_logprobs: int = 20,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if retrieval not in ("adaptive", "always", "never"):
            raise ValueError(f"retrieval must be 'adaptive', 'always' or 'never', got {retrieval!r}")
        if threshold_space not in ("prob", "logprob"):
            raise ValueError(f"threshold_space must be 'prob' or 'logprob', got {threshold_space!r}")
        self.llm = llm_of(llm)
        if mode == "selfrag-tokens" and self.llm is not None and not supports_logprobs(self.llm):
            raise TypeError(
                "mode='selfrag-tokens' needs an LLM with complete_logprobs(raw=True) (OpenAICompatibleLLM "
                "on a vLLM /v1/completions endpoint serving selfrag/selfrag_llama2_7b)"
            )
        self.mode, self.retrieval = mode, retrieval
        self.threshold, self.threshold_space = float(threshold), threshold_space
        self.w_rel, self.w_sup, self.w_use = float(w_rel), float(w_sup), float(w_use)
        self.use_seqscore = (mode == "selfrag-tokens") if use_seqscore is None else bool(use_seqscore)
        self.logprobs = bool(logprobs) and self.llm is not None and supports_logprobs(self.llm)
        self.top_logprobs = int(top_logprobs)
        #: Tokens of a generation (a label's own budget, :data:`.self_rag_prompts.LABEL_MAX_TOKENS`,
        #: applies unless ``max_new_tokens`` is given).
        self.max_new_tokens = max_new_tokens or (100 if mode == "selfrag-tokens" else P.ANSWER_MAX_TOKENS)
        self._label_tokens = max_new_tokens
        self.temperature = float(temperature)

    # -- one validated call

    def _ask(
        self,
        prompt: str,
        validate: Callable[[Completion], Any],
        step: str,
        errors: list,
        raw: bool = False,
        schema: OutputSchema | None = None,
        max_tokens: int | None = None,
        **ctx,
    ) -> Any:
        max_tokens = max_tokens or self.max_new_tokens
        if self.logprobs:
            return complete_logprobs_validated(
                self.llm,
                prompt,
                validate,
                step=step,
                errors=errors,
                context=ctx or None,
                log=logger,
                schema=schema,
                max_tokens=max_tokens,
                temperature=self.temperature,
                top_logprobs=self.top_logprobs,
                raw=raw,
            )
        return complete_validated(
            self.llm,
            prompt,
            lambda text: validate(Completion(text)),
            step=step,
            errors=errors,
            context=ctx or None,
            log=logger,
            schema=schema,
            max_tokens=max_tokens,
            temperature=self.temperature,
        )

    def _label(self, prompt: str, labels: Mapping[str, str], step: str, errors: list, **ctx) -> tuple | None:
        """A critique: ``(probs, source)`` or ``None`` (invalid twice / failed call)."""

        def validate(c: Completion) -> tuple[dict[str, float], str]:
            token, offset = P.parse_label(c.text, labels)
            probs = P.label_probs(c, labels, offset) if c.tokens else None
            return (probs, "logprobs") if probs else ({token: 1.0}, "label")

        schema = P.LABEL_SCHEMAS.get(step)
        tokens = self._label_tokens or (schema.max_tokens if schema is not None else None)
        return self._ask(prompt, validate, step, errors, schema=schema, max_tokens=tokens, **ctx)

    # -- retrieval decision

    def _ratio(self, p_ret: float, p_no: float) -> float:
        if self.threshold_space == "logprob":  # run_short_form.py: the ratio of log-probabilities
            lr, ln = math.log(max(p_ret, 1e-300)), math.log(max(p_no, 1e-300))
            return lr / (lr + ln) if (lr + ln) != 0 else 0.0
        return p_ret / (p_ret + p_no) if (p_ret + p_no) > 0 else 0.0

    def decide(self, question: str, errors: list) -> tuple[bool, dict[str, Any]]:
        """Retrieve or not, with the trace entry ``{"p_retrieve", "source", ...}``."""
        if self.llm is None or self.retrieval != "adaptive":
            return self.retrieval != "never", {"source": "no llm" if self.llm is None else self.retrieval}
        if self.mode == "prompted":
            out = self._label(
                str(P.RETRIEVE_DECISION.format(question=question)), P.RETRIEVE_LABELS, "retrieve?", errors
            )
            if out is None:
                return True, {"source": "fallback: retrieve"}
            probs, source = out
        else:
            comp = self._ask(P.selfrag_prompt(question), lambda c: c, "retrieve?", errors, raw=True)
            if comp is None:
                return True, {"source": "fallback: retrieve"}
            top = _stripped_top(comp.tokens[0].top) if comp.tokens else {}
            if any(t in top for t in P.RETRIEVAL_TOKENS):
                probs = {t: math.exp(top.get(t, _MISSING)) for t in P.RETRIEVAL_TOKENS}
                source = "logprobs"
            else:  # argparse threshold=None rule of run_short_form.py
                hit = "[Retrieval]" in comp.text
                return hit, {"source": "text", "p_retrieve": 1.0 if hit else 0.0}
        p = self._ratio(probs.get("[Retrieval]", 0.0), probs.get("[No Retrieval]", 0.0))
        return p > self.threshold, {"source": source, "p_retrieve": p, "threshold": self.threshold}

    # -- generation

    def _answer_validator(self, template: str) -> Callable[[Completion], tuple[str, Completion]]:
        def validate(c: Completion) -> tuple[str, Completion]:
            if self.mode == "selfrag-tokens":
                text = P.postprocess_answer(c.text)
                return check_text(text, max_chars=MAX_ANSWER_CHARS), c
            line = P.postprocess_answer(first_line(c.text))
            if line.lower().startswith("answer:"):
                line = line[7:].strip()
            return check_text(line, single_line=True, max_chars=MAX_ANSWER_CHARS, instructions=template), c

        return validate

    def answer_without_retrieval(self, question: str, errors: list) -> str | None:
        """The no-retrieval answer (Self-RAG: the prompt + ``[No Retrieval]``)."""
        if self.llm is None:
            return None
        if self.mode == "selfrag-tokens":
            prompt, template = P.selfrag_prompt(question) + "[No Retrieval]", ""
        else:
            prompt = str(P.GENERATE_NO_RETRIEVAL.format(question=question))
            template = str(P.GENERATE_NO_RETRIEVAL)
        out = self._ask(prompt, self._answer_validator(template), "generate", errors, raw=self.mode != "prompted")
        return out[0] if out else None

    def candidate(self, question: str, i: int, p: Mapping[str, Any], errors: list) -> dict[str, Any] | None:
        """One passage: generation + critique + score (``None`` without a valid generation)."""
        ctx = {"passage": i}
        if self.mode == "selfrag-tokens":
            prompt = P.selfrag_prompt(question) + P.selfrag_paragraph(p["title"], p["text"])
            out = self._ask(prompt, self._answer_validator(""), "generate", errors, raw=True, **ctx)
            if out is None:
                return None
            answer, comp = out
            crit = selfrag_critique(comp)
        else:
            fields = {"question": question, "title": p["title"], "text": p["text"]}
            crit = Critique()
            rel = self._label(str(P.RELEVANCE.format(**fields)), P.RELEVANCE_LABELS, "relevant?", errors, **ctx)
            gen = str(P.GENERATE.format(**fields))
            out = self._ask(gen, self._answer_validator(str(P.GENERATE)), "generate", errors, **ctx)
            if out is None:
                return None
            answer, comp = out
            crit.seq_logprob = comp.mean_logprob()
            sup = self._label(
                str(P.SUPPORT.format(**fields, answer=answer)), P.SUPPORT_LABELS, "supported?", errors, **ctx
            )
            use = self._label(
                str(P.UTILITY.format(question=question, answer=answer)), P.UTILITY_LABELS, "useful?", errors, **ctx
            )
            for name, got in (("relevance", rel), ("support", sup), ("utility", use)):
                probs, src = got if got is not None else ({}, "missing")
                setattr(crit, name, probs)
                crit.sources[name] = src
        parts = critique_score(
            crit, w_rel=self.w_rel, w_sup=self.w_sup, w_use=self.w_use, use_seqscore=self.use_seqscore
        )
        return {"passage": p["id"], "index": i, "answer": answer, **parts, "probs_from": dict(crit.sources)}

    def generate(self, question: str, passages: list[Mapping[str, Any]], errors: list) -> list[dict[str, Any]]:
        """Every valid candidate, in passage order."""
        if self.llm is None:
            return []
        out = [self.candidate(question, i, p, errors) for i, p in enumerate(passages)]
        return [c for c in out if c is not None]

    @staticmethod
    def best(candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The highest score; ties go to the earlier passage (a stable sort, as the repository)."""
        return max(candidates, key=lambda c: c["score"]) if candidates else None


# --------------------------------------------------------------------------- graphs


class SelfRAGState(AgentState, total=False):
    """:class:`AgentState` plus the passages Self-RAG generates from (enhanced ones with KG-Infused)
    and the retrieval decision (internal; the graphs' input/output schema is ``AgentState``)."""

    passages: list[dict[str, Any]]
    do_retrieve: bool


def _trace_update(state: Mapping[str, Any], errors: list, **entries: Any) -> dict[str, Any]:
    trace = add_llm_errors(dict(state), errors)
    sr = dict(trace.get("self_rag") or {})
    sr.update(entries)
    trace["self_rag"] = sr
    return trace


def _step(state: Mapping[str, Any], **record: Any) -> list[dict[str, Any]]:
    return [*(state.get("steps") or []), record]


def _build(core: SelfRAG, retrieve_node: Callable[[dict], dict], augment_node: Callable[[dict], dict] | None):
    def decide(state: dict) -> dict:
        errors: list = []
        do, info = core.decide(agent_question(state), errors)
        return {
            "do_retrieve": do,
            "trace": _trace_update(state, errors, mode=core.mode, retrieve=do, decision=info),
            "steps": _step(state, step="retrieve?", retrieve=do, **info),
        }

    def answer_directly(state: dict) -> dict:
        errors: list = []
        text = core.answer_without_retrieval(state["question"], errors)
        upd = {**state, "trace": _trace_update(state, errors, best=None)}
        return {**final_update(upd, text), "steps": _step(state, step="generate", passage=None, valid=bool(text))}

    def generate(state: dict) -> dict:
        errors: list = []
        cands = core.generate(state["question"], state.get("passages") or [], errors)
        best = core.best(cands)
        note = None if core.llm is not None else "no LLM: retrieval only, generation ''"
        upd = {**state, "trace": _trace_update(state, errors, candidates=cands, best=best, note=note)}
        steps = _step(state, step="generate", candidates=len(cands), best=best["passage"] if best else None)
        return {**final_update(upd, best["answer"] if best else ""), "steps": steps}

    g = StateGraph(SelfRAGState, input_schema=AgentState, output_schema=AgentState)
    g.add_node("decide", decide)
    g.add_node("retrieve", retrieve_node)
    g.add_node("answer_directly", answer_directly)
    g.add_node("generate", generate)
    g.add_edge(START, "decide")
    g.add_conditional_edges(
        "decide",
        lambda s: "retrieve" if s.get("do_retrieve", True) else "answer_directly",
        ["retrieve", "answer_directly"],
    )
    g.add_edge("answer_directly", END)
    if augment_node is not None:
        g.add_node("augment", augment_node)
        g.add_edge("retrieve", "augment")
        g.add_edge("augment", "generate")
    else:
        g.add_edge("retrieve", "generate")
    g.add_edge("generate", END)
    return g.compile()


def self_rag_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    mode: str = "prompted",
    k: int = 6,
    retrieval: str = "adaptive",
    threshold: float = DEFAULT_THRESHOLD,
    **options: Any,
):
    """Self-RAG short form over any retrieve step (a kgrag ``Retriever``, a LlamaIndex or LangChain
    ``BaseRetriever``, a node or callable: :func:`~kgrag_plugins.agents.retrieve.as_retrieve_step`;
    a ``KnowledgeIndex``: dense top-k). ``k`` passages are retrieved once (KG-Infused RAG: 6).
    ``options``: ``threshold_space``, ``w_rel``, ``w_sup``, ``w_use``, ``use_seqscore``,
    ``logprobs``, ``top_logprobs``, ``max_new_tokens``, ``temperature`` (module docstring).
    Returns a compiled ``StateGraph``; input ``{"question"}``, output :class:`AgentState` with
    ``trace["self_rag"]`` = ``{mode, retrieve, decision, candidates, best}``."""
    step = resolve_step(retrieve, k)
    core = SelfRAG(llm, mode=mode, retrieval=retrieval, threshold=threshold, **options)

    def retrieve_node(state: dict) -> dict:
        ev = step(state["question"], k)
        upd = add_evidence(state, ev, retriever=step.name)
        rec = {"step": "retrieve", "query": state["question"], "passages": ev.passage_ids}
        return {**upd, "passages": _passage_dicts(ev), "steps": _step(state, **rec)}

    return _build(core, retrieve_node, None)


def _template_augment(text: str, summary: str) -> str:
    """LLM-free KG augmentation (docs/methods.md §1(e)): the passage followed by the verbalised triples."""
    return f"{text}\nKnowledge graph facts: {summary}" if summary.strip() else text


def self_rag_kg_infused_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    kg_infused: Any,
    kg_llm: Any = "auto",
    mode: str = "prompted",
    k_each: int = 3,
    retrieval: str = "adaptive",
    threshold: float = DEFAULT_THRESHOLD,
    kg_options: dict[str, Any] | None = None,
    **options: Any,
):
    """Self-RAG + KG-Infused RAG (kg-infused-rag.md §4.2): q' from spreading activation + KG-based
    QE, ``k_each`` passages for q + ``k_each`` new ones for q' from ``retrieve``, KG-guided
    augmentation of each passage, then Self-RAG unchanged. ``kg_infused``: a
    ``KGInfusedRetriever`` or a ``KnowledgeIndex`` with a graph. ``kg_llm``: the LLM of the KG steps
    (the paper: a DPO-tuned LLaMA-3.1-8B, not the Self-RAG model); ``"auto"`` (default): ``llm`` in
    the prompted mode, none in the ``selfrag-tokens`` mode; ``None``: the ``KGInfusedRetriever``'s
    own LLM, LLM-free KG steps when it has none. Other arguments as :func:`self_rag_graph`."""
    step = resolve_step(retrieve, 2 * k_each)
    core = SelfRAG(llm, mode=mode, retrieval=retrieval, threshold=threshold, **options)
    if isinstance(kg_llm, str) and kg_llm == "auto":
        kg_llm = core.llm if mode == "prompted" else None
    plugin = KGInfusedPlugin(kg_infused, kg_llm, k_each=k_each, kg_options=kg_options)

    def retrieve_node(state: dict) -> dict:
        found = plugin.retrieve(state["question"], step)
        upd = add_evidence(state, found.evidence, retriever=found.evidence.trace.get("retriever", ""))
        upd["retrievals"] = int(state.get("retrievals") or 0) + found.retrievals
        passages = _passage_dicts(found.evidence, found.sources)
        for p in passages:
            p["summary"] = found.summary
        kg = {"summary": found.summary, "expanded_query": found.expanded, "passage_sources": found.sources}
        rec = {"step": "kg_retrieve", "query": state["question"], "expanded_query": found.expanded}
        return {
            **upd,
            "passages": passages,
            "trace": _trace_update(state, found.errors, kg_infused=kg),
            "steps": _step(state, **rec, passages=found.evidence.passage_ids),
        }

    def augment_node(state: dict) -> dict:
        errors: list = []
        out, how = [], []
        for i, p in enumerate(state.get("passages") or []):
            summary, enhanced = p.get("summary", ""), None
            try:
                enhanced = plugin.kg.augment(state["question"], p["text"], summary)
            except LLMError as exc:
                entry = {"step": "kg.augment", "kind": error_kind(exc), "error": str(exc), "passage": i}
                logger.warning("KG augmentation of passage %d fell back to the template: %s", i, exc)
                errors.append(entry)
            how.append("llm" if enhanced is not None else "template")
            text = enhanced if enhanced is not None else _template_augment(p["text"], summary)
            out.append({**p, "text": text, "original": p["text"]})
        return {
            "passages": out,
            "trace": _trace_update(state, errors, augmented=how),
            "steps": _step(state, step="kg_augment", passages=len(out), how=how),
        }

    return _build(core, retrieve_node, augment_node)
