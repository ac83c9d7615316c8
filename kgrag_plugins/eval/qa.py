"""``kgrag bench --qa``: end-to-end QA with the papers' baselines as variants.

Systems (``--systems``, default: all available):

* KG-Infused RAG and its ablations (docs/methods.md §1(a), Tables 2/5), built from the public steps of
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
  Self-RAG with and without KG-Infused (docs/methods.md §6.1-6.2), CoT-RAG, SA-RAG + CoT,
  decomposition (§6.3), the hop-aware front door. Their retrieve step is the dense retriever,
  or SA-RAG's for ``sa-rag+cot`` and ``sa-rag+decomposition`` (the ``decomposition`` agent over
  SA-RAG, the paper's ``hybrid_agent``; :data:`AGENT_RETRIEVER`, :data:`AGENT_ALIASES`).

Metrics per system (docs/methods.md §1(f), §9): ``em`` / ``f1`` (SQuAD, max over gold aliases),
``acc`` (gold contained after SQuAD normalisation), ``acc_raw`` (KG-Infused's raw lower-case
substring) and ``f1_last_alias`` (F1 against the last gold alias only, the function KG-Infused's
code reports; compare with its tables through this one). LLM calls and prompt / completion
tokens per question (the endpoint's ``usage`` when it returns one, else tiktoken ``cl100k_base``
over the message texts), latency p50 / p95 per question (after an LLM-free warm-up of each system's
retrievers on the first question), ``fallbacks`` (questions where any LLM
step fell back: ``llm_error`` in the answer), ``fallback_share`` and ``measured`` (at most 5 %
fallen back), ``reply_stats`` / ``invalid_replies`` / ``fallback_steps`` per LLM step, ``reruns``
(after an unavailable LLM), ``questions_per_minute`` and ``empty_answers`` (no valid answer:
scored as wrong, never the invalid reply). The question loop, the journal (``--resume``) and the
rerun policy are in :mod:`.qa_run`; metering in :mod:`.qa_meter`.

``vanilla-rag:RETRIEVER``: the ``vanilla-rag`` note + answer over the top 6 of any retriever of
:data:`~kgrag_plugins.eval.bench.RETRIEVERS`.

``--retriever-opt NAME.KEY=V1,V2`` runs one row per combination: ``NAME`` is a retriever the
systems use (``kg-infused``, ``sa-rag``, ``dense``) or a system (agent build options).
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..datasets.indexes import dataset_index
from ..datasets.loaders import Dataset, load_dataset
from ..index.store import KnowledgeIndex
from ..methods.baselines import DenseRetriever
from ..methods.kg_infused import KGInfusedRetriever
from ..methods.kg_infused import prompts as P
from ..methods.kg_infused.retriever import MAX_ANSWER_CHARS, KGInfusedMemory
from ..methods.sa_rag import SARAGRetriever
from ..models.llm import LLMError
from ..models.prompting import PASSAGE_PROMPT_CHARS, passage_budget
from ..models.prompting import passage_chars as current_passage_chars
from ..models.replies import check_text, complete_validated
from ..names import name_key, resolve_name
from ..types import Answer, Evidence
from .bench import DATASET_AWARE, RETRIEVERS, _opt_grid, _write, build_with_opts, parse_retriever_opts
from .qa_meter import MeteredLLM
from .qa_run import QAJournal, QARunAborted, default_journal_path, prompt_fingerprint, run_questions, summarize_row

__all__ = [
    "AGENT_ALIASES",
    "AGENT_RETRIEVER",
    "KG_INFUSED_VARIANTS",
    "MeteredLLM",
    "QARunAborted",
    "VANILLA_RAG_PREFIX",
    "available_systems",
    "kg_infused_system",
    "qa_markdown_table",
    "resolve_systems",
    "run_qa_bench",
]

logger = logging.getLogger(__name__)

#: KG-Infused RAG and its ablations (docs/methods.md §1(a)).
KG_INFUSED_VARIANTS = ("no-retrieval", "vanilla-rag", "vanilla-qe", "qe-only", "ka-only", "full")

#: The variants that use the KG (``kg-infused.*`` options apply to them; the other three run once).
KG_SYSTEMS = ("qe-only", "ka-only", "full")

#: The retriever behind each agent's retrieve step (others: ``dense``). SA-RAG's agents
#: (``modified_diffusion_agent.py``, ``hybrid_agent.py``) retrieve with spreading activation.
AGENT_RETRIEVER = {"sa-rag+cot": "sa-rag", "sa-rag+decomposition": "sa-rag"}

#: Harness systems that are a registry agent over another retriever: name -> agent.
AGENT_ALIASES = {"sa-rag+decomposition": "decomposition"}

#: ``vanilla-rag:RETRIEVER``: the vanilla RAG note + answer over any retriever of
#: :data:`~kgrag_plugins.eval.bench.RETRIEVERS` (its top 6 instead of the dense top 6).
VANILLA_RAG_PREFIX = "vanilla-rag:"

#: LLM options a resumed run may change (they decide whether a call times out, not what it
#: replies): recorded in the journal header's ``info``, not compared by ``--resume``.
RESUMABLE_OPTIONS = frozenset({"deadline"})

#: Note on the scripted LLM's numbers (table header and JSON).
SCRIPTED_NOTE = "scripted LLM: these numbers test the plumbing (parsing, control flow, fallbacks), not answer quality"


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

    vanilla_dense = vanilla_rag_system(dense, kgi)

    def run(question: str) -> Answer:
        errors: list[dict[str, Any]] = []
        if variant == "no-retrieval":
            return _answer_without_retrieval(kgi, question)
        if variant == "full":
            return kgi.run(question)
        if variant == "vanilla-rag":
            return vanilla_dense(question)
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


def resolve_systems(systems: Sequence[str]) -> list[str]:
    """The registered spelling of each QA system (``self_ask+kg_infused`` -> ``self-ask+kg-infused``,
    ``vanilla_rag:sa_rag`` -> ``vanilla-rag:sa-rag``); unknown names are kept for
    :func:`check_systems` to report."""
    known = available_systems()
    out = []
    for s in systems:
        if name_key(s).startswith(VANILLA_RAG_PREFIX):
            s = VANILLA_RAG_PREFIX + resolve_name(s[len(VANILLA_RAG_PREFIX) :], RETRIEVERS)
        out.append(resolve_name(s, known))
    return out


def check_systems(systems: Sequence[str]) -> None:
    """Raise :class:`ValueError` naming the systems that are neither available nor
    ``vanilla-rag:RETRIEVER`` with ``RETRIEVER`` in :data:`~kgrag_plugins.eval.bench.RETRIEVERS`."""
    known = available_systems()
    for s in systems:
        if s.startswith(VANILLA_RAG_PREFIX) and s[len(VANILLA_RAG_PREFIX) :] not in RETRIEVERS:
            raise ValueError(
                f"unknown retriever in QA system {s!r}: vanilla-rag:RETRIEVER takes one of {', '.join(RETRIEVERS)}"
            )
    unknown = [s for s in systems if s not in known and not s.startswith(VANILLA_RAG_PREFIX)]
    if unknown:
        raise ValueError(
            f"unknown QA system(s) {unknown}; available: {', '.join(known)}, and vanilla-rag:RETRIEVER "
            f"(RETRIEVER one of {', '.join(RETRIEVERS)})"
        )


def _agent_uses_kg_infused(name: str) -> bool:
    return "kg-infused" in name


def _option_targets(system: str) -> list[str]:
    """The ``--retriever-opt`` names that apply to ``system`` (its retrievers, then itself)."""
    if system.startswith(VANILLA_RAG_PREFIX):
        return [system[len(VANILLA_RAG_PREFIX) :]]
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
        self._others: dict[str, KnowledgeIndex] = {}
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

    def for_builder(self, builder: str | None) -> KnowledgeIndex:
        """The index a retriever of :data:`~kgrag_plugins.eval.bench.RETRIEVERS` reads (its builder)."""
        if builder is None:
            return self.plain
        if builder == "mentions":
            return self.graph
        if builder not in self._others:
            self._others[builder], self.reused[builder] = dataset_index(
                self.ds, cache_dir=self.cache_dir, builder=builder, progress=self.progress
            )
        return self._others[builder]


def vanilla_rag_system(retriever: Any, kgi: KGInfusedRetriever) -> Callable[[str], Answer]:
    """``vanilla-rag`` over ``retriever``: note over its top ``2 * kgi.k_passages`` (6), answer."""
    k = 2 * kgi.k_passages

    def run(question: str) -> Answer:
        return _note_and_answer(kgi, question, retriever.retrieve(question, k), [])

    return run


def _vanilla_rag_over(
    name: str, combo: dict[str, dict[str, Any]], indexes: _Indexes, llm: MeteredLLM, warm: str
) -> Callable[[str], Answer]:
    """``vanilla-rag:NAME``: the retriever built as the retrieval bench builds it (its index,
    dataset defaults, ``prepare``), ``--retriever-opt NAME.KEY=V`` applied."""
    factory, _, builder = RETRIEVERS[name]
    kw = {"dataset": indexes.ds.name} if name in DATASET_AWARE else {}
    retriever = factory(indexes.for_builder(builder), **kw, **combo.get(name, {}))
    prepare = getattr(retriever, "prepare", None)
    if callable(prepare):
        prepare()
    if warm:
        _warm(warm, retriever)
    return vanilla_rag_system(retriever, KGInfusedRetriever(indexes.graph, llm=llm))


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
    if system.startswith(VANILLA_RAG_PREFIX):
        return _vanilla_rag_over(system[len(VANILLA_RAG_PREFIX) :], combo, indexes, llm, warm)
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
    concurrency: int | Sequence[int] = 1,
    journal: str | Path | None | bool = None,
    resume: bool = False,
    llm_retries: int = 2,
    retry_wait: float | None = None,
    llm_options: dict[str, Any] | None = None,
    passage_chars: int | None = None,
) -> dict[str, Any]:
    """Run the QA ``systems`` (default :func:`available_systems`; also ``vanilla-rag:RETRIEVER``)
    with ``llm`` on ``dataset``; write the JSON report to ``out`` (if given) and return it
    (``results`` keyed by row label, ``predictions`` per row). ``retriever_opts`` as
    ``--retriever-opt``: one row per setting.

    ``concurrency``: questions of one row in flight at once (the LLM is shared); several values
    (``[1, 8]``) give one row per value, labelled ``SYSTEM@cN``, to compare throughput in one run.
    ``journal``: the
    journal file (default :func:`~kgrag_plugins.eval.qa_run.default_journal_path`; ``False``: in
    memory only); ``resume``: continue it (its config must match: dataset, systems, LLM, limit,
    ``retriever_opts``, ``llm_options`` but the ``deadline``; concurrency and retries may change).
    A question whose answer fell back because the LLM was
    unavailable is rerun after the cool-down (``retry_wait`` seconds, default the LLM breaker's
    ``cooldown``) up to ``llm_retries`` times; then :class:`QARunAborted` stops the run.
    ``passage_chars``: characters of each passage every prompt shows
    (:func:`~kgrag_plugins.models.prompting.passage_budget`; default ``KGRAG_PASSAGE_CHARS`` or
    4000); a budget other than 4000 goes into the journal's config."""
    if passage_chars is not None:
        with passage_budget(passage_chars):
            # only the parameters are bound here: the same call, inside the budget
            kw = {k: v for k, v in locals().items() if k not in ("dataset", "systems", "passage_chars")}
            return run_qa_bench(dataset, systems, **kw)
    if llm is None:
        raise ValueError("run_qa_bench needs an LLM (see resolve_llm: an endpoint URL, vllm:PATH or 'scripted')")
    levels = [concurrency] if isinstance(concurrency, int) else [int(c) for c in concurrency]
    if not levels or min(levels) < 1 or llm_retries < 0:
        raise ValueError(f"concurrency must be >= 1 and llm_retries >= 0, got {concurrency} and {llm_retries}")
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_dir=data_dir, limit=limit)
    if isinstance(dataset, Dataset) and limit is not None:
        ds = Dataset(ds.name, ds.questions[:limit], ds.corpus)
    if ds.corpus is None:
        raise ValueError(f"{ds.name} has no passage corpus: the QA bench needs one")
    systems = resolve_systems(systems) if systems else available_systems()
    check_systems(systems)
    used = {t for s in systems for t in _option_targets(s)}
    opts = parse_retriever_opts(retriever_opts, sorted(used))
    for name in opts:
        if name not in used:
            raise ValueError(
                f"--retriever-opt names {name!r}, which none of the systems uses; "
                f"options apply to: {', '.join(sorted(used)) or 'nothing'}"
            )
    config = {
        "dataset": ds.name,
        "systems": systems,
        "llm": llm_name or type(llm).__name__,
        "limit": limit,
        "n_questions": len(ds.questions),
        "retriever_opts": list(retriever_opts),
        "llm_options": {k: v for k, v in (llm_options or {}).items() if k not in RESUMABLE_OPTIONS},
        "prompts": prompt_fingerprint(),
    }
    chars = current_passage_chars()
    if chars != PASSAGE_PROMPT_CHARS:
        config["passage_chars"] = chars
    info = {k: v for k, v in (llm_options or {}).items() if k in RESUMABLE_OPTIONS}
    info.update(concurrency=concurrency if isinstance(concurrency, int) else levels, llm_retries=llm_retries)
    path = None if journal is False else Path(journal) if journal else default_journal_path(out, cache_dir, config)
    jrn = QAJournal(path, config, resume=resume, info=info)
    indexes = _Indexes(ds, cache_dir, progress)
    t0 = time.perf_counter()
    corpus_size = len(indexes.plain.passages)
    from .scripted import ScriptedQALLM

    report: dict[str, Any] = {
        "task": "qa",
        "dataset": ds.name,
        "n_questions": len(ds.questions),
        "corpus_size": corpus_size,
        "embedder": indexes.plain.embedder.name,
        "llm": llm_name or repr(llm),
        "index_open_or_build_seconds": round(time.perf_counter() - t0, 2),
        "concurrency": concurrency if isinstance(concurrency, int) else levels,
        "journal": str(path) if path else None,
        "resumed_questions": jrn.resumed,
        "results": {},
        "predictions": {},
    }
    if isinstance(llm, ScriptedQALLM):
        report["note"] = SCRIPTED_NOTE
    metered = MeteredLLM(llm, use_usage=max(levels) == 1)
    warm = ds.questions[0].question if ds.questions else ""
    # one row per system, option combination and concurrency level
    for system, combo, level in ((s, c, n) for s in systems for c in _system_grid(s, opts) for n in levels):
        label = _label(system, combo) + (f"@c{level}" if len(levels) > 1 else "")
        if len(jrn.finished(label)) < len(ds.questions):
            run = build_with_opts(label, combo, lambda: _build_system(system, combo, indexes, metered, warm))
            run_questions(
                run, ds.questions, row=label, journal=jrn, llm=metered, concurrency=level,
                retries=llm_retries, retry_wait=retry_wait, progress=progress,
            )  # fmt: skip
        done = jrn.finished(label)
        result, rows = summarize_row([done[i] for i in sorted(done)], jrn.sessions.get(label, []))
        result["system"] = system
        if combo:
            result["options"] = combo
        report["results"][label] = result
        report["predictions"][label] = rows
        logger.info("%s on %s: em=%.3f f1=%.3f", label, ds.name, result["em"], result["f1"])
        if not result["measured"]:
            logger.warning("%s: not measured (%.0f%% of questions fell back)", label, 100 * result["fallback_share"])
    report["index_reused"] = indexes.reused
    _write(report, out)
    return report


def _status(r: dict[str, Any]) -> str:
    return "measured" if r.get("measured", True) else f"not measured (fallbacks {100 * r['fallback_share']:.0f}%)"


def qa_markdown_table(report: dict[str, Any]) -> str:
    """The QA report as markdown: one row per system / setting (a row with more than 5 % of its
    questions fallen back is marked "not measured"), then the replies per LLM step."""
    note = f"\n\n_{report['note']}_" if report.get("note") else ""
    head = (
        f"**{report['dataset']}** (QA): {report['n_questions']} questions, {report['corpus_size']} passages, "
        f"LLM: {report['llm']}{note}\n\n"
        "| system | EM | F1 | Acc | Acc_raw | F1 last alias | LLM calls/q | prompt tok/q | completion tok/q "
        "| p50 s | p95 s | q/min | fallbacks | empty | status |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {name} | {r['em']:.3f} | {r['f1']:.3f} | {r['acc']:.3f} | {r['acc_raw']:.3f} | {r['f1_last_alias']:.3f} "
        f"| {r['llm_calls_per_q']:.1f} | {r['tokens_per_q']['prompt']:.0f} | {r['tokens_per_q']['completion']:.0f} "
        f"| {r['latency_s']['p50']:.2f} | {r['latency_s']['p95']:.2f} "
        f"| {'-' if r.get('questions_per_minute') is None else format(r['questions_per_minute'], '.1f')} "
        f"| {r['fallbacks']} | {r['empty_answers']} | {_status(r)} |"
        for name, r in report["results"].items()
    ]
    return head + "\n".join(rows) + "\n" + _step_table(report) + _usage_table(report)


def _step_table(report: dict[str, Any]) -> str:
    """Replies per LLM step and system: how many, the valid share, how many were schema-constrained,
    and the step's fallbacks."""
    lines = [
        f"| {name} | {step} | {st['replies']} | {100 * st['valid'] / st['replies'] if st['replies'] else 0:.0f}% "
        f"| {st['constrained']} | {r.get('fallback_steps', {}).get(step, 0)} |"
        for name, r in report["results"].items()
        for step, st in r.get("reply_stats", {}).items()
    ]
    if not lines:
        return ""
    return (
        "\n| system | step | replies | valid % | constrained | fallbacks |\n|---|---|---|---|---|---|\n"
        + "\n".join(lines)
        + "\n"
    )


def _usage_table(report: dict[str, Any]) -> str:
    """LLM calls, tokens and seconds in LLM calls per step and system, then each system's total
    (``llm_usage``, :mod:`kgrag_plugins.models.usage`; ``~`` marks estimated token counts)."""
    lines = []
    for name, r in report["results"].items():
        usage = r.get("llm_usage") or {}
        for step, st in [*(usage.get("steps") or {}).items(), *((("**total**", usage["total"]),) if usage else ())]:
            est = "~" if st.get("estimated") else ""
            lines.append(
                f"| {name} | {step} | {st.get('calls', 0)} | {est}{st.get('prompt_tokens', 0)} "
                f"| {est}{st.get('completion_tokens', 0)} | {float(st.get('seconds', 0.0)):.2f} |"
            )
    if not lines:
        return ""
    return (
        "\n| system | step | LLM calls | prompt tokens | completion tokens | LLM s |\n|---|---|---|---|---|---|\n"
        + "\n".join(lines)
        + "\n"
    )
