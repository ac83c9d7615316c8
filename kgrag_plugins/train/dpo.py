# ruff: noqa: E501  (the judge prompt's paragraphs stay single lines, as the model sees them)
"""``kgrag train generator-dpo``: KG-Infused RAG's DPO of the generator (Wu et al., arXiv
2506.09542, §3.7, App. D.2 and E; docs/methods.md §1(b)).

**Data (§3.7, App. E).** The paper samples *one* pipeline stage, KG-guided knowledge augmentation
(KA, Eq. 10): for a training question, run KG-Infused RAG for 1 and for 2 rounds of spreading
activation; each run gives one KA input ``x`` = the ``aug_passage`` prompt (Table 16) over the
question, the passage note of the dual-retrieved passages (Eq. 8-9) and the triples summary. For each
``x`` the generator writes 6 candidate outputs under the decoding settings :data:`PAPER_SAMPLINGS`
``(temperature, top-p)``; a judge (GPT-4o-mini in the paper) reads the Table 17 prompt
(:data:`JUDGE_PROMPT`) and returns ``{"best_id", "worst_id"}``; the pair is
``(prompt=x, chosen=best, rejected=worst)``.

Decisions where the paper is silent or our setting differs (also in ``docs/training.md``):

* **Questions.** The ``origin_split == "train"`` questions of the shared half of MuSiQue, 2Wiki and
  HotpotQA (:func:`training_questions`; the paper used 2Wiki's train set only), in file order.
* **Pipeline.** :class:`~kgrag_plugins.methods.kg_infused.KGInfusedRetriever` with the given LLM
  (greedy, as the paper's pipeline) over the dataset's index (``builder="mentions"`` graph, cached
  by :func:`~kgrag_plugins.datasets.indexes.dataset_index`). Round 2 continues the activation memory of
  round 1. A round is skipped when activation stopped before it (its input would repeat the
  previous round's), when no triple was selected (KA is not run on an empty summary), or when the
  note call fails.
* **Candidates.** Each candidate is validated like the pipeline's own KA replies (non-empty text,
  not symbols, not a refusal, not the instructions echoed, at most 4,000 characters); an invalid
  candidate is retried once, then left out. Identical candidates (after whitespace folding) are
  kept once; fewer than 2 distinct candidates -> no pair (nothing to compare). ``top-p`` reaches the
  model only through an :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` (``extra_body``);
  other LLMs vary the temperature only (the LLM protocol has no top-p).
* **Judge.** Any LLM endpoint (``judge``), validated with
  :func:`~kgrag_plugins.models.replies.complete_validated`: the reply must hold a JSON object with
  integer ``best_id`` / ``worst_id`` among the shown ids (retried once). ``best_id == worst_id`` is the
  prompt's "similar quality" answer: the input is dropped (the paper filters ambiguous judgements).
  On a reply that stays invalid or a failed call (WARNING + trace entry) and with no judge at all
  (the LLM-free path), the **gold answers** decide (``judge="gold"`` in the record): candidates are
  ranked by KG-Infused's Acc (a gold alias, lower-cased, inside the candidate) then SQuAD token F1
  against the gold aliases (EM is never 1 for a passage), then token F1 against the input's passage
  and facts (Table 17's "integrates the passage and the facts"; ``judge="evidence"`` when only this
  separated best from worst: none of the candidates names the answer); best = first top-ranked,
  worst = first bottom-ranked; all equal -> dropped.
* Pairs with ``chosen == rejected`` are dropped. Records (:meth:`DPOPair.to_record`): ``prompt``,
  ``chosen``, ``rejected``, ``question_id``, ``dataset``, ``judge`` (``"llm"`` / ``"gold"`` / ``"evidence"``), plus
  ``round`` and the samplings of both answers.

**Training (App. E, Table 20; :mod:`.dpo_train`).** TRL's ``DPOTrainer``: β 0.1, lr 5e-7, batch 4, 1 epoch, AdamW
(0.9, 0.999, 1e-8), weight decay 0, warmup 0, max length 8000, reference-model mixup α 0.6 synced
every 512 steps (TR-DPO, ``sync_ref_model``). The paper fine-tunes all parameters; ``lora`` /
``qlora`` (:mod:`.lora`) train an adapter instead, with lr 5e-6 (the alignment-handbook's QLoRA
DPO recipe: 5e-7 barely moves a low-rank update) and without reference sync (TRL does not support
it with PEFT: the reference is the base with the adapter disabled). The conversational format is
used when the tokenizer has a chat template (the paper's prompts are single user turns).
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..config import progress_enabled
from ..datasets.metrics import accuracy_raw, f1_score
from ..index.manifest import atomic_write_text
from ..methods.kg_infused import prompts as P
from ..models.llm import LLMError
from ..models.prompting import DATA_NOTICE, DataPrompt
from ..models.replies import InvalidReply, check_text, complete_validated

logger = logging.getLogger(__name__)

__all__ = [
    "DPO_DATASETS",
    "JUDGE_PROMPT",
    "PAPER_SAMPLINGS",
    "DPOPair",
    "DPOStats",
    "build_dpo_data",
    "build_dpo_dataset",
    "build_ka_inputs",
    "gold_judgement",
    "judge_prompt",
    "load_jsonl",
    "load_dpo_data",
    "pairs_from_candidates",
    "parse_judgement",
    "sample_candidates",
    "save_dpo_data",
    "save_jsonl",
    "training_questions",
]

#: Datasets with training questions for the data builder.
DPO_DATASETS = ("musique", "2wikimultihopqa", "hotpotqa")
#: App. E: the 6 decoding settings ``(temperature, top-p)`` of the candidates.
PAPER_SAMPLINGS: tuple[tuple[float, float], ...] = (
    (0.0, 1.0),
    (0.3, 0.95),
    (0.5, 0.9),
    (0.7, 0.9),
    (0.9, 0.8),
    (1.0, 0.7),
)
#: Max new tokens of every generation (docs/methods.md §1(b)).
MAX_NEW_TOKENS = 1000
MAX_CANDIDATE_CHARS = 4000

#: App. D.2, Table 17 (the judge); the passage, facts and outputs sit in data blocks (ours).
JUDGE_PROMPT = DataPrompt(
    """### Instructions
Task: You will receive a list of enhanced passage outputs generated based on a given question, a retrieved passage, and relevant factual information (triples summary).
Your task is to evaluate and compare the outputs to identify the best and worst ones.

Rules:
1. Focus only on the final enhanced passage. Ignore any prefatory comments, explanations, or formatting differences that do not affect content.
2. The quality of an enhanced passage is determined by:
   - Integration: How well the factual information has been integrated into the passage.
   - Coherence: The passage should be logically structured, readable, and maintain a natural flow.
   - Relevance: The enhanced passage should directly support answering the question.
   - Accuracy: Factual information should be incorporated correctly without hallucination or distortion.
   - Preservation: The original passage's meaning should be preserved and enhanced, not changed incorrectly.
3. If two outputs have substantially the same informational content (even if wording differs slightly), they are considered of equal quality.
4. If all outputs are of similar quality, or if no significant difference can be determined, use the same _id for both best and worst.
"""
    + DATA_NOTICE
    + """

Input:
Question:
{question}

Retrieved Passage:
<passage>
{passage}
</passage>

Relevant Factual Information:
<facts>
{facts}
</facts>

Enhanced Passage Outputs:
<outputs>
{outputs}
</outputs>

Output format:
Output the result as a JSON object:
{{"best_id": <_id of the highest-quality output>, "worst_id": <_id of the lowest-quality output>}}

Important:
Do not include any explanations, just the JSON output."""
)

_KA_INSTRUCTIONS = re.sub(r"\{[a-z_]+\}", "\n", P.AUG_PASSAGE)
_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.S)


@dataclass(frozen=True)
class DPOPair:
    """One preference pair of the KA stage: ``prompt`` (the Table 16 prompt) -> ``chosen`` / ``rejected``."""

    prompt: str
    chosen: str
    rejected: str
    question_id: str
    dataset: str
    judge: str
    round: int = 0
    chosen_sampling: tuple[float, float] = (0.0, 1.0)
    rejected_sampling: tuple[float, float] = (0.0, 1.0)
    candidates: int = 0

    def to_record(self) -> dict[str, Any]:
        rec = asdict(self)
        rec["chosen_sampling"], rec["rejected_sampling"] = list(self.chosen_sampling), list(self.rejected_sampling)
        return rec


@dataclass
class DPOStats:
    """Counts of :func:`build_dpo_data`: questions, KA inputs, pairs, judgements by kind, skips by reason."""

    questions: int = 0
    inputs: int = 0
    pairs: int = 0
    judges: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def merge(self, other: DPOStats) -> None:
        """Add ``other``'s counts (one question's) to these."""
        self.questions += other.questions
        self.inputs += other.inputs
        for mine, theirs in ((self.judges, other.judges), (self.skipped, other.skipped)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        self.errors.extend(other.errors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "inputs": self.inputs,
            "pairs": self.pairs,
            "judges": dict(self.judges),
            "skipped": dict(self.skipped),
            "llm_errors": len(self.errors),
        }


# ------------------------------------------------------------------ questions


def training_questions(
    dataset: str, data_dir: str | Path | None = None, limit: int | None = None
) -> tuple[list[Any], Any]:
    """The first ``limit`` ``origin_split == "train"`` questions of ``dataset`` (MuSiQue, 2Wiki,
    HotpotQA; shared half) and the loaded :class:`~kgrag_plugins.datasets.loaders.Dataset`."""
    from ..datasets.loaders import ALIASES, load_dataset

    key = ALIASES.get(dataset.strip().lower(), dataset.strip().lower())
    if key not in DPO_DATASETS:
        raise ValueError(f"no KG-Infused DPO data for {dataset!r}; choose from {', '.join(DPO_DATASETS)}")
    ds = load_dataset(key, data_dir)
    qs = [q for q in ds.questions if str(q.metadata.get("origin_split", "")).strip() == "train" and q.answers]
    return qs[:limit] if limit is not None else qs, ds


# ------------------------------------------------------------------ KA stage


def _ka_inputs(kgi: Any, question: str, rounds: Sequence[int], stats: DPOStats) -> list[tuple[int, str, str]]:
    """``(round, note, summary)`` per requested activation round (see the module doc for skips)."""
    memory = kgi.seed(question)
    out: list[tuple[int, str, str]] = []
    for r in sorted(set(rounds)):
        kgi.rounds = r  # activate() runs the rounds the memory has not run yet, up to kgi.rounds
        kgi.activate(question, memory)
        if len(memory.rounds) < r:
            stats.skip("activation stopped before the round")
            continue
        summary = kgi.summarize(question, memory)
        if not summary.strip():
            stats.skip("no triple selected")
            continue
        expanded = kgi.expand_query(question, summary, memory)
        passages = kgi.dual_retrieve(question, expanded, kgi.k_passages)
        try:
            note = kgi.write_note(question, passages)
        except LLMError as exc:
            stats.errors.append({"step": "write_note", "error": str(exc)})
            stats.skip("note failed")
            continue
        out.append((r, note or "", summary))
    stats.errors.extend(getattr(memory, "llm_errors", []))
    return out


def _sampler(llm: Any, top_p: float) -> Any:
    """``llm`` with ``top_p`` in its request body (OpenAI-compatible clients); others as they are."""
    from ..models.llm import OpenAICompatibleLLM

    if isinstance(llm, OpenAICompatibleLLM) and top_p < 1.0:
        clone = copy.copy(llm)
        clone.extra_body = {**llm.extra_body, "top_p": top_p}
        return clone
    return llm


def _validate_candidate(reply: str) -> str:
    return check_text(P.postprocess(reply), max_chars=MAX_CANDIDATE_CHARS, instructions=_KA_INSTRUCTIONS)


def sample_candidates(
    llm: Any, prompt: str, samplings: Sequence[tuple[float, float]], stats: DPOStats
) -> list[tuple[str, tuple[float, float]]]:
    """The distinct valid KA outputs of ``prompt`` under each ``(temperature, top-p)``, in order."""
    out: list[tuple[str, tuple[float, float]]] = []
    seen: set[str] = set()
    for temperature, top_p in samplings:
        text = complete_validated(
            _sampler(llm, top_p),
            prompt,
            _validate_candidate,
            step="dpo_candidate",
            errors=stats.errors,
            context={"temperature": temperature, "top_p": top_p},
            log=logger,
            max_tokens=MAX_NEW_TOKENS,
            temperature=temperature,
        )
        if text is None:
            continue
        key = " ".join(text.split())
        if key not in seen:
            seen.add(key)
            out.append((text, (float(temperature), float(top_p))))
    return out


# ------------------------------------------------------------------ judging


def judge_prompt(question: str, passage: str, facts: str, candidates: Sequence[str]) -> str:
    """The Table 17 prompt; candidates are numbered ``_id`` 1..n inside the ``<outputs>`` block."""
    outputs = "\n\n".join(f"_id: {i}\n{text}" for i, text in enumerate(candidates, 1))
    return JUDGE_PROMPT.format(question=question, passage=passage, facts=facts, outputs=outputs)


def parse_judgement(reply: str, n: int) -> tuple[int, int]:
    """``(best, worst)`` as 0-based indices from a judge reply holding ``{"best_id": i, "worst_id": j}``
    with ids in 1..``n`` (a code fence or text around the object is allowed); else :class:`InvalidReply`."""
    for m in _JSON_OBJECT.finditer(reply or ""):
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or "best_id" not in obj or "worst_id" not in obj:
            continue
        ids = []
        for key in ("best_id", "worst_id"):
            v = obj[key]
            if isinstance(v, bool) or not isinstance(v, (int, str)) or not str(v).strip().isdigit():
                raise InvalidReply(f"{key} is not an integer id: {v!r}")
            if not 1 <= int(v) <= n:
                raise InvalidReply(f"{key} {v} is not one of the ids 1..{n}")
            ids.append(int(v) - 1)
        return ids[0], ids[1]
    raise InvalidReply(f"no JSON object with best_id and worst_id in {(reply or '')[:200]!r}")


def _gold_ranking(
    candidates: Sequence[str], answers: Sequence[str], evidence: str | None
) -> tuple[int, int, str] | None:
    """:func:`gold_judgement` plus what decided it: ``"gold"`` (the answers) or ``"evidence"``."""
    if not answers or len(candidates) < 2:
        return None
    scores = [
        (accuracy_raw(c, list(answers)), f1_score(c, list(answers))) + ((f1_score(c, [evidence]),) if evidence else ())
        for c in candidates
    ]
    best = max(range(len(scores)), key=lambda i: scores[i])
    worst = min(range(len(scores)), key=lambda i: scores[i])
    if scores[best] == scores[worst]:
        return None
    return best, worst, "gold" if scores[best][:2] != scores[worst][:2] else "evidence"


def gold_judgement(
    candidates: Sequence[str], answers: Sequence[str], evidence: str | None = None
) -> tuple[int, int] | None:
    """The LLM-free judge: rank by (KG-Infused Acc, SQuAD F1) against ``answers``, then, with
    ``evidence`` (the KA input's passage and facts), by token F1 against it: Table 17's "integrates
    the passage and the facts, stays on them" when the answers cannot tell the candidates apart
    (none names a gold alias). ``(best, worst)`` 0-based (first of equals), or ``None`` when every
    candidate scores the same."""
    ranked = _gold_ranking(candidates, answers, evidence)
    return None if ranked is None else ranked[:2]


def _judge(
    judge: Any,
    question: str,
    note: str,
    summary: str,
    texts: list[str],
    answers: Sequence[str],
    stats: DPOStats,
    qid: str,
) -> tuple[int, int, str] | str:
    """``(best, worst, "llm" | "gold" | "evidence")`` or the reason the input yields no pair."""
    if judge is not None:
        picked = complete_validated(
            judge,
            judge_prompt(question, note, summary, texts),
            lambda reply: parse_judgement(reply, len(texts)),
            step="dpo_judge",
            errors=stats.errors,
            context={"question_id": qid},
            log=logger,
            max_tokens=64,
            temperature=0.0,
        )
        if picked is not None:
            return (*picked, "llm") if picked[0] != picked[1] else "judge: all of similar quality"
        logger.warning("question %s: judge reply invalid twice, the gold answers decide (judge='gold')", qid)
    ranked = _gold_ranking(texts, answers, f"{note}\n{summary}")
    return ranked if ranked is not None else "gold: all candidates score the same"


# ------------------------------------------------------------------ builder


def _pair_of(
    rec: dict[str, Any], cands: list[tuple[str, tuple[float, float]]], judge: Any, stats: DPOStats
) -> DPOPair | None:
    """The judged pair of one KA input (a :func:`build_ka_inputs` record) from its distinct valid
    candidates, or ``None`` (a skip is counted)."""
    if len(cands) < 2:
        stats.skip("fewer than 2 distinct candidates")
        return None
    texts = [t for t, _ in cands]
    verdict = _judge(
        judge, rec["question"], rec["note"], rec["summary"], texts, rec["answers"], stats, rec["question_id"]
    )
    if isinstance(verdict, str):
        stats.skip(verdict)
        return None
    best, worst, how = verdict
    if texts[best].strip() == texts[worst].strip():
        stats.skip("chosen == rejected")
        return None
    stats.judges[how] = stats.judges.get(how, 0) + 1
    return DPOPair(
        prompt=rec["prompt"],
        chosen=texts[best],
        rejected=texts[worst],
        question_id=str(rec["question_id"]),
        dataset=rec["dataset"],
        judge=how,
        round=int(rec["round"]),
        chosen_sampling=cands[best][1],
        rejected_sampling=cands[worst][1],
        candidates=len(cands),
    )


def _question_inputs(kgi: Any, q: Any, rounds: Sequence[int], dataset: str) -> tuple[list[dict[str, Any]], DPOStats]:
    """One question's KA inputs as records (:func:`build_ka_inputs`, without ``input_id``)."""
    stats, out = DPOStats(questions=1), []
    for rnd, note, summary in _ka_inputs(kgi, q.question, rounds, stats):
        stats.inputs += 1
        prompt = P.AUG_PASSAGE.format(question=q.question, passage=note, triples_summary=summary)
        out.append({
            "question_id": str(q.id), "question": q.question, "answers": list(q.answers), "dataset": dataset,
            "round": rnd, "note": note, "summary": summary, "prompt": prompt,
        })  # fmt: skip
    return out, stats


def _question_pairs(
    kgi: Any,
    q: Any,
    llm: Any,
    judge: Any,
    rounds: Sequence[int],
    samplings: Sequence[tuple[float, float]],
    dataset: str,
) -> tuple[list[DPOPair], DPOStats]:
    """One question's pairs and counts (module doc): its KA inputs, candidates, judgements."""
    records, stats = _question_inputs(kgi, q, rounds, dataset)
    pairs = []
    for rec in records:
        pair = _pair_of(rec, sample_candidates(llm, rec["prompt"], samplings, stats), judge, stats)
        if pair is not None:
            pairs.append(pair)
    return pairs, stats


def _per_question(
    fn: Any, questions: list[Any], workers: int, progress: bool | None, desc: str
) -> list[tuple[list[Any], DPOStats]]:
    """``fn(q)`` for every question, ``workers`` at once (threads; an OpenAI-compatible server
    batches their calls), results in question order (``workers`` checked by :func:`_checked`)."""
    results: list[tuple[list[Any], DPOStats]] = []
    with tqdm(total=len(questions), desc=desc, disable=not progress_enabled(progress), leave=False) as bar:
        if workers == 1:
            for q in questions:
                results.append(fn(q))
                bar.update(1)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kgrag-dpo") as pool:
                for fut in [pool.submit(fn, q) for q in questions]:
                    results.append(fut.result())
                    bar.update(1)
    return results


def _merged(results: list[tuple[list[Any], DPOStats]]) -> tuple[list[Any], DPOStats]:
    items, stats = [], DPOStats()
    for part, qstats in results:
        items.extend(part)
        stats.merge(qstats)
    return items, stats


def _checked(llm: Any, rounds: Sequence[int], workers: int) -> None:
    if llm is None:
        raise ValueError("the DPO data needs the generator LLM (its KA outputs are what DPO trains on): pass llm=...")
    if not rounds:
        raise ValueError("rounds must name at least one activation round")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def build_dpo_data(
    questions: Iterable[Any],
    index: Any,
    llm: Any,
    *,
    dataset: str,
    judge: Any = None,
    rounds: Sequence[int] = (1, 2),
    samplings: Sequence[tuple[float, float]] = PAPER_SAMPLINGS,
    progress: bool | None = None,
    workers: int = 1,
    **retriever_options: Any,
) -> tuple[list[DPOPair], DPOStats]:
    """KA-stage preference pairs (module doc) for ``questions`` (objects with ``id``, ``question``,
    ``answers``) over ``index``, candidates from ``llm``, judged by ``judge`` (an LLM, or ``None``:
    the gold answers). ``workers`` questions run at once (threads; pairs and counts come back in
    question order). ``retriever_options`` go to :class:`KGInfusedRetriever`."""
    from ..methods.kg_infused import KGInfusedRetriever

    _checked(llm, rounds, workers)
    if len(samplings) < 2:
        raise ValueError("need at least 2 decoding settings to compare candidates")
    kgi = KGInfusedRetriever(index, llm=llm, rounds=max(rounds), **retriever_options)

    def one(q: Any) -> tuple[list[DPOPair], DPOStats]:
        # a shallow copy per question: _ka_inputs sets .rounds; the index and caches are shared
        return _question_pairs(copy.copy(kgi), q, llm, judge, rounds, samplings, dataset)

    pairs, stats = _merged(_per_question(one, list(questions), workers, progress, "DPO data"))
    stats.pairs = len(pairs)
    logger.info("DPO data (%s): %s", dataset, stats.to_dict())
    return pairs, stats


# ------------------------------------------------------------------ candidates sampled elsewhere


def build_ka_inputs(
    questions: Iterable[Any],
    index: Any,
    llm: Any,
    *,
    dataset: str,
    rounds: Sequence[int] = (1, 2),
    progress: bool | None = None,
    workers: int = 1,
    **retriever_options: Any,
) -> tuple[list[dict[str, Any]], DPOStats]:
    """Step 2 of the module doc alone: the KA inputs of ``questions`` as records (``input_id``,
    ``question_id``, ``question``, ``answers``, ``dataset``, ``round``, ``note``, ``summary``,
    ``prompt``), so that the six candidates per input can be sampled elsewhere (the same generator
    on a GPU: ``benchmarks/dpo_candidates_gpu.py``) and judged by :func:`pairs_from_candidates`."""
    from ..methods.kg_infused import KGInfusedRetriever

    _checked(llm, rounds, workers)
    kgi = KGInfusedRetriever(index, llm=llm, rounds=max(rounds), **retriever_options)
    records, stats = _merged(
        _per_question(
            lambda q: _question_inputs(copy.copy(kgi), q, rounds, dataset), list(questions), workers, progress,
            "KA inputs",
        )
    )  # fmt: skip
    for i, rec in enumerate(records):
        rec["input_id"] = i
    logger.info("KA inputs (%s): %s", dataset, stats.to_dict())
    return records, stats


def pairs_from_candidates(
    inputs: Sequence[dict[str, Any]], candidates: Iterable[dict[str, Any]], *, judge: Any = None
) -> tuple[list[DPOPair], DPOStats]:
    """Judge candidates sampled elsewhere: ``candidates`` are records ``{"input_id", "text",
    "temperature", "top_p"}`` for the :func:`build_ka_inputs` records ``inputs``. Each candidate is
    validated as in :func:`sample_candidates` (an invalid one cannot be asked again here: it is left
    out, counted in ``skipped["invalid candidate"]``), duplicates are kept once, and the rest is
    :func:`build_dpo_data`'s: the judge (``None``: the gold answers), the skips, the records."""
    by_input: dict[int, list[dict[str, Any]]] = {}
    for c in candidates:
        by_input.setdefault(int(c["input_id"]), []).append(c)
    unknown = set(by_input) - {int(r["input_id"]) for r in inputs}
    if unknown:
        raise ValueError(f"candidates name input ids that are not in the KA inputs: {sorted(unknown)[:5]}")
    stats, pairs = DPOStats(), []
    stats.questions = len({r["question_id"] for r in inputs})
    for rec in inputs:
        stats.inputs += 1
        cands: list[tuple[str, tuple[float, float]]] = []
        seen: set[str] = set()
        for c in by_input.get(int(rec["input_id"]), []):
            try:
                text = _validate_candidate(str(c["text"]))
            except InvalidReply:
                stats.skip("invalid candidate")
                continue
            key = " ".join(text.split())
            if key not in seen:
                seen.add(key)
                cands.append((text, (float(c["temperature"]), float(c["top_p"]))))
        pair = _pair_of(rec, cands, judge, stats)
        if pair is not None:
            pairs.append(pair)
    stats.pairs = len(pairs)
    logger.info("DPO pairs from sampled candidates: %s", stats.to_dict())
    return pairs, stats


def build_dpo_dataset(
    dataset: str,
    llm: Any,
    *,
    judge: Any = None,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    index: Any = None,
    cache_dir: str | Path | None = None,
    progress: bool | None = None,
    inputs_only: bool = False,
    **options: Any,
) -> tuple[list[Any], DPOStats]:
    """:func:`build_dpo_data` (or, with ``inputs_only``, :func:`build_ka_inputs`) on the
    :func:`training_questions` of ``dataset``, over ``index`` (a
    :class:`~kgrag_plugins.index.store.KnowledgeIndex` or a saved index directory; default the
    dataset's cached ``mentions``-graph index)."""
    from ..datasets.indexes import dataset_index
    from ..index.store import KnowledgeIndex

    questions, ds = training_questions(dataset, data_dir, limit)
    if index is None:
        index, _ = dataset_index(ds, cache_dir=cache_dir, builder="mentions", progress=progress_enabled(progress))
    elif isinstance(index, (str, Path)):
        index = KnowledgeIndex.open(index)
    if inputs_only:
        return build_ka_inputs(questions, index, llm, dataset=ds.name, progress=progress, **options)
    return build_dpo_data(questions, index, llm, dataset=ds.name, judge=judge, progress=progress, **options)


def save_dpo_data(pairs: Sequence[DPOPair], path: str | Path) -> Path:
    """Write the pairs as JSONL (:meth:`DPOPair.to_record`)."""
    return save_jsonl((p.to_record() for p in pairs), path)


def save_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write ``records`` (KA inputs, sampled candidates) one JSON object a line, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records))
    return path


def _numbered_objects(path: str | Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` per non-blank line; a line that is not a JSON object is a clear error."""
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not JSON ({e})") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{i}: expected a JSON object")
            yield i, row


def load_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL of objects (blank lines skipped); a line that is not an object is a clear error."""
    return [row for _i, row in _numbered_objects(path)]


def load_dpo_data(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL written by :func:`save_dpo_data` (each row needs ``prompt``/``chosen``/``rejected``)."""
    rows = []
    for i, row in _numbered_objects(path):
        if not all(isinstance(row.get(k), str) for k in ("prompt", "chosen", "rejected")):
            raise ValueError(f"{path}:{i}: a DPO record needs string prompt, chosen and rejected")
        rows.append(row)
    return rows
