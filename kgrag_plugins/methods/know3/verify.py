"""Know³'s knowledge-aware check as one reusable step: text -> triples -> KGE score -> decision.

Paper §4.1 (Eq. 1-2; docs/methods.md §5(a) step 2): extract the triples of an answer (or, LLM-free,
of the top references), score them with the KG-embedding verifier (lower = more consistent with
the KG) and decide whether to **accept** (s_t < θ_t, or t = T) or **retrieve** again. The adapters
(the LangGraph verifier node and the LlamaIndex
``KGEVerifierPostprocessor``) call :class:`KGVerifier`; it shares every part (extractor, KGE,
verifier, θ schedule, query enhancer) with a :class:`~.loop.Know3Retriever`, so the node, the
postprocessor and the retriever decide identically.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...types import Passage
from .loop import Know3Retriever

__all__ = ["KGVerifier"]


class KGVerifier:
    """Verify texts and passages against an index's KG with Know³'s relative triple score.

    ``index``: a :class:`~kgrag_plugins.index.store.KnowledgeIndex` (its KGE is trained on first
    use and stored in the index, :func:`~kgrag_plugins.index.kge.kge_for_index`); ``loop``: an
    existing :class:`~.loop.Know3Retriever` to share parts with; ``opts`` go to a new one
    (``llm`` for Fig. 9 extraction, ``theta0`` / ``percentile`` / ``schedule_kind``, ``max_turns``,
    ``method``, ``kge``, ``verifier``, ``answer_refs``, ...).
    """

    def __init__(self, index: Any = None, *, loop: Know3Retriever | None = None, **opts: Any) -> None:
        if loop is None:
            if index is None:
                raise TypeError("KGVerifier needs a KnowledgeIndex (or loop=Know3Retriever(...))")
            loop = Know3Retriever(index, **opts)
        elif opts:
            raise ValueError(f"KGVerifier: pass {sorted(opts)} to the Know3Retriever given as loop=")
        self.loop = loop

    @property
    def max_turns(self) -> int:
        return int(self.loop.max_turns)

    def _ready(self) -> Know3Retriever:
        self.loop._sync_index()
        self.loop._ensure()
        return self.loop

    def threshold(self, turn: int = 0) -> float:
        """θ_t of the loop's schedule."""
        return self._ready().schedule.theta(turn)

    def check(self, text: str | None = None, *, passages: Sequence[Passage] = (), turn: int = 0) -> dict[str, Any]:
        """Verify ``text`` (an answer or its reasoning), or, without text, the top ``answer_refs``
        of ``passages`` (LLM-free KG-verified retrieval, docs/methods.md §5(e)).

        Returns ``{"score", "plausibility", "threshold", "turn", "decision", "source", "triples",
        "reason", "extraction"}``: ``score`` is lower = more consistent with the KG, ``plausibility``
        the same in [0, 1], higher = more plausible (:func:`~.scoring.plausibility`); ``decision``
        is ``"accept"`` when score < θ_turn or turn ≥ T, else ``"retrieve"``; ``score`` is ``None``
        (with a ``reason``) when no triple could be linked and scored -- never an exception for
        unknown entities or empty text."""
        loop = self._ready()
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text must be a str (an answer), got {type(text).__name__}")
        errors: list[dict[str, Any]] = []
        if text and text.strip():
            ex, source = loop.extractor.extract(text, errors=errors), "generation"
        elif passages:
            ex = loop._union(loop._extract_passages(list(passages)[: loop.answer_refs], errors))
            source = "documents"
        else:
            ex, source = None, "none"
        if ex is None:
            out: dict[str, Any] = {
                "score": None,
                "reason": "nothing to verify: no text and no passages",
                "extraction": None,
            }
        else:
            out = loop._verify(ex)
        accept = loop.schedule.accept(out["score"], turn)
        res = {
            "score": out["score"],
            "plausibility": out.get("plausibility"),
            "threshold": round(loop.schedule.theta(turn), 6),
            "turn": int(turn),
            "decision": "accept" if accept else "retrieve",
            "source": source,
            "triples": (out.get("verification") or {}).get("triples", []),
            "reason": out["reason"],
            "extraction": out["extraction"],
        }
        if errors:
            res["llm_error"] = errors
        return res

    def score_passages(self, passages: Sequence[Passage]) -> list[dict[str, Any]]:
        """Per passage: ``{"id", "score", "plausibility", "reason", "triples"}`` (the factual check of the
        reference filter, paper §4.3; ``score`` ``None`` when nothing in it is scorable)."""
        loop = self._ready()
        out = []
        for p, ex in zip(passages, loop._extract_passages(list(passages))):
            v = loop._verify(ex)
            out.append(
                {
                    "id": p.id,
                    "score": v["score"],
                    "plausibility": v.get("plausibility"),
                    "reason": v["reason"],
                    "triples": (v.get("verification") or {}).get("triples", []),
                }
            )
        return out

    def enhance(self, question: str) -> str:
        """The knowledge-enhanced query q^KG (App. A): linked entities, their local neighbours and
        a global KGE prediction listed with the question (``question`` itself when nothing links)."""
        eq = self._ready().enhancer.enhance(question)
        return eq.text or question

    def __repr__(self) -> str:
        return f"KGVerifier({self.loop!r})"
