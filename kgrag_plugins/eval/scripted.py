"""The deterministic LLM behind ``kgrag bench --qa --llm scripted``.

:class:`ScriptedQALLM` recognises each prompt kind the QA systems send and replies in the format
that prompt asks for, so every system runs end to end offline:

* KG-Infused RAG (docs/methods.md §1(c), App. D.1): triple selection / update (the first candidate
  triples copied verbatim), summary (``"head relation tail."`` sentences), query expansion (the
  question plus the summary's first words), note (each passage's title and first sentence),
  augmentation (the note plus the summary), answer with / without retrieval.
* SA-RAG + CoT (docs/methods.md §6.3): the reasoning JSON (one follow-up question, then
  ``answer_possible``) and the answering JSON ``{"reasoning", "final_answer"}``.
* Self-Ask (§6.1): ``Follow up:`` once, then ``So the final answer is:``.
* Self-RAG (§6.2): the prompted critiques get ``Yes`` / ``Relevant`` / ``Fully`` / ``5``; the
  reflection-token format gets ``[Relevant]{title}[Fully supported][Utility:5]``.
* Query decomposition: the JSON ``{"original_question", "subquestions"}`` with two sub-questions.
* Anything else: a generic short answer.

An answer is the title of the first passage in the prompt (the first line of its first data
block), or the first capitalised phrase of the question when there is no passage. **The numbers it
produces measure the plumbing (parsing, control flow, fallbacks, token counting), not answer
quality.**

``overrides`` maps a prompt kind (:data:`KINDS`) to a fixed reply, e.g. ``{"answer": "%%%"}`` to
make every answer reply drift (tests of the fallback path).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from ..models.messages import Message, to_messages, truncate_at_stop

__all__ = ["KINDS", "ScriptedQALLM", "prompt_kind"]

#: Prompt kinds recognised (the keys of ``overrides`` and of :attr:`ScriptedQALLM.kinds`).
KINDS = (
    "triple_selection",
    "triple_update",
    "summary",
    "query_expansion",
    "note",
    "augment",
    "answer",
    "answer_no_retrieval",
    "sa_reasoning",
    "sa_answer",
    "self_ask",
    "sub_answer",
    "critique",
    "selfrag_tokens",
    "decompose",
    "generic",
)

_TRIPLE = re.compile(r"<[^<>|\n]+ \| [^<>|\n]+ \| [^<>|\n]+>")
#: A data block: its tags on their own lines (the data notice's inline "<passages>...</passages>" is not one).
_BLOCK = re.compile(r"(?:^|\n)<(passages|passage|documents|context)>\n(.*?)\n</\1>", re.S)
_QUESTION = re.compile(
    r"(?:^|\n)\s*(?:\*\*)?(?:Question|Original Question|Question to be answered)(?:\*\*)?\s*:[\s*]*\n?(.+)"
)
_CAPS = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:of|the|de|von|van|and|[A-Z][\w'’.-]*))*")
#: Self-RAG's prompted critiques (agents/self_rag_prompts.py): the closing instruction -> the reply.
_CRITIQUES = {
    "Reply with exactly one word: Yes or No.": "Yes",
    "Reply with exactly one word: Relevant or Irrelevant.": "Relevant",
    "Reply with exactly one word: Fully, Partially or No.": "Fully",
    "Reply with a single digit from 1 to 5.": "5",
}
_PARAGRAPH = re.compile(r"<paragraph>([^\n<]*)")


def _has(text: str, *needles: str) -> bool:
    return all(n in text for n in needles)


def prompt_kind(messages: list[Message]) -> str:
    """The kind of prompt ``messages`` carry (one of :data:`KINDS`)."""
    text = "\n".join(m.get("content", "") for m in messages)
    low = text.lower()
    if _has(text, "New Retrieved Entity Triples:", "Selected Triples:"):
        return "triple_update"
    if _has(text, "Retrieved Entity Triples:", "Selected Triples:"):
        return "triple_selection"
    if _has(text, "Selected Triples:", "Summary:"):
        return "summary"
    if "New Query:" in text:
        return "query_expansion"
    if _has(text, "Document content:", "Note:"):
        return "note"
    if "Enhanced Passage:" in text:
        return "augment"
    if "answer_possible" in text and "additional_question" in text:
        return "sa_reasoning"
    if '"final_answer"' in text:
        return "sa_answer"
    if "follow up" in low and ("intermediate answer" in low or "so the final answer is" in low):
        return "self_ask"
    if "You answer one question from the given passages" in text:
        return "sub_answer"
    if any(c in text for c in _CRITIQUES):
        return "critique"
    if _has(text, "### Instruction:", "### Response:"):
        return "selfrag_tokens"
    if '"subquestions"' in text:
        return "decompose"
    if "Answer the question based on the given passages" in text:
        return "answer"
    if _has(text, "Only give me the answer", "Answer:"):
        return "answer_no_retrieval"
    return "generic"


def _question(text: str) -> str:
    found = _QUESTION.findall(text)
    return found[-1].strip() if found else ""


def _first_title(text: str) -> str:
    """The first line of the first passage-like data block (``[1] `` prefix removed)."""
    for _, body in _BLOCK.findall(text):
        for line in body.splitlines():
            line = re.sub(r"^\[\d+\]\s*", "", line.strip()).split(": ", 1)[0]
            if line:
                return " ".join(line.split()[:8]).rstrip(".:")
    return ""


def _entity(question: str) -> str:
    """The first capitalised phrase after the question's first word (generic short answer)."""
    rest = question.split(" ", 1)[1] if " " in question else question
    m = _CAPS.search(rest)
    return m.group(0).strip() if m else "unknown"


def _short_answer(text: str) -> str:
    return _first_title(text) or _entity(_question(text)) or "unknown"


def _block(text: str, tag: str) -> str:
    m = re.search(rf"(?:^|\n)<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return m.group(1) if m else ""


def _sentences_of_triples(body: str) -> str:
    out = []
    for t in _TRIPLE.findall(body):
        h, r, tl = (x.strip() for x in t[1:-1].split(" | "))
        out.append(f"{h} {r} {tl}.")
    return " ".join(out)


def _note(text: str) -> str:
    body = _block(text, "passages")
    parts = []
    for chunk in re.split(r"\n\s*\n(?=\[\d+\])", body):
        lines = [ln for ln in chunk.strip().splitlines() if ln.strip()]
        if not lines:
            continue
        title = re.sub(r"^\[\d+\]\s*", "", lines[0]).strip()
        first = (lines[1] if len(lines) > 1 else "").split(". ")[0].strip().rstrip(".")
        parts.append(f"{title}. {first}." if first else f"{title}.")
    return " ".join(parts[:3]) or "No relevant information."


def _answer_from_slot(text: str) -> str:
    """The with-retrieval answer: the first passage's title, or the note's first sentence."""
    body = _block(text, "passages").strip()
    if re.match(r"\[\d+\]", body):
        return _first_title(text)
    first = body.split(".")[0].strip()
    return " ".join(first.split()[:8]) if first else _entity(_question(text))


class ScriptedQALLM:
    """A deterministic, offline LLM that answers each QA prompt kind in its paper format.

    Args:
        overrides: prompt kind -> fixed reply (e.g. a drifting answer); see :data:`KINDS`.

    ``calls`` counts the calls; ``kinds`` counts them per prompt kind.
    """

    name = "scripted"

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        unknown = set(overrides or {}) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown prompt kind(s) {sorted(unknown)}; known: {', '.join(KINDS)}")
        self.overrides = dict(overrides or {})
        self.calls = 0
        self.kinds: dict[str, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ScriptedQALLM({self.calls} calls)"

    def reply(self, messages: list[Message]) -> str:
        """The reply to ``messages`` (no counting)."""
        kind = prompt_kind(messages)
        if kind in self.overrides:
            return self.overrides[kind]
        text = "\n".join(m.get("content", "") for m in messages)
        last = messages[-1].get("content", "") if messages else ""
        question = _question(text)
        if kind == "triple_selection":
            return "\n".join(_TRIPLE.findall(_block(text, "triples"))[:3]) or "None"
        if kind == "triple_update":
            return "\n".join(_TRIPLE.findall(_block(text, "new_triples"))[:2]) or "None"
        if kind == "summary":
            return _sentences_of_triples(_block(text, "triples")) or "No facts."
        if kind == "query_expansion":
            summary = " ".join(_block(text, "summary").split()[:12])
            return f"{question} {summary}".strip() if summary else f"Background of {_entity(question)}"
        if kind == "note":
            return _note(text)
        if kind == "augment":
            passage = " ".join(_block(text, "passage").split()[:300])  # a real model's length, under the
            summary = " ".join(_block(text, "summary").split()[:60])  # validators' 4,000-character cap
            return f"{passage} {summary}".strip()
        if kind == "answer":
            return _answer_from_slot(text)
        if kind == "answer_no_retrieval":
            return _entity(question)
        if kind == "sa_reasoning":
            known = "# Known information" in text
            title = _first_title(text)
            return json.dumps(
                {
                    "provided_context": f"{title} is relevant." if title else "Nothing relevant yet.",
                    "answer_possible": known,
                    "final_answer": title if known else "",
                    "additional_question": "" if known else f"What is known about {title or _entity(question)}?",
                }
            )
        if kind == "sa_answer":
            return json.dumps({"reasoning": "The first passage names it.", "final_answer": _short_answer(text)})
        if kind == "self_ask":
            return self._self_ask(last, text)
        if kind == "sub_answer":
            return f"{_short_answer(text)}."
        if kind == "critique":
            return next(reply for cue, reply in _CRITIQUES.items() if cue in text)
        if kind == "selfrag_tokens":
            m = _PARAGRAPH.search(text)
            answer = m.group(1).strip() if m and m.group(1).strip() else _entity(text.split("\n", 2)[1])
            return f"[Relevant]{answer}[Fully supported][Utility:5]"
        if kind == "decompose":
            subs = [{"id": 1, "question": f"What is {_entity(question)}?"}, {"id": 2, "question": question}]
            return json.dumps({"original_question": question, "subquestions": subs})
        return _short_answer(text)

    @staticmethod
    def _self_ask(last: str, text: str) -> str:
        """One follow-up, then the final answer: the first capitalised phrase of the last
        intermediate answer (the transcript is the tail of the last message)."""
        tail = last.rsplit("\nQuestion:", 1)[-1]
        question = tail.split("\n", 1)[0].strip()
        inter = re.findall(r"Intermediate answer:\s*(.+)", tail)
        if inter:
            found = _CAPS.search(inter[-1])
            return f"So the final answer is: {found.group(0).strip() if found else inter[-1].strip()}"
        return f"Follow up: What is {_entity(question)}?"

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """The scripted reply (truncated at ``stop``)."""
        messages = to_messages(prompt)
        kind = prompt_kind(messages)
        with self._lock:
            self.calls += 1
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        return truncate_at_stop(self.reply(messages), stop)

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Async :meth:`complete`."""
        return self.complete(prompt, stop=stop, max_tokens=max_tokens, temperature=temperature)

    def describe(self) -> dict[str, Any]:
        """Calls per prompt kind so far."""
        return {"calls": self.calls, "kinds": dict(self.kinds)}
