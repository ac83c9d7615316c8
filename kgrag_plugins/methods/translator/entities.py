"""LLM-free entity translation (KG-Translator §3.3 Eq. 1/4, docs/methods.md §3(e)).

The fine-tuned translator decodes α entity names under a Trie of the ParseKG's head entities
C_H. Without an LLM we translate by matching instead, in three tiers, best first:

1. **exact**: query NER spans (spaCy, the shared ``load_spacy(False)`` pipeline) and word
   n-grams of the question whose :func:`~kgrag_plugins.index.builders.linking.name_key` equals
   an entity name key. Longer spans win over their sub-spans (greedy, left to right).
2. **alias / fuzzy**: keys of graph aliases and of titles without their disambiguation
   ("Paris (band)" -> "paris"), then ``difflib`` ratio >= 0.88 against entity keys that share
   a word with the span (so the fuzzy pass touches tens of names, not the whole table).
3. **embedding** (forward only, and only when tiers 1-2 found nothing -- measured: filling α
   with look-alike names, "Bukhan River" for "Bubye River", cost MuSiQue recall): MiniLM cosine between
   each candidate span (NER spans and maximal capitalised runs, at most 8) and the name vectors
   of the head entities (computed once per index for the head entities only -- a third of all
   entities on MuSiQue -- and persisted as ``translator_entity_vectors.npy``; ``index.entity_vectors``
   is reused when the index already has it).

The pool is direction-specific: forward translation uses head entities (C_H, Eq. 4), reverse
translation the entities that are tails of at least one hyperrelation (App. J). The α best are
returned; ties inside a tier keep question order. **Query NER entities** (Alg. 2 line 8) are the
entities that tier 1 links from spaCy NER spans; the retriever adds them on top of the α
translated entities when they are not already among them (decision for the open point
"added on top, or counted inside α", docs/methods.md §3(d): on top, as App. F.1 calls them "a supplement").
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ...index.builders.linking import name_key, title_base, usable_key
from ...index.vector_cache import cached

logger = logging.getLogger(__name__)

#: Longest n-gram tried against entity names (words).
MAX_NGRAM = 12
#: difflib ratio a fuzzy match needs.
FUZZY_CUTOFF = 0.88
#: MiniLM cosine a span-to-name match needs to count as a tier-3 candidate.
EMBED_MIN = 0.55

#: Spans embedded per question in tier 3.
MAX_EMBED_SPANS = 8

ENTITY_VECTORS_FILE = "translator_entity_vectors.npy"
#: NER types that are never looked up as entities ("first", "two", "40%").
NUMERIC_TYPES = frozenset({"ORDINAL", "CARDINAL", "PERCENT", "QUANTITY", "MONEY"})

_WORD = re.compile(r"[\w'\u2019.-]+")
_CONNECT = frozenset({"of", "the", "de", "and", "in", "on", "for", "von", "van", "la", "le", "&"})


def capitalised_runs(text: str) -> list[str]:
    """Maximal runs of capitalised words (connectors such as "of"/"the" allowed inside), the
    name-like spans that NER may miss; the question's first word alone is skipped."""
    words = _WORD.findall(text)
    out, run = [], []
    for i, w in enumerate(words):
        cap = w[:1].isupper() or w[:1].isdigit()
        if cap and not (i == 0 and len(words) > 1 and not (words[1][:1].isupper())):
            run.append(w)
        elif run and w.lower() in _CONNECT and i + 1 < len(words) and words[i + 1][:1].isupper():
            run.append(w)
        else:
            if run:
                out.append(" ".join(run))
            run = []
    if run:
        out.append(" ".join(run))
    return out


TIER_SCORE = {"exact": 3.0, "alias": 2.0, "fuzzy": 1.5, "embedding": 1.0}


@dataclass
class EntityMatch:
    """One translated entity: graph id, name, how it was found and its score."""

    entity: str
    name: str
    tier: str
    score: float
    span: str = ""
    ner: bool = False


@dataclass
class _Pool:
    ids: list[str]
    rows: np.ndarray  # graph rows of ``ids`` (entity-vector rows)
    members: set[str] = field(default_factory=set)
    vectors: np.ndarray | None = None
    where: dict[str, int] | None = None


class EntityTranslator:
    """Match a question against ParseKG entity names; see the module docstring.

    Built lazily from ``index`` (graph names, aliases and the ParseKG's head/tail sets); call
    :meth:`reset` after the index changed.
    """

    def __init__(self, index: Any, *, use_embedding: bool = True, use_ner: bool = True) -> None:
        self.index = index
        self.use_embedding = use_embedding
        self.use_ner = use_ner
        self.reset()

    def reset(self) -> None:
        self._keys: dict[str, list[str]] | None = None
        self._alias_keys: dict[str, list[str]] = {}
        self._word_keys: dict[str, set[str]] = {}
        self._pools: dict[str, _Pool] = {}
        self._names: dict[str, str] = {}

    # ------------------------------------------------------------------ tables
    def _build(self) -> None:
        g, kg = self.index.graph, self.index.parsekg
        names = g.names()
        self._names = names
        keys: dict[str, list[str]] = {}
        alias: dict[str, list[str]] = {}
        for e in g.entities():
            k = name_key(e.name)
            if usable_key(k):
                keys.setdefault(k, []).append(e.id)
            for a in (*e.aliases, title_base(e.name)):
                ak = name_key(a)
                if usable_key(ak) and ak != k:
                    alias.setdefault(ak, []).append(e.id)
        words: dict[str, set[str]] = {}
        for k in keys:
            for w in k.split():
                if len(w) > 2:
                    words.setdefault(w, set()).add(k)
        self._keys, self._alias_keys, self._word_keys = keys, alias, words
        heads = kg.head_entities() if kg is not None else []
        tails: list[str] = []
        if kg is not None:  # entities that are a tail somewhere (the pool of reverse translation)
            tails = kg.tail_entities()
        for direction, ids in (("forward", heads), ("reverse", tails)):
            ids = [e for e in ids if e in names]
            rows = np.array([g.index_of(e) for e in ids], dtype=np.int64)
            self._pools[direction] = _Pool(ids, rows, set(ids))

    def pool(self, direction: str = "forward") -> list[str]:
        """Entity ids translation may return in ``direction`` (C_H for forward)."""
        if self._keys is None:
            self._build()
        return list(self._pools[direction].ids)

    def name(self, entity_id: str) -> str:
        if self._keys is None:
            self._build()
        return self._names.get(entity_id, entity_id)

    def resolve(self, text: str) -> list[str]:
        """Entity ids whose name (or alias) key equals ``text``'s key (backend outputs -> ids)."""
        if self._keys is None:
            self._build()
        k = name_key(text)
        return list(dict.fromkeys([*(self._keys or {}).get(k, []), *self._alias_keys.get(k, [])]))

    # ------------------------------------------------------------------ spans
    @staticmethod
    def ner_spans(question: str) -> list[str]:
        """spaCy NER spans of the question (Alg. 2 line 8, E_q = NER(q)), without numeric types."""
        from ...index.builders.nlp import load_spacy

        return [e.text for e in load_spacy(False)(question).ents if e.label_ not in NUMERIC_TYPES]

    @staticmethod
    def ngrams(question: str, max_words: int = MAX_NGRAM) -> list[tuple[int, int, str]]:
        """``(start, end, text)`` word n-grams, longest first per start position."""
        words = _WORD.findall(question)
        out = []
        for i in range(len(words)):
            for m in range(min(max_words, len(words) - i), 0, -1):
                out.append((i, i + m, " ".join(words[i : i + m])))
        return out

    # ------------------------------------------------------------------ translation
    def translate(
        self, question: str, alpha: int, *, direction: str = "forward", ner: Sequence[str] | None = None
    ) -> list[EntityMatch]:
        """The ``alpha`` best entities of the pool for ``question`` (plus nothing else)."""
        return self.candidates(question, direction=direction, ner=ner, fill=max(alpha, 1))[: max(alpha, 0)]

    def candidates(
        self, question: str, *, direction: str = "forward", ner: Sequence[str] | None = None, fill: int = 3
    ) -> list[EntityMatch]:
        """Matched pool entities, best first (tiers exact > alias > fuzzy > embedding); the
        embedding tier runs only when nothing matched by text (and ``fill > 0``)."""
        if self._keys is None:
            self._build()
        pool = self._pools[direction]
        if not pool.ids:
            return []
        ner = list(ner) if ner is not None else (self.ner_spans(question) if self.use_ner else [])
        ner_keys = {name_key(s) for s in ner}
        found: dict[str, EntityMatch] = {}

        def add(eids: Sequence[str], tier: str, span: str, bonus: float = 0.0) -> bool:
            hit = False
            for e in eids:
                if e in pool.members:
                    hit = True
                    m = found.get(e)
                    sc = TIER_SCORE[tier] + bonus
                    if m is None or m.score < sc:
                        found[e] = EntityMatch(e, self._names.get(e, e), tier, sc, span, name_key(span) in ner_keys)
            return hit

        keys, alias = self._keys or {}, self._alias_keys
        # tier 1 + 2: NER spans, then greedy longest n-grams (a span that matched covers its words)
        for s in ner:
            k = name_key(s)
            if usable_key(k):
                add(keys.get(k, []), "exact", s, 0.5) or add(alias.get(k, []), "alias", s, 0.5)
        covered: set[int] = set()
        for i, j, text in self.ngrams(question):
            if any(w in covered for w in range(i, j)):
                continue
            words = text.split()
            if not any(w[:1].isupper() or w[:1].isdigit() for w in words):
                continue
            k = name_key(text)
            if not usable_key(k) or (len(words) == 1 and len(k) < 3):
                continue
            # longer spans rank higher inside a tier (more specific names)
            bonus = 0.05 * min(len(words), 6)
            if add(keys.get(k, []), "exact", text, bonus) or add(alias.get(k, []), "alias", text, bonus):
                covered.update(range(i, j))
        spans = list(dict.fromkeys([*ner, *capitalised_runs(question)]))
        # fuzzy: spans that matched nothing, against keys sharing a word
        for s in dict.fromkeys(spans):
            k = name_key(s)
            if not usable_key(k) or len(k) < 4 or k in keys or k in alias:
                continue
            cands = set().union(*(self._word_keys.get(w, set()) for w in k.split() if len(w) > 2)) if k else set()
            if not cands or len(cands) > 2000:
                continue
            best = difflib.get_close_matches(k, list(cands), n=3, cutoff=FUZZY_CUTOFF)
            for b in best:
                add(keys.get(b, []), "fuzzy", s, difflib.SequenceMatcher(None, k, b).ratio() - 1.0)
        # tier 3: MiniLM similarity of candidate spans to entity-name vectors of the pool
        if self.use_embedding and direction == "forward" and spans and not found and fill > 0:
            self._embedding_tier(spans[:MAX_EMBED_SPANS], pool, found)
        return sorted(found.values(), key=lambda m: -m.score)

    def _pool_vectors(self, pool: _Pool) -> np.ndarray | None:
        """Name vectors of the forward pool (head entities), computed once and persisted in the
        index generation as ``translator_entity_vectors.<fingerprint>.npy`` (reused while the names match).
        Reuses ``index.entity_vectors`` when the index already has them."""
        if pool.vectors is not None:
            return pool.vectors
        if getattr(self.index, "has_entity_vectors", False):
            pool.vectors = np.asarray(self.index.entity_vectors[pool.rows], dtype=np.float32)
            return pool.vectors
        names = [self._names.get(e, e) for e in pool.ids]
        pool.vectors = cached(self.index, ENTITY_VECTORS_FILE, names, what="translator entity names")
        return pool.vectors

    def vectors_of(self, entity_ids: list[str]) -> np.ndarray:
        """Name vectors of forward-pool entities (rows in ``entity_ids`` order)."""
        if self._keys is None:
            self._build()
        pool = self._pools["forward"]
        pv = self._pool_vectors(pool)
        if pool.where is None:
            pool.where = {e: i for i, e in enumerate(pool.ids)}
        return pv[[pool.where[e] for e in entity_ids]]  # type: ignore[index]

    def prepare(self) -> int:
        """Build the tables and the forward pool's name vectors now; returns the pool size."""
        if self._keys is None:
            self._build()
        pool = self._pools["forward"]
        if len(pool.ids):
            self._pool_vectors(pool)
        return len(pool.ids)

    def _embedding_tier(self, spans: list[str], pool: _Pool, found: dict[str, EntityMatch]) -> None:
        if not len(pool.ids):
            return
        pv = self._pool_vectors(pool)
        if pv is None:
            return
        sv = np.asarray(self.index.embedder.embed(spans, progress=False), dtype=np.float32)
        sims = pv @ sv.T  # (pool, spans)
        best_span = sims.argmax(axis=1)
        best = sims[np.arange(len(pool.ids)), best_span]
        top = np.argsort(-best)[:16]
        for r in top:
            if best[r] < EMBED_MIN:
                break
            e = pool.ids[int(r)]
            if e not in found:
                found[e] = EntityMatch(
                    e, self._names.get(e, e), "embedding", TIER_SCORE["embedding"] * float(best[r]), spans[best_span[r]]
                )


class LLMFreeBackend:
    """Part A's translation behind the :class:`TranslationBackend` protocol (names in, names out)."""

    def __init__(self, index: Any, relations: Any = None) -> None:
        from .relations import RelationTranslator

        self.entity_translator = EntityTranslator(index)
        self.relation_translator = relations or RelationTranslator(index)

    def entities(self, question: str, alpha: int, direction: str = "forward") -> list[str]:
        return [m.name for m in self.entity_translator.translate(question, alpha, direction=direction)]

    def relations(self, question: str, entity: str, beta: int, direction: str = "forward") -> list[str]:
        ids = self.entity_translator.resolve(entity) or [entity]
        return [r.text for r in self.relation_translator.translate(question, ids[0], beta, direction=direction)]
