"""The question loop of ``kgrag bench --qa``: reruns after LLM outages, concurrency, the journal
(``--journal`` / ``--resume``) and the per-row summary built from the journal (docs/qa.md).

Journal: JSON lines. The first is a header ``{"type": "header", "version", "config"}`` (dataset,
systems, LLM, limit, options and :func:`prompt_fingerprint`: ``--resume`` refuses a journal whose
config differs, except for a larger ``--limit``, recorded as an ``{"type": "extend"}`` line; one
written before the fingerprint existed resumes with a WARNING) and ``info`` (options a resumed
run may change: deadline, concurrency, retries); then one
``{"type": "question", "row", "i", ...}`` line per finished (row, question), appended, flushed and
fsynced as each question finishes; and one ``{"type": "row", "row", "n_run", "wall_s",
"concurrency"}`` line per row per session (throughput). A torn last line (a kill mid-write) is
dropped on resume. The report is always built from the journal's question lines, so a resumed run
reports what an uninterrupted one would (latency aside).
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..config import cache_dir as default_cache_dir
from ..config import progress_enabled
from ..datasets.loaders import Question
from ..datasets.metrics import answer_scores, f1_score, mean, percentile
from ..models.llm import LLMError
from ..models.usage import LLM_USAGE_KEY, add_usage, metering_usage
from ..types import Answer
from .qa_meter import RETRYABLE_ERRORS, MeteredLLM, QuestionMeter, metering

__all__ = [
    "DEFAULT_RETRY_WAIT",
    "MEASURED_MAX_FALLBACK_SHARE",
    "QAJournal",
    "QARunAborted",
    "default_journal_path",
    "prompt_fingerprint",
    "read_journal",
    "run_questions",
    "summarize_row",
]

logger = logging.getLogger(__name__)

JOURNAL_VERSION = 1
#: Seconds to wait before rerunning a question after an LLM outage when the LLM has no breaker.
DEFAULT_RETRY_WAIT = 3.0
#: A row whose share of questions with any fallback exceeds this is reported as not measured.
MEASURED_MAX_FALLBACK_SHARE = 0.05
SCORE_KEYS = ("em", "f1", "acc", "acc_raw", "f1_last_alias")
_sleep = time.sleep  # the cool-down wait (tests replace it)
#: The modules (paths under the package) whose code and strings make the QA systems' prompts and
#: output schemas: :func:`prompt_fingerprint` hashes them.
PROMPT_MODULES = (
    "methods/kg_infused/prompts.py",
    "methods/sa_rag/prompts.py",
    "methods/frag/prompts.py",
    "methods/know3/prompts.py",
    "methods/translator/prompts.py",
    "agents/prompts.py",
    "agents/self_rag_prompts.py",
    "models/prompting.py",
    "models/structured.py",
)
#: The config key of the fingerprint in a journal's header.
PROMPTS_KEY = "prompts"


def _code_without_docs(source: str) -> str:
    """``source``'s syntax tree without docstrings or positions: what a comment, a docstring or a
    reformat leaves unchanged."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def prompt_fingerprint(modules: Sequence[str] = PROMPT_MODULES, root: str | Path | None = None) -> str:
    """A hash (12 hex digits) of the prompt and schema modules' code (:data:`PROMPT_MODULES`, read
    under ``root``, default this package), comments, docstrings and layout ignored. It goes into a
    journal's config, so ``--resume`` refuses to mix answers given under reworded prompts or
    changed output schemas with new ones."""
    base = Path(root) if root is not None else Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for rel in modules:
        h.update(rel.encode() + b"\0" + _code_without_docs((base / rel).read_text(encoding="utf-8")).encode() + b"\0")
    return h.hexdigest()[:12]


class QARunAborted(LLMError):
    """The LLM stayed unavailable for a question after every rerun: the run stopped; its journal
    holds the finished questions (``--resume`` continues)."""


def default_journal_path(out: str | Path | None, cache_dir: str | Path | None, config: dict[str, Any]) -> Path:
    """``<out>.journal.jsonl`` when ``out`` is given, else a file under the cache directory keyed
    by the run's config (dataset, systems, LLM, limit, options)."""
    if out:
        return Path(f"{out}.journal.jsonl")
    key = hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
    name = "".join(c if c.isalnum() else "-" for c in str(config.get("dataset", "qa"))).strip("-").lower()
    return Path(cache_dir or default_cache_dir()) / "qa-journals" / f"{name}-{key}.jsonl"


#: Config keys a resumed run may raise: the questions are the dataset's first ``limit`` (the corpus
#: does not depend on it), so a larger limit keeps every finished answer valid.
_EXTENDABLE = ("limit", "n_questions")


def _limit_grows(old: dict[str, Any], new: dict[str, Any]) -> tuple[int, int] | None:
    """``(old n, new n)`` when ``new`` differs from ``old`` only by a larger question limit."""
    if {k: v for k, v in old.items() if k not in _EXTENDABLE} != {k: v for k, v in new.items() if k not in _EXTENDABLE}:
        return None
    a, b = old.get("n_questions"), new.get("n_questions")
    if not isinstance(a, int) or not isinstance(b, int) or b <= a:
        return None
    if old.get("limit") is None:  # the old run already had every question
        return None
    return a, b


def _parse_journal(text: str, path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(config, records)`` of a journal's text: the header's config with any ``extend`` line's
    limit applied, and every line after the header. ``ValueError`` names a missing header or a
    damaged line."""
    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        header = {}
    if not isinstance(header, dict) or header.get("type") != "header":
        raise ValueError(f"{path} is not a QA journal (no header line)")
    config = dict(header.get("config") or {})
    records = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} line {n} is damaged ({e})") from e
    for rec in records:  # an earlier resume that raised --limit
        if rec.get("type") == "extend":
            config.update({k: rec[k] for k in _EXTENDABLE if k in rec})
    return config, records


def read_journal(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a QA journal without changing it: ``(config, records)``, where config is the header's
    (with the limit of any later ``extend`` line) and records are the lines after the header
    (``question``, ``row``, ``extend``). A torn last line (a kill mid-write) is ignored."""
    path = Path(path)
    data = path.read_bytes()
    return _parse_journal(data[: data.rfind(b"\n") + 1].decode("utf-8"), path)


class QAJournal:
    """An append-only JSON-lines journal of finished questions (see the module docstring);
    ``path=None`` keeps it in memory only. Appends are thread-safe."""

    def __init__(
        self,
        path: str | Path | None,
        config: dict[str, Any],
        *,
        resume: bool = False,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.config = json.loads(json.dumps(config, default=str))
        self.done: dict[str, dict[int, dict[str, Any]]] = {}
        self.sessions: dict[str, list[dict[str, Any]]] = {}
        self.resumed = 0
        self._lock = threading.Lock()
        if self.path is None:
            return
        if resume and self.path.is_file() and self.path.stat().st_size:
            self._load()
            self.resumed = sum(len(v) for v in self.done.values())
            logger.info("resuming from %s: %d finished questions", self.path, self.resumed)
            return
        if self.path.is_file() and self.path.stat().st_size:
            prev = self.path.with_name(self.path.name + ".prev")
            self.path.replace(prev)
            logger.warning("starting a new journal at %s (the previous one is now %s)", self.path, prev)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._append({"type": "header", "version": JOURNAL_VERSION, "config": self.config, "info": info or {}})

    def _load(self) -> None:
        assert self.path is not None
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # a torn last line: drop it so the next append starts a fresh line
            logger.warning("%s: ignoring a torn last line (%d bytes)", self.path, len(data) - end)
            with self.path.open("r+b") as fh:
                fh.truncate(end)
            data = data[:end]
        try:
            old, records = _parse_journal(data.decode("utf-8"), self.path)
        except ValueError as e:
            raise ValueError(f"--resume: {e}") from e
        mine = self.config
        extended = _limit_grows(old, mine)
        if extended:
            old.update({k: mine.get(k) for k in _EXTENDABLE})
        if PROMPTS_KEY not in old and PROMPTS_KEY in mine:
            logger.warning(
                "%s was written before journals recorded a prompt fingerprint: resuming without checking "
                "that its prompts and output schemas are today's",
                self.path,
            )
            mine = {k: v for k, v in mine.items() if k != PROMPTS_KEY}
        if old != mine:
            diff = sorted(k for k in set(old) | set(mine) if old.get(k) != mine.get(k))
            details = "; ".join(f"{k}: journal {old.get(k)!r}, now {mine.get(k)!r}" for k in diff)
            why = (
                "; its prompts or output schemas differ from this version's, so its answers are not this "
                "version's: drop --resume (or pass another --journal) to start over"
                if PROMPTS_KEY in diff
                else "; rerun with the same options, or drop --resume (or pass another --journal) to start over"
            )
            raise ValueError(f"--resume: {self.path} was written by a run with another config ({details}){why}")
        if extended:
            logger.info(
                "%s: extending the run from its first %s to its first %s questions",
                self.path,
                extended[0],
                extended[1],
            )
            self._append({"type": "extend", **{k: mine.get(k) for k in _EXTENDABLE}})
        for rec in records:
            if rec.get("type") == "question":
                self.done.setdefault(rec["row"], {})[int(rec["i"])] = rec
            elif rec.get("type") == "row":
                self.sessions.setdefault(rec["row"], []).append(rec)

    def _append(self, rec: dict[str, Any]) -> None:
        if self.path is None:
            return
        line = json.dumps(rec, ensure_ascii=False, default=str) + "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def add_question(self, rec: dict[str, Any]) -> None:
        """Record one finished (row, question)."""
        with self._lock:
            self._append({"type": "question", **rec})
            self.done.setdefault(rec["row"], {})[int(rec["i"])] = rec

    def add_session(self, row: str, n_run: int, wall_s: float, concurrency: int) -> None:
        """Record one session's loop over ``row``: questions run and wall seconds."""
        rec = {"type": "row", "row": row, "n_run": n_run, "wall_s": round(wall_s, 3), "concurrency": concurrency}
        with self._lock:
            self._append(rec)
            self.sessions.setdefault(row, []).append(rec)

    def finished(self, row: str) -> dict[int, dict[str, Any]]:
        """``{question index: record}`` of ``row``'s finished questions."""
        with self._lock:
            return dict(self.done.get(row, {}))

    @property
    def n_done(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.done.values())


# --------------------------------------------------------------------------- one question


def _llm_down(errors: list[dict[str, Any]], meter: QuestionMeter) -> bool:
    """Whether a question's fallbacks come from an absent LLM (unavailable / timed out / failed
    call) rather than from invalid replies."""
    if not errors:
        return False
    if any(e.get("kind") == "llm_error" or e.get("type") in RETRYABLE_ERRORS for e in errors):
        return True
    return bool(meter.call_errors)  # e.g. a note step's LLMError, recorded without kind / type


def _retry_wait(llm: Any, retry_wait: float | None) -> float:
    if retry_wait is not None:
        return float(retry_wait)
    cooldown = getattr(getattr(llm, "breaker", None), "cooldown", None)
    return float(cooldown) if isinstance(cooldown, (int, float)) else DEFAULT_RETRY_WAIT


def _question_record(
    row: str,
    i: int,
    q: Question,
    ans: Answer,
    meter: QuestionMeter,
    latency: float,
    attempts: int,
    source: str,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    pred = ans.text or ""
    sc = answer_scores(pred, q.answers) if q.answers else {"em": 0.0, "f1": 0.0, "acc": 0.0, "acc_raw": 0.0}
    sc["f1_last_alias"] = f1_score(pred, q.answers[-1]) if q.answers else 0.0
    errors = [e for e in ans.metadata.get("llm_error") or [] if isinstance(e, dict)]
    retrievals = ans.metadata.get("retrievals")
    return {
        "row": row,
        "i": i,
        "id": q.id,
        "prediction": pred,
        "answers": list(q.answers),
        "scores": {k: float(sc[k]) for k in SCORE_KEYS},
        "latency_s": round(latency, 4),
        "calls": meter.calls,
        "prompt_tokens": meter.prompt_tokens,
        "completion_tokens": meter.completion_tokens,
        "token_source": source,
        "fallback": bool(ans.metadata.get("llm_error")),
        "llm_error": [
            {"step": e.get("step", "?"), "kind": e.get("kind", ""), "error": str(e.get("error", ""))[:200]}
            for e in errors
        ],
        "reply_stats": meter.reply_stats(),
        "retrievals": float(retrievals) if isinstance(retrievals, (int, float)) else None,
        "attempts": attempts,
        # calls, tokens and seconds per LLM step (models/usage.py); the totals above stay MeteredLLM's
        LLM_USAGE_KEY: usage or {"steps": {}, "total": {}},
    }


def _slow_hint(errors: list[dict[str, Any]]) -> str:
    """A hint when the calls ran out of time rather than finding no server: a slow server (a
    small CPU box, many questions in flight) needs a longer deadline or fewer questions at once."""
    text = " ".join(str(e.get("error", "")) for e in errors).lower()
    if "deadline" in text or "timed out" in text or any(e.get("type") == "LLMTimeoutError" for e in errors):
        return " (the calls timed out: give a slow server a longer --llm-deadline or a lower --concurrency)"
    return ""


def run_questions(
    run: Callable[[str], Answer],
    questions: Sequence[Question],
    *,
    row: str,
    journal: QAJournal,
    llm: MeteredLLM,
    concurrency: int = 1,
    retries: int = 2,
    retry_wait: float | None = None,
    progress: bool = True,
) -> int:
    """Run ``row``'s unfinished questions (up to ``concurrency`` at once), journalling each; a
    question whose answer fell back because the LLM was absent is rerun after the cool-down, at
    most ``retries`` times, then :class:`QARunAborted` is raised (after the questions in flight
    finish). Returns how many questions ran."""
    done = journal.finished(row)
    todo = [(i, q) for i, q in enumerate(questions) if i not in done]
    abort = threading.Event()

    def one(i: int, q: Question) -> bool:
        if abort.is_set():
            return False
        for attempt in range(1, retries + 2):
            meter = QuestionMeter()
            t0 = time.perf_counter()
            with metering(meter), metering_usage() as usage:
                ans = run(q.question)
            latency = time.perf_counter() - t0
            errors = [e for e in ans.metadata.get("llm_error") or [] if isinstance(e, dict)]
            if not _llm_down(errors, meter):
                break
            why = "; ".join(f"{e.get('step', '?')}: {e.get('error', '')}" for e in errors)[:300].replace("\n", " ")
            if attempt > retries:
                abort.set()
                raise QARunAborted(
                    f"QA run stopped: {row}, question {i + 1} ({q.id}): the LLM was unavailable in "
                    f"{attempt} attempts ({why}); {journal.n_done} finished questions are in "
                    f"{journal.path or 'memory'}; rerun with --resume to continue" + _slow_hint(errors)
                )
            wait = _retry_wait(llm, retry_wait)
            logger.warning(
                "%s question %d: LLM unavailable (%s); rerunning in %.1f s (retry %d of %d)",
                row, i + 1, why, wait, attempt, retries,
            )  # fmt: skip
            _sleep(wait)
        record = _question_record(row, i, q, ans, meter, latency, attempt, llm.token_source, usage.as_dict())
        journal.add_question(record)
        return True

    n_run, t0 = 0, time.perf_counter()
    bar = tqdm(total=len(questions), initial=len(done), desc=row, disable=not progress_enabled(progress), leave=False)
    try:
        if concurrency <= 1:
            for i, q in todo:
                n_run += one(i, q)
                bar.update()
        else:
            failure: BaseException | None = None
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kgrag-qa") as pool:
                for fut in as_completed([pool.submit(one, i, q) for i, q in todo]):
                    exc = fut.exception()
                    if exc is not None:
                        abort.set()
                        failure = failure or exc
                    elif fut.result():
                        n_run += 1
                        bar.update()
            if failure is not None:
                raise failure
    finally:
        bar.close()
        if todo:
            journal.add_session(row, n_run, time.perf_counter() - t0, concurrency)
    return n_run


# --------------------------------------------------------------------------- the row's summary


def summarize_row(
    records: Sequence[dict[str, Any]], sessions: Sequence[dict[str, Any]] = ()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The report row and per-question predictions from a row's journal records (question order)."""
    n = max(len(records), 1)
    out: dict[str, Any] = {k: round(mean([r["scores"][k] for r in records]), 4) for k in SCORE_KEYS}
    calls = sum(r["calls"] for r in records)
    prompt = sum(r["prompt_tokens"] for r in records)
    completion = sum(r["completion_tokens"] for r in records)
    latencies = [r["latency_s"] for r in records]
    fallbacks = sum(bool(r["fallback"]) for r in records)
    steps: dict[str, dict[str, int]] = {}
    fallback_steps: dict[str, int] = {}
    usage: dict[str, Any] | None = None
    for r in records:
        usage = add_usage(usage, r.get(LLM_USAGE_KEY))  # absent in journals of older versions
        for step, st in r["reply_stats"].items():
            acc = steps.setdefault(step, {"replies": 0, "valid": 0, "constrained": 0})
            for k in acc:
                acc[k] += int(st.get(k, 0))
        for e in r["llm_error"]:
            fallback_steps[e["step"]] = fallback_steps.get(e["step"], 0) + 1
    share = fallbacks / n
    run = sum(int(s["n_run"]) for s in sessions)
    wall = sum(float(s["wall_s"]) for s in sessions)
    out.update(
        n=len(records),
        llm_calls=calls,
        llm_calls_per_q=round(calls / n, 2),
        prompt_tokens=prompt,
        completion_tokens=completion,
        tokens_per_q={"prompt": round(prompt / n, 1), "completion": round(completion / n, 1)},
        token_count=(
            "endpoint usage" if any(r["token_source"] == "endpoint usage" for r in records) else "tiktoken cl100k_base"
        ),
        latency_s={"p50": round(percentile(latencies, 50), 3), "p95": round(percentile(latencies, 95), 3)},
        fallbacks=fallbacks,
        fallback_share=round(share, 4),
        measured=share <= MEASURED_MAX_FALLBACK_SHARE,
        fallback_steps=fallback_steps,
        empty_answers=sum(not r["prediction"].strip() for r in records),
        reply_stats=steps,
        invalid_replies=sum(s["replies"] - s["valid"] for s in steps.values()),
        reruns=sum(int(r.get("attempts", 1)) - 1 for r in records),
        questions_per_minute=round(60.0 * run / wall, 2) if wall > 0 and run else None,
        concurrency=max((int(s.get("concurrency", 1)) for s in sessions), default=1),
    )
    if usage is not None:  # per LLM step: calls, prompt / completion tokens, seconds in LLM calls
        out[LLM_USAGE_KEY] = usage
        out["llm_seconds"] = usage["total"].get("seconds", 0.0)
    retrievals = [r["retrievals"] for r in records if r.get("retrievals") is not None]
    if retrievals:
        out["retrievals_per_q"] = round(mean(retrievals), 2)
    rows = []
    for r in records:
        row: dict[str, Any] = {
            "id": r["id"],
            "prediction": r["prediction"],
            "answers": r["answers"],
            "em": r["scores"]["em"],
            "fallback": r["fallback"],
        }
        if r["fallback"]:
            row["llm_error"] = r["llm_error"]
        if r.get("attempts", 1) > 1:
            row["attempts"] = r["attempts"]
        rows.append(row)
    return out, rows
