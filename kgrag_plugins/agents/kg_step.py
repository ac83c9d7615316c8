"""KG-Infused RAG as a plug-in inside an agent step (kg-infused-rag.md App. F.1 / §4.2;
docs/methods.md §6.1, §6.2): for one (sub-)question, KG-guided spreading activation and KG-based
query expansion give q'; the agent's own corpus retrieve step fetches 3 passages for the
question and 3 new ones for q'; with an LLM, the passage note is KG-augmented and the question is
answered from the fact-enhanced note.

The corpus passages always come from the agent's retrieve step (not from the KG index's own
vectors), so the plug-in works with any corpus retriever; the KG side (seeds, activation,
summary, q') is the :class:`~kgrag_plugins.methods.kg_infused.KGInfusedRetriever`'s public API.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from ..models.llm import LLMError, as_llm
from ..models.replies import error_kind
from ..types import Evidence, ScoredPassage
from .retrieve import RetrieveStep

logger = logging.getLogger("kgrag_plugins.agents")

__all__ = ["KGInfusedPlugin", "KGRetrieval", "merge_dual"]


@dataclass
class KGRetrieval:
    """One KG-infused retrieval: the merged evidence (passages from q then q'; facts = the
    activated triples), the summary, q', the passage sources and the LLM errors of the KG steps."""

    evidence: Evidence
    summary: str
    expanded: str
    sources: list[str]
    retrievals: int
    errors: list[dict[str, Any]] = field(default_factory=list)


def merge_dual(
    q_hits: list[ScoredPassage], x_hits: list[ScoredPassage], k_each: int
) -> tuple[list[ScoredPassage], list[str]]:
    """KG-Infused dual retrieval merge (Eq. 8, App. C.2): q's first ``k_each`` passages, then the
    first ``k_each`` of q''s passages not among them; sources ``"q"`` / ``"q'"``."""
    out = list(q_hits[:k_each])
    src = ["q"] * len(out)
    ids = {sp.passage.id for sp in out}
    for sp in x_hits:
        if src.count("q'") >= k_each:
            break
        if sp.passage.id not in ids:
            ids.add(sp.passage.id)
            out.append(sp)
            src.append("q'")
    return out, src


class KGInfusedPlugin:
    """The KG-Infused RAG plug-in for agents.

    ``kg_infused``: a ``KGInfusedRetriever`` or a ``KnowledgeIndex`` with a graph (a retriever is
    built on it with ``llm`` and ``kg_options``). A retriever without an LLM is used through a
    copy that has the agent's ``llm`` when one is given (so selection, summary, QE, note and
    augmentation are the paper's LLM steps); without any LLM the KG steps are LLM-free
    (embedding triple selection, template summary and expansion) and no note is written.
    """

    def __init__(self, kg_infused: Any, llm: Any = None, *, k_each: int = 3, kg_options: dict | None = None) -> None:
        from ..index.store import KnowledgeIndex
        from ..methods.kg_infused import KGInfusedRetriever

        llm = as_llm(llm)
        if isinstance(kg_infused, KnowledgeIndex):
            kg_infused = KGInfusedRetriever(kg_infused, llm=llm, **(kg_options or {}))
        elif not isinstance(kg_infused, KGInfusedRetriever):
            raise TypeError(
                "kg_infused must be a KGInfusedRetriever or a KnowledgeIndex with a graph, "
                f"got {type(kg_infused).__name__}"
            )
        elif kg_infused.llm is None and llm is not None:
            kg_infused = copy.copy(kg_infused)
            kg_infused.llm = llm
        if k_each < 1:
            raise ValueError(f"k_each must be >= 1, got {k_each}")
        self.kg = kg_infused
        self.k_each = k_each

    def retrieve(self, question: str, step: RetrieveStep) -> KGRetrieval:
        """Activation + summary + KG-based QE on ``question`` (KG side), then the corpus step for
        ``question`` (``k_each``) and for q' (``2·k_each``), merged 3 + 3 (2 retrievals)."""
        kg = self.kg
        memory = kg.activate(question, kg.seed(question))
        summary = kg.summarize(question, memory)
        expanded = kg.expand_query(question, summary, memory)
        q_ev = step(question, self.k_each)
        x_ev = step(expanded, 2 * self.k_each)
        passages, sources = merge_dual(q_ev.passages, x_ev.passages, self.k_each)
        facts = memory.facts(getattr(memory, "scores", None))
        seen = {f.text for f in facts}
        facts += [f for f in q_ev.facts + x_ev.facts if f.text not in seen and not seen.add(f.text)]
        errors = list(getattr(memory, "llm_errors", []) or [])
        trace = {
            "retriever": f"kg-infused+{step.name}",
            "summary": summary,
            "expanded_query": expanded,
            "passage_sources": sources,
            "activation": {"rounds": len(memory.rounds), "triples": len(memory.triples)},
        }
        return KGRetrieval(Evidence(question, passages, facts, trace), summary, expanded, sources, 2, errors)

    def answer(self, question: str, found: KGRetrieval) -> tuple[str | None, dict[str, Any], list[dict[str, Any]]]:
        """Note (Eq. 9) -> KG-guided augmentation with the summary (Eq. 10) -> answer from the
        fact-enhanced note (Eq. 11). A failed note / augmentation falls back to the raw passages /
        the plain note (as ``KGInfusedRetriever.run``); a failed answer gives ``None``. Returns
        ``(answer, {"note", "enhanced_note"}, errors)``. Needs an LLM."""
        kg = self.kg
        errors: list[dict[str, Any]] = []
        note = enhanced = None
        try:
            note = kg.write_note(question, found.evidence.passages)
        except LLMError as exc:
            errors.append({"step": "kg.write_note", "kind": error_kind(exc), "error": str(exc)})
        if note is not None:
            try:
                enhanced = kg.augment(question, note, found.summary)
            except LLMError as exc:
                errors.append({"step": "kg.augment", "kind": error_kind(exc), "error": str(exc)})
        ans = kg.answer(question, found.evidence, enhanced if enhanced is not None else note)
        errors += [{**e, "step": f"kg.{e.get('step', 'answer')}"} for e in ans.metadata.get("llm_error", [])]
        return (ans.text or None), {"note": note, "enhanced_note": enhanced}, errors
