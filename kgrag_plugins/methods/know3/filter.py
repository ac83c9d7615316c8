"""Knowledge-driven reference filter of Know³-RAG (paper §4.4 Eq. 6-7; docs/methods.md §5(a) step 6).

Each candidate reference gets (i) a **relevance** decision and (ii) a **factual score**; among
the relevant ones the ``k`` (5) with the lowest score are kept (Eq. 7: D^c_{t+1} = D^c_t ∪ kept).

- Relevance with an LLM: the Fig. 10 prompt per reference with the question's entities and
  descriptions ("The reliability of the passage is yes/no"); an invalid reply is asked once more,
  then the LLM-free check decides (WARNING + trace entry). LLM-free (docs/methods.md §5(e)): MiniLM
  cosine between the reference and "question + entity descriptions" ≥ ``relevance_min`` (0.3).
- Factual check: the reference's triples (:class:`.extraction.TripleExtractor`) scored by the
  verifier (lower = more consistent); a reference with no scorable triple gets the paper code's
  sentinel ``10000 − #entities`` (entities = KG entities linked in the reference), so among
  unverifiable references the one naming more KG entities ranks first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...models.prompting import clip_text
from ...models.replies import complete_validated
from ...types import Passage
from .extraction import Extraction
from .prompts import RELEVANCE_SCHEMA, parse_relevance, relevance_messages
from .query import EnhancedQuery

logger = logging.getLogger(__name__)

__all__ = ["Candidate", "FilterResult", "ReferenceFilter", "SENTINEL"]

#: Score of a reference with no scorable triple is ``SENTINEL - #entities`` (Know3RAG code).
SENTINEL = 10000.0


@dataclass
class Candidate:
    """A reference from a knowledge model: the passage, where it came from (``"activation:q"``,
    ``"activation:q_kg"``, ``"llm:q"`` ...), its rank there; filled by the filter: relevance,
    score, verification breakdown and the decision."""

    passage: Passage
    source: str
    rank: int = 0
    relevant: bool | None = None
    relevance: float | None = None
    relevance_by: str = ""
    score: float | None = None
    verification: dict[str, Any] | None = None
    kept: bool = False
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.passage.id,
            "title": self.passage.title,
            "source": self.source,
            "rank": self.rank,
            "relevant": self.relevant,
            "relevance": None if self.relevance is None else round(self.relevance, 4),
            "relevance_by": self.relevance_by,
            "score": None if self.score is None else round(self.score, 4),
            "verification": self.verification,
            "kept": self.kept,
            "reason": self.reason,
        }


@dataclass
class FilterResult:
    kept: list[Candidate] = field(default_factory=list)
    dropped: list[Candidate] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kept": [c.to_dict() for c in self.kept], "dropped": [c.to_dict() for c in self.dropped]}


class ReferenceFilter:
    """Relevance + factual check, keep the ``k`` lowest-scored relevant references.

    ``extract(passages, errors) -> list[Extraction]`` gives each reference's linked triples (the loop
    passes a cached extractor); ``verifier`` is a
    :class:`~kgrag_plugins.methods.know3.scoring.TripleVerifier`.
    """

    def __init__(
        self,
        index: Any,
        verifier: Any,
        extract: Callable[[Sequence[Passage], list[dict[str, Any]]], list[Extraction]],
        *,
        llm: Any = None,
        k: int = 5,
        relevance_min: float = 0.3,
    ) -> None:
        self.index = index
        self.verifier = verifier
        self.extract = extract
        self.llm = llm
        self.k = k
        self.relevance_min = relevance_min

    # ------------------------------------------------------------------ relevance
    def _vectors(self, passages: Sequence[Passage]) -> np.ndarray:
        store = self.index.passages
        out = []
        missing = [i for i, p in enumerate(passages) if p.id not in store or p.metadata.get("generated")]
        fresh = {}
        if missing:
            vecs = self.index.embedder.embed([passages[i].embed_text for i in missing], progress=False)
            fresh = dict(zip(missing, vecs))
        for i, p in enumerate(passages):
            out.append(fresh[i] if i in fresh else store.vectors[store.position(p.id)])
        return np.asarray(out, dtype=np.float32)

    def relevance(
        self, question: str, eq: EnhancedQuery, cands: Sequence[Candidate], errors: list[dict[str, Any]]
    ) -> None:
        """Set ``relevant`` / ``relevance`` / ``relevance_by`` of each candidate."""
        if not cands:
            return
        entities = eq.pairs(("query",))
        context = question + "".join(f" {n}: {d}" for n, d in entities)
        qvec = np.asarray(self.index.embed_query(context), dtype=np.float32)
        sims = self._vectors([c.passage for c in cands]) @ qvec
        for c, s in zip(cands, sims):
            c.relevance = float(s)
            verdict = None
            if self.llm is not None:
                text = clip_text(f"{c.passage.title}: {c.passage.text}" if c.passage.title else c.passage.text)
                verdict = complete_validated(
                    self.llm,
                    relevance_messages(question, text, entities),
                    parse_relevance,
                    step="relevance_check",
                    errors=errors,
                    context={"passage": c.passage.id},
                    log=logger,
                    schema=RELEVANCE_SCHEMA,
                    temperature=0.0,
                )
            if verdict is not None:
                c.relevant, c.relevance_by = bool(verdict), "llm"
            else:
                c.relevant = c.relevance >= self.relevance_min
                c.relevance_by = "minilm" if self.llm is None else "minilm (llm fallback)"

    # ------------------------------------------------------------------ factual check
    def factual(self, cands: Sequence[Candidate], errors: list[dict[str, Any]] | None = None) -> None:
        """Set ``score`` (verifier score, or the sentinel) and ``verification`` of each candidate."""
        if not cands:
            return
        extractions = self.extract([c.passage for c in cands], errors if errors is not None else [])
        for c, ex in zip(cands, extractions):
            keys = ex.keys
            ver = self.verifier.verify(keys) if keys else None
            n_ent = len(getattr(ex, "entities", ()) or {x for t in keys for x in (t[0], t[2])})
            if ver is not None and ver.score is not None:
                c.score = float(ver.score)
                c.verification = {"score": round(c.score, 4), "triples": len(keys), "method": ex.method}
            else:
                c.score = SENTINEL - n_ent
                why = ex.reason or (ver.reason if ver is not None else None) or "no scorable triple"
                c.verification = {"score": None, "sentinel": c.score, "reason": why, "triples": len(keys)}

    def filter(
        self,
        question: str,
        eq: EnhancedQuery,
        cands: Sequence[Candidate],
        *,
        errors: list[dict[str, Any]] | None = None,
        exclude: set[str] | None = None,
    ) -> FilterResult:
        """Decide every candidate (duplicates and ``exclude``d ids are dropped with that reason)."""
        errors = errors if errors is not None else []
        res = FilterResult()
        unique: list[Candidate] = []
        seen = set(exclude or ())
        for c in cands:
            if c.passage.id in seen:
                c.reason = "already a reference" if c.passage.id in (exclude or ()) else "duplicate"
                res.dropped.append(c)
                continue
            seen.add(c.passage.id)
            unique.append(c)
        self.relevance(question, eq, unique, errors)
        relevant = [c for c in unique if c.relevant]
        for c in unique:
            if not c.relevant:
                c.reason = f"not relevant ({c.relevance_by}, cosine {c.relevance:.2f})"
                res.dropped.append(c)
        self.factual(relevant, errors)
        order = sorted(relevant, key=lambda c: (c.score if c.score is not None else SENTINEL, c.rank))
        for i, c in enumerate(order):
            if i < self.k:
                c.kept, c.reason = True, f"kept: score rank {i + 1} of {len(order)}"
                res.kept.append(c)
            else:
                c.reason = f"score rank {i + 1} > k = {self.k}"
                res.dropped.append(c)
        return res
