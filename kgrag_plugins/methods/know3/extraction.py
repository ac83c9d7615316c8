"""Triple extraction and KG linking for Know³-RAG's verifier (paper §4.2; docs/methods.md §5(a) step 2,
§5(c), §5(e)).

Text (an answer's reasoning or a reference) -> surface triples -> triples over the KG's entity
ids and relation labels, which the verifier
(:class:`~kgrag_plugins.methods.know3.scoring.TripleVerifier`) scores.

**Surface triples.** With an LLM: the Fig. 9 prompt (entity hints = the KG entities linked in the
text) and :func:`~kgrag_plugins.methods.know3.prompts.parse_triples`; an unparsable reply is
asked once more, then the LLM-free extractor runs (WARNING + trace entry). LLM-free
(docs/methods.md §5(e)): spaCy dependency SVO (:meth:`TripleExtractor.svo`): for each verb with a
subject (``nsubj``/``nsubjpass``, inherited by conjoined verbs), objects are ``dobj``/``attr``
children (``attr`` + ``prep`` -> "was son of"), ``pobj`` of ``prep``/``agent`` children
("was born in"), each with its ``conj``/``appos`` siblings; the predicate is the verb with its
auxiliaries, negation and particle (+ preposition). A pronoun subject becomes the passage's
title entity when one is given (the cheap coreference of the ``mentions`` builder), else the
triple is dropped, like pronoun/generic objects.

**Linking** (paper: entity-linking dictionary, then the linker; predicate by Wikidata
label/alias, then template similarity). Subject/object: the text's linked mentions, then the
exact name/alias key (:func:`~kgrag_plugins.index.builders.linking.name_key`; the longer
surface first, e.g. "Emich, 5th Prince of Leiningen" before "Emich"), then MiniLM cosine to the
entity *names* ≥ ``entity_min_sim`` (0.8; name vectors stored in the index as
``know3_name_vectors.npy``), for strings with an upper-case letter only (common nouns and dates
are not names, and each lookup costs a MiniLM call). One id per string (the paper's Cartesian product over candidate ids
is not used). Predicate: an exact KG relation label; else the string itself when the KGE knows
it (the KGE canonicalises free-text relations, :func:`~kgrag_plugins.models.kge.canonical_relation`);
else the KG relation with the highest MiniLM cosine ≥ ``relation_min_sim`` (0.5) — only for
vocabularies of at most ``max_vector_relations`` (5,000) labels: a corpus graph's tens of thousands
of sentence-like labels would take minutes to embed, and its KGE canonicalises instead. Self-loops
are dropped. Every dropped triple keeps its reason.

**KGQA** (:func:`path_triples`, :func:`chain_triples`): a topic entity, a relation chain and a
candidate answer are already KG ids and labels; a path's edges are the triples.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from ...index.builders.linking import NameIndex, name_key, title_base, title_keys, usable_key
from ...models.replies import complete_validated
from ...types import Path
from ..activation import TextVectorCache
from .prompts import EXTRACTION_SCHEMA, GENERIC_TERMS, extraction_messages, parse_triples

logger = logging.getLogger(__name__)

__all__ = [
    "Extraction",
    "LinkedTriple",
    "SurfaceTriple",
    "TripleExtractor",
    "chain_triples",
    "load_nlp",
    "path_triples",
]

#: Name vectors of the graph's entities (MiniLM of the name alone), stored per generation.
NAME_VECTORS_FILE = "know3_name_vectors.npy"
#: Pronouns resolved to the passage title when they are a sentence's subject.
_SUBJECT_PRONOUNS = frozenset({"he", "she", "it", "they", "his", "her", "its", "their"})
_OBJECT_DEPS = ("dobj", "obj", "attr", "oprd")
_PREP_DEPS = ("prep", "agent", "dative")
_MAX_SURFACE_TOKENS = 10
#: Texts longer than this are cut before parsing (answers and passages are far shorter).
MAX_TEXT_CHARS = 20_000


@lru_cache(maxsize=1)
def load_nlp() -> Any:
    """The full spaCy pipeline (tagger, parser, NER) of the builders' model, loaded once."""
    from ..._spacy import load_pipeline

    return load_pipeline()


class SurfaceTriple(NamedTuple):
    """A triple as text; ``*_alts`` are other surfaces of the same mention, tried first when
    linking (longest first)."""

    subject: str
    predicate: str
    object: str
    subject_alts: tuple[str, ...] = ()
    object_alts: tuple[str, ...] = ()


@dataclass
class LinkedTriple:
    """A triple over KG ids (``head``/``tail``) and a KG relation label, with its surface and how
    each part was linked (``"hint"``, ``"name"``, ``"vector:0.83"``, ``"exact"``, ``"kge"``, ``"kg"``)."""

    head: str
    relation: str
    tail: str
    text: tuple[str, str, str]
    link: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.head, self.relation, self.tail)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": list(self.text)}


@dataclass
class Extraction:
    """Triples of one text: ``surface`` strings, the ``triples`` linked to the KG, ``dropped``
    ones with their reason; ``method`` (``"llm"``, ``"svo"``, ``"svo (llm fallback)"``, ``"kgqa"``)
    and ``reason`` when nothing was linked."""

    triples: list[LinkedTriple] = field(default_factory=list)
    surface: list[tuple[str, str, str]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    method: str = "svo"
    reason: str | None = None
    #: KG entities mentioned in the text (the entity hints).
    entities: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[tuple[str, str, str]]:
        return [t.key for t in self.triples]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "surface": [list(t) for t in self.surface],
            "triples": [t.to_dict() for t in self.triples],
            "dropped": list(self.dropped),
            "reason": self.reason,
            "entities": list(self.entities),
        }


def _clean(s: str) -> str:
    return " ".join(s.split()).strip(" ,;:.\"'`")


def _generic(s: str) -> bool:
    return " ".join(s.lower().split()) in GENERIC_TERMS


def _name_like(s: str) -> bool:
    """Worth a name-vector lookup: has an upper-case letter and is not only digits/punctuation
    (common nouns and dates are not entity names; this keeps the MiniLM calls few)."""
    return any(c.isupper() for c in s) and any(c.isalpha() for c in s)


# =========================================================================== spaCy SVO


def _span_tokens(tok: Any) -> tuple[int, int]:
    """The mention around ``tok``: its NER entity, else the token with its contiguous
    ``compound``/``flat`` children."""
    if tok.ent_type_:
        for ent in tok.doc.ents:
            if ent.start <= tok.i < ent.end:
                return ent.start, ent.end
    lo = hi = tok.i
    for ch in reversed(list(tok.lefts)):
        if ch.dep_ in ("compound", "flat", "nmod") and ch.i == lo - 1:
            lo = ch.i
    for ch in tok.rights:
        if ch.dep_ in ("compound", "flat") and ch.i == hi + 1:
            hi = ch.i
    return lo, hi + 1


def _surfaces(tok: Any) -> tuple[str, tuple[str, ...]]:
    """``(span text, alternates)``: the alternates are the token's whole subtree (when short and
    contiguous, e.g. "Emich, 5th Prince of Leiningen") without its conjuncts."""
    doc = tok.doc
    lo, hi = _span_tokens(tok)
    span = _clean(doc[lo:hi].text)
    drop = {t.i for ch in tok.children if ch.dep_ in ("conj", "cc") for t in ch.subtree}
    sub = [t for t in tok.subtree if t.i not in drop]
    alts: list[str] = []
    if sub:
        s_lo, s_hi = min(t.i for t in sub), max(t.i for t in sub) + 1
        if s_hi - s_lo <= _MAX_SURFACE_TOKENS and s_hi - s_lo == len(sub):
            whole = _clean(doc[s_lo:s_hi].text)
            if whole and whole != span:
                alts.append(whole)
    return span, tuple(alts)


def _subject(verb: Any) -> Any:
    """The subject token of a verb, inherited through ``conj``/``xcomp`` chains."""
    v = verb
    for _ in range(4):
        for ch in v.children:
            if ch.dep_ in ("nsubj", "nsubjpass"):
                return ch
        if v.dep_ in ("conj", "xcomp") and v.head is not v:
            v = v.head
        else:
            return None
    return None


def _verb_phrase(verb: Any) -> str:
    left = [ch for ch in verb.lefts if ch.dep_ in ("aux", "auxpass", "neg")]
    right = [ch for ch in verb.rights if ch.dep_ == "prt"]
    return " ".join(t.text for t in sorted([*left, verb, *right], key=lambda t: t.i))


def _with_siblings(tok: Any) -> list[Any]:
    """A token and its ``conj`` / ``appos`` siblings (recursively)."""
    out, stack = [], [tok]
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(ch for ch in t.children if ch.dep_ in ("conj", "appos"))
    return sorted(out, key=lambda t: t.i)


def _objects(verb: Any, vp: str) -> list[tuple[str, Any]]:
    """``(predicate, object token)`` pairs of one verb."""
    out: list[tuple[str, Any]] = []
    for ch in verb.children:
        if ch.dep_ in _OBJECT_DEPS:
            preps = [p for p in ch.children if p.dep_ == "prep"]
            if ch.dep_ == "attr" and preps and ch.pos_ == "NOUN":
                for p in preps:
                    for po in (c for c in p.children if c.dep_ == "pobj"):
                        out += [(f"{vp} {ch.text} {p.text}", o) for o in _with_siblings(po)]
            else:
                out += [(vp, o) for o in _with_siblings(ch)]
        elif ch.dep_ in _PREP_DEPS:
            for po in (c for c in ch.children if c.dep_ == "pobj"):
                out += [(f"{vp} {ch.text}", o) for o in _with_siblings(po)]
        elif ch.dep_ == "acomp":
            for p in (c for c in ch.children if c.dep_ == "prep"):
                for po in (c for c in p.children if c.dep_ == "pobj"):
                    out += [(f"{vp} {ch.text} {p.text}", o) for o in _with_siblings(po)]
    return out


def svo_doc(doc: Any, title: str | None = None) -> list[SurfaceTriple]:
    """Dependency SVO triples of a parsed text (see the module docstring)."""
    out: list[SurfaceTriple] = []
    for verb in doc:
        if verb.pos_ not in ("VERB", "AUX"):
            continue
        subj = _subject(verb)
        if subj is None:
            continue
        s_text, s_alts = _surfaces(subj)
        refers_to_title = bool(title) and (
            subj.lower_ in _SUBJECT_PRONOUNS
            or any(_generic(x) for x in (s_text, *s_alts))
            or name_key(s_text) in title_keys(title, person=True)
        )
        if refers_to_title:  # cheap coreference: "He ...", "The film ...", "Snow ..." in its own passage
            s_text, s_alts = title_base(title), (title,)  # type: ignore[arg-type]
        elif subj.pos_ == "PRON" or _generic(s_text):
            continue
        if not s_text:
            continue
        vp = _verb_phrase(verb)
        for pred, obj in _objects(verb, vp):
            if obj.pos_ == "PRON" or obj.i == subj.i:
                continue
            o_text, o_alts = _surfaces(obj)
            if not o_text or _generic(o_text):
                continue
            out.append(SurfaceTriple(s_text, pred, o_text, s_alts, o_alts))
    return list(dict.fromkeys(out))


# =========================================================================== KGQA


def path_triples(path: Path) -> list[tuple[str, str, str]]:
    """The triples along a reasoning path (an inverse step ``a <- r <- b`` is ``(b, r, a)``)."""
    inv = path.inverse or [False] * len(path.relations)
    out = []
    for i, (rel, back) in enumerate(zip(path.relations, inv)):
        a, b = path.nodes[i], path.nodes[i + 1]
        out.append((b, rel, a) if back else (a, rel, b))
    return out


def chain_triples(topic: str, relations: Sequence[str], answer: str) -> tuple[list[tuple[str, str, str]], str | None]:
    """KGQA (topic, predicted relation chain, candidate answer) -> triples: one relation gives
    ``[(topic, r, answer)]``; a longer chain has no known intermediate entities, so it gives no
    triple and a reason (pass the path to :func:`path_triples` instead)."""
    if len(relations) == 1:
        return [(topic, relations[0], answer)], None
    if not relations:
        return [], "empty relation chain"
    return [], f"a {len(relations)}-relation chain without intermediate entities: use path_triples"


# =========================================================================== the extractor


class TripleExtractor:
    """Extract triples from text and link them to an index's KG (see the module docstring).

    ``kge`` (a :class:`~kgrag_plugins.models.kge.KGEModel`, optional) lets a free-text predicate
    the KGE can canonicalise pass as it is; ``llm`` switches extraction to the Fig. 9 prompt.
    Call :meth:`refresh` after the index changed (the owning retriever does).
    """

    def __init__(
        self,
        index: Any,
        *,
        kge: Any = None,
        llm: Any = None,
        entity_min_sim: float = 0.8,
        relation_min_sim: float = 0.5,
        max_hints: int = 30,
        max_vector_relations: int = 5000,
    ) -> None:
        self.index = index
        self.kge = kge
        self.llm = llm
        self.entity_min_sim = entity_min_sim
        self.relation_min_sim = relation_min_sim
        self.max_hints = max_hints
        self.max_vector_relations = max_vector_relations
        self._cache = TextVectorCache(20_000)
        self._lock = threading.Lock()
        self.refresh()

    # ------------------------------------------------------------------ state
    def refresh(self) -> None:
        """Rebuild the name index and drop vectors derived from the previous graph."""
        g = self.index.graph
        self.names = NameIndex.from_graph(g)
        self._name_vectors: np.ndarray | None = None
        self._relations = g.relations
        self._relation_key = {" ".join(r.lower().split()): r for r in reversed(self._relations)}
        self._kge_mask: np.ndarray | None = None

    def set_kge(self, kge: Any) -> None:
        """Use ``kge`` for predicate matching (its canonicaliser and relation vocabulary)."""
        self.kge = kge
        self._kge_mask = None

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs, _ = self._cache.vectors(list(texts), lambda xs: self.index.embedder.embed(xs, progress=False))
        return vecs

    def name_vectors(self) -> np.ndarray | None:
        """MiniLM vectors of the entity names (rows = graph rows), stored in the index on first use."""
        with self._lock:
            if self._name_vectors is None:
                g = self.index.graph
                if not g.num_entities:
                    return None
                arr = self.index.load_derived(NAME_VECTORS_FILE, g.num_entities)
                if arr is None:
                    names = [g._names[i] for i in range(g.num_entities)]  # noqa: SLF001 (column read)
                    arr = np.asarray(self.index.embedder.embed(names, progress=None), dtype=np.float32)
                    self.index.save_derived(NAME_VECTORS_FILE, arr)
                self._name_vectors = arr
            return self._name_vectors

    # ------------------------------------------------------------------ linking
    def mentions(self, text: str, doc: Any = None) -> list[tuple[str, str, bool]]:
        """KG entities mentioned in ``text``: ``(surface, entity id, overlaps a NER span)`` for NER
        spans resolved by name key, then greedy name n-grams; one per id, and a mention whose key
        lies inside a longer mention's key is dropped ("Karl" inside "Karl, Prince of Leiningen")."""
        doc = doc if doc is not None else load_nlp()(text[:MAX_TEXT_CHARS])
        ner_keys = [k for k in (name_key(e.text) for e in doc.ents) if k]
        found: dict[str, tuple[str, str, bool]] = {}
        for ent in doc.ents:
            eid = self.names.get(name_key(ent.text))
            if eid is not None and eid not in found:
                found[eid] = (ent.text, eid, True)
        for surface, eid in self.names.match_ngrams(text):
            if eid not in found:
                key = name_key(surface)
                found[eid] = (surface, eid, any(k in key or key in k for k in ner_keys))
        keys = {eid: f" {name_key(s)} " for s, eid, _ in found.values()}
        out = [
            m
            for m in found.values()
            if not any(o != m[1] and keys[m[1]] in keys[o] and keys[m[1]] != keys[o] for o in keys)
        ]
        return out[: self.max_hints]

    def _exact(self, surface: str, alts: Sequence[str], hints: dict[str, str] | None) -> tuple[str | None, str]:
        """Hint or name/alias key match, the longer surface first."""
        for s in sorted(dict.fromkeys([*alts, surface]), key=len, reverse=True):
            key = name_key(s)
            if not s or not key:
                continue
            if hints and key in hints:
                return hints[key], "hint"
            if usable_key(key):
                eid = self.names.get(key) or self.names.get(name_key(title_base(s)))
                if eid is not None:
                    return eid, "name"
        return None, f"unknown entity {surface!r}"

    def _by_vectors(self, surfaces: Sequence[str]) -> dict[str, tuple[str | None, str]]:
        """MiniLM name-similarity linking of many strings at once (one embedding batch)."""
        todo = [s for s in dict.fromkeys(surfaces) if _name_like(s)]
        out: dict[str, tuple[str | None, str]] = {s: (None, f"unknown entity {s!r}") for s in surfaces}
        vecs = self.name_vectors() if todo and self.entity_min_sim <= 1 else None
        if vecs is None:
            return out
        sims = self._embed(todo).astype(vecs.dtype) @ vecs.T
        ids = self.index.graph.entity_ids
        for s, row in zip(todo, sims):
            best = int(np.argmax(row))
            if row[best] >= self.entity_min_sim:
                out[s] = (ids[best], f"vector:{row[best]:.2f}")
            else:
                out[s] = (None, f"unknown entity {s!r} (best name cosine {row[best]:.2f} < {self.entity_min_sim})")
        return out

    def link_entity(
        self, surface: str, alts: Sequence[str] = (), hints: dict[str, str] | None = None
    ) -> tuple[str | None, str]:
        """``(entity id, how)`` or ``(None, reason)`` for a subject/object string."""
        eid, how = self._exact(surface, alts, hints)
        if eid is not None:
            return eid, how
        return self._by_vectors([surface]).get(surface, (None, how))

    def _kge_relations(self) -> np.ndarray:
        if self._kge_mask is None:
            has = getattr(self.kge, "has_relation", None)
            self._kge_mask = np.array([bool(has(r)) if has else True for r in self._relations], dtype=bool)
        return self._kge_mask

    def match_relation(self, predicate: str) -> tuple[str | None, str]:
        """``(KG relation label, how)`` or ``(None, reason)`` for a predicate string."""
        p = " ".join(predicate.lower().split())
        if p in self._relation_key:
            return self._relation_key[p], "exact"
        if self.kge is not None and self.kge.has_relation(predicate):
            return predicate, "kge"
        if not self._relations or self.relation_min_sim > 1 or len(self._relations) > self.max_vector_relations:
            return None, f"unknown relation {predicate!r}"
        vecs = self.index.relation_vectors
        sims = (vecs @ self._embed([predicate])[0].astype(vecs.dtype)).astype(np.float64)
        if self.kge is not None:
            sims = np.where(self._kge_relations(), sims, -np.inf)
        best = int(np.argmax(sims))
        if np.isfinite(sims[best]) and sims[best] >= self.relation_min_sim:
            return self._relations[best], f"vector:{sims[best]:.2f}"
        return None, f"unknown relation {predicate!r}"

    def link(
        self,
        surface: Iterable[SurfaceTriple | tuple[str, str, str]],
        hints: dict[str, str] | None = None,
        *,
        method: str = "svo",
    ) -> Extraction:
        """Link surface triples to the KG; unlinkable ones go to ``dropped`` with the reason."""
        ex = Extraction(method=method)
        sts = [st if isinstance(st, SurfaceTriple) else SurfaceTriple(*st) for st in surface]
        exact = {}
        for st in sts:
            for s, alts in ((st.subject, st.subject_alts), (st.object, st.object_alts)):
                if (s, alts) not in exact:
                    exact[(s, alts)] = self._exact(s, alts, hints)
        vec = self._by_vectors([s for (s, _), (eid, _) in exact.items() if eid is None])
        seen: set[tuple[str, str, str]] = set()
        for st in sts:
            ex.surface.append((st.subject, st.predicate, st.object))
            h, how_h = exact[(st.subject, st.subject_alts)]
            if h is None:
                h, how_h = vec.get(st.subject, (None, how_h))
            t, how_t = exact[(st.object, st.object_alts)]
            if t is None:
                t, how_t = vec.get(st.object, (None, how_t))
            r, how_r = self.match_relation(st.predicate) if h and t else (None, "")
            reason = None if h else how_h
            reason = reason or (None if t else how_t) or (None if r else how_r)
            if reason is None and h == t:
                reason = "self-loop"
            if reason is not None:
                ex.dropped.append({"triple": [st.subject, st.predicate, st.object], "reason": reason})
                continue
            how = {"head": how_h, "relation": how_r, "tail": how_t}
            lt = LinkedTriple(h, r, t, (st.subject, st.predicate, st.object), how)  # type: ignore[arg-type]
            if lt.key not in seen:
                seen.add(lt.key)
                ex.triples.append(lt)
        if not ex.triples:
            ex.reason = "no triples extracted" if not ex.surface else "no extracted triple could be linked to the KG"
        return ex

    # ------------------------------------------------------------------ extraction
    def svo(self, text: str, title: str | None = None) -> list[SurfaceTriple]:
        """LLM-free surface triples of one text (spaCy dependency SVO)."""
        return svo_doc(load_nlp()(text[:MAX_TEXT_CHARS]), title)

    def extract(self, text: str, *, title: str | None = None, errors: list[dict[str, Any]] | None = None) -> Extraction:
        """Triples of ``text`` linked to the KG: the Fig. 9 prompt when an LLM is set (invalid
        twice -> SVO, recorded in ``errors``), else SVO. Empty text gives a reason, not an error."""
        if not text or not text.strip():
            return Extraction(method="llm" if self.llm is not None else "svo", reason="empty text")
        doc = load_nlp()(text[:MAX_TEXT_CHARS])
        found = self.mentions(text, doc)
        hints = {name_key(s): eid for s, eid, _ in found}
        hints.update({name_key(self.index.graph.name_of(eid)): eid for _, eid, _ in found})
        if self.llm is not None:
            names = [self.index.graph.name_of(eid) for _, eid, _ in found]
            triples = complete_validated(
                self.llm,
                extraction_messages(text, names),
                parse_triples,
                step="triple_extraction",
                errors=errors,
                log=logger,
                schema=EXTRACTION_SCHEMA,
                temperature=0.0,
            )
            if triples is not None:
                ex = self.link(triples, hints, method="llm")
            else:
                ex = self.link(svo_doc(doc, title), hints, method="svo (llm fallback)")
        else:
            ex = self.link(svo_doc(doc, title), hints, method="svo")
        ex.entities = list(dict.fromkeys(eid for _, eid, _ in found))
        return ex

    def extract_many(self, items: Sequence[tuple[str, str | None]]) -> list[Extraction]:
        """LLM-free extraction of many ``(text, title)`` pairs (one batched spaCy pass)."""
        nlp = load_nlp()
        docs = nlp.pipe([t[:MAX_TEXT_CHARS] for t, _ in items], batch_size=16)
        out = []
        for (text, title), doc in zip(items, docs):
            if not text.strip():
                out.append(Extraction(reason="empty text"))
                continue
            found = self.mentions(text, doc)
            hints = {name_key(s): eid for s, eid, _ in found}
            ex = self.link(svo_doc(doc, title), hints, method="svo")
            ex.entities = list(dict.fromkeys(eid for _, eid, _ in found))
            out.append(ex)
        return out
