"""Clue-translation backends for KG-Translator (paper §3.3, App. J Alg. 1; docs/methods.md §3(a)
steps 3-4, §7): the translator asks a :class:`TranslationBackend` for ``alpha`` entities, then
``beta`` relation spans per entity, and does not care which backend runs.

* :class:`HFConstrainedBackend` -- a transformers causal LM with
  ``generate(prefix_allowed_tokens_fn=...)``: entities by beam search (``num_beams=alpha``)
  constrained by the head-entity trie, then for each entity a beam search (``num_beams=beta``)
  over relation spans constrained by its hyperrelations, in the ``ENTITY@@ RELATION`` format of
  prompt ❶. Every output is valid by construction. ``constrained=False`` decodes the same way
  without the constraints (for comparison and tests).
* :class:`ProjectionBackend` -- any :class:`~kgrag_plugins.models.llm.LLM` (OpenAI-compatible
  servers included): constraints cannot be pushed into a generic server, so it decodes
  unconstrained and projects each ``ENTITY@@RELATION`` line onto the index: entity by exact,
  then fuzzy (``difflib``), then embedding match over head-entity names; relation by exact
  substring, then the fuzzy-best word window, then the embedding-best word window of the
  entity's hyperrelations. ``vllm_choice=True`` (vLLM servers) also sends the candidate entity
  names as a ``choice`` structured output.

Decisions (docs/methods.md §3(d), §7; also in ``docs/translator.md``): the alpha x beta clues come
from **two beam searches** (entities, then relations per entity), not a joint beam; ``@@`` is
forced after a complete entity name (it is part of the trie's sequences); query-NER merging is
the translator's job (Part A), not the backend's.

The vLLM logits-processor hook: :func:`allowed_tokens_fn` returns the exact
``generated_ids -> allowed ids`` function the HF backend uses; a vLLM logits processor (a later
issue) wraps it per request. transformers / torch are imported only inside the HF backend.
"""

from __future__ import annotations

import copy
import difflib
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...models.replies import InvalidReply, complete_validated
from ...models.usage import llm_call, report_usage
from .constraints import SEPARATOR, ConstraintIndex, Direction, TokenTrie, graph_names, parse_clue
from .prompts import CLUE_MAX_TOKENS, clue_translation_prompt

logger = logging.getLogger(__name__)

__all__ = [
    "HFConstrainedBackend",
    "ProjectionBackend",
    "TranslationBackend",
    "allowed_tokens_fn",
    "clue_prompt",
]

#: Prompt ❶ of App. M (training and inference), verbatim but for the doubled comma.


@runtime_checkable
class TranslationBackend(Protocol):
    """What the translator calls: entity names of the ParseKG, then relation spans (substrings
    of that entity's hyperrelations). Implementations may accept ``direction="reverse"``."""

    def entities(self, question: str, alpha: int) -> list[str]: ...

    def relations(self, question: str, entity: str, beta: int) -> list[str]: ...


def clue_prompt(question: str, *, pairs: int = 1) -> str:
    """Prompt ❶ with the question in a data block (:func:`.prompts.clue_translation_prompt`, the SFT
    prompt, so training and decoding match). ``pairs > 1`` appends a request for that many pairs,
    one per line (the projection backend). Training targets: :func:`format_clue`."""
    base = clue_translation_prompt(question)
    return base if pairs <= 1 else f"{base}\nOutput up to {pairs} pairs, one per line."


def allowed_tokens_fn(
    constraints: ConstraintIndex,
    stage: str,
    *,
    entity: str | None = None,
    direction: Direction = "forward",
    separator_ids: Sequence[int] = (),
) -> Callable[[Sequence[int]], list[int]]:
    """``generated_ids -> allowed next ids`` for one request (the hook a vLLM logits processor wraps).

    ``stage="entity"``: the trie over ``name + separator_ids + [eos]``; ``stage="relation"``:
    the span index of ``entity``. After EOS, or when nothing is allowed, only EOS is allowed
    (HF raises on an empty set).
    """
    eos = constraints.end_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id; pass end_id= to ConstraintIndex")
    if stage == "entity":
        trie: TokenTrie = constraints.entity_trie(direction, tuple(separator_ids) + (eos,))

        def step(gen: Sequence[int]) -> list[int]:
            if eos in gen:
                return [eos]
            return sorted(trie.allowed_next(gen)) or [eos]

    elif stage == "relation":
        if entity is None:
            raise ValueError("stage='relation' needs entity=")
        idx = constraints.relation_index(entity, direction)

        def step(gen: Sequence[int]) -> list[int]:
            if eos in gen:
                return [eos]
            return sorted(idx.allowed_next(gen)) or [eos]

    else:
        raise ValueError(f"stage must be 'entity' or 'relation', got {stage!r}")
    return step


class HFConstrainedBackend:
    """Constrained beam search with a transformers causal LM (see the module doc).

    ``model`` / ``tokenizer``: a loaded ``AutoModelForCausalLM`` and its tokenizer (or a path /
    hub id, loaded offline). ``constraints`` defaults to a :class:`ConstraintIndex` over
    ``index`` (a ParseKG index) for this tokenizer. The prompt is :func:`clue_prompt`, through
    the tokenizer's chat template when it has one (``chat_template=False`` uses the raw text +
    newline). ``max_entity_tokens`` bounds the entity stage; relations stop at the 16-token cap.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        constraints: ConstraintIndex | None = None,
        *,
        index: Any = None,
        constrained: bool = True,
        chat_template: bool | None = None,
        max_entity_tokens: int = 32,
        prompt: Callable[[str], str] = clue_prompt,
    ) -> None:
        import torch  # noqa: F401  (heavy imports only when this backend is used)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model)
        if tokenizer is None:
            raise ValueError("HFConstrainedBackend needs the model's tokenizer")
        if constraints is None:
            if index is None:
                raise ValueError("pass constraints=ConstraintIndex(...) or index= (a ParseKG index)")
            constraints = ConstraintIndex.from_index(index, tokenizer)
        self.model, self.tokenizer, self.constraints = model.eval(), tokenizer, constraints
        self.constrained = constrained
        self.eos = constraints.end_id if constraints.end_id is not None else tokenizer.eos_token_id
        if self.eos is None:
            raise ValueError("the tokenizer has no eos_token_id; set one (it ends entities and relations)")
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self.sep_ids = list(constraints.encode(SEPARATOR))
        self.max_entity_tokens = int(max_entity_tokens)
        self.max_relation_tokens = constraints.max_relation_tokens
        self.prompt = prompt
        self.chat_template = bool(getattr(tokenizer, "chat_template", None)) if chat_template is None else chat_template

    # ------------------------------------------------------------------ helpers
    def _prompt_ids(self, question: str) -> list[int]:
        text = self.prompt(question)
        if self.chat_template:
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        return self.constraints.encode(text + "\n")

    def _generate(
        self, rows: list[list[int]], beams: int, max_new: int, step_fns: list[Callable] | None
    ) -> list[list[tuple[list[int], float]]]:
        """Left-padded beam search over ``rows``; per row ``beams`` (generated ids, score)."""
        import torch

        width = max(len(r) for r in rows)
        ids = torch.tensor([[self.pad] * (width - len(r)) + r for r in rows], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
        kwargs: dict[str, Any] = {}
        if step_fns is not None:
            kwargs["prefix_allowed_tokens_fn"] = lambda b, sent: step_fns[b](sent[width:].tolist())
        with torch.no_grad(), llm_call("translator.decode") as call:  # metered: models/usage.py
            out = self.model.generate(
                input_ids=ids.to(self.model.device),
                attention_mask=mask.to(self.model.device),
                num_beams=beams,
                num_return_sequences=beams,
                do_sample=False,
                max_new_tokens=max_new,
                eos_token_id=self.eos,
                pad_token_id=self.pad,
                output_scores=True,
                return_dict_in_generate=True,
                early_stopping=True,
                **kwargs,
            )
            seqs = out.sequences[:, width:].tolist()
            generated = sum(next((n for n, t in enumerate(g) if t in (self.eos, self.pad)), len(g)) for g in seqs)
            report_usage(sum(len(r) for r in rows), generated)
            call.reply = ""
        scores = (
            out.sequences_scores.tolist() if getattr(out, "sequences_scores", None) is not None else [0.0] * len(seqs)
        )
        res: list[list[tuple[list[int], float]]] = []
        for i in range(len(rows)):
            beam_out = []
            for j in range(i * beams, (i + 1) * beams):
                gen = seqs[j]
                cut = next((n for n, t in enumerate(gen) if t in (self.eos, self.pad)), len(gen))
                beam_out.append((gen[:cut], float(scores[j])))
            res.append(beam_out)
        return res

    def _decode(self, ids: Sequence[int]) -> str:
        dec = getattr(self.tokenizer, "decode")
        try:
            return dec(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)
        except TypeError:  # tokenizers.Tokenizer.decode
            return dec(list(ids), skip_special_tokens=True)

    def _entity_of(self, gen: list[int], direction: Direction) -> str:
        n = len(self.sep_ids)
        name_ids = gen
        for i in range(len(gen) - n + 1):
            if gen[i : i + n] == self.sep_ids:
                name_ids = gen[:i]
                break
        if self.constrained:
            trie = self.constraints.entity_trie(direction, tuple(self.sep_ids) + (self.eos,))
            vals = trie.values(list(name_ids) + self.sep_ids + [self.eos])
            return vals[0] if vals else ""  # a beam cut before its name completed is dropped
        return self._decode(name_ids).split(SEPARATOR)[0].strip()

    # ------------------------------------------------------------------ protocol
    def entities_batch(self, questions: Sequence[str], alpha: int, direction: Direction = "forward") -> list[list[str]]:
        """``alpha`` entity names per question, best beam first, no duplicates."""
        if not questions:
            return []
        alpha = max(1, int(alpha))
        rows = [self._prompt_ids(q) for q in questions]
        fns = None
        if self.constrained:
            fn = allowed_tokens_fn(self.constraints, "entity", direction=direction, separator_ids=self.sep_ids)
            if not self.constraints.entity_trie(direction, tuple(self.sep_ids) + (self.eos,)).size:
                return [[] for _ in questions]
            fns = [fn] * len(rows)
        budget = self.max_entity_tokens + len(self.sep_ids) + 1
        out = []
        for beams in self._generate(rows, alpha, budget, fns):
            names = [self._entity_of(g, direction) for g, _s in beams]
            out.append([n for n in dict.fromkeys(names) if n])
        return out

    def relations_batch(
        self, items: Sequence[tuple[str, str]], beta: int, direction: Direction = "forward"
    ) -> list[list[str]]:
        """``beta`` relation spans per ``(question, entity)``, best first, no duplicates."""
        if not items:
            return []
        beta = max(1, int(beta))
        rows, fns, keep = [], [], []
        for q, ent in items:
            has = bool(self.constraints.relation_index(ent, direction).sequences) if self.constrained else True
            keep.append(has)
            if has:
                rows.append(self._prompt_ids(q) + self.constraints.encode(ent.strip()) + self.sep_ids)
                fns.append(allowed_tokens_fn(self.constraints, "relation", entity=ent, direction=direction))
        results = (
            iter(self._generate(rows, beta, self.max_relation_tokens + 1, fns if self.constrained else None))
            if rows
            else iter(())
        )
        out: list[list[str]] = []
        for (_q, ent), has in zip(items, keep):
            if not has:
                out.append([])
                continue
            # A byte-level BPE token may hold part of a multi-byte character ("–" is 3 bytes): a token
            # span can then end mid-character and decode to U+FFFD. Trim those and keep a constrained
            # span only when its text is a substring of a hyperrelation (Eq. 6 on text, not tokens).
            spans = [self._decode(g).split("\n")[0].strip().strip("\ufffd").strip() for g, _s in next(results)]
            spans = [s for s in dict.fromkeys(spans) if s]
            if self.constrained:
                spans = [s for s in spans if self.constraints.is_valid(ent, s, direction)]
            out.append(spans)
        return out

    def entities(self, question: str, alpha: int, direction: Direction = "forward") -> list[str]:
        return self.entities_batch([question], alpha, direction)[0]

    def relations(self, question: str, entity: str, beta: int, direction: Direction = "forward") -> list[str]:
        return self.relations_batch([(question, entity)], beta, direction)[0]


# ---------------------------------------------------------------------- projection backend
_WORD = re.compile(r"\S+")


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s#]", " ", s.lower()).split())


def _parse_pairs(reply: str) -> list[tuple[str, str]]:
    pairs = []
    for line in reply.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip("\"'`")
        pc = parse_clue(line)
        if pc is not None:
            pairs.append(pc)
    if not pairs:
        raise InvalidReply(f"no ENTITY@@RELATION line in reply {reply[:200]!r}")
    return pairs


def _with_extra_body(llm: Any, extra: dict[str, Any]) -> Any:
    """A shallow copy of an OpenAI-compatible client with ``extra`` merged into its request body
    (the original is not mutated, so concurrent calls stay independent); ``None`` when the
    client has no ``extra_body``."""
    if not isinstance(getattr(llm, "extra_body", None), dict):
        return None
    twin = copy.copy(llm)
    twin.extra_body = {**llm.extra_body, **extra}
    return twin


class ProjectionBackend:
    """Unconstrained decoding with any LLM, projected onto the ParseKG (see the module doc).

    ``fuzzy_cutoff`` is the ``difflib`` ratio a fuzzy match needs; ``embed_threshold`` the
    cosine an embedding match needs (``embedder=None`` skips that tier). Outputs that match
    nothing are dropped, so garbage gives ``[]``. ``vllm_choice=True`` constrains the entity
    call to at most ``choice_limit`` candidate names (all of them when fewer; else the most
    similar to the question) via ``extra_body={choice_key: {"choice": [...]}}``
    (``"structured_outputs"`` for recent vLLM; ``choice_key="guided_choice"`` sends the list
    itself, for vLLM before 0.11). LLM failures are recorded in ``self.errors``.
    """

    def __init__(
        self,
        llm: Any,
        parsekg: Any,
        *,
        names: Any = None,
        embedder: Any = None,
        fuzzy_cutoff: float = 0.8,
        embed_threshold: float = 0.75,
        max_relation_words: int = 16,
        vllm_choice: bool = False,
        choice_key: str = "structured_outputs",
        choice_limit: int = 200,
        cache_size: int = 256,
    ) -> None:
        if llm is None:
            raise ValueError("ProjectionBackend needs an llm")
        self.llm = llm
        self.space = ConstraintIndex(parsekg, lambda s: [], names=names)  # names + hyperrelations, no tokens
        self.embedder = embedder
        self.fuzzy_cutoff, self.embed_threshold = float(fuzzy_cutoff), float(embed_threshold)
        self.max_relation_words = int(max_relation_words)
        self.vllm_choice, self.choice_key, self.choice_limit = vllm_choice, choice_key, int(choice_limit)
        self.errors: list[dict[str, Any]] = []
        self._replies: OrderedDict[str, list[tuple[str, str]]] = OrderedDict()
        self._cache_size = cache_size
        self._name_vecs: dict[str, tuple[list[str], np.ndarray]] = {}

    @classmethod
    def from_index(cls, index: Any, llm: Any, **kwargs: Any) -> "ProjectionBackend":
        """Over ``index.parsekg`` with names from ``index.graph`` and ``index.embedder``."""
        if getattr(index, "parsekg", None) is None:
            raise ValueError("this index has no ParseKG: build it with KnowledgeIndex.build(..., builder='parsekg')")
        kwargs.setdefault("embedder", getattr(index, "embedder", None))
        return cls(llm, index.parsekg, names=graph_names(index.graph), **kwargs)

    # ------------------------------------------------------------------ projection
    def _names(self, direction: Direction) -> list[str]:
        return list(self.space.names_by_entity(direction))

    def _embed(self, texts: list[str]) -> np.ndarray:
        v = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        n = np.linalg.norm(v, axis=1, keepdims=True)
        n[n == 0] = 1.0
        return v / n

    def project_entity(self, text: str, direction: Direction = "forward") -> str | None:
        """The nearest entity name: exact (case/punctuation-insensitive), fuzzy, then embedding."""
        text = text.strip()
        by_name = self.space.names_by_entity(direction)
        if not text or not by_name:
            return None
        if text in by_name:
            return text
        norm = {}
        for n in by_name:
            norm.setdefault(_norm(n), n)
        key = _norm(text)
        if key in norm:
            return norm[key]
        close = difflib.get_close_matches(key, list(norm), n=1, cutoff=self.fuzzy_cutoff)
        if close:
            return norm[close[0]]
        if self.embedder is None:
            return None
        if direction not in self._name_vecs:
            names = list(by_name)
            self._name_vecs[direction] = (names, self._embed(names))
        names, vecs = self._name_vecs[direction]
        sims = vecs @ self._embed([text])[0]
        best = int(np.argmax(sims))
        return names[best] if sims[best] >= self.embed_threshold else None

    def _windows(self, hyper: str, lengths: Sequence[int]) -> list[str]:
        spans = [m.span() for m in _WORD.finditer(hyper)]
        out = []
        for n in lengths:
            for i in range(0, max(0, len(spans) - n + 1)):
                out.append(hyper[spans[i][0] : spans[i + n - 1][1]])
        return out

    def project_relation(self, entity: str, text: str, direction: Direction = "forward") -> str | None:
        """The nearest span of ``entity``'s hyperrelations: exact substring (case-insensitive;
        the hyperrelation's own text is returned), fuzzy-best word window, embedding-best window."""
        text = " ".join(text.split())
        hypers = self.space.hyperrelations(entity, direction)
        if not text or not hypers:
            return None
        low = text.lower()
        for h in hypers:
            i = h.lower().find(low)
            if i >= 0:
                return h[i : i + len(text)]
        n = len(text.split())
        lengths = sorted({max(1, min(self.max_relation_words, m)) for m in (n - 1, n, n + 1)})
        wins = list(dict.fromkeys(w for h in hypers for w in self._windows(h, lengths)))
        if not wins:
            return None
        scored = [(difflib.SequenceMatcher(None, low, w.lower()).ratio(), w) for w in wins]
        ratio, best = max(scored, key=lambda x: x[0])
        if ratio >= self.fuzzy_cutoff:
            return best
        if self.embedder is None:
            return None
        sims = self._embed(wins) @ self._embed([text])[0]
        j = int(np.argmax(sims))
        return wins[j] if sims[j] >= self.embed_threshold else None

    # ------------------------------------------------------------------ LLM calls
    def _choices(self, question: str, direction: Direction) -> list[str]:
        names = self._names(direction)
        if len(names) <= self.choice_limit or self.embedder is None:
            return names[: self.choice_limit]
        if direction not in self._name_vecs:
            self._name_vecs[direction] = (names, self._embed(names))
        nm, vecs = self._name_vecs[direction]
        order = np.argsort(-(vecs @ self._embed([question])[0]))[: self.choice_limit]
        return [nm[i] for i in order]

    def _pairs(self, question: str, alpha: int) -> list[tuple[str, str]]:
        hit = self._replies.get(question)
        if hit is not None:
            return hit
        pairs = (
            complete_validated(
                self.llm,
                clue_prompt(question, pairs=alpha),
                _parse_pairs,
                step="translator.clue_translation",
                errors=self.errors,
                log=logger,
                max_tokens=CLUE_MAX_TOKENS,
            )
            or []
        )
        self._replies[question] = pairs
        if len(self._replies) > self._cache_size:
            self._replies.popitem(last=False)
        return pairs

    def _choice_entities(self, question: str, alpha: int, direction: Direction) -> list[str]:
        cands, out = self._choices(question, direction), []
        for _ in range(alpha):
            left = [c for c in cands if c not in out]
            if not left:
                break
            body = (
                {self.choice_key: left} if self.choice_key == "guided_choice" else {self.choice_key: {"choice": left}}
            )
            twin = _with_extra_body(self.llm, body)
            if twin is None:
                logger.warning("vllm_choice needs an OpenAI-compatible client with extra_body; projecting instead")
                break
            reply = complete_validated(
                twin,
                clue_prompt(question) + "\nAnswer with the ENTITY only.",
                lambda r: r.strip() or _bad(r),
                step="translator.entity_choice",
                errors=self.errors,
                log=logger,
                max_tokens=32,
            )
            name = self.project_entity(reply, direction) if reply else None
            if name is None or name in out:
                break
            out.append(name)
        return out

    def entities(self, question: str, alpha: int, direction: Direction = "forward") -> list[str]:
        alpha = max(1, int(alpha))
        out: list[str] = self._choice_entities(question, alpha, direction) if self.vllm_choice else []
        for ent, _rel in self._pairs(question, alpha):
            if len(out) >= alpha:
                break
            name = self.project_entity(ent, direction)
            if name is not None and name not in out:
                out.append(name)
        return out[:alpha]

    def relations(self, question: str, entity: str, beta: int, direction: Direction = "forward") -> list[str]:
        beta = max(1, int(beta))
        raw = [r for e, r in self._pairs(question, beta) if self.project_entity(e, direction) == entity]
        if not raw and self.space.hyperrelations(entity, direction):
            prompt = clue_prompt(question, pairs=beta) + f"\nEvery pair starts with the entity: {entity}{SEPARATOR}"
            pairs = (
                complete_validated(
                    self.llm,
                    prompt,
                    _parse_pairs,
                    step="translator.relation_translation",
                    errors=self.errors,
                    log=logger,
                    max_tokens=CLUE_MAX_TOKENS,
                )
                or []
            )
            raw = [r for _e, r in pairs]
        out: list[str] = []
        for r in raw:
            span = self.project_relation(entity, r, direction)
            if span and span not in out:
                out.append(span)
        return out[:beta]


def _bad(reply: str) -> str:
    raise InvalidReply(f"empty reply {reply[:200]!r}")
