"""SA-RAG + chain-of-thought (SA-RAG §6.3, docs/methods.md §6.3): reasoning loop over SA-RAG contexts,
JSON reply parsing, follow-up retrieval and the final answer."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from ...models.llm import LLMError, as_llm
from ...models.prompting import data_block
from ...models.replies import CALL_ERRORS, InvalidReply, check_text, complete_validated
from ...types import Answer, Evidence, Fact, ScoredPassage
from .prompts import ANSWER_SCHEMA, ANSWERING_SYSTEM, QUESTION_PREFIX, REASONING_SCHEMA, REASONING_SYSTEM
from .retriever import CONTEXT_HEADER, SARAGRetriever

logger = logging.getLogger(__name__)

__all__ = ["SARAGCoT", "parse_json_object", "parse_reasoning"]

# ---------------------------------------------------------------------- JSON replies

#: Longest accepted final answer (characters).
MAX_ANSWER_CHARS = 1000

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_PY_LITERALS = re.compile(r"\b(True|False|None)\b")


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in an LLM reply, tolerant of code fences and prose around it.

    Tries fenced blocks first, then the whole reply, then every ``{`` as a start of an object;
    as a last resort Python literals (``True``/``False``/``None``) are read as JSON ones.
    Returns ``None`` when no object can be read.
    """
    if not isinstance(text, str):
        return None
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for lenient in (False, True):
        for cand in candidates:
            s = cand.strip()
            if lenient:
                s = _PY_LITERALS.sub(lambda m: {"True": "true", "False": "false", "None": "null"}[m.group(1)], s)
            try:
                obj = json.loads(s)
            except (ValueError, RecursionError):  # RecursionError: absurdly nested input
                obj = None
            if isinstance(obj, dict):
                return obj
            for m in re.finditer(r"\{", s):
                try:
                    obj, _ = decoder.raw_decode(s, m.start())
                except (ValueError, RecursionError):
                    continue
                if isinstance(obj, dict):
                    return obj
    return None


def _as_bool(value: Any) -> bool | None:
    """JSON-ish truth: booleans, ``"true"``/``"false"``/``"yes"``/``"no"`` strings, 0/1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        s = value.strip().strip(".").lower()
        if s in ("true", "yes", "y", "1"):
            return True
        if s in ("false", "no", "n", "0", ""):
            return False
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (int, float, bool)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def parse_reasoning(reply: str) -> dict[str, Any]:
    """A reasoning reply (§6.3) as ``{provided_context, answer_possible (bool), final_answer,
    additional_question}``; :class:`InvalidReply` when no JSON object with a readable
    ``answer_possible`` is found (code fences, prose around the object and ``"yes"``/``"false"``
    strings are tolerated: :func:`parse_json_object`). Shared by :class:`SARAGCoT` and the
    CoT agents (``kgrag_plugins.agents.cot``)."""
    obj = parse_json_object(reply)
    if obj is None:
        raise InvalidReply("unparseable reply")
    possible = _as_bool(obj.get("answer_possible"))
    if possible is None:
        raise InvalidReply("reply lacks a readable answer_possible")
    return {
        "provided_context": _as_text(obj.get("provided_context")),
        "answer_possible": possible,
        "final_answer": _as_text(obj.get("final_answer")),
        "additional_question": _as_text(obj.get("additional_question")),
    }


# ---------------------------------------------------------------------- SA-RAG + CoT


class SARAGCoT:
    """SA-RAG + CoT iterative retrieval (docs/methods.md §6.3; the paper's default agent).

    1. Context ``C`` = SA retrieval (:meth:`SARAGRetriever.acquire`) for the question.
    2. Up to ``max_steps`` reasoning calls (system = reasoning prompt; user = ``"**Question:  **"``
       + question; user = ``C``). ``answer_possible`` true stops the loop. Otherwise SA retrieval
       runs on the follow-up question *alone* and ``C`` becomes
       :meth:`merge_context` (summary, new context). Valid reasoning reply: a JSON object with a
       readable ``answer_possible``; an invalid one is asked once more. A failed call or a second
       invalid reply skips the step (trace: ``skipped``, ``error``; WARNING logged); a reply with
       neither an answer nor a follow-up question ends the loop (the next call would see the same
       context).
    3. The answering call on the final ``C`` gives the prediction (the reasoning step's own
       ``final_answer`` is not used, as in the paper's code). Valid answer reply: a JSON object
       whose ``final_answer`` is non-empty text (not a refusal, not symbols, at most 1,000
       characters); up to ``answer_attempts`` calls. With none valid the answer is empty and
       ``metadata["llm_error"]`` says why: nothing invalid is passed on as an answer.

    At most ``1 + max_steps`` SA retrievals per question. Temperature 0 throughout. Both calls
    declare their reply's JSON schema (:data:`.prompts.REASONING_SCHEMA`, :data:`.prompts.ANSWER_SCHEMA`);
    ``max_tokens`` (default: each schema's budget, 256 / 192) bounds every call.
    """

    def __init__(
        self,
        retriever: SARAGRetriever,
        llm: Any,
        *,
        max_steps: int = 3,
        answer_attempts: int = 3,
        max_tokens: int | None = None,
    ) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
            raise ValueError(f"max_steps must be a non-negative integer, got {max_steps!r}")
        if answer_attempts < 1:
            raise ValueError(f"answer_attempts must be >= 1, got {answer_attempts}")
        llm = as_llm(llm)
        if llm is None:
            raise ValueError("SARAGCoT needs an LLM (use SARAGRetriever alone for LLM-free retrieval)")
        self.retriever = retriever
        self.llm = llm
        self.max_steps = max_steps
        self.answer_attempts = int(answer_attempts)
        self.max_tokens = max_tokens

    # -- single calls
    def _reason(
        self, question: str, context: str
    ) -> tuple[dict[str, Any] | None, str | None, str, dict[str, Any] | None]:
        messages = [
            {"role": "system", "content": REASONING_SYSTEM},
            {"role": "user", "content": QUESTION_PREFIX + question},
            {"role": "user", "content": context},
        ]
        replies: list[str] = []

        def validate(reply: str) -> dict[str, Any]:
            replies.append(reply)
            return parse_reasoning(reply)

        errors: list[dict[str, Any]] = []
        try:
            parsed = complete_validated(
                self.llm,
                messages,
                validate,
                step="reasoning",
                errors=errors,
                schema=REASONING_SCHEMA,
                temperature=0.0,
                max_tokens=self.max_tokens,
            )
        except Exception as e:  # noqa: BLE001 - the paper's agent skips the step on any failure
            logger.warning("LLM step 'reasoning' failed, the step is skipped: %s: %s", type(e).__name__, e)
            entry = {
                "step": "reasoning",
                "kind": "llm_error",
                "error": f"{type(e).__name__}: {e}",
                "type": type(e).__name__,
            }
            return None, entry["error"], replies[-1] if replies else "", entry
        if parsed is None:
            return None, errors[-1]["error"], replies[-1] if replies else "", errors[-1]
        return parsed, None, replies[-1], None

    def reason_with_error(self, question: str, context: str) -> tuple[dict[str, Any] | None, str | None]:
        """:meth:`reason` plus why it returned ``None`` (call failure or unreadable reply)."""
        parsed, error, *_ = self._reason(question, context)
        return parsed, error

    def reason_step(self, question: str, context: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """:meth:`reason` plus, when it returned ``None``, the failure's trace entry (``{"step",
        "kind": "llm_error" | "invalid_reply", "error", "type"?}``; see
        :func:`~kgrag_plugins.models.replies.step_error` for the exception it stands for)."""
        parsed, _, _, entry = self._reason(question, context)
        return parsed, entry

    def reason(self, question: str, context: str) -> dict[str, Any] | None:
        """One reasoning call: ``{provided_context, answer_possible (bool), final_answer,
        additional_question}``, or ``None`` when the call fails or the reply cannot be read."""
        return self._reason(question, context)[0]

    @staticmethod
    def merge_context(provided_context: str, new_context: str) -> str:
        """``"# Known information\\n{summary}\\n# Additional facts"`` + the new context without
        its ``"### Context "`` header (the paper's short-term memory update). The summary, written
        by the model from retrieved text, goes in a ``<notes>`` data block."""
        tail = new_context[len(CONTEXT_HEADER) :] if new_context.startswith(CONTEXT_HEADER) else "\n" + new_context
        return f"# Known information\n{data_block('notes', provided_context)}\n# Additional facts{tail}"

    def _answer(self, question: str, context: str) -> dict[str, Any]:
        messages = [
            {"role": "system", "content": ANSWERING_SYSTEM},
            {"role": "user", "content": context},
            {"role": "user", "content": QUESTION_PREFIX + question},
        ]
        replies: list[str] = []

        def validate(reply: str) -> dict[str, Any]:
            replies.append(reply)
            obj = parse_json_object(reply)
            if obj is None or obj.get("final_answer") is None:
                raise InvalidReply("no JSON object with a final_answer")
            return {
                "answer": check_text(_as_text(obj["final_answer"]), max_chars=MAX_ANSWER_CHARS),
                "reasoning": _as_text(obj.get("reasoning")),
            }

        errors: list[dict[str, Any]] = []
        try:
            out = complete_validated(
                self.llm,
                messages,
                validate,
                step="answer",
                errors=errors,
                retries=self.answer_attempts - 1,
                retry_errors=True,
                schema=ANSWER_SCHEMA,
                temperature=0.0,
                max_tokens=self.max_tokens,
            )
        except Exception as e:  # noqa: BLE001 - an adapter's own error type: the call failed
            if isinstance(e, CALL_ERRORS):
                raise
            errors.append({"step": "answer", "kind": "llm_error", "error": f"{type(e).__name__}: {e}"})
            logger.warning("LLM step 'answer' fell back to the LLM-free path (llm_error): %s", errors[-1]["error"])
            out = None
        raw = replies[-1] if replies else ""
        if out is None:
            error = errors[-1]["error"] if errors else "no valid reply"
            return {
                "answer": "",
                "reasoning": "",
                "raw": raw,
                "attempts": len(replies),
                "parsed": False,
                "error": error,
            }
        return {**out, "raw": raw, "attempts": len(replies), "parsed": True}

    def final_answer(self, question: str, context: str) -> str:
        """The answering call: JSON ``{reasoning, final_answer}``; up to ``answer_attempts``
        calls while the reply is invalid or the call fails. Raises
        :class:`~kgrag_plugins.models.llm.LLMError` ("answering call failed ...") when no valid
        answer came: an invalid reply is never returned as an answer."""
        result = self._answer(question, context)
        if not result["parsed"]:
            raise LLMError(f"SA-RAG answering call failed after {self.answer_attempts} attempt(s): {result['error']}")
        return result["answer"]

    # -- the loop
    def run(self, question: str) -> Answer:
        """Answer ``question`` with SA-RAG + CoT; ``metadata["trace"]`` lists the steps."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        first = self.retriever.acquire(question)
        gathered = [first]
        context = self.retriever.context(first)
        steps: list[dict[str, Any]] = [
            {"step": 0, "query": question, "passages": first.passage_ids, "facts": len(first.facts)}
        ]
        stop = "max_steps"
        for step in range(1, self.max_steps + 1):
            parsed, error, *_ = self._reason(question, context)
            record: dict[str, Any] = {"step": step}
            steps.append(record)
            if parsed is None:
                record.update(skipped=True, error=error)
                continue
            record.update(answer_possible=parsed["answer_possible"], follow_up=parsed["additional_question"])
            if parsed["answer_possible"]:
                stop = "answer_possible"
                break
            follow = parsed["additional_question"]
            if not follow:
                stop = "no_follow_up"
                break
            found = self.retriever.acquire(follow)
            gathered.append(found)
            record.update(query=follow, passages=found.passage_ids, facts=len(found.facts))
            context = self.merge_context(parsed["provided_context"], self.retriever.context(found))
        result = self._answer(question, context)
        evidence = _union(question, gathered)
        evidence.trace.update(stop=stop, steps=len(steps) - 1)
        metadata = {
            "trace": steps,
            "stop": stop,
            "retrievals": len(gathered),
            "reasoning": result["reasoning"],
            "raw": result["raw"],
            "answer_attempts": result["attempts"],
            "answer_parsed": result["parsed"],
            "context": context,
        }
        if not result["parsed"]:
            metadata["llm_error"] = [{"step": "answer", "error": result["error"]}]
        return Answer(question, result["answer"], evidence, metadata)


def _union(question: str, evidences: Sequence[Evidence]) -> Evidence:
    """Passages (first occurrence, in order) and facts (by text) of several retrievals."""
    seen_p: set[str] = set()
    seen_f: set[str] = set()
    passages: list[ScoredPassage] = []
    facts: list[Fact] = []
    for ev in evidences:
        for sp in ev.passages:
            if sp.passage.id not in seen_p:
                seen_p.add(sp.passage.id)
                passages.append(sp)
        for f in ev.facts:
            if f.text not in seen_f:
                seen_f.add(f.text)
                facts.append(f)
    trace = {"retriever": "sa-rag+cot", "retrievals": len(evidences), "queries": [ev.query for ev in evidences]}
    return Evidence(question, passages, facts, trace)
