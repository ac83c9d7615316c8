"""The Know³-RAG adaptive loop as a retriever (paper §4, Eq. 1-7; docs/methods.md §5(a), §5(e)).

:class:`Know3Retriever` wraps any corpus retriever (``base``, default
:class:`~kgrag_plugins.methods.activation.ActivationRetriever`) and runs turns t = 0 … T (T = 2):

1. **Answer** a_t. With an LLM: the Fig. 6 QA prompt over the references D^c_t (none at t = 0).
   LLM-free ("KG-verified retrieval", docs/methods.md §5(e)): the base retriever's references stand in for
   generated ones; a_0 is the base ranking's top ``answer_refs`` (2) passages for Q, a_t (t ≥ 1)
   the top ``answer_refs`` of D^c_t (the references the loop kept, best factual score first).
2. **Verify**: triples of a_t (:class:`.extraction.TripleExtractor`; LLM: Fig. 9 on the reasoning,
   LLM-free: spaCy SVO on the passages) scored by the verifier (lower = more consistent); output
   when s_t < θ_t or t = T (:class:`.threshold.ThresholdSchedule`; no scorable triple -> not
   verified, so retrieve before T).
3. **Retrieve** for turn t+1: q_1 = Q; later q_t from the Fig. 8 prompt (LLM-free: Q plus the
   names of the previous turn's local/global entities); q^KG (:class:`.query.QueryEnhancer`); every
   knowledge model (default: the base retriever) with q_t and q^KG (+ Fig. 7 LLM references when
   ``generate_references``); :class:`.filter.ReferenceFilter` keeps the ``k_refs`` (5)
   lowest-scored relevant ones not yet in D^c; D^c_{t+1} = D^c_t ∪ kept (Eq. 7).
4. **Final references**. LLM: D^c (filled up to k with the base ranking for Q when shorter,
   marked ``"fill"`` in the trace). LLM-free, ``merge`` decides how D^c meets the base top k:
   ``"append"`` (default): the base top k unchanged, D^c after it (visible with a larger k only) —
   the wrapped retriever's Recall@k and order are kept, the loop adds its verification trace and
   the q^KG triples as facts; ``"rerank"``: the base top-k *set* is kept and its members that are
   in D^c move to the front, both groups in base order (Recall@k equal by construction, Recall@2
   measured ±0.01 around the base, docs/know3.md); ``"score"``: the same with D^c members in the
   filter's order (measured worse at Recall@2); ``"tail"``: up to ``max_new`` (2) D^c passages
   outside the base top k replace the last base positions (measured lower Recall@5).

The KGE is :func:`~kgrag_plugins.index.kge.kge_for_index` (trained on the index graph on first
use and stored in the index generation; an index update retrains it via :meth:`_refresh`). θ_0
defaults to the calibrated value (:meth:`.threshold.ThresholdSchedule.calibrated`). Every LLM call
goes through ``complete_validated`` (invalid twice -> the LLM-free step, WARNING, an entry in
``trace["llm_error"]``). The trace (``evidence.trace["know3"]``) lists every turn: score, θ_t,
decision and its reason, extracted/linked/dropped triples with the per-triple breakdown, the
query, q^KG and the kept/dropped references with their reasons. ``trace["score_kind"]`` is the base
retriever's while its ranking stands (``1 / (1 + rank)`` once the loop reorders), and the base's
fallbacks are this call's too (``trace["fallback"]``, marked ``(in BASE)``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ...models.llm import as_llm
from ...models.prompting import clip_text
from ...models.replies import complete_validated
from ...types import Answer, Evidence, Fact, Passage, ScoredPassage, note_fallback
from ..base import Retriever
from . import prompts as P
from .extraction import Extraction, TripleExtractor
from .filter import Candidate, ReferenceFilter
from .prompts import parse_answer, parse_query, parse_reference, qa_prompt, query_prompt, reference_prompt
from .query import EnhancedQuery, QueryEnhancer, relation_text
from .threshold import DEFAULT_C, DEFAULT_PERCENTILE, MAX_TURNS, ThresholdSchedule

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_KGE_KWARGS", "MERGES", "Know3Retriever"]

MERGES = ("rerank", "score", "append", "tail")
#: Training options for a KGE trained on first use: at most 20 min of epochs (the best epoch is
#: kept; the check runs after each epoch). On 2 shared cores one epoch over a corpus graph of
#: 35k triples took ~20 min (docs/know3.md), so an unbounded run could take hours.
DEFAULT_KGE_KWARGS: dict[str, Any] = {"time_budget": 1200.0}
_CACHE_SIZE = 50_000


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


class Know3Retriever(Retriever):
    """Know³-RAG's verify -> retrieve-again loop around a corpus retriever (module docstring).

    ``retrieve(q, k)`` returns the loop's final references (LLM-free unless ``llm`` is given);
    :meth:`run` returns an :class:`~kgrag_plugins.types.Answer` (needs an LLM for a generated
    answer). Options: ``theta0`` / ``schedule`` (default: calibrated θ_0 at ``percentile``, the
    ``schedule_kind`` "constant"), ``max_turns`` T, ``k_refs`` (k of Eq. 7), ``answer_refs``,
    ``merge`` / ``max_new``, ``relevance_min``, verifier ``method`` / ``aggregate`` (the
    verifier's defaults when ``None``), ``knowledge_models`` (retrievers; default ``[base]``),
    ``generate_references`` (Fig. 7 with the LLM), ``relation_prediction``.
    """

    name = "know3"

    def __init__(
        self,
        index: Any,
        base: Retriever | None = None,
        *,
        llm: Any = None,
        kge: Any = None,
        verifier: Any = None,
        schedule: ThresholdSchedule | None = None,
        theta0: float | None = None,
        percentile: float = DEFAULT_PERCENTILE,
        schedule_kind: str = "constant",
        c: float = DEFAULT_C,
        max_turns: int = MAX_TURNS,
        k_refs: int = 5,
        answer_refs: int = 2,
        merge: str = "append",
        max_new: int = 2,
        relevance_min: float = 0.3,
        method: str | None = None,
        aggregate: str = "mean",
        knowledge_models: Sequence[Retriever] | None = None,
        generate_references: bool = False,
        relation_prediction: str = "similarity",
        max_verify_triples: int = 30,
        train_kge: bool = True,
        kge_kwargs: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if merge not in MERGES:
            raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
        for key, val in (("k_refs", k_refs), ("answer_refs", answer_refs), ("max_verify_triples", max_verify_triples)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{key} must be a positive int, got {val!r}")
        if base is None:
            from ..activation import ActivationRetriever

            base = ActivationRetriever(index)
        self.base = base
        self.llm = as_llm(llm) if llm is not None else None
        self.index = index
        self.name = name or (self.name if base.name == "activation" else f"know3:{base.name}")
        self._given = {"kge": kge, "verifier": verifier, "schedule": schedule}
        self.theta0, self.percentile, self.schedule_kind, self.c = theta0, percentile, schedule_kind, c
        self.max_turns, self.k_refs, self.answer_refs = max_turns, k_refs, answer_refs
        self.merge, self.max_new, self.relevance_min = merge, max_new, relevance_min
        #: user overrides of the instruction texts (:meth:`set_prompt`)
        self.prompts: dict[str, str] = {}
        self.method, self.aggregate = method, aggregate
        self.knowledge_models = list(knowledge_models) if knowledge_models else [base]
        self.generate_references = generate_references
        self.relation_prediction = relation_prediction
        self.max_verify_triples = max_verify_triples
        self.train_kge = train_kge
        self.kge_kwargs = {**DEFAULT_KGE_KWARGS, **(kge_kwargs or {})}
        self._lock = threading.RLock()
        self.extractor = TripleExtractor(index, llm=self.llm)
        self._ready = False
        self._cache: OrderedDict[str, Extraction] = OrderedDict()
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ state

    #: Prompts whose instruction text :meth:`set_prompt` replaces (paper App. D, Figs. 6-8).
    PROMPT_KEYS = ("qa", "reference_generation", "query_generation")

    def set_prompt(self, key: str, text: str) -> None:
        """Replace the instruction text of prompt ``key`` (``"qa"``: Fig. 6, ``"reference_generation"``:
        Fig. 7, ``"query_generation"``: Fig. 8). The question, references and answer stay in their
        data blocks (so the text has no ``{fields}``); the data notice is kept."""
        if key not in self.PROMPT_KEYS:
            raise KeyError(f"unknown Know³ prompt {key!r}; keys: {', '.join(self.PROMPT_KEYS)}")
        if re.search(r"\{\w+\}", text):
            raise ValueError(f"prompt {key!r} takes no {{fields}} (the data blocks are added)")
        self.prompts[key] = str(text)

    def _refresh(self) -> None:
        """The index changed: new KGE (``kge_for_index`` on the new generation), verifier, θ_0,
        name index and extraction cache. A ``kge`` / ``verifier`` / ``schedule`` passed to the
        constructor is kept as it is (it is the caller's to update)."""
        with self._lock:
            self._ready = False
            self._cache.clear()
            self.extractor.refresh()

    def prepare(self) -> dict[str, Any]:
        """Load or train the KGE, build the verifier and calibrate θ_0 now; returns what it did
        (``kge_seconds``, the KGE's training report, θ values)."""
        self._sync_index()
        self._ensure()
        return dict(self.info)

    def _ensure(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            from .scoring import TripleVerifier

            t0 = time.perf_counter()
            kge = self._given["kge"]
            if kge is None:
                from ...index.kge import kge_for_index

                kge = kge_for_index(self.index, train=self.train_kge, **self.kge_kwargs)
            kge_s = time.perf_counter() - t0
            verifier = self._given["verifier"]
            if verifier is None and kge is not None:
                kw = {"aggregate": self.aggregate} | ({"method": self.method} if self.method else {})
                verifier = TripleVerifier(kge, self.index.graph, **kw)
            self.kge, self.verifier = kge, verifier
            t1 = time.perf_counter()
            schedule = self._given["schedule"]
            if schedule is None:
                kind = {"kind": self.schedule_kind, "c": self.c, "max_turns": self.max_turns}
                if self.theta0 is not None:
                    schedule = ThresholdSchedule(float(self.theta0), source="given", **kind)
                elif verifier is not None:
                    schedule = ThresholdSchedule.calibrated(verifier, percentile=self.percentile, **kind)
                else:  # no KGE: nothing verifies, every question runs to T
                    schedule = ThresholdSchedule(0.0, source="no KGE", **kind)
            self.schedule = schedule
            self.extractor.set_kge(kge)
            self.enhancer = QueryEnhancer(self.index, self.extractor, kge, relation_prediction=self.relation_prediction)
            self.filter = ReferenceFilter(
                self.index,
                verifier,
                self._extract_passages,
                llm=self.llm,
                k=self.k_refs,
                relevance_min=self.relevance_min,
            )
            self.info = {
                "kge_seconds": round(kge_s, 2),
                "kge": None if kge is None else {"model": kge.model_name, **getattr(kge, "report", {})},
                "calibration_seconds": round(time.perf_counter() - t1, 2),
                "schedule": schedule.to_dict(),
                "verifier": None if verifier is None else {"method": verifier.method, "aggregate": verifier.aggregate},
            }
            self._ready = True

    # ------------------------------------------------------------------ triples
    def _extract_passages(
        self, passages: Sequence[Passage], errors: list[dict[str, Any]] | None = None
    ) -> list[Extraction]:
        """Extractions of passages (LLM-free ones cached by passage id until the index changes)."""
        if self.llm is not None:
            return [self.extractor.extract(p.text, title=p.title or None, errors=errors) for p in passages]
        with self._lock:
            have = {p.id: self._cache[p.id] for p in passages if p.id in self._cache}
        todo = list({p.id: p for p in passages if p.id not in have}.values())
        if todo:
            fresh = self.extractor.extract_many([(p.text, p.title or None) for p in todo])
            with self._lock:
                for p, ex in zip(todo, fresh):
                    self._cache[p.id] = have[p.id] = ex
                while len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        return [have[p.id] for p in passages]

    def _verify(self, ex: Extraction) -> dict[str, Any]:
        """Score an extraction: ``{"score", "plausibility"?, "verification", "extraction", "reason"}``."""
        keys = ex.keys[: self.max_verify_triples]
        out: dict[str, Any] = {"score": None, "reason": ex.reason, "extraction": ex.to_dict()}
        if self.verifier is None:
            out["reason"] = "no KGE for this index"
        elif keys:
            ver = self.verifier.verify(keys)
            out["verification"] = ver.to_dict()
            out["score"] = ver.score
            out["plausibility"] = ver.plausibility  # the score in [0, 1], higher = more plausible
            out["reason"] = ver.reason
        return out

    @staticmethod
    def _union(extractions: Sequence[Extraction]) -> Extraction:
        if len(extractions) == 1:
            return extractions[0]
        ex = Extraction(method=extractions[0].method if extractions else "svo")
        seen: set[tuple[str, str, str]] = set()
        for e in extractions:
            ex.surface += e.surface
            ex.dropped += e.dropped
            ex.entities += [x for x in e.entities if x not in ex.entities]
            for t in e.triples:
                if t.key not in seen:
                    seen.add(t.key)
                    ex.triples.append(t)
        if not ex.triples:
            ex.reason = next((e.reason for e in extractions if e.reason), "no triples extracted")
        return ex

    # ------------------------------------------------------------------ knowledge models
    def _candidates(
        self, q: str, eq: EnhancedQuery, k: int, t: int, errors: list[dict[str, Any]], first: Evidence | None
    ) -> list[Candidate]:
        cands: list[Candidate] = []
        queries = [("q", q)] + ([("q_kg", eq.text)] if eq.text and eq.text != q else [])
        for km in self.knowledge_models:
            for tag, text in queries:
                ev = first if (first is not None and km is self.base and text == first.query) else km.retrieve(text, k)
                cands += [Candidate(sp.passage, f"{km.name}:{tag}", i) for i, sp in enumerate(ev.passages)]
        if self.generate_references and self.llm is not None:
            for tag, ents in (("q", ()), ("q_kg", eq.pairs())):
                prompt = reference_prompt(q, ents, self.prompts.get("reference_generation"))
                ref = complete_validated(
                    self.llm, prompt, parse_reference, step="reference_generation",
                    errors=errors, log=logger, max_tokens=P.MAX_TOKENS["reference_generation"], temperature=0.0,
                )  # fmt: skip
                if ref is not None:
                    p = Passage(f"know3-gen-t{t}-{tag}", ref, "", {"generated": True, "query": tag})
                    cands.append(Candidate(p, f"llm:{tag}", 0))
        return cands

    def _next_query(
        self,
        question: str,
        t: int,
        prev: EnhancedQuery | None,
        refs: list[Candidate],
        answer: str,
        errors: list[dict[str, Any]],
    ) -> tuple[str, str]:
        """q_t and how it was made (``"Q"``, ``"llm"``, ``"Q + entities"``)."""
        if t == 0:
            return question, "Q"
        if self.llm is not None:
            q = complete_validated(
                self.llm,
                query_prompt(
                    question, [self._ref_text(c.passage) for c in refs], answer, self.prompts.get("query_generation")
                ),
                parse_query, step="query_generation", errors=errors, log=logger,
                max_tokens=P.MAX_TOKENS["query_generation"], temperature=0.0,
            )  # fmt: skip
            if q is not None:
                return q, "llm"
        names = [e.name for e in (prev.entities if prev else []) if e.role != "query"]
        return (question + (" " + " ".join(names) if names else "")), "Q + entities"

    @staticmethod
    def _ref_text(p: Passage) -> str:
        return f"{p.title}: {clip_text(p.text)}" if p.title else clip_text(p.text)

    def _answer(self, question: str, refs: list[Candidate], errors: list[dict[str, Any]]) -> tuple[str, str, bool]:
        """(answer, reasoning, valid) from the Fig. 6 prompt; ``("", "", False)`` after two invalid replies."""
        replies: list[str] = []

        def validate(reply: str) -> str:
            replies.append(reply)
            return parse_answer(reply)

        prompt = qa_prompt(question, [self._ref_text(c.passage) for c in refs], self.prompts.get("qa"))
        ans = complete_validated(
            self.llm, prompt, validate, step="answer", errors=errors, log=logger,
            schema=P.ANSWER_SCHEMA, temperature=0.0,
        )  # fmt: skip
        if ans is None:
            return "", "", False
        return ans, replies[-1], True

    # ------------------------------------------------------------------ the loop
    def _loop(self, question: str, k: int) -> tuple[dict[str, Any], list[ScoredPassage], list[Candidate], Evidence]:
        self._ensure()
        timings = {"base": 0.0, "extract_verify": 0.0, "query": 0.0, "knowledge": 0.0, "filter": 0.0}
        errors: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        base_ev = self.base.retrieve(question, k)
        timings["base"] += _ms(t0)
        ranking = list(base_ev.passages)
        refs: list[Candidate] = []
        turns: list[dict[str, Any]] = []
        prev_eq: EnhancedQuery | None = None
        answer = reasoning = ""
        if self.llm is not None:
            answer, reasoning, _ = self._answer(question, refs, errors)
        for t in range(self.max_turns + 1):
            t1 = time.perf_counter()
            if self.llm is not None:
                ex = self.extractor.extract(reasoning or answer, errors=errors)
                shown = {"answer": answer}
            else:
                # a_0: the base retriever's top references; a_t: the top of D^c_t (Eq. 7: the
                # answer rests on the kept references), whatever the output merge
                top = [c.passage for c in refs[: self.answer_refs]] or [
                    sp.passage for sp in ranking[: self.answer_refs]
                ]
                ex = self._union(self._extract_passages(top)) if top else Extraction(reason="no references retrieved")
                shown = {"answer_refs": [p.id for p in top]}
            check = self._verify(ex)
            timings["extract_verify"] += _ms(t1)
            score, theta = check["score"], self.schedule.theta(t)
            accept = self.schedule.accept(score, t)
            decision = ("forced" if t >= self.max_turns else "accept") if accept else "retrieve"
            if decision == "forced":
                why = f"t = T = {self.max_turns}"
            elif score is None:
                why = f"not verifiable: {check['reason']}"
            else:
                why = f"score {score:.4g} {'<' if accept else '>='} θ_{t} {theta:.4g}"
            check["verify_reason"] = check.pop("reason")
            turn = {"t": t, **shown, **check, "theta": theta, "decision": decision, "reason": why}
            turns.append(turn)
            if accept:
                break
            t2 = time.perf_counter()
            q, how = self._next_query(question, t, prev_eq, refs, answer, errors)
            eq = self.enhancer.enhance(q)
            prev_eq = eq
            timings["query"] += _ms(t2)
            t3 = time.perf_counter()
            cands = self._candidates(q, eq, k, t, errors, base_ev if t == 0 else None)
            timings["knowledge"] += _ms(t3)
            t4 = time.perf_counter()
            res = self.filter.filter(question, eq, cands, errors=errors, exclude={c.passage.id for c in refs})
            timings["filter"] += _ms(t4)
            refs += res.kept
            turn.update(query=q, query_by=how, q_kg=eq.to_dict(), references=res.to_dict())
            if self.llm is not None:
                answer, reasoning, _ = self._answer(question, refs, errors)
            else:
                ranking = self._merge(list(base_ev.passages[:k]), refs, k)
                turn["ranking_after"] = [sp.passage.id for sp in ranking[:k]]
        final = turns[-1]["t"]
        trace: dict[str, Any] = {
            "retriever": self.name,
            "base": self.base.name,
            "mode": "llm" if self.llm is not None else "llm-free",
            "know3": {
                "turns": turns,
                "final_turn": final,
                "decision": turns[-1]["decision"],
                "answer": answer if self.llm is not None else None,
                "references": [c.passage.id for c in refs],
                "schedule": self.schedule.to_dict(),
                "merge": self.merge if self.llm is None else None,
            },
            "base_trace": base_ev.trace,
            "timings": timings,
        }
        if errors:
            trace["llm_error"] = errors
        return trace, ranking, refs, base_ev

    def _merge(self, base: list[ScoredPassage], refs: list[Candidate], k: int) -> list[ScoredPassage]:
        """The LLM-free final ranking of the base top ``k`` and D^c (see ``merge``)."""
        order = {c.passage.id: i for i, c in enumerate(refs)}
        if self.merge == "rerank":  # kept ones first, each group in base order
            out = [sp for sp in base if sp.passage.id in order] + [sp for sp in base if sp.passage.id not in order]
        elif self.merge == "score":  # kept ones first in the filter's order (lowest factual score first)
            ranked = sorted(
                range(len(base)),
                key=lambda i: (0, order[base[i].passage.id]) if base[i].passage.id in order else (1, i),
            )
            out = [base[i] for i in ranked]
        elif self.merge == "append":
            out = list(base)
        else:
            ids = {sp.passage.id for sp in base}
            new = [c.passage for c in refs if c.passage.id not in ids][: self.max_new]
            keep = max(0, min(len(base), k - len(new)))
            out = base[:keep] + [ScoredPassage(p, 0.0) for p in new]
        ids = {sp.passage.id for sp in out}
        out += [ScoredPassage(c.passage, 0.0) for c in refs if c.passage.id not in ids]
        return [ScoredPassage(sp.passage, round(1.0 / (1 + i), 6)) for i, sp in enumerate(out)]

    def _facts(self, refs: list[Candidate], turns: list[dict[str, Any]]) -> list[Fact]:
        """The enhanced-query triples of the turns (local/global entities) as facts."""
        g = self.index.graph
        out: list[Fact] = []
        for turn in turns:
            for e in (turn.get("q_kg") or {}).get("entities", []):
                if e.get("triple"):
                    h, r, t = e["triple"]
                    text = f"{g.name_of(h) if h in g else h} {relation_text(r)} {g.name_of(t) if t in g else t}"
                    out.append(Fact(text, "fact", float(e["score"] or 0.0), {"role": e["role"], "triple": [h, r, t]}))
        return out

    def _retrieve(self, query: str, k: int) -> Evidence:
        trace, ranking, refs, base_ev = self._loop(query, k)
        if self.llm is not None:
            passages = [ScoredPassage(c.passage, round(1.0 / (1 + i), 6)) for i, c in enumerate(refs[:k])]
            ids = {sp.passage.id for sp in passages}
            fill = [sp for sp in base_ev.passages if sp.passage.id not in ids][: max(0, k - len(passages))]
            trace["know3"]["fill"] = [sp.passage.id for sp in fill]
            passages += fill
        elif trace["know3"]["final_turn"] == 0 or self.merge == "append":
            passages = list(base_ev.passages[:k])
        else:
            passages = ranking[:k]
        facts = list(base_ev.facts) + self._facts(refs, trace["know3"]["turns"])
        trace["score_kind"] = self._score_kind(base_ev, trace)
        for f in base_ev.fallbacks:  # the wrapped retriever's fallbacks are this call's too
            note_fallback(trace, f["to"], f["reason"] + f" (in {self.base.name})")
        return Evidence(query, passages, facts, trace)

    def _score_kind(self, base_ev: Evidence, trace: dict[str, Any]) -> str:
        """The passage scores of :meth:`_retrieve`: the base retriever's when its ranking stands,
        else ranks ``1 / (1 + rank)``."""
        base = base_ev.score_kind or getattr(self.base, "score_kind", "retriever score")
        if self.llm is not None:
            return f"rank (1 / (1 + rank)) for the verified references, then {base}"
        if trace["know3"]["final_turn"] == 0 or self.merge == "append":
            return base
        return "rank (1 / (1 + rank))"

    def run(self, question: str, k: int = 5) -> Answer:
        """The loop with its answer: the LLM's final a_t (``""`` without an LLM: use
        :func:`~kgrag_plugins.methods.answer.generate_answer` on the evidence) and the final
        references; ``metadata``: ``turn``, ``decision``, ``llm_error``."""
        ev = self.retrieve(question, k)
        k3 = ev.trace["know3"]
        meta: dict[str, Any] = {"turn": k3["final_turn"], "decision": k3["decision"]}
        if ev.trace.get("llm_error"):
            meta["llm_error"] = ev.trace["llm_error"]
        return Answer(question, k3.get("answer") or "", ev, meta)

    def __repr__(self) -> str:
        return f"Know3Retriever(base={self.base.name!r}, merge={self.merge!r}, llm={self.llm is not None})"
