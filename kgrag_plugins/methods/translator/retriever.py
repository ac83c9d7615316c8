"""KG-Translator retriever: translate the question into (entity, relation) clues that exist in
the ParseKG, trace them to sentences and passages, rank by MiniLM (paper §3, App. J Alg. 2).

Pipeline per question (``trace["timings"]`` has one entry per component, ms):

1. ``ner``: spaCy NER spans of the question; the ones naming an entity are E_q (Alg. 2 line 8).
2. ``entity_translation``: α entities (LLM-free matching, :mod:`.entities`, or ``backend``).
3. ``relation_translation``: β relation spans per entity (:mod:`.relations` or ``backend``).
4. ``tracing``: sentences containing each clue with the entity in the right role -> passages.
5. Reverse translation (App. J Alg. 2) with R⁻ when the forward pass traced no passage or an
   E_q entity is missing from the forward entities; clues and passages are merged.
6. Multi-hop (:mod:`.decompose`): prompt ❸ with an ``llm``; the LLM-free bridge step otherwise
   (``bridge=``; default from measurement, see docs/translator.md).
7. ``ranking``: every traced passage by MiniLM cosine to the question (Eq. 10, the index's passage
   vectors), top k. When fewer than k (but at least one) passages were traced, the rest of the k
   slots are filled by dense retrieval, ranked below every traced passage (``backfill=True``; our
   addition: the paper returns the fewer passages; ``backfill="always"`` also fills when nothing
   was traced, ``False`` never).

Decisions (docs/methods.md §3(d)): query NER entities are added *on top of* the α translated ones;
forward+reverse passages are merged and re-ranked together; beam defaults per dataset are the
paper's (:data:`BEAMS`), unknown data gets :data:`DEFAULT_BEAMS`. An index without a ParseKG
is refused at construction (build it with ``builder="parsekg"``); an empty ParseKG, a question
with no translatable entity, or entities without relations give no clue facts and
``trace["reason"]``. Their passages: none in the paper's order (``fusion=None``: an empty
:class:`Evidence`, as the paper returns nothing; dense passages only with ``backfill="always"``,
flagged in the trace); with fusion (the default ``"dense-first"``, or ``"rrf"``) the fused
ranking degenerates to the dense one (``trace["fusion"]["traced"] == 0``) -- a fused retriever
keeps its dense list when the other list is empty. Whenever dense passages stand in for traced ones,
``trace["fallback"]`` says so (``{"to": "dense", "reason": "no entity found"}``, or ``"no passage
traced"``); a failed prompt-❸ call is recorded the same way. ``trace["score_kind"]`` names the
scores (cosine, RRF, or the dense-first ranks). Clue facts are shown with the names of their
traced sentence (:mod:`~kgrag_plugins.methods.facts`). An empty ParseKG is always an empty Evidence.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from typing import Any

import numpy as np

from ...types import Evidence, Fact, ScoredPassage, note_fallback
from ..base import Retriever
from .decompose import bridge_entities, next_query
from .entities import EntityTranslator
from .relations import RelationTranslator
from .tracing import Clue, clue_passages, rank_passages, trace_clue

logger = logging.getLogger(__name__)

#: (α, β) per dataset, paper App. F ("Model Retrieval & QA").
BEAMS: dict[str, tuple[int, int]] = {
    "hotpotqa": (3, 3),
    "2wikimultihopqa": (3, 1),
    "2wiki": (3, 1),
    "musique": (3, 5),
    "popqa": (3, 5),
}
#: (α, β) for unknown data: α = 3 in every paper setting; β = 3 is the middle of the paper's values.
DEFAULT_BEAMS = (3, 3)
_OPTIONS = {
    "bridge": True,
    "backfill": True,
    "reverse": True,
    "bridge_passages": 3,
    "bridge_alpha": None,
    "traced_bonus": None,
    "fusion": "dense-first",
}
#: Reciprocal-rank-fusion constant (Cormack et al., 2009): score = Σ 1 / (RRF_K + rank).
RRF_K = 60
#: ``fusion="dense-first"``: how many dense passages go before the traced ones.
DENSE_FIRST = 2
FUSIONS = (None, "rrf", "dense-first")


def beams_for(dataset: str | None) -> tuple[int, int]:
    """The paper's (α, β) for ``dataset`` (case/punctuation-insensitive), else the default."""
    key = "".join(c for c in (dataset or "").lower() if c.isalnum())
    for name, ab in BEAMS.items():
        if key and key == "".join(c for c in name if c.isalnum()):
            return ab
    return DEFAULT_BEAMS


def _accepts_direction(fn: Any) -> bool:
    try:
        return "direction" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class TranslatorRetriever(Retriever):
    """Clue-translation retriever (KG-Translator); see the module docstring.

    ``llm`` enables prompt-❸ decomposition (``max_steps`` calls at most); ``backend`` (Part B's
    :class:`~kgrag_plugins.methods.translator.decoding.TranslationBackend`) replaces the LLM-free
    entity/relation translation; given a model instead (a local transformers model directory or
    ``(model, tokenizer)``, a ``VLLMServer`` / ``VLLMEngine``, any LLM), the backend is chosen by
    what it supports (:func:`~.vllm_backend.choose_backend`: HF constrained decoding, the vLLM
    logits processor, vLLM structured outputs, else unconstrained decoding + projection).
    Options: ``bridge`` (LLM-free second round), ``backfill`` (dense fill-up to k), ``reverse``
    (App. J), ``bridge_passages`` (first-round passages whose entities
    are bridge candidates), ``bridge_alpha`` (bridge entities, default α), ``traced_bonus`` (``None``:
    traced passages strictly first, the paper; a float: traced passages compete with the dense
    top 2k with this bonus added to their cosine -- our addition), ``fusion`` (``None``: the
    paper's order, traced passages then the dense fill-up; ``"rrf"``: reciprocal-rank fusion of the
    traced ranking and the dense top 2k, equal weights, ``RRF_K`` = 60; ``"dense-first"``: the
    dense top ``DENSE_FIRST`` = 2, then the traced passages, then the dense fill-up -- both our
    additions; scores are rank-based (RRF scores / ``1 / (1 + rank)``), so they decrease with rank).
    """

    name = "translator"

    def __init__(
        self,
        index: Any,
        *,
        llm: Any = None,
        backend: Any = None,
        alpha: int | None = None,
        beta: int | None = None,
        dataset: str | None = None,
        max_steps: int = 2,
        **opts: Any,
    ) -> None:
        if getattr(index, "parsekg", None) is None:
            raise ValueError(
                "TranslatorRetriever needs an index with a ParseKG: build it with "
                'KnowledgeIndex.build(passages, path, builder="parsekg")'
            )
        unknown = set(opts) - set(_OPTIONS)
        if unknown:
            raise TypeError(f"TranslatorRetriever: unknown option(s) {sorted(unknown)}; known: {sorted(_OPTIONS)}")
        a0, b0 = beams_for(dataset)
        self.alpha, self.beta = int(alpha if alpha is not None else a0), int(beta if beta is not None else b0)
        if self.alpha < 1 or self.beta < 1:
            raise ValueError(f"alpha and beta must be >= 1, got alpha={self.alpha}, beta={self.beta}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
            raise ValueError(f"max_steps must be an int >= 0, got {max_steps!r}")
        from ...models.llm import as_llm

        self.llm = as_llm(llm) if llm is not None else None
        if backend is not None and not (
            callable(getattr(backend, "entities", None)) and callable(getattr(backend, "relations", None))
        ):
            # a model, server, engine or LLM rather than a TranslationBackend: pick the best
            # backend it supports (HF constrained > vLLM processor > vLLM structured > projection)
            from .vllm_backend import choose_backend

            backend = choose_backend(index, backend)
        self.backend = backend
        self.max_steps = max_steps
        self.opts = {**_OPTIONS, **opts}
        if self.opts["fusion"] not in FUSIONS:
            raise ValueError(
                f"fusion must be None (the paper's order), 'rrf' or 'dense-first', got {self.opts['fusion']!r}"
            )
        self.index = index
        self.entities = EntityTranslator(index)
        self.relations = RelationTranslator(index)
        #: Prompt overrides (:meth:`set_prompt`); ``"decomposition"``: prompt ❸'s instruction text.
        self.prompts: dict[str, str] = {}

    def set_prompt(self, key: str, template: str) -> None:
        """Replace the instruction text of prompt ``key`` (``"decomposition"``: prompt ❸; the
        question, passages and used queries stay in their data blocks, so it has no ``{fields}``)."""
        if key != "decomposition":
            raise KeyError(f"unknown KG-Translator prompt {key!r}; keys: 'decomposition'")
        if re.search(r"\{\w+\}", template):
            raise ValueError("prompt 'decomposition' must use the fields [] (the data blocks are added)")
        self.prompts[key] = str(template)

    def prepare(self) -> dict[str, float]:
        """Compute (or load) the derived indexes now: entity-name vectors, the entity tables and
        the relation-window vectors; returns their build seconds (the benchmark reports them)."""
        t0 = time.perf_counter()
        self.entities.pool("forward")
        t1 = time.perf_counter()
        n_heads = self.entities.prepare()
        t2 = time.perf_counter()
        self.relations.ensure()
        t3 = time.perf_counter()
        return {
            "entity_tables_s": round(t1 - t0, 2),
            "entity_vectors_s": round(t2 - t1, 2),
            "head_entities": n_heads,
            "relation_windows_s": round(t3 - t2, 2),
            "relation_windows": len(self.relations._texts),
        }

    def _refresh(self) -> None:
        self.entities.reset()
        self.relations.reset()

    def __repr__(self) -> str:
        return f"TranslatorRetriever(alpha={self.alpha}, beta={self.beta}, llm={self.llm is not None})"

    # ------------------------------------------------------------------ one translation round
    def _entities(
        self, query: str, direction: str, ner: list[str], timings: dict[str, float]
    ) -> list[tuple[str, float]]:
        t0 = time.perf_counter()
        if self.backend is not None:
            kw = {"direction": direction} if _accepts_direction(self.backend.entities) else {}
            if direction == "reverse" and not kw:
                return []  # a backend without reverse support: forward only
            pool = set(self.entities.pool(direction))
            names = self.backend.entities(query, self.alpha, **kw)
            out = [(e, 1.0) for n in names for e in self.entities.resolve(n)[:1] if e in pool]
        else:
            out = [
                (m.entity, m.score) for m in self.entities.translate(query, self.alpha, direction=direction, ner=ner)
            ]
        timings["entity_translation"] = timings.get("entity_translation", 0.0) + (time.perf_counter() - t0) * 1000
        return out

    def _clues(
        self,
        query: str,
        qvec: np.ndarray,
        ents: list[tuple[str, float]],
        direction: str,
        step: int,
        timings: dict[str, float],
    ) -> list[Clue]:
        t0 = time.perf_counter()
        clues: list[Clue] = []
        for e, _s in ents:
            name = self.entities.name(e)
            if self.backend is not None:
                kw = {"direction": direction} if _accepts_direction(self.backend.relations) else {}
                rels = [(r, 0.0) for r in self.backend.relations(query, name, self.beta, **kw)]
            else:
                rels = [
                    (r.text, r.score)
                    for r in self.relations.translate(query, e, self.beta, direction=direction, qvec=qvec)
                ]
            clues.extend(Clue(e, name, r, direction, sc, step=step) for r, sc in rels)
        t1 = time.perf_counter()
        timings["relation_translation"] = timings.get("relation_translation", 0.0) + (t1 - t0) * 1000
        kg = self.index.parsekg
        for c in clues:
            trace_clue(kg, c)
        timings["tracing"] = timings.get("tracing", 0.0) + (time.perf_counter() - t1) * 1000
        return clues

    def _round(
        self, query: str, qvec: np.ndarray, ner: list[str], eq: set[str], step: int, timings: dict[str, float]
    ) -> tuple[list[Clue], list[str]]:
        """Alg. 2 for one query: forward, then reverse when needed. Returns clues and directions."""
        ents = self._entities(query, "forward", ner, timings)
        have = {e for e, _ in ents}
        heads = set(self.entities.pool("forward"))
        ents += [(e, 0.0) for e in eq if e not in have and e in heads]  # NER entities on top of α
        clues = self._clues(query, qvec, ents, "forward", step, timings)
        directions = ["forward"]
        missing = eq - {c.entity for c in clues}
        if self.opts["reverse"] and (not clue_passages(clues) or missing):
            rents = self._entities(query, "reverse", ner, timings)
            rhave = {e for e, _ in rents}
            tails = set(self.entities.pool("reverse"))
            rents += [(e, 0.0) for e in missing if e not in rhave and e in tails]
            clues += self._clues(query, qvec, rents, "reverse", step, timings)
            directions.append("reverse")
        return clues, directions

    # ------------------------------------------------------------------ retrieve
    def _retrieve(self, query: str, k: int) -> Evidence:
        timings: dict[str, float] = {}
        trace: dict[str, Any] = {"clues": [], "direction": [], "traced": [], "timings": timings}
        kg = self.index.parsekg
        if kg.num_sentences == 0:
            trace["reason"] = "empty ParseKG: the index has no sentences with entities to translate into"
            return Evidence(query, [], [], trace)
        t0 = time.perf_counter()
        qvec = self.index.embed_query(query)
        timings["embed"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        ner = EntityTranslator.ner_spans(query)
        eq = {e for s in ner for e in self.entities.resolve(s)}
        timings["ner"] = (time.perf_counter() - t0) * 1000
        errors: list[dict[str, Any]] = []
        seen = len(getattr(self.backend, "errors", None) or [])  # an LM backend's failed calls so far
        clues, directions = self._round(query, qvec, ner, eq, 0, timings)
        queries = [query]
        if self.llm is not None and self.max_steps > 0:
            clues = self._decompose(query, qvec, clues, queries, errors, timings)
        elif self.opts["bridge"]:
            clues = self._bridge(query, qvec, clues, timings)
        t0 = time.perf_counter()
        ranked = rank_passages(self.index, qvec, clue_passages(clues))
        traced_any = bool(ranked)
        timings["ranking"] = (time.perf_counter() - t0) * 1000
        trace["direction"] = directions
        trace["queries"] = queries
        trace["clues"] = [
            {
                "entity": c.entity,
                "name": c.name,
                "relation": c.relation,
                "direction": c.direction,
                "step": c.step,
                "score": round(c.score, 4),
                "passage_ids": c.passage_ids,
            }
            for c in clues
        ]
        trace["traced"] = [
            {"sentence": kg.sentence(s), "passage_id": kg.passage_of(s)} for c in clues for s in c.sentences[:5]
        ]
        if errors:
            trace["llm_errors"] = errors
        store = self.index.passages
        bonus = self.opts["traced_bonus"]
        if bonus is not None and ranked:
            # our addition: traced passages compete with dense candidates, +bonus on their cosine
            t0 = time.perf_counter()
            traced = {p for p, _ in ranked}
            dense = [(p.id, float(s)) for p, s in store.dense_search(qvec, 2 * k) if p.id not in traced]
            ranked = sorted([(p, s + float(bonus)) for p, s in ranked] + dense, key=lambda x: -x[1])
            trace["dense_mixed"] = [p for p, _ in ranked[:k] if p not in traced]
            timings["backfill"] = (time.perf_counter() - t0) * 1000
        if not ranked:
            trace["reason"] = self._why_empty(clues, eq)
        if self.opts["fusion"] is not None and bonus is None:  # traced_bonus replaces fusion
            # with nothing traced the fused ranking is the dense one (the reason stays in the trace)
            ranked = self._fuse(ranked, qvec, k, trace, timings)
        passages = [ScoredPassage(store.get(p), s) for p, s in ranked[:k]]
        fill_up = self.opts["backfill"] == "always" or (self.opts["backfill"] and ranked)
        if len(passages) < k and fill_up:
            t0 = time.perf_counter()
            have = {sp.passage.id for sp in passages}
            fill = [(p, s) for p, s in store.dense_search(qvec, k + len(have)) if p.id not in have][: k - len(passages)]
            # backfilled passages rank below every traced one
            passages += [ScoredPassage(p, float(s) - 2.0) for p, s in fill]
            trace["backfill"] = [p.id for p, _ in fill]
            timings["backfill"] = (time.perf_counter() - t0) * 1000
        trace["score_kind"] = self._score_kind("backfill" in trace)
        failed = list((getattr(self.backend, "errors", None) or [])[seen:])  # this call's LM translation errors
        why = None
        if failed:
            trace["llm_error"] = failed
            why = f"LLM error in {failed[-1].get('step', 'translation')}: {failed[-1].get('error', '?')}"
        if passages and not traced_any:  # the dense ranking stands in for the traced one
            note_fallback(trace, "dense", why or trace["reason"].split(":")[0])
        elif why:
            note_fallback(trace, "the clues translated before the error", why)
        if errors:  # prompt ❸ failed: the LLM-free bridge step (or the clues so far) instead
            last = errors[-1]
            to = "the LLM-free bridge step" if self.opts["bridge"] else "the clues found so far"
            note_fallback(trace, to, f"LLM error in {last.get('step', 'decomposition')}: {last.get('error', '?')}")
        facts = [
            Fact(
                f"{c.name} @@ {c.relation}",
                kind="clue",
                score=c.score,
                data={
                    "entity": c.entity,
                    "name": c.name,
                    "relation": c.relation,
                    "hyperrelation": c.hyperrelations.get(c.sentences[0]) if c.sentences else None,
                    "direction": c.direction,
                    "sentences": [kg.sentence(s) for s in c.sentences],
                    "passage_ids": c.passage_ids,
                },
            )
            for c in clues
        ]
        for key in timings:
            timings[key] = round(timings[key], 3)
        return Evidence(query, passages, facts, trace)

    def _score_kind(self, backfilled: bool) -> str:
        """What this call's passage scores are (``trace["score_kind"]``)."""
        if self.opts["traced_bonus"] is not None:
            kind = "cosine (+ traced_bonus for traced passages)"
        elif self.opts["fusion"] == "rrf":
            kind = "fusion rank (RRF)"
        elif self.opts["fusion"] == "dense-first":
            kind = "rank (dense-first fusion: 1 / (1 + rank))"
        else:
            kind = "cosine"
        return kind + ("; dense fill-up: cosine - 2" if backfilled else "")

    def _fuse(
        self,
        ranked: list[tuple[str, float]],
        qvec: np.ndarray,
        k: int,
        trace: dict[str, Any],
        timings: dict[str, float],
    ) -> list[tuple[str, float]]:
        """The traced ranking fused with the dense top 2k (``fusion="rrf"`` or ``"dense-first"``).

        Our addition (not in the paper): traced passages ranked strictly first lose the passages
        of later hops that only the question's wording finds (MuSiQue); fusing keeps the best of
        both lists near the top. See docs/translator.md for the measurement."""
        t0 = time.perf_counter()
        scores: dict[str, float] = {}
        dense = [p.id for p, _ in self.index.passages.dense_search(qvec, 2 * k)]
        traced = {p for p, _ in ranked}
        if self.opts["fusion"] == "dense-first":
            order = list(dict.fromkeys(dense[:DENSE_FIRST] + [p for p, _ in ranked] + dense))
            trace["fusion"] = {
                "method": "dense-first",
                "traced": len(traced),
                "dense_in_top_k": [p for p in order[:k] if p not in traced],
            }
            timings["fusion"] = (time.perf_counter() - t0) * 1000
            return [(p, 1.0 / (1 + r)) for r, p in enumerate(order)]
        for ids in ([p for p, _ in ranked], dense):
            for r, pid in enumerate(ids):
                scores[pid] = scores.get(pid, 0.0) + 1.0 / (RRF_K + r + 1)
        fused = sorted(scores.items(), key=lambda x: -x[1])
        trace["fusion"] = {
            "method": "rrf",
            "traced": len(traced),
            "dense_in_top_k": [p for p, _ in fused[:k] if p not in traced],
        }
        timings["fusion"] = (time.perf_counter() - t0) * 1000
        return fused

    @staticmethod
    def _why_empty(clues: list[Clue], eq: set[str]) -> str:
        if not clues:
            return "no entity found: nothing in the question matches a ParseKG entity with relations"
        return "no passage traced: the translated clues match no sentence in the right role"

    def _bridge(self, query: str, qvec: np.ndarray, clues: list[Clue], timings: dict[str, float]) -> list[Clue]:
        """LLM-free second round over entities of the first round's top passages (our addition)."""
        t0 = time.perf_counter()
        top = [p for p, _ in rank_passages(self.index, qvec, clue_passages(clues))[: int(self.opts["bridge_passages"])]]
        pool = set(self.entities.pool("forward"))
        ents = bridge_entities(
            self.index,
            top,
            qvec,
            pool=pool,
            exclude={c.entity for c in clues},
            alpha=int(self.opts["bridge_alpha"] or self.alpha),
            vectors=self.entities.vectors_of,
        )
        timings["bridge"] = (time.perf_counter() - t0) * 1000
        return clues + self._clues(query, qvec, ents, "forward", 1, timings)

    def _decompose(
        self,
        query: str,
        qvec: np.ndarray,
        clues: list[Clue],
        queries: list[str],
        errors: list,
        timings: dict[str, float],
    ) -> list[Clue]:
        """Prompt-❸ loop (at most ``max_steps`` calls); contexts merged, re-ranked by the caller."""
        store = self.index.passages
        for step in range(1, self.max_steps + 1):
            t0 = time.perf_counter()
            top = [store.get(p).text for p, _ in rank_passages(self.index, qvec, clue_passages(clues))[:5]]
            status, nq = next_query(
                self.llm, query, top, queries, errors=errors, instruction=self.prompts.get("decomposition")
            )
            timings["decompose"] = timings.get("decompose", 0.0) + (time.perf_counter() - t0) * 1000
            if status == "failed":
                return self._bridge(query, qvec, clues, timings) if self.opts["bridge"] else clues
            if status == "stop" or nq is None:
                break
            queries.append(nq)
            nvec = self.index.embed_query(nq)
            ner = EntityTranslator.ner_spans(nq)
            eq = {e for s in ner for e in self.entities.resolve(s)}
            more, _dirs = self._round(nq, nvec, ner, eq, step, timings)
            clues = clues + more
        return clues
