"""Answer generation from Evidence with any LLM (used by the demo and the plug-ins)."""

from __future__ import annotations

from ..models.llm import LLM
from ..types import Answer, Evidence

ANSWER_SYSTEM = (
    "You answer questions using the given evidence. Reply with a short answer only "
    "(an entity, date, number or short phrase), no explanation."
)


def format_evidence(evidence: Evidence, max_passages: int = 5) -> str:
    """Numbered passages followed by facts, as placed in the answer prompt."""
    lines = [
        f"[{i}] {sp.passage.title + ': ' if sp.passage.title else ''}{sp.passage.text}"
        for i, sp in enumerate(evidence.passages[:max_passages], 1)
    ]
    if evidence.facts:
        lines.append("Facts:")
        lines += [f"- {f.text}" for f in evidence.facts]
    return "\n".join(lines)


def generate_answer(llm: LLM, question: str, evidence: Evidence, *, max_passages: int = 5) -> Answer:
    """Ask ``llm`` to answer ``question`` from ``evidence``; the reply's first line is the answer."""
    messages = [
        {"role": "system", "content": ANSWER_SYSTEM},
        {
            "role": "user",
            "content": f"Evidence:\n{format_evidence(evidence, max_passages)}\n\nQuestion: {question}\nAnswer:",
        },
    ]
    reply = llm.complete(messages, max_tokens=64, temperature=0.0)
    text = reply.strip().splitlines()[0].strip() if reply.strip() else ""
    if text.lower().startswith("answer:"):
        text = text[len("answer:") :].strip()
    return Answer(question, text, evidence, {"raw": reply})
