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
  against the gold aliases (EM is never 1 for a passage); best = first top-ranked, worst = first
  bottom-ranked; all equal -> dropped.
* Pairs with ``chosen == rejected`` are dropped. Records (:meth:`DPOPair.to_record`): ``prompt``,
  ``chosen``, ``rejected``, ``question_id``, ``dataset``, ``judge`` (``"llm"`` / ``"gold"``), plus
  ``round`` and the samplings of both answers.

**Training (App. E, Table 20).** TRL's ``DPOTrainer``: β 0.1, lr 5e-7, batch 4, 1 epoch, AdamW
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
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..config import progress_enabled
from ..datasets.metrics import accuracy_raw, f1_score
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
    "gold_judgement",
    "judge_prompt",
    "load_dpo_data",
    "parse_judgement",
    "sample_candidates",
    "save_dpo_data",
    "train_generator_dpo",
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


def gold_judgement(candidates: Sequence[str], answers: Sequence[str]) -> tuple[int, int] | None:
    """The LLM-free judge: rank by (KG-Infused Acc, SQuAD F1) against ``answers``; ``(best, worst)``
    0-based (first of equals), or ``None`` when every candidate scores the same."""
    if not answers or len(candidates) < 2:
        return None
    scores = [(accuracy_raw(c, list(answers)), f1_score(c, list(answers))) for c in candidates]
    best = max(range(len(scores)), key=lambda i: scores[i])
    worst = min(range(len(scores)), key=lambda i: scores[i])
    return None if scores[best] == scores[worst] else (best, worst)


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
    """``(best, worst, "llm" | "gold")`` or the reason the input yields no pair."""
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
    gold = gold_judgement(texts, answers)
    return (*gold, "gold") if gold is not None else "gold: all candidates score the same"


# ------------------------------------------------------------------ builder


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
    **retriever_options: Any,
) -> tuple[list[DPOPair], DPOStats]:
    """KA-stage preference pairs (module doc) for ``questions`` (objects with ``id``, ``question``,
    ``answers``) over ``index``, candidates from ``llm``, judged by ``judge`` (an LLM, or ``None``:
    the gold answers). ``retriever_options`` go to :class:`KGInfusedRetriever`."""
    from ..methods.kg_infused import KGInfusedRetriever

    if llm is None:
        raise ValueError("the DPO data needs the generator LLM (its KA outputs are what DPO trains on): pass llm=...")
    if len(samplings) < 2:
        raise ValueError("need at least 2 decoding settings to compare candidates")
    kgi = KGInfusedRetriever(index, llm=llm, rounds=max(rounds), **retriever_options)
    stats, pairs = DPOStats(), []
    questions = list(questions)
    for q in tqdm(questions, desc="DPO data", disable=not progress_enabled(progress), leave=False):
        stats.questions += 1
        for rnd, note, summary in _ka_inputs(kgi, q.question, rounds, stats):
            stats.inputs += 1
            prompt = P.AUG_PASSAGE.format(question=q.question, passage=note, triples_summary=summary)
            cands = sample_candidates(llm, prompt, samplings, stats)
            if len(cands) < 2:
                stats.skip("fewer than 2 distinct candidates")
                continue
            texts = [t for t, _ in cands]
            verdict = _judge(judge, q.question, note, summary, texts, q.answers, stats, q.id)
            if isinstance(verdict, str):
                stats.skip(verdict)
                continue
            best, worst, how = verdict
            if texts[best].strip() == texts[worst].strip():
                stats.skip("chosen == rejected")
                continue
            stats.judges[how] = stats.judges.get(how, 0) + 1
            pairs.append(
                DPOPair(
                    prompt=prompt,
                    chosen=texts[best],
                    rejected=texts[worst],
                    question_id=str(q.id),
                    dataset=dataset,
                    judge=how,
                    round=rnd,
                    chosen_sampling=cands[best][1],
                    rejected_sampling=cands[worst][1],
                    candidates=len(cands),
                )
            )
    stats.pairs = len(pairs)
    logger.info("DPO data (%s): %s", dataset, stats.to_dict())
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
    **options: Any,
) -> tuple[list[DPOPair], DPOStats]:
    """:func:`build_dpo_data` on the :func:`training_questions` of ``dataset``, over ``index`` (a
    :class:`~kgrag_plugins.index.store.KnowledgeIndex` or a saved index directory; default the
    dataset's cached ``mentions``-graph index)."""
    from ..datasets.indexes import dataset_index
    from ..index.store import KnowledgeIndex

    questions, ds = training_questions(dataset, data_dir, limit)
    if index is None:
        index, _ = dataset_index(ds, cache_dir=cache_dir, builder="mentions", progress=progress_enabled(progress))
    elif isinstance(index, (str, Path)):
        index = KnowledgeIndex.open(index)
    return build_dpo_data(questions, index, llm, dataset=ds.name, judge=judge, progress=progress, **options)


def save_dpo_data(pairs: Sequence[DPOPair], path: str | Path) -> Path:
    """Write the pairs as JSONL (:meth:`DPOPair.to_record`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p.to_record(), ensure_ascii=False) + "\n")
    return path


def load_dpo_data(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL written by :func:`save_dpo_data` (each row needs ``prompt``/``chosen``/``rejected``)."""
    rows = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if not all(isinstance(row.get(k), str) for k in ("prompt", "chosen", "rejected")):
                raise ValueError(f"{path}:{i}: a DPO record needs string prompt, chosen and rejected")
            rows.append(row)
    return rows


# ------------------------------------------------------------------ training


def _records(pairs: Sequence[DPOPair | dict[str, Any]], tokenizer: Any) -> list[dict[str, Any]]:
    """TRL preference records: conversational with a chat template, else ``prompt + "\\n"`` (TRL adds EOS)."""
    rows = [p.to_record() if isinstance(p, DPOPair) else dict(p) for p in pairs]
    if getattr(tokenizer, "chat_template", None):
        return [
            {
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "chosen": [{"role": "assistant", "content": r["chosen"]}],
                "rejected": [{"role": "assistant", "content": r["rejected"]}],
            }
            for r in rows
        ]
    return [{"prompt": r["prompt"] + "\n", "chosen": r["chosen"], "rejected": r["rejected"]} for r in rows]


def train_generator_dpo(
    pairs: Sequence[DPOPair | dict[str, Any]] | str | Path,
    base_model: str | Path,
    out_dir: str | Path,
    *,
    lora: bool = False,
    lora_r: int = 16,
    lora_alpha: int = 32,
    qlora: bool = False,
    merge: bool = False,
    max_steps: int | None = None,
    learning_rate: float | None = None,
    beta: float = 0.1,
    epochs: float = 1.0,
    batch_size: int = 4,
    per_device_batch_size: int = 1,
    max_length: int = 8000,
    ref_mixup_alpha: float = 0.6,
    ref_sync_steps: int = 512,
    seed: int = 42,
    resume: bool | str | Path = False,
    save_steps: int = 500,
    progress: bool | None = None,
    **trainer_args: Any,
) -> Path:
    """DPO of ``base_model`` on ``pairs`` (or a JSONL path) with the App. E defaults (module doc);
    saves the model (or the LoRA adapter, plus ``out_dir/merged`` with ``merge``) and the tokenizer
    to ``out_dir`` and a report to ``out_dir/train_report.json``; returns ``out_dir``.
    ``trainer_args`` go to ``DPOConfig`` (e.g. ``use_cpu=True``)."""
    from .lora import (
        device_args,
        export_merged,
        load_causal_lm,
        lora_config,
        loss_curve,
        peak_rss_mb,
        qlora_quantization,
        resume_checkpoint,
        save_adapter,
    )

    lora = lora or qlora
    if merge and not lora:
        raise ValueError("merge=True needs lora=True or qlora=True (a full fine-tune is already a plain model)")
    if qlora:
        qlora_quantization()
    rows = load_dpo_data(pairs) if isinstance(pairs, (str, Path)) else list(pairs)
    if not rows:
        raise ValueError("no DPO pairs to train on")
    try:
        from datasets import Dataset
        from trl import DPOConfig, DPOTrainer
    except ImportError as e:  # pragma: no cover - environment
        raise ImportError(f"DPO training needs the train extra: pip install 'kgrag-plugins[train]' ({e})") from e
    out = Path(out_dir)
    model, tokenizer = load_causal_lm(base_model, qlora=qlora)
    lr = learning_rate if learning_rate is not None else (5e-6 if lora else 5e-7)
    accumulation = max(1, batch_size // max(1, per_device_batch_size))
    config = DPOConfig(
        output_dir=str(out),
        learning_rate=lr,
        beta=beta,
        num_train_epochs=epochs,
        max_steps=-1 if max_steps is None else max_steps,
        per_device_train_batch_size=min(per_device_batch_size, batch_size),
        gradient_accumulation_steps=accumulation,
        max_length=max_length,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        weight_decay=0.0,
        warmup_steps=0,
        sync_ref_model=not lora,
        ref_model_mixup_alpha=ref_mixup_alpha,
        ref_model_sync_steps=ref_sync_steps,
        seed=seed,
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=2,
        disable_tqdm=not progress_enabled(True if progress is None else progress),
        report_to=[],
        **device_args(trainer_args),
    )
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(_records(rows, tokenizer)),
        processing_class=tokenizer,
        peft_config=lora_config(model, r=lora_r, alpha=lora_alpha) if lora else None,
    )
    resume_from = resume_checkpoint(resume, out)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume_from)
    train_s = time.perf_counter() - t0
    save_adapter(trainer, tokenizer, out, base_model)
    report: dict[str, Any] = {
        "pairs": len(rows),
        "train_seconds": round(train_s, 1),
        "peak_rss_mb": peak_rss_mb(),
        "loss_curve": loss_curve(trainer),
        "model": str(out),
        "base_model": str(base_model),
        "adapter": "qlora" if qlora else "lora" if lora else None,
        "learning_rate": lr,
        "beta": beta,
        "effective_batch": min(per_device_batch_size, batch_size) * accumulation,
        "sync_ref_model": not lora,
        "train_loss": float(result.training_loss),
        "global_steps": int(result.global_step),
        "resumed_from": resume_from,
    }
    if merge:
        report["merged"] = str(export_merged(out, out / "merged", base_model=base_model))
    (out / "train_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    logger.info("generator DPO: %d steps, loss %.4f -> %s", result.global_step, result.training_loss, out)
    return out
