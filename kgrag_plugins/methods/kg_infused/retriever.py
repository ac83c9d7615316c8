"""KG-Infused RAG (Wu et al., arXiv 2506.09542; docs/methods.md §1) as a :class:`Retriever`.

Pipeline (paper §3.4–3.6), each step a public method so a LangGraph node can call it alone:

1. :meth:`KGInfusedRetriever.seed` — Eq. 4: the top-``k_entities`` entities by cosine between
   the question and the entity vectors; their outgoing triples (a seeded sample of at most
   ``max_triples_per_entity`` = 50 each) are the round-0 candidates. Seeds are marked explored.
2. :meth:`~KGInfusedRetriever.activate` — Eq. 5/6, rounds 0 … ``rounds``-1: select triples among
   the frontier's out-triples, add them to the activation memory, next frontier = tails of the
   newly selected triples that were never explored, de-duplicated, first
   ``max_entities_per_round`` = 10. Stops early when the frontier is empty.
3. :meth:`~KGInfusedRetriever.summarize` — subgraph summary of *all* selected triples.
4. :meth:`~KGInfusedRetriever.expand_query` — Eq. 7, KG-based query expansion q'.
5. :meth:`~KGInfusedRetriever.dual_retrieve` — Eq. 8 / App. C.2: q's top-3 + the first 3 of q''s
   top-6 that are not in q's top-3.
6. :meth:`~KGInfusedRetriever.write_note` (Eq. 9), :meth:`~KGInfusedRetriever.augment` (Eq. 10),
   :meth:`~KGInfusedRetriever.answer` (Eq. 11) — need an LLM.

``retrieve(q, k)`` runs steps 1–5; :meth:`~KGInfusedRetriever.run` runs 1–6.

**With an LLM** the prompts of the paper's App. D.1 are used (:mod:`.kg_infused_prompts`);
candidate triples are shown as ``[j] EntityName`` groups of ``<head | relation | tail>`` lines and
the reply is parsed by :func:`parse_triples` against the candidate set (only candidates count).
Every reply is validated (:func:`~kgrag_plugins.models.replies.complete_validated`): selection
must name at least one candidate triple; summary, note and augmentation must be text (non-empty,
not symbols, not a refusal, not the instructions echoed); q' is the first line of the reply, at
most 400 characters, with the same checks; the answer the same, at most 1,000 characters. An
invalid reply is asked once more; a second invalid reply or an
:class:`~kgrag_plugins.models.llm.LLMError` falls back to the LLM-free step for that call
(answer: an empty answer) with a WARNING and an entry in the trace (``"llm_error"``).

**Without an LLM** (docs/methods.md §1(e)) — documented choices:

* Triple selection: cosine between the question vector and the embedding of the verbalised
  triple ``"head relation tail"``; keep at most ``select_per_round`` (default 5) triples per round,
  only those scoring at least ``select_min_ratio`` (default 0.8) × the round's best score (and
  > 0). Frontier = tails of the kept triples in score order (caps 10 / 50 as above). Triple-text
  vectors are kept in an in-memory LRU cache (``cache_size`` vectors, default 50,000) shared by all
  queries; only candidate triples are embedded.
* Summary: template ``"head relation tail."`` sentences joined with spaces, in selection order.
* Query expansion: ``q + " " + `` the verbalised selected triples in selection order (round 0
  first, within a round best score first), cut to ``qe_max_words`` words (default 64: the MiniLM
  encoder reads 256 word pieces; on MuSiQue questions 100-159, 32 / 64 / 128 words and
  3 / 5 / 10 triples per round all gave Recall@6 within 0.74-0.76, so the defaults are not tuned
  hard).
* Notes, augmentation: skipped (``None``); :meth:`~KGInfusedRetriever.answer` needs an LLM.

Other documented choices: with no selected triples the LLM path skips the summary call (empty
summary) and expands with the vanilla QE prompt (Table 10); :meth:`augment` with an empty summary
returns the note unchanged. Frontier entities are addressed by id (the paper looks tail *names* up
in an alias map; selected triples are mapped back to candidate indices, so their tail ids are
known). Passages for ``retrieve(q, k)``: the 3 + 3 merge truncated to ``k``; for ``k`` > 6 the merge
continues with the next passages of q and q' alternately (q first), skipping duplicates.

Evidence trace: :meth:`ActivationMemory.trace` (seeds, activated, facts) with its per-round list
under ``"activation_rounds"``, plus ``retriever``, ``mode``, ``summary``, ``expanded_query``,
``rounds`` (number of rounds run), ``passage_sources`` (``"q"`` / ``"q'"`` per passage),
``llm_error`` (when any) and ``fallback`` (``"dense"`` when q' = q, e.g. no triple was selected,
so the dual retrieval is plain dense retrieval; LLM steps that took their LLM-free path).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...index.store import KnowledgeIndex
from ...models.llm import LLMError, as_llm
from ...models.prompting import DataPrompt, clip_text
from ...models.replies import InvalidReply, check_text, complete_validated, first_line, step_error
from ...models.structured import OutputSchema
from ...types import Answer, Evidence, Passage, ScoredPassage, note_fallback
from ..activation import (
    MAX_ENTITIES_PER_ROUND,
    MAX_TRIPLES_PER_ENTITY,
    ActivationMemory,
    RoundTrace,
    TextVectorCache,
    out_triples,
    seed_entities,
    triple_text,
)
from ..base import Retriever
from . import prompts as P
from .parsing import SEP, parse_triples

__all__ = ["KGInfusedMemory", "KGInfusedRetriever"]

#: Longest accepted q' (characters) and answer (characters) from an LLM.
MAX_QUERY_CHARS = 400
MAX_ANSWER_CHARS = 1000


#: A selection reply that explicitly selects nothing ("None", "No new triples.", "Nothing relevant").
_NONE_SELECTED = re.compile(r"^\W*(?:selected triples\s*:\s*)?(?:none|no\b|nothing|there are no)", re.I)


def _instructions(template: str) -> str:
    """The fixed wording of a prompt template (placeholders removed), for echo detection."""
    return re.sub(r"\{[a-z_]+\}", "\n", template)


def _text_validator(
    template: str,
    *,
    single_line: bool = False,
    max_chars: int = 4000,
    context: str | None = None,
    prose: bool = True,
):
    """Validator of a free-text reply: :func:`~.prompts.postprocess`, then :func:`check_text` as
    prose (no JSON, markup or code), sharing a content word with ``context`` (the question and the
    evidence the prompt showed) when given."""
    instructions = _instructions(template)

    def validate(reply: str) -> str:
        return check_text(
            P.postprocess(reply),
            single_line=single_line,
            max_chars=max_chars,
            instructions=instructions,
            prose=prose,
            context=context,
        )

    return validate


class KGInfusedMemory(ActivationMemory):
    """:class:`ActivationMemory` plus per-query state of KG-Infused RAG: the question, the score
    of each selected triple (cosine in LLM-free selection, 1.0 for LLM-selected) and LLM errors
    met on the way (each ``{"step", "round"?, "error"}``)."""

    def __init__(self, graph, seeds=(), question: str = "") -> None:
        super().__init__(graph, seeds)
        self.question = question
        self.scores: dict[int, float] = {}
        self.llm_errors: list[dict[str, Any]] = []


def _scores_of(memory: ActivationMemory) -> dict[int, float]:
    if not hasattr(memory, "scores"):
        memory.scores = {}  # type: ignore[attr-defined]
    return memory.scores  # type: ignore[attr-defined]


def _errors_of(memory: ActivationMemory) -> list[dict[str, Any]]:
    if not hasattr(memory, "llm_errors"):
        memory.llm_errors = []  # type: ignore[attr-defined]
    return memory.llm_errors  # type: ignore[attr-defined]


# =========================================================================== retriever


class KGInfusedRetriever(Retriever):
    """KG-Infused RAG: KG-guided spreading activation, KG-based query expansion, dual retrieval,
    and (with an LLM) note / KG-guided augmentation / answer. See the module docstring.

    Args:
        index: a :class:`KnowledgeIndex` with a graph (corpus-built or a curated KG) and entity
            vectors (computed on first use if missing).
        llm: any :func:`~kgrag_plugins.models.llm.as_llm`-compatible model, or ``None`` for the
            LLM-free variant.
        k_entities: seed entities k_e (paper: 3).
        rounds: activation rounds R (paper main tables: 2).
        max_entities_per_round: frontier cap (10). max_triples_per_entity: per-entity cap (50).
        k_passages: passages per query in dual retrieval (k_p / 2 = 3).
        select_per_round / select_min_ratio: LLM-free selection (top 5, score >= 0.8 × best).
        qe_max_words: word budget of the LLM-free expansion's triple appendix and of an LLM's q' (64).
        seed: seed of the per-entity triple sample (42, as the official code).
        max_new_tokens / temperature: decoding of every LLM call (paper: 1000, greedy; default
            ``None``: each step's budget, :data:`.prompts.MAX_TOKENS`). Triple selection declares
            its reply's shape (:func:`.prompts.selection_schema`: the shown candidates or ``None``).
        triple_vectors: ``"index"``: score candidate triples with the index's stored
            :attr:`~kgrag_plugins.index.store.KnowledgeIndex.triple_vectors` (every triple embedded
            once, computed on first use); ``"lazy"``: embed candidates per query through an LRU
            cache; ``"auto"`` (default): ``"index"`` up to 2M triples, else ``"lazy"``.
        cache_size: triple-text vectors kept in the LRU cache (``"lazy"``).
        prompts: overrides of the App. D.1 prompts by key (:meth:`set_prompt`).
    """

    name = "kg-infused"
    score_kind = "cosine (to the question or the expanded query)"

    def __init__(
        self,
        index: KnowledgeIndex,
        *,
        llm: Any = None,
        k_entities: int = 3,
        rounds: int = 2,
        max_entities_per_round: int = MAX_ENTITIES_PER_ROUND,
        max_triples_per_entity: int = MAX_TRIPLES_PER_ENTITY,
        k_passages: int = 3,
        select_per_round: int = 5,
        select_min_ratio: float = 0.8,
        qe_max_words: int = 64,
        seed: int = 42,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        triple_vectors: str = "auto",
        cache_size: int = 50_000,
        prompts: dict[str, str] | None = None,
    ) -> None:
        if index.graph.num_entities == 0:
            raise ValueError(
                "KGInfusedRetriever needs an index with a knowledge graph: build it with "
                "builder='mentions' (LLM-free), builder='llm', or attach a curated KG (graph=...)"
            )
        for nm, v in (("k_entities", k_entities), ("k_passages", k_passages), ("select_per_round", select_per_round)):
            if v < 1:
                raise ValueError(f"{nm} must be >= 1, got {v}")
        if rounds < 0:
            raise ValueError(f"rounds must be >= 0, got {rounds}")
        if not 0.0 <= select_min_ratio <= 1.0:
            raise ValueError(f"select_min_ratio must be in [0, 1], got {select_min_ratio}")
        self.index = index
        self.graph = index.graph  # re-read by _refresh when the index changes (index.revision)
        self.llm = as_llm(llm)
        self.k_entities = k_entities
        self.rounds = rounds
        self.max_entities_per_round = max_entities_per_round
        self.max_triples_per_entity = max_triples_per_entity
        self.k_passages = k_passages
        self.select_per_round = select_per_round
        self.select_min_ratio = select_min_ratio
        self.qe_max_words = qe_max_words
        self.seed_value = seed
        #: The answer's budget (or the caller's ``max_new_tokens`` for every step).
        self.max_new_tokens = max_new_tokens or P.MAX_TOKENS["answer"]
        self._max_tokens = max_new_tokens
        self.temperature = temperature
        if triple_vectors not in ("auto", "index", "lazy"):
            raise ValueError(f"triple_vectors must be 'auto', 'index' or 'lazy', got {triple_vectors!r}")
        if triple_vectors == "auto":
            triple_vectors = "index" if index.graph.num_triples <= 2_000_000 else "lazy"
        self.triple_vectors = triple_vectors
        self._triple_cache = TextVectorCache(cache_size)
        self._query_cache = TextVectorCache(256)
        #: Prompt overrides by the official key (:data:`.prompts.PROMPTS`): ``str.format`` templates
        #: with the default's fields; fields are data-escaped like the defaults (DataPrompt).
        self.prompts: dict[str, str] = {}
        for key, template in (prompts or {}).items():
            self.set_prompt(key, template)

    def _refresh(self) -> None:
        """Follow the index's new graph after ``add_passages`` / ``delete_passages`` (the LRU caches
        are keyed by text, so they stay valid)."""
        self.graph = self.index.graph

    def __repr__(self) -> str:
        mode = type(self.llm).__name__ if self.llm is not None else "llm-free"
        return f"KGInfusedRetriever({mode}, k_entities={self.k_entities}, rounds={self.rounds})"

    # ------------------------------------------------------------------ helpers
    def set_prompt(self, key: str, template: str) -> None:
        """Override the prompt ``key`` (a key of :data:`.prompts.PROMPTS`); ``template`` must use
        exactly the default's ``{fields}``."""
        if key not in P.PROMPTS:
            raise KeyError(f"unknown KG-Infused prompt {key!r}; keys: {', '.join(P.PROMPTS)}")
        want, got = set(re.findall(r"\{(\w+)\}", P.PROMPTS[key])), set(re.findall(r"\{(\w+)\}", template))
        if want != got:
            raise ValueError(f"prompt {key!r} must use the fields {sorted(want)}, got {sorted(got)}")
        self.prompts[key] = str(template)

    def _prompt(self, key: str) -> DataPrompt:
        """The template of prompt ``key``: the user's override, else the paper's."""
        override = self.prompts.get(key)
        return DataPrompt(override) if override is not None else P.PROMPTS[key]

    def _complete(
        self,
        prompt: str,
        validate,
        step: str,
        errors: list[dict[str, Any]] | None,
        schema: OutputSchema | None = None,
        **context: Any,
    ):
        """One validated LLM call (retried once on an invalid reply); ``None`` -> LLM-free path."""
        assert self.llm is not None
        return complete_validated(
            self.llm,
            prompt,
            validate,
            step=step,
            errors=errors,
            context=context or None,
            schema=schema,
            max_tokens=self._max_tokens or P.MAX_TOKENS.get(step, P.MAX_TOKENS["write_note"]),
            temperature=self.temperature,
        )

    def _qvec(self, text: str) -> np.ndarray:
        return self._query_cache.vectors([text], lambda miss: [self.index.embed_query(miss[0])])[0][0]

    def _triple_vectors(self, tis: Sequence[int]) -> np.ndarray:
        """Vectors of ``"head relation tail"`` for ``tis`` (stored in the index, or cached with
        only misses embedded)."""
        if self.triple_vectors == "index" and len(tis):
            return self.index.triple_vectors[np.asarray(tis, dtype=np.int64)]
        texts = [triple_text(self.graph, ti) for ti in tis]
        return self._triple_cache.vectors(texts, lambda miss: self.index.embedder.embed(miss, progress=False))[0]

    def _triple_fields(self, ti: int) -> tuple[str, str, str]:
        t = self.graph.triple(ti)
        return self.graph.name_of(t.head), t.relation, self.graph.name_of(t.tail)

    def _frontier(self, memory: ActivationMemory) -> list[str]:
        """Round 0: the seeds; later: the last round's next frontier."""
        if not memory.rounds:
            return [e for e, _ in memory.seeds]
        return list(memory.rounds[-1].next_frontier)

    def _candidates(self, frontier: Sequence[str], memory: ActivationMemory) -> list[tuple[str, list[int]]]:
        """Per frontier entity, its out-triples (sampled to the cap) not already selected."""
        held = set(memory.triples)
        groups = []
        for eid in frontier:
            tis = [
                ti
                for ti in out_triples(self.graph, eid, self.max_triples_per_entity, self.seed_value)
                if ti not in held
            ]
            groups.append((eid, tis))
        return groups

    # ------------------------------------------------------------------ step 1: seeds
    def seed(self, question: str) -> KGInfusedMemory:
        """Eq. 4: top-``k_entities`` entities by cosine with the question; marked explored. Their
        out-triples are the round-0 candidates of :meth:`activate`. A memory belongs to the graph
        it was seeded on: start a new one after an index update."""
        self._sync_index()
        seeds = seed_entities(self.index, self._qvec(question), self.k_entities)
        memory = KGInfusedMemory(self.graph, seeds, question)
        memory.explored.update(e for e, _ in seeds)
        return memory

    # ------------------------------------------------------------------ step 2: activation
    def _select_embedding(self, question: str, cands: list[int]) -> tuple[list[int], dict[int, float]]:
        """LLM-free selection: top ``select_per_round`` by cosine, >= ratio × best, > 0."""
        if not cands:
            return [], {}
        sims = self._triple_vectors(cands) @ self._qvec(question)
        order = np.argsort(-sims, kind="stable")
        best = float(sims[order[0]])
        if best <= 0:
            return [], {}
        floor = self.select_min_ratio * best
        keep = [int(i) for i in order[: self.select_per_round] if sims[i] >= floor]
        return [cands[i] for i in keep], {cands[i]: float(sims[i]) for i in keep}

    def _select_llm(
        self,
        question: str,
        memory: ActivationMemory,
        groups: list[tuple[str, list[int]]],
        first: bool,
        round_no: int = 0,
    ) -> tuple[list[int] | None, str]:
        """LLM selection (Table 12 for the first round, Table 13 after); returns indices + reply.
        Valid: at least one candidate triple, or an explicit "none" reply (first line opens with
        "None" / "No" / "Nothing" / "There are no": nothing selected, the frontier empties, as in
        the paper). Anything else is invalid (asked once more); ``None`` when the LLM failed or
        stayed invalid (recorded in the memory's ``llm_errors``)."""
        cmap: dict[str, int] = {}
        shown = []
        lines: list[str] = []
        for eid, tis in groups:
            fs = [self._triple_fields(ti) for ti in tis]
            for ti, f in zip(tis, fs):
                cmap.setdefault(SEP.join(f), ti)
                line = P.format_triple(*f)
                cmap.setdefault(line[1:-1], ti)  # as shown (escaped), the form the schema allows
                lines.append(line)
            shown.append((self.graph.name_of(eid), fs))
        if first:
            prompt = self._prompt("triples_selection_before_retri").format(
                question=question, triples=P.format_candidate_groups(shown)
            )
        else:
            prompt = self._prompt("triples_update_before_retri").format(
                question=question,
                previous_selected_triples=P.format_triples(self._triple_fields(ti) for ti in memory.triples),
                new_retrieved_triples=P.format_candidate_groups(shown),
            )
        replies: list[str] = []

        def validate(reply: str) -> list[int]:
            replies.append(reply)
            picked = [int(t.index) for t in parse_triples(reply, cmap)]  # type: ignore[arg-type]
            if not picked and not _NONE_SELECTED.match(first_line(P.postprocess(reply))):
                raise InvalidReply("no candidate triple in the reply")
            return picked

        picked = self._complete(
            prompt, validate, "triple_selection", _errors_of(memory), P.selection_schema(lines), round=round_no
        )
        return picked, (replies[-1] if replies else "")

    def activate(self, question: str, memory: ActivationMemory) -> ActivationMemory:
        """Eq. 5/6: run the remaining activation rounds on ``memory`` (one :class:`RoundTrace`
        each); stops early when the frontier is empty. Returns ``memory``."""
        scores = _scores_of(memory)
        errors = _errors_of(memory)
        frontier = self._frontier(memory)
        for i in range(len(memory.rounds), self.rounds):
            if not frontier:
                break
            groups = self._candidates(frontier, memory)
            cands = [ti for _, tis in groups for ti in tis]
            rt = RoundTrace(round=i, frontier=list(frontier), candidates=len(cands))
            mode = "llm" if cands and self.llm is not None else "embedding"
            selected: list[int] = []
            if mode == "llm":
                n_err = len(errors)
                picked, reply = self._select_llm(question, memory, groups, i == 0 or not memory.triples, i)
                rt.extra["reply"] = reply[:2000]
                if picked is None:
                    # No candidate triple named (twice) or the call failed: LLM-free selection.
                    mode = "embedding (llm_error fallback)"
                    rt.extra["llm_error"] = errors[-1]["error"] if len(errors) > n_err else "no reply"
                else:
                    selected = picked
                    if not selected:
                        rt.extra["no_triple_parsed"] = True  # an explicit "none": nothing selected
                    for ti in selected:
                        scores.setdefault(ti, 1.0)
            if cands and mode != "llm":
                selected, sc = self._select_embedding(question, cands)
                for ti, s in sc.items():
                    scores.setdefault(ti, s)
                rt.extra["scores"] = [round(sc[ti], 4) for ti in selected]
            rt.extra["mode"] = mode
            before = set(memory.activation)
            new = memory.add_triples(selected)
            rt.selected = [triple_text(self.graph, ti, SEP) for ti in new]
            rt.activated = {e: v for e, v in memory.activation.items() if e not in before}
            rt.next_frontier = memory.next_frontier(new, cap=self.max_entities_per_round)
            memory.rounds.append(rt)
            frontier = rt.next_frontier
        return memory

    # ------------------------------------------------------------------ step 3: summary
    def _template_summary(self, memory: ActivationMemory) -> str:
        return " ".join(triple_text(self.graph, ti) + "." for ti in memory.triples)

    def summarize(self, question: str, memory: ActivationMemory) -> str:
        """Subgraph summary of all selected triples (Table 14 with an LLM; LLM-free or on an LLM
        error: ``"head relation tail."`` sentences). No triples -> ``""`` (no LLM call)."""
        if not memory.triples:
            return ""
        if self.llm is None:
            return self._template_summary(memory)
        prompt = self._prompt("triples_summary").format(
            question=question, selected_triples=P.format_triples(self._triple_fields(ti) for ti in memory.triples)
        )
        out = self._complete(
            prompt,
            _text_validator(
                self._prompt("triples_summary"),
                context=question + "\n" + "\n".join(triple_text(self.graph, ti) for ti in memory.triples),
            ),
            "summary",
            _errors_of(memory),
            schema=P.PROSE_SCHEMAS["summary"],
        )
        return out if out is not None else self._template_summary(memory)

    # ------------------------------------------------------------------ step 4: query expansion
    def _template_expansion(self, question: str, memory: ActivationMemory | None) -> str:
        if memory is None or not memory.triples:
            return question
        words = " ".join(triple_text(self.graph, ti) for ti in memory.triples).split()
        return f"{question} {' '.join(words[: self.qe_max_words])}".strip()

    def expand_query(self, question: str, summary: str, memory: ActivationMemory | None = None) -> str:
        """Eq. 7: q' from q and the summary (Table 15; Table 10 when the summary is empty).
        LLM-free or on an LLM error: ``q + " " +`` the verbalised selected triples, cut to
        ``qe_max_words`` words. The prompt asks for one short query, so an LLM reply is cut to its
        first non-empty line and ``qe_max_words`` words; an invalid reply (empty, over 400
        characters, symbols, a refusal, the instructions echoed) is asked once more, then the
        LLM-free expansion is used."""
        if self.llm is None:
            return self._template_expansion(question, memory)
        if summary.strip():
            template = self._prompt("query_expansion_query_and_triples_summary")
            prompt = template.format(question=question, triples_summary=summary)
        else:
            template = self._prompt("query_expansion_only_query")
            prompt = template.format(question=question)
        errors = _errors_of(memory) if memory is not None else None
        validate = _text_validator(
            template, single_line=True, max_chars=MAX_QUERY_CHARS, context=f"{question}\n{summary}"
        )
        line = self._complete(prompt, validate, "query_expansion", errors, schema=P.QUERY_EXPANSION_SCHEMA)
        if line is None:
            return self._template_expansion(question, memory)
        return " ".join(first_line(line).split()[: self.qe_max_words]) or question

    # ------------------------------------------------------------------ step 5: dual retrieval
    def _search(self, text: str, n: int) -> list[ScoredPassage]:
        return [ScoredPassage(p, s) for p, s in self.index.passages.dense_search(self._qvec(text), n)]

    def _merge(
        self, q_hits: list[ScoredPassage], x_hits: list[ScoredPassage], k_each: int, k: int | None
    ) -> tuple[list[ScoredPassage], list[str]]:
        out = list(q_hits[:k_each])
        src = ["q"] * len(out)
        ids = {sp.passage.id for sp in out}
        for sp in x_hits[: 2 * k_each]:
            if sum(1 for s in src if s == "q'") >= k_each:
                break
            if sp.passage.id not in ids:
                out.append(sp)
                src.append("q'")
                ids.add(sp.passage.id)
        if k is None or k <= len(out):
            return (out, src) if k is None else (out[:k], src[:k])
        # k > 2*k_each: continue with q's and q''s next passages alternately (q first)
        rest = {"q": iter(q_hits[k_each:]), "q'": iter(x_hits)}
        turn = ["q", "q'"]
        while len(out) < k and rest:
            for name in list(turn):
                if len(out) >= k or name not in rest:
                    continue
                for sp in rest[name]:
                    if sp.passage.id not in ids:
                        out.append(sp)
                        src.append(name)
                        ids.add(sp.passage.id)
                        break
                else:
                    del rest[name]
        return out, src

    def dual_retrieve(self, question: str, expanded: str, k_each: int = 3) -> list[ScoredPassage]:
        """Eq. 8 / App. C.2: q's top ``k_each`` + the first ``k_each`` of q''s top ``2·k_each``
        that are not among them (at most ``2·k_each`` unique passages, q's first)."""
        return self._dual(question, expanded, k_each, None)[0]

    def _dual(self, question: str, expanded: str, k_each: int, k: int | None) -> tuple[list[ScoredPassage], list[str]]:
        n = max(2 * k_each, k or 0)
        return self._merge(self._search(question, n), self._search(expanded, n), k_each, k)

    # ------------------------------------------------------------------ retrieve
    def _retrieve(self, query: str, k: int) -> Evidence:
        memory = self.activate(query, self.seed(query))
        summary = self.summarize(query, memory)
        expanded = self.expand_query(query, summary, memory)
        passages, sources = self._dual(query, expanded, self.k_passages, k)
        facts = memory.facts(_scores_of(memory))
        trace = memory.trace()
        trace["activation_rounds"] = trace.pop("rounds")
        trace.update(
            retriever=self.name,
            mode="llm" if self.llm is not None else "llm-free",
            summary=summary,
            expanded_query=expanded,
            rounds=len(memory.rounds),
            passage_sources=sources,
        )
        if " ".join(expanded.split()) == " ".join(query.split()):  # q' = q: plain dense retrieval
            why = "no triple selected" if not memory.triples else "the query expansion added nothing"
            note_fallback(trace, "dense", why)
        errors = _errors_of(memory)
        if errors:
            trace["llm_error"] = errors
        return Evidence(query, passages, facts, trace)

    # ------------------------------------------------------------------ step 6: generation
    def _need_llm(self, what: str) -> None:
        if self.llm is None:
            raise ValueError(
                f"KGInfusedRetriever.{what} needs an LLM: pass llm=... (e.g. OpenAICompatibleLLM.from_env()); "
                "retrieval (retrieve / seed / activate / expand_query / dual_retrieve) works without one"
            )

    @staticmethod
    def _passage_pairs(passages: Sequence[ScoredPassage | Passage]) -> list[tuple[str, str]]:
        out = []
        for p in passages:
            p = p.passage if isinstance(p, ScoredPassage) else p
            out.append((p.title, clip_text(p.text)))  # a long passage: head and tail around a marker
        return out

    def _complete_or_raise(
        self,
        prompt: str,
        template: str,
        step: str,
        context: str | None = None,
        schema: OutputSchema | None = None,
    ) -> str:
        """A validated free-text call; raises :class:`LLMError` (naming the step and why) when the
        call failed, :class:`~kgrag_plugins.models.replies.RepliesStayedInvalid` (an ``LLMError``)
        when the reply stayed invalid, so callers take their LLM-free path."""
        errors: list[dict[str, Any]] = []
        validate = _text_validator(template, context=context)
        out = self._complete(prompt, validate, step, errors, schema=schema or P.PROSE_SCHEMAS.get(step))
        if out is None:
            last = errors[-1] if errors else {"kind": "invalid_reply", "error": "no valid reply"}
            raise step_error({"step": step, **last})  # timeouts / invalid replies stay retryable
        return out

    def write_note(self, question: str, passages: Sequence[ScoredPassage | Passage]) -> str | None:
        """Eq. 9: one query-focused note over all passages (Table 11); ``None`` without an LLM.
        A failed call or a reply that stays invalid raises :class:`LLMError` (:meth:`run` falls
        back to the raw passages)."""
        if self.llm is None:
            return None
        prompt = self._prompt("write_note").format(
            question=question, passages=P.format_passages(self._passage_pairs(passages))
        )
        shown = "\n".join(f"{t}\n{x}" for t, x in self._passage_pairs(passages))
        return self._complete_or_raise(
            prompt, self._prompt("write_note"), "write_note", f"{question}\n{shown}", P.note_schema(question)
        )

    def augment(self, question: str, note: str | None, summary: str) -> str | None:
        """Eq. 10: the note rewritten with the triples summary (Table 16); ``None`` without an LLM
        or a note; the note itself when the summary is empty. A failed call or a reply that stays
        invalid raises :class:`LLMError` (:meth:`run` falls back to the plain note)."""
        if self.llm is None or note is None:
            return None
        if not summary.strip():
            return note
        prompt = self._prompt("aug_passage").format(question=question, passage=note, triples_summary=summary)
        return self._complete_or_raise(prompt, self._prompt("aug_passage"), "augment", f"{question}\n{note}\n{summary}")

    def answer(self, question: str, evidence: Evidence, note: str | None = None) -> Answer:
        """Eq. 11: the with-retrieval answer prompt (Table 9) with ``note`` in the ``Passages:``
        slot, or the raw passages plus the KG facts when ``note`` is ``None``. Needs an LLM.
        A failed call or a reply that stays invalid gives an empty answer with
        ``metadata["llm_error"]`` (there is no LLM-free answer step; nothing invalid is passed on)."""
        self._need_llm("answer")
        if note is not None and note.strip():
            slot = note
        else:
            slot = P.format_passages(self._passage_pairs(evidence.passages))
            if evidence.facts:
                slot += "\n\nKnowledge graph facts:\n" + "\n".join(f"- {f.display}" for f in evidence.facts)
        replies: list[str] = []
        check = _text_validator(self._prompt("base_retri"), max_chars=MAX_ANSWER_CHARS, prose=False)

        def validate(reply: str) -> str:
            replies.append(reply)
            return check(reply)

        errors: list[dict[str, Any]] = []
        prompt = self._prompt("base_retri").format(passages=slot, question=question)
        text = self._complete(prompt, validate, "answer", errors)
        meta: dict[str, Any] = {"raw": replies[-1] if replies else "", "used_note": note is not None}
        if text is None:
            meta["llm_error"] = errors
        return Answer(question, text or "", evidence, meta)

    def run(self, question: str) -> Answer:
        """Full pipeline: retrieve (2·k_passages) -> note -> KG-guided augmentation -> answer.
        A failing note / augmentation call falls back to the raw passages / the plain note
        (recorded in ``metadata["llm_error"]``); a failing answer call gives an empty answer
        (recorded there too)."""
        self._need_llm("run")
        evidence = self.retrieve(question, 2 * self.k_passages)
        summary = evidence.trace.get("summary", "")
        errors: list[dict[str, Any]] = list(evidence.trace.get("llm_error", []))
        note = enhanced = None
        try:
            note = self.write_note(question, evidence.passages)
        except LLMError as exc:
            errors.append({"step": "write_note", "error": str(exc)})
        if note is not None:
            try:
                enhanced = self.augment(question, note, summary)
            except LLMError as exc:
                errors.append({"step": "augment", "error": str(exc)})
        ans = self.answer(question, evidence, enhanced if enhanced is not None else note)
        errors += ans.metadata.pop("llm_error", [])
        ans.metadata.update(
            summary=summary,
            expanded_query=evidence.trace.get("expanded_query", question),
            note=note,
            enhanced_note=enhanced,
            trace=evidence.trace,
        )
        if errors:
            ans.metadata["llm_error"] = errors
        return ans
