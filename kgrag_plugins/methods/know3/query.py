"""Knowledge-enhanced query q^KG of Know³-RAG (paper §4.3, App. A Algorithm 1; docs/methods.md §5(a) step 4).

For a query q_t (:meth:`QueryEnhancer.enhance`):

1. **Query entities** E^q: spaCy NER spans longer than 2 characters whose text links to a KG
   entity (name/alias key, then MiniLM name similarity, :class:`.extraction.TripleExtractor`),
   plus name n-gram matches that overlap a NER span (the paper keeps mentions that are also NER
   spans). A query with no NER span at all (lower-cased KGQA questions) keeps its n-gram matches
   (ours: the paper's linker needs capitalisation). At most ``max_query_entities`` (3).
2. **Local relation** r_loc of each e ∈ E^q: among the relations of e's KG edges, the one whose
   words have the highest MiniLM cosine to q. With a KGE the edges are grouped by their KGE
   relation label (a corpus graph's sentence-like labels by their canonical relation, e.g.
   "bear_in"; the pooled rare-relation label only when nothing else is there), without one by raw
   label (first ``max_relations``, 64). The paper fills relation question templates with e's label;
   the relation words alone rank one entity's relations the same way up to the shared entity term,
   and need no template file. Edges of both directions count (corpus-graph direction is word
   order; curated KGs store one direction).
3. **Local neighbours** E^l: the entities across r_loc edges; more than ``max_local`` (3) are
   ranked by the KGE score of their triple and the best 3 kept.
4. **Global prediction** E^g: the ``predicted`` (3) relations for e — ``relation_prediction=
   "similarity"`` (default: the KGE relations most MiniLM-similar to q, the paper's
   template-similarity ranking) or ``"kge"`` (``KGEModel.predict_relations``, which scores every
   (relation, entity) pair: 2.6-2.9 s per entity on 2Wiki's corpus KGE, 1,901 relations x 11,858
   entities, against 0.05 s for the three ``score_tails`` calls; docs/know3.md). Only when r_loc
   is not among them: the single best (relation, tail) by ``score_tails`` over the predicted
   relations, e itself and e's KG neighbours excluded; added if new.
5. **q^KG** (:attr:`EnhancedQuery.text`, our layout): the query, then ``Related entities:`` and
   one line per entity ``name: description (+ verbalised selected triples)``, descriptions cut to
   ``description_words`` (30) words. The paper writes [E_t; q_t] (entities first); we put q first
   so that a 256-token encoder never truncates the question away.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ...index.builders.linking import name_key
from ..activation import TextVectorCache
from .extraction import MAX_TEXT_CHARS, TripleExtractor, load_nlp

logger = logging.getLogger(__name__)

__all__ = ["EnhancedEntity", "EnhancedQuery", "QueryEnhancer", "relation_text"]

_PLACEHOLDER = re.compile(r"#+")


def relation_text(label: str) -> str:
    """A relation label as words (``##`` placeholders and ``_`` removed)."""
    return " ".join(_PLACEHOLDER.sub(" ", label).replace("_", " ").split())


@dataclass
class EnhancedEntity:
    """One entity of E_t: ``role`` is ``"query"``, ``"local"`` or ``"global"``; ``via`` the query
    entity it was found from; ``triple`` the (head, relation, tail) that selected it; ``score`` its
    KGE score (local/global)."""

    id: str
    name: str
    description: str
    role: str
    via: str | None = None
    triple: tuple[str, str, str] | None = None
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["triple"] = list(self.triple) if self.triple else None
        return d


@dataclass
class EnhancedQuery:
    """q_t, its entities E_t and q^KG (``text``); ``local_relations`` / ``predicted_relations``
    per query entity and ``reasons`` (no linked entity, no KGE, ...)."""

    query: str
    entities: list[EnhancedEntity] = field(default_factory=list)
    text: str = ""
    local_relations: dict[str, str | None] = field(default_factory=dict)
    predicted_relations: dict[str, list[str]] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    def pairs(self, roles: Sequence[str] = ("query", "local", "global")) -> list[tuple[str, str]]:
        """``(name, description)`` of the entities with these roles (for the prompts)."""
        return [(e.name, e.description) for e in self.entities if e.role in roles]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "text": self.text,
            "entities": [e.to_dict() for e in self.entities],
            "local_relations": dict(self.local_relations),
            "predicted_relations": {k: list(v) for k, v in self.predicted_relations.items()},
            "reasons": list(self.reasons),
        }


class QueryEnhancer:
    """Builds :class:`EnhancedQuery` objects over an index's KG (see the module docstring)."""

    def __init__(
        self,
        index: Any,
        extractor: TripleExtractor,
        kge: Any = None,
        *,
        max_query_entities: int = 3,
        max_local: int = 3,
        predicted: int = 3,
        relation_prediction: str = "similarity",
        description_words: int = 30,
        max_relations: int = 64,
    ) -> None:
        if relation_prediction not in ("similarity", "kge"):
            raise ValueError(f"relation_prediction must be 'similarity' or 'kge', got {relation_prediction!r}")
        self.index = index
        self.extractor = extractor
        self.kge = kge
        self.max_query_entities = max_query_entities
        self.max_local = max_local
        self.predicted = predicted
        self.relation_prediction = relation_prediction
        self.description_words = description_words
        self.max_relations = max_relations
        self._cache = TextVectorCache(20_000)
        self._lock = threading.Lock()
        self._kge_rel_vectors: np.ndarray | None = None

    def refresh(self, kge: Any = None) -> None:
        """Use a new KGE / graph (drop vectors derived from the old one)."""
        self.kge = kge
        self._kge_rel_vectors = None

    # ------------------------------------------------------------------ pieces
    def link(self, query: str) -> list[tuple[str, str]]:
        """E^q as ``(surface, entity id)``: NER spans (> 2 chars) linked to the KG, and name
        matches inside NER spans; all name matches when the query has no NER span."""
        doc = load_nlp()(query[:MAX_TEXT_CHARS])
        ner = [e for e in doc.ents if len(e.text.strip()) > 2]
        out: dict[str, str] = {}
        for surface, eid, in_ner in self.extractor.mentions(query, doc):
            if in_ner or not ner:
                out.setdefault(eid, surface)
        for ent in ner:
            if any(name_key(s) == name_key(ent.text) for s in out.values()):
                continue
            eid, _how = self.extractor.link_entity(ent.text)
            if eid is not None:
                out.setdefault(eid, ent.text)
        return [(s, e) for e, s in out.items()][: self.max_query_entities]

    def _describe(self, eid: str) -> tuple[str, str]:
        e = self.index.graph.entity(eid)
        words = (e.description or "").replace("##", "…").split()
        desc = " ".join(words[: self.description_words]) + (" ..." if len(words) > self.description_words else "")
        return e.name, desc

    def _edges(self, eid: str) -> list[tuple[str, str, str]]:
        """KG triples (head, relation, tail) with ``eid`` at either end, self-loops excluded."""
        g = self.index.graph
        out = []
        for nb, rel, d in g.neighbors(eid, "both"):
            if nb != eid:
                out.append((eid, rel, nb) if d == "out" else (nb, rel, eid))
        return list(dict.fromkeys(out))

    def _kge_score(self, triple: tuple[str, str, str]) -> float | None:
        if self.kge is None:
            return None
        return self.kge.score(*triple)

    def _label_vectors(self, labels: Sequence[str]) -> np.ndarray:
        texts = [relation_text(r) or r for r in labels]
        vecs, _ = self._cache.vectors(texts, lambda xs: self.index.embedder.embed(xs, progress=False))
        return vecs

    def local(self, eid: str, qvec: np.ndarray) -> tuple[str | None, list[tuple[tuple[str, str, str], float | None]]]:
        """``(r_loc, [(triple, KGE score)])``: the relation of e's edges most MiniLM-similar to q
        (compared as KGE labels when there is a KGE, so a corpus graph's sentence-like labels are
        compared by their canonical relation, the pooled rare label only as a last resort; else
        as raw labels, at most ``max_relations`` of them) and up to ``max_local`` of its triples
        (best KGE score first when there are more)."""
        edges = self._edges(eid)
        if not edges:
            return None, []
        group: dict[str, list[tuple[str, str, str]]] = {}
        for tr in edges:
            label = self._kge_label(tr[1]) if self.kge is not None else tr[1]
            group.setdefault(label or tr[1], []).append(tr)
        labels = list(group)
        if len(labels) > 1 and self.kge is not None:
            from ...models.kge import POOLED_RELATION

            labels = [x for x in labels if x != POOLED_RELATION] or labels
        labels = labels[: self.max_relations]
        sims = self._label_vectors(labels) @ qvec.astype(np.float32)
        r_loc = labels[int(np.argmax(sims))]
        scored = [(t, self._kge_score(t)) for t in group[r_loc]]
        if len(scored) > self.max_local:
            scored.sort(key=lambda x: -np.inf if x[1] is None else -x[1])
            scored = scored[: self.max_local]
        return r_loc, scored

    def _relation_vectors_kge(self) -> np.ndarray | None:
        with self._lock:
            if self._kge_rel_vectors is None and self.kge is not None and self.kge.relation_ids:
                self._kge_rel_vectors = self._label_vectors(self.kge.relation_ids)
            return self._kge_rel_vectors

    def predict_relations(self, eid: str, qvec: np.ndarray) -> list[str]:
        """The ``predicted`` KGE relation labels for e (see ``relation_prediction``)."""
        if self.kge is None or not self.kge.has_entity(eid):
            return []
        if self.relation_prediction == "kge":
            return [r for r, _ in self.kge.predict_relations(eid, k=self.predicted)]
        vecs = self._relation_vectors_kge()
        if vecs is None:
            return []
        sims = vecs @ qvec.astype(vecs.dtype)
        n = min(self.predicted, len(sims))
        top = np.argsort(-sims, kind="stable")[:n]
        return [self.kge.relation_ids[i] for i in top]

    def _kge_label(self, relation: str) -> str | None:
        row = self.kge.relation_row(relation) if self.kge is not None and hasattr(self.kge, "relation_row") else None
        if row is None:
            return relation if self.kge is not None and relation in getattr(self.kge, "relation_ids", ()) else None
        return self.kge.relation_ids[row]

    def global_prediction(
        self, eid: str, relations: Sequence[str], known: set[str]
    ) -> tuple[tuple[str, str, str], float] | None:
        """The best (e, r, tail) over ``relations`` by ``score_tails`` (tail ∉ ``known`` ∪ {e})."""
        best: tuple[tuple[str, str, str], float] | None = None
        ids = self.kge.entity_ids
        rows = [i for i in (self.kge.entity_row(x) for x in {*known, eid}) if i is not None]
        for r in relations:
            sc = self.kge.score_tails(eid, r)
            if sc is None:
                continue
            sc = np.asarray(sc, dtype=np.float64).copy()
            sc[rows] = -np.inf
            i = int(np.argmax(sc))
            if np.isfinite(sc[i]) and (best is None or sc[i] > best[1]):
                best = ((eid, r, ids[i]), float(sc[i]))
        return best

    # ------------------------------------------------------------------ q^KG
    def enhance(self, query: str) -> EnhancedQuery:
        """E_t and q^KG for ``query`` (Algorithm 1 with the choices of the module docstring)."""
        eq = EnhancedQuery(query=query)
        linked = self.link(query)
        if not linked:
            eq.reasons.append("no query entity linked to the KG")
            eq.text = query
            return eq
        if self.kge is None:
            eq.reasons.append("no KGE: local neighbours unranked, no global prediction")
        qvec = np.asarray(self.index.embed_query(query), dtype=np.float32)
        seen: set[str] = set()
        for _surface, eid in linked:
            name, desc = self._describe(eid)
            eq.entities.append(EnhancedEntity(eid, name, desc, "query"))
            seen.add(eid)
        g = self.index.graph
        for _surface, eid in linked:
            r_loc, local = self.local(eid, qvec)
            eq.local_relations[eid] = r_loc
            for (h, r, t), score in local:
                other = t if h == eid else h
                if other in seen:
                    continue
                seen.add(other)
                name, desc = self._describe(other)
                eq.entities.append(EnhancedEntity(other, name, desc, "local", eid, (h, r, t), score))
            pred = self.predict_relations(eid, qvec)
            eq.predicted_relations[eid] = pred
            if not pred:
                continue
            loc_label = self._kge_label(r_loc) if r_loc is not None else None
            if loc_label is not None and loc_label in pred:
                continue
            known = {t for _, _, t in self._edges(eid)} | {h for h, _, _ in self._edges(eid)}
            hit = self.global_prediction(eid, pred, known)
            if hit is None:
                continue
            (h, r, t), score = hit
            if t in seen or t not in g:
                continue
            seen.add(t)
            name, desc = self._describe(t)
            eq.entities.append(EnhancedEntity(t, name, desc, "global", eid, (h, r, t), score))
        eq.text = self.format(query, eq.entities)
        return eq

    def format(self, query: str, entities: Sequence[EnhancedEntity]) -> str:
        """q^KG text: the query, then one ``name: description`` line per entity (with the
        verbalised triple that selected a local/global entity)."""
        if not entities:
            return query
        g = self.index.graph
        lines = []
        for e in entities:
            line = f"{e.name}: {e.description}" if e.description else e.name
            if e.triple is not None:
                h, r, t = e.triple
                line += f" ({g.name_of(h)} {relation_text(r)} {g.name_of(t) if t in g else t})"
            lines.append(line)
        return query + "\nRelated entities:\n" + "\n".join(lines)
