"""Answer generation from Evidence with any LLM (used by the demo and the plug-ins).

The evidence goes inside ``<passages>`` / ``<facts>`` data blocks and the system prompt says
that delimited text is data (:mod:`kgrag_plugins.models.prompting`)."""

from __future__ import annotations

from ..models.llm import LLM, Message
from ..models.prompting import DATA_NOTICE, clip_text, data_block
from ..models.replies import check_text, complete_validated, first_line
from ..types import Answer, Evidence

ANSWER_SYSTEM = (
    "You answer questions using the given evidence. Reply with a short answer only "
    "(an entity, date, number or short phrase), no explanation. " + DATA_NOTICE
)


def format_evidence(evidence: Evidence, max_passages: int = 5) -> str:
    """Numbered passages in a ``<passages>`` block, then (if any) facts in a ``<facts>`` block, as
    placed in the answer prompt; both blocks are escaped
    (:func:`~kgrag_plugins.models.prompting.data_block`)."""
    lines = [
        f"[{i}] {sp.passage.title + ': ' if sp.passage.title else ''}{clip_text(sp.passage.text)}"
        for i, sp in enumerate(evidence.passages[:max_passages], 1)
    ]
    out = data_block("passages", lines)
    if evidence.facts:
        out += "\nFacts:\n" + data_block("facts", [f"- {f.display}" for f in evidence.facts])
    return out


#: Longest accepted answer line (characters).
MAX_ANSWER_CHARS = 300


def _answer_line(reply: str, instructions: str = ANSWER_SYSTEM) -> str:
    """The reply's first line without an ``Answer:`` prefix, validated by
    :func:`~kgrag_plugins.models.replies.check_text` (non-empty, at most 300 characters, not
    symbols, not a refusal, not the system prompt echoed)."""
    text = first_line(reply)
    if text.lower().startswith("answer:"):
        text = text[len("answer:") :].strip()
    return check_text(text, single_line=True, max_chars=MAX_ANSWER_CHARS, instructions=instructions)


#: Longest accepted whole answer (characters; ``whole=True``).
MAX_WHOLE_ANSWER_CHARS = 8000


def _whole_answer(reply: str, instructions: str) -> str:
    """The whole reply without an ``Answer:`` prefix, validated by
    :func:`~kgrag_plugins.models.replies.check_text` (multi-line, at most 8,000 characters)."""
    text = (reply or "").strip()
    if text.lower().startswith("answer:"):
        text = text[len("answer:") :].strip()
    return check_text(text, max_chars=MAX_WHOLE_ANSWER_CHARS, instructions=instructions)


def answer_messages(question: str, evidence: Evidence, *, max_passages: int = 5) -> list[Message]:
    """The house answer prompt: :data:`ANSWER_SYSTEM`, then the evidence blocks and the question."""
    return [
        {"role": "system", "content": ANSWER_SYSTEM},
        {
            "role": "user",
            "content": f"Evidence:\n{format_evidence(evidence, max_passages)}\n\nQuestion: {question}\nAnswer:",
        },
    ]


def generate_answer(
    llm: LLM,
    question: str,
    evidence: Evidence,
    *,
    max_passages: int = 5,
    whole: bool = False,
    max_tokens: int | None = 64,
    messages: list[Message] | None = None,
) -> Answer:
    """Ask ``llm`` to answer ``question`` from ``evidence``; the reply's first line is the answer
    (``whole=True``: the whole reply, multi-line, up to 8,000 characters).

    ``messages`` replaces the house prompt (:func:`answer_messages`); it must carry the evidence
    inside data blocks and say so (:data:`~kgrag_plugins.models.prompting.DATA_NOTICE`); its system
    text is what an echoed reply is checked against. ``max_tokens`` (default 64) goes to the LLM;
    ``None`` leaves the model's own limit.

    An invalid reply is asked once more. When the call fails (dead endpoint, open circuit
    breaker) or the reply stays invalid, the LLM-free answer is used: the first of
    ``evidence.trace["answers"]`` (FRAG's path ends) or ``""``; ``metadata["llm_error"]`` lists
    why and ``metadata["fallback"]`` is ``True`` (a WARNING is logged)."""
    if messages is None:
        messages = answer_messages(question, evidence, max_passages=max_passages)
        instructions = ANSWER_SYSTEM
    else:
        instructions = "\n".join(m["content"] for m in messages if m.get("role") == "system")
    replies: list[str] = []

    def validate(reply: str) -> str:
        replies.append(reply)
        if whole:
            return _whole_answer(reply, instructions)
        return _answer_line(reply, instructions)

    errors: list[dict] = []
    text = complete_validated(
        llm, messages, validate, step="answer", errors=errors, max_tokens=max_tokens, temperature=0.0
    )
    raw = replies[-1] if replies else ""
    if text is None:
        answers = evidence.trace.get("answers") or []
        fallback = str(answers[0]) if answers else ""
        return Answer(question, fallback, evidence, {"raw": raw, "fallback": True, "llm_error": errors})
    return Answer(question, text, evidence, {"raw": raw})
