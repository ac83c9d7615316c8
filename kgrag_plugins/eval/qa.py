"""``kgrag bench --qa``: end-to-end QA with the papers' baselines as variants (issue 16 items 6-7).

Systems (``--systems``, default: all available):

* KG-Infused RAG and its ablations (METHODS.md §1(a), Tables 2/5), built from the public steps of
  :class:`~kgrag_plugins.methods.kg_infused.KGInfusedRetriever`, with the paper's answer prompt
  (Table 9, the ``Passages:`` slot holding the note):

  - ``no-retrieval``: the without-retrieval answer prompt (Table 8); nothing is retrieved.
  - ``vanilla-rag``: note over the dense top-6 for q, answer.
  - ``vanilla-qe``: q' from q alone (Table 10), q's top-3 + 3 new from q', note, answer.
  - ``qe-only``: KG-based QE (activation, summary, Eq. 7), the 3 + 3 merge, note, answer.
  - ``ka-only``: note over the vanilla top-6 augmented with the triples summary (Eq. 10), answer.
  - ``full``: :meth:`~kgrag_plugins.methods.kg_infused.KGInfusedRetriever.run`.

  Each variant runs on its own (the paper computes them in one pass sharing the activation), so
  the LLM calls per question are each variant's own.
* Agent systems from :data:`kgrag_plugins.agents.AGENTS` (looked up at run time): Self-Ask /
  Self-RAG with and without KG-Infused (METHODS.md §6.1-6.2), CoT-RAG, SA-RAG + CoT,
  decomposition (§6.3), the hop-aware front door. Their retrieve step is the dense retriever,
  or SA-RAG's for ``sa-rag+cot`` and ``sa-rag+decomposition`` (the ``decomposition`` agent over
  SA-RAG, the paper's ``hybrid_agent``; :data:`AGENT_RETRIEVER`, :data:`AGENT_ALIASES`).

Metrics per system (METHODS.md §1(f), §9): ``em`` / ``f1`` (SQuAD, max over gold aliases),
``acc`` (gold contained after SQuAD normalisation), ``acc_raw`` (KG-Infused's raw lower-case
substring) and ``f1_last_alias`` (F1 against the last gold alias only, the function KG-Infused's
code reports; compare with its tables through this one). LLM calls and prompt / completion
tokens per question (the endpoint's ``usage`` when it returns one, else tiktoken ``cl100k_base``
over the message texts), latency p50 / p95 per question (after an LLM-free warm-up of each system's
retrievers on the first question), ``fallbacks`` (questions where any LLM
step fell back: ``llm_error`` in the answer) and ``empty_answers`` (no valid answer: scored as
wrong, never the invalid reply).

``--retriever-opt NAME.KEY=V1,V2`` runs one row per combination: ``NAME`` is a retriever the
systems use (``kg-infused``, ``sa-rag``, ``dense``) or a system (agent build options).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..config import progress_enabled
from ..index.store import KnowledgeIndex
from ..methods.baselines import DenseRetriever
from ..methods.kg_infused import KGInfusedRetriever
from ..methods.kg_infused import prompts as P
from ..methods.kg_infused.retriever import MAX_ANSWER_CHARS, KGInfusedMemory
from ..methods.sa_rag import SARAGRetriever
from ..models.llm import LLMError, Message, to_messages
from ..models.replies import check_text, complete_validated
from ..types import Answer, Evidence
from .bench import _opt_grid, _write, dataset_index, parse_retriever_opts
from .datasets import Dataset, load_dataset
from .metrics import answer_scores, f1_score, mean, percentile

__all__ = [
    "AGENT_ALIASES",
    "AGENT_RETRIEVER",
    "KG_INFUSED_VARIANTS",
    "MeteredLLM",
    "available_systems",
    "kg_infused_system",
    "qa_markdown_table",
    "run_qa_bench",
]

logger = logging.getLogger(__name__)

#: KG-Infused RAG and its ablations (METHODS.md §1(a)).
KG_INFUSED_VARIANTS = ("no-retrieval", "vanilla-rag", "vanilla-qe", "qe-only", "ka-only", "full")

#: The variants that use the KG (``kg-infused.*`` options apply to them; the other three run once).
KG_SYSTEMS = ("qe-only", "ka-only", "full")

#: The retriever behind each agent's retrieve step (others: ``dense``). SA-RAG's agents
#: (``modified_diffusion_agent.py``, ``hybrid_agent.py``) retrieve with spreading activation.
AGENT_RETRIEVER = {"sa-rag+cot": "sa-rag", "sa-rag+decomposition": "sa-rag"}

#: Harness systems that are a registry agent over another retriever: name -> agent.
AGENT_ALIASES = {"sa-rag+decomposition": "decomposition"}

#: Note on the scripted LLM's numbers (table header and JSON).
SCRIPTED_NOTE = "scripted LLM: these numbers test the plumbing (parsing, control flow, fallbacks), not answer quality"


# --------------------------------------------------------------------------- metering


def _tiktoken():
    import tiktoken

    from .. import integrations  # noqa: F401  (sets TIKTOKEN_CACHE_DIR, read at get_encoding time)

    return tiktoken.get_encoding("cl100k_base")


class MeteredLLM:
    """Wraps an LLM and counts calls and prompt / completion tokens.

    Tokens come from the wrapped client's ``usage`` counters when they grow on a call (an
    OpenAI-compatible endpoint returning ``usage``), else from tiktoken ``cl100k_base`` over the
    message contents and the reply. Other attributes are the wrapped client's.
    """

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.token_source = "tiktoken cl100k_base"
        self._enc = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.__dict__["llm"], name)
        if name == "complete_logprobs" and callable(attr):  # Self-RAG's logprob calls are counted too
            return self._counted_logprobs(attr)
        return attr

    def _counted_logprobs(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def complete_logprobs(prompt: str | list[Message], **kwargs: Any) -> Any:
            messages, before = to_messages(prompt), self._usage()
            try:
                out = fn(prompt, **kwargs)
            except Exception:
                with self._lock:
                    self.calls += 1
                raise
            self._record(messages, str(getattr(out, "text", "") or ""), before)
            return out

        return complete_logprobs

    def __repr__(self) -> str:
        return f"MeteredLLM({self.llm!r}, calls={self.calls})"

    def _count(self, text: str) -> int:
        if self._enc is None:
            self._enc = _tiktoken()
        return len(self._enc.encode(text, disallowed_special=()))

    def _usage(self) -> tuple[int, int] | None:
        usage = getattr(self.llm, "usage", None)
        if isinstance(usage, dict) and "prompt_tokens" in usage:
            return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        return None

    def _record(self, messages: list[Message], reply: str, before: tuple[int, int] | None) -> None:
        after = self._usage()
        with self._lock:
            self.calls += 1
            if before is not None and after is not None and after[0] > before[0]:
                self.prompt_tokens += after[0] - before[0]
                self.completion_tokens += after[1] - before[1]
                self.token_source = "endpoint usage"
            else:
                self.prompt_tokens += sum(self._count(m.get("content", "")) for m in messages)
                self.completion_tokens += self._count(reply)

    def complete(self, prompt: str | list[Message], **kwargs: Any) -> str:
        """The wrapped ``complete``, counted (a failed call counts as a call with no tokens)."""
        messages, before = to_messages(prompt), self._usage()
        try:
            reply = self.llm.complete(prompt, **kwargs)
        except Exception:
            with self._lock:
                self.calls += 1
            raise
        self._record(messages, reply, before)
        return reply

    async def acomplete(self, prompt: str | list[Message], **kwargs: Any) -> str:
        """The wrapped ``acomplete``, counted."""
        messages, before = to_messages(prompt), self._usage()
        try:
            reply = await self.llm.acomplete(prompt, **kwargs)
        except Exception:
            with self._lock:
                self.calls += 1
            raise
        self._record(messages, reply, before)
        return reply

    def snapshot(self) -> tuple[int, int, int]:
        """``(calls, prompt_tokens, completion_tokens)`` so far."""
        return self.calls, self.prompt_tokens, self.completion_tokens


# --------------------------------------------------------------------------- KG-Infused variants

_NO_RETRIEVAL_FIXED = re.sub(r"\{[a-z_]+\}", "\n", P.ANSWER_WITHOUT_RETRIEVAL)


def _answer_without_retrieval(kgi: KGInfusedRetriever, question: str) -> Answer:
    """NoR (Table 8): the answer prompt without passages, validated like the retriever's answer."""
    if kgi.llm is None:
        raise ValueError("no-retrieval needs an LLM")
    errors: list[dict[str, Any]] = []
    replies: list[str] = []

    def validate(reply: str) -> str:
        replies.append(reply)
        return check_text(P.postprocess(reply), max_chars=MAX_ANSWER_CHARS, instructions=_NO_RETRIEVAL_FIXED)

    text = complete_validated(
        kgi.llm,
        P.ANSWER_WITHOUT_RETRIEVAL.format(question=question),
        validate,
        step="answer",
        errors=errors,
        max_tokens=kgi.max_new_tokens,
        temperature=kgi.temperature,
    )
    meta: dict[str, Any] = {"raw": replies[-1] if replies else "", "retrievals": 0}
    if text is None:
        meta["llm_error"] = errors
    return Answer(question, text or "", Evidence(question), meta)


def _note_and_answer(
    kgi: KGInfusedRetriever,
    question: str,
    evidence: Evidence,
    errors: list[dict[str, Any]],
    summary: str | None = None,
) -> Answer:
    """Note over ``evidence``'s passages (Eq. 9), augmented with ``summary`` when given (Eq. 10),
    answer (Eq. 11). A failed note / augmentation falls back to the raw passages / the plain note."""
    note = enhanced = None
    try:
        note = kgi.write_note(question, evidence.passages)
    except LLMError as exc:
        errors.append({"step": "write_note", "error": str(exc)})
    if note is not None and summary is not None:
        try:
            enhanced = kgi.augment(question, note, summary)
        except LLMError as exc:
            errors.append({"step": "augment", "error": str(exc)})
    ans = kgi.answer(question, evidence, enhanced if enhanced is not None else note)
    errors += ans.metadata.pop("llm_error", [])
    ans.metadata.update(note=note, enhanced_note=enhanced)
    if errors:
        ans.metadata["llm_error"] = errors
    return ans


def kg_infused_system(variant: str, kgi: KGInfusedRetriever) -> Callable[[str], Answer]:
    """``question -> Answer`` for one KG-Infused variant (:data:`KG_INFUSED_VARIANTS`), built
    from ``kgi``'s public steps; ``kgi`` must have an LLM."""
    if variant not in KG_INFUSED_VARIANTS:
        raise ValueError(f"unknown KG-Infused variant {variant!r}; one of {', '.join(KG_INFUSED_VARIANTS)}")
    k_each = kgi.k_passages
    dense = DenseRetriever(kgi.index)

    def vanilla(question: str) -> Evidence:
        return dense.retrieve(question, 2 * k_each)

    def run(question: str) -> Answer:
        errors: list[dict[str, Any]] = []
        if variant == "no-retrieval":
            return _answer_without_retrieval(kgi, question)
        if variant == "full":
            return kgi.run(question)
        if variant == "vanilla-rag":
            ev = vanilla(question)
            return _note_and_answer(kgi, question, ev, errors)
        if variant == "vanilla-qe":
            memory = KGInfusedMemory(kgi.graph, (), question)  # empty: Table 10 prompt, errors recorded
            expanded = kgi.expand_query(question, "", memory)
            errors += memory.llm_errors
            passages = kgi.dual_retrieve(question, expanded, k_each)
            ans = _note_and_answer(kgi, question, Evidence(question, passages), errors)
            ans.metadata["expanded_query"] = expanded
            return ans
        if variant == "qe-only":
            ev = kgi.retrieve(question, 2 * k_each)
            errors += list(ev.trace.get("llm_error", []))
            ans = _note_and_answer(kgi, question, ev, errors)
            ans.metadata["expanded_query"] = ev.trace.get("expanded_query", question)
            return ans
        # ka-only: activation + summary, the note over the vanilla top-6 augmented with it
        memory = kgi.activate(question, kgi.seed(question))
        summary = kgi.summarize(question, memory)
        errors += list(getattr(memory, "llm_errors", []))
        ev = vanilla(question)
        ev = Evidence(question, ev.passages, memory.facts(), ev.trace)
        ans = _note_and_answer(kgi, question, ev, errors, summary=summary)
        ans.metadata["summary"] = summary
        return ans

    return run


# --------------------------------------------------------------------------- agents


def _agents_module() -> Any | None:
    """``kgrag_plugins.agents`` when it provides ``AGENTS`` and ``build_agent`` (else ``None``)."""
    try:
        from .. import agents
    except ImportError as exc:
        logger.debug("agent systems unavailable: %s", exc)
        return None
    if not hasattr(agents, "build_agent") or not hasattr(agents, "AGENTS"):
        return None
    return agents


def _agent_ready(agents: Any, name: str) -> bool:
    """Whether the module behind a registry entry exists (agents are written in parallel)."""
    module = getattr(agents, "_EXPORTS", {}).get(getattr(agents.AGENTS[name], "__name__", ""))
    has = getattr(agents, "_has_module", None)
    return module is None or has is None or bool(has(module))


def available_systems() -> list[str]:
    """The KG-Infused variants plus every agent in the registry whose module is present."""
    agents = _agents_module()
    found = [n for n in agents.AGENTS if _agent_ready(agents, n)] if agents is not None else []
    found += [alias for alias, agent in AGENT_ALIASES.items() if agent in found]
    return list(KG_INFUSED_VARIANTS) + found


def _agent_uses_kg_infused(name: str) -> bool:
    return "kg-infused" in name


def _option_targets(system: str) -> list[str]:
    """The ``--retriever-opt`` names that apply to ``system`` (its retrievers, then itself)."""
    if system in KG_INFUSED_VARIANTS:  # the baselines without the KG run once, with defaults
        return ["kg-infused"] if system in KG_SYSTEMS else []
    targets = [AGENT_RETRIEVER.get(system, "dense")]
    if _agent_uses_kg_infused(system):
        targets.append("kg-infused")
    return targets + [system]


def _system_grid(system: str, opts: dict[str, dict[str, list[Any]]]) -> list[dict[str, dict[str, Any]]]:
    """Every combination of the options that apply to ``system``: ``[{target: {key: value}}]``."""
    targets = [t for t in _option_targets(system) if t in opts]
    per_target = [[(t, combo) for combo in _opt_grid(opts[t])] for t in targets]
    return [dict(choice) for choice in itertools.product(*per_target)] if per_target else [{}]


def _label(system: str, combo: dict[str, dict[str, Any]]) -> str:
    parts = [
        f"{k}={v}" if target == system else f"{target}.{k}={v}" for target, kv in combo.items() for k, v in kv.items()
    ]
    return f"{system}[{','.join(parts)}]" if parts else system


# --------------------------------------------------------------------------- the bench


class _Indexes:
    """The dataset's plain (dense) index and its ``mentions`` graph index, built on first use."""

    def __init__(self, ds: Dataset, cache_dir: str | Path | None, progress: bool) -> None:
        self.ds, self.cache_dir, self.progress = ds, cache_dir, progress
        self._plain: KnowledgeIndex | None = None
        self._graph: KnowledgeIndex | None = None
        self.reused: dict[str, bool] = {}

    @property
    def plain(self) -> KnowledgeIndex:
        if self._plain is None:
            self._plain, self.reused["plain"] = dataset_index(self.ds, cache_dir=self.cache_dir, progress=self.progress)
        return self._plain

    @property
    def graph(self) -> KnowledgeIndex:
        if self._graph is None:
            self._graph, self.reused["mentions"] = dataset_index(
                self.ds, cache_dir=self.cache_dir, builder="mentions", progress=self.progress
            )
        return self._graph


def _warm(question: str, retriever: Any) -> None:
    """LLM-free first use before timing (lazy loads: entity vectors, SA-RAG's caches), as the
    retrieval bench's warm-up query."""
    if isinstance(retriever, KGInfusedRetriever):
        retriever.seed(question)
    else:
        retriever.retrieve(question, 6)


def _build_system(
    system: str, combo: dict[str, dict[str, Any]], indexes: _Indexes, llm: MeteredLLM, warm: str = ""
) -> Callable[[str], Answer]:
    """``question -> Answer`` for a system; its retrievers get an LLM-free warm-up on ``warm``."""
    kgi_opts = combo.get("kg-infused", {})
    if system in KG_INFUSED_VARIANTS:
        kgi = KGInfusedRetriever(indexes.graph, llm=llm, **kgi_opts)
        if warm and system != "no-retrieval":
            _warm(warm, kgi)
            _warm(warm, DenseRetriever(kgi.index))
        return kg_infused_system(system, kgi)
    agents = _agents_module()
    agent = AGENT_ALIASES.get(system, system)
    if agents is None or agent not in agents.AGENTS:
        raise ValueError(f"unknown QA system {system!r}; available: {', '.join(available_systems())}")
    base = AGENT_RETRIEVER.get(system, "dense")
    if base == "sa-rag":
        retrieve: Any = SARAGRetriever.for_dataset(indexes.ds.name, indexes.graph, **combo.get("sa-rag", {}))
    else:
        retrieve = DenseRetriever(indexes.plain, **combo.get("dense", {}))
    opts = dict(combo.get(system, {}))
    if _agent_uses_kg_infused(system):
        opts["kg_infused"] = KGInfusedRetriever(indexes.graph, llm=llm, **kgi_opts)
    for r in (retrieve, opts.get("kg_infused")) if warm else ():
        if r is not None:
            _warm(warm, r)
    graph = agents.build_agent(agent, retrieve, llm=llm, **opts)
    return lambda question: agents.run_agent(graph, question)


def _evaluate(
    run: Callable[[str], Answer], ds: Dataset, llm: MeteredLLM, label: str, progress: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scores: dict[str, list[float]] = {"em": [], "f1": [], "acc": [], "acc_raw": [], "f1_last_alias": []}
    latencies: list[float] = []
    retrievals: list[float] = []
    fallbacks = empty = 0
    c0 = llm.snapshot()
    rows: list[dict[str, Any]] = []
    for q in tqdm(ds.questions, desc=label, disable=not progress_enabled(progress), leave=False):
        t0 = time.perf_counter()
        ans = run(q.question)
        latencies.append(time.perf_counter() - t0)
        pred = ans.text or ""
        sc = answer_scores(pred, q.answers) if q.answers else {"em": 0.0, "f1": 0.0, "acc": 0.0, "acc_raw": 0.0}
        sc["f1_last_alias"] = f1_score(pred, q.answers[-1]) if q.answers else 0.0
        for k, v in sc.items():
            scores[k].append(v)
        fell_back = bool(ans.metadata.get("llm_error"))
        fallbacks += fell_back
        empty += not pred.strip()
        if isinstance(ans.metadata.get("retrievals"), (int, float)):
            retrievals.append(float(ans.metadata["retrievals"]))
        row = {"id": q.id, "prediction": pred, "answers": q.answers, "em": sc["em"], "fallback": fell_back}
        if fell_back:  # which steps fell back, and why (cut)
            row["llm_error"] = [
                {"step": e.get("step", "?"), "error": str(e.get("error", ""))[:200]}
                for e in ans.metadata["llm_error"]
                if isinstance(e, dict)
            ]
        rows.append(row)
    c1 = llm.snapshot()
    n = max(len(ds.questions), 1)
    out: dict[str, Any] = {k: round(mean(v), 4) for k, v in scores.items()}
    out.update(
        n=len(ds.questions),
        llm_calls=c1[0] - c0[0],
        llm_calls_per_q=round((c1[0] - c0[0]) / n, 2),
        prompt_tokens=c1[1] - c0[1],
        completion_tokens=c1[2] - c0[2],
        tokens_per_q={"prompt": round((c1[1] - c0[1]) / n, 1), "completion": round((c1[2] - c0[2]) / n, 1)},
        token_count=llm.token_source,
        latency_s={"p50": round(percentile(latencies, 50), 3), "p95": round(percentile(latencies, 95), 3)},
        fallbacks=fallbacks,
        empty_answers=empty,
    )
    if retrievals:
        out["retrievals_per_q"] = round(mean(retrievals), 2)
    return out, rows


def run_qa_bench(
    dataset: str | Dataset,
    systems: Sequence[str] | None,
    *,
    llm: Any,
    llm_name: str = "",
    data_dir: str | Path | None = None,
    limit: int | None = None,
    out: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    retriever_opts: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the QA ``systems`` (default :func:`available_systems`) with ``llm`` on ``dataset``;
    write the JSON report to ``out`` (if given) and return it (``results`` keyed by row label,
    ``predictions`` per row). ``retriever_opts`` as ``--retriever-opt``: one row per setting."""
    if llm is None:
        raise ValueError("run_qa_bench needs an LLM (see resolve_llm: an endpoint URL, vllm:PATH or 'scripted')")
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_dir=data_dir, limit=limit)
    if isinstance(dataset, Dataset) and limit is not None:
        ds = Dataset(ds.name, ds.questions[:limit], ds.corpus)
    if ds.corpus is None:
        raise ValueError(f"{ds.name} has no passage corpus: the QA bench needs one")
    systems = list(systems) if systems else available_systems()
    known = available_systems()
    unknown = [s for s in systems if s not in known]
    if unknown:
        raise ValueError(f"unknown QA system(s) {unknown}; available: {', '.join(known)}")
    opts = parse_retriever_opts(retriever_opts)
    used = {t for s in systems for t in _option_targets(s)}
    for name in opts:
        if name not in used:
            raise ValueError(
                f"--retriever-opt names {name!r}, which none of the systems uses; "
                f"options apply to: {', '.join(sorted(used)) or 'nothing'}"
            )
    indexes = _Indexes(ds, cache_dir, progress)
    t0 = time.perf_counter()
    corpus_size = len(indexes.plain.passages)
    from .scripted import ScriptedQALLM

    scripted = isinstance(llm, ScriptedQALLM)
    report: dict[str, Any] = {
        "task": "qa",
        "dataset": ds.name,
        "n_questions": len(ds.questions),
        "corpus_size": corpus_size,
        "llm": llm_name or repr(llm),
        "index_open_or_build_seconds": round(time.perf_counter() - t0, 2),
        "results": {},
        "predictions": {},
    }
    if scripted:
        report["note"] = SCRIPTED_NOTE
    for system in systems:
        for combo in _system_grid(system, opts):
            label = _label(system, combo)
            metered = MeteredLLM(llm)
            warm = ds.questions[0].question if ds.questions else ""
            run = _build_system(system, combo, indexes, metered, warm)
            result, rows = _evaluate(run, ds, metered, label, progress)
            result["system"] = system
            if combo:
                result["options"] = combo
            report["results"][label] = result
            report["predictions"][label] = rows
            logger.info("%s on %s: em=%.3f f1=%.3f", label, ds.name, result["em"], result["f1"])
    report["index_reused"] = indexes.reused
    _write(report, out)
    return report


def qa_markdown_table(report: dict[str, Any]) -> str:
    """The QA report as a markdown table (one row per system / setting)."""
    note = f"\n\n_{report['note']}_" if report.get("note") else ""
    head = (
        f"**{report['dataset']}** (QA): {report['n_questions']} questions, {report['corpus_size']} passages, "
        f"LLM: {report['llm']}{note}\n\n"
        "| system | EM | F1 | Acc | Acc_raw | F1 last alias | LLM calls/q | prompt tok/q | completion tok/q "
        "| p50 s | p95 s | fallbacks | empty |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {name} | {r['em']:.3f} | {r['f1']:.3f} | {r['acc']:.3f} | {r['acc_raw']:.3f} | {r['f1_last_alias']:.3f} "
        f"| {r['llm_calls_per_q']:.1f} | {r['tokens_per_q']['prompt']:.0f} | {r['tokens_per_q']['completion']:.0f} "
        f"| {r['latency_s']['p50']:.2f} | {r['latency_s']['p95']:.2f} | {r['fallbacks']} | {r['empty_answers']} |"
        for name, r in report["results"].items()
    ]
    return head + "\n".join(rows) + "\n"
