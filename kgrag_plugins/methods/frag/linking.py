"""FRAG's topic-entity linking (docs/methods.md §2(a) step 1): the entities a question is about.

MetaQA-style questions mark the topic in brackets (``[Ginger Rogers]``); other questions are
linked by NER spans and name/alias n-grams (:func:`~kgrag_plugins.index.builders.linking.link_question`),
then, when nothing matched, by the nearest entity-name vector of a question span. One linker
serves the in-memory :class:`~.retriever.FRAGRetriever` and the graph-database one
(:class:`~kgrag_plugins.methods.graphdb.DBFRAGRetriever`, whose ``graph`` is the
database's entity table).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .hop_classifier import TOPIC_MARK

__all__ = ["EMBED_LINK_MAX_ENTITIES", "TopicLinker"]

#: Largest graph whose entity vectors are computed on the fly for embedding-based linking.
EMBED_LINK_MAX_ENTITIES = 5000
_CAPS = re.compile(r"[A-Z][\w'.-]*(?:\s+(?:of |the |de )?[A-Z][\w'.-]*)*")


class TopicLinker:
    """Topic entities of questions over ``graph`` (entity ids and names) with ``names``
    (its :class:`~kgrag_plugins.index.builders.linking.NameIndex`); ``index`` gives the embedder
    and entity vectors (rows aligned with ``graph``); ``threshold`` is the cosine an embedding
    match needs (FRAG's ``link_threshold``)."""

    def __init__(self, index: Any, graph: Any, names: Any, threshold: float = 0.85) -> None:
        self.index, self.graph, self.names, self.threshold = index, graph, names, float(threshold)
        self._ids = graph.entity_ids

    def link(self, question: str) -> tuple[list[str], str, list[str]]:
        """``(entity ids, how, unknown bracketed names)``; ``how`` is ``"bracket"`` (MetaQA-style
        ``[name]``), ``"name"`` (NER + name/alias n-grams), ``"embedding"`` (nearest entity name of
        a question span) or ``"none"``."""
        from ...index.builders.linking import link_question, name_key

        unknown: list[str] = []
        spans = TOPIC_MARK.findall(question)
        if spans:  # the user named the topic: never link other words of the question instead
            ids = []
            for s in spans:
                eid = s.strip() if s.strip() in self.graph else self.names.get(name_key(s))
                if eid is None:
                    eid = next(iter(self.embedding_match([s.strip()])), None)
                if eid is None:
                    unknown.append(s)
                else:
                    ids.append(eid)
            return list(dict.fromkeys(ids)), ("bracket" if ids else "none"), unknown
        ids = link_question(self.graph, question, names=self.names)
        if ids:
            return ids, "name", unknown
        ids = self.embedding_link(question)
        return ids, ("embedding" if ids else "none"), unknown

    def embedding_match(self, spans: list[str]) -> list[str]:
        """Entities whose name vector is nearest to each span (cos ≥ ``threshold``). Entity
        vectors are used when already computed, or computed now for graphs of at most
        ``EMBED_LINK_MAX_ENTITIES`` entities (larger graphs: ``index.entity_vectors`` once)."""
        spans = [s for s in spans if len(s) > 2]
        if not spans or not (self.index.has_entity_vectors or self.graph.num_entities <= EMBED_LINK_MAX_ENTITIES):
            return []
        vecs = self.index.entity_vectors
        if vecs is None or not len(vecs):
            return []
        q = np.asarray(self.index.embedder.embed(spans, progress=False), dtype=np.float32)
        sims = q @ vecs.T
        best = sims.argmax(axis=1)
        return list(dict.fromkeys(self._ids[int(b)] for i, b in enumerate(best) if sims[i, b] >= self.threshold))

    def embedding_link(self, question: str) -> list[str]:
        """:meth:`embedding_match` over the question's NER spans and capitalised phrases."""
        from ...index.builders.nlp import load_spacy

        ents = [e.text for e in load_spacy(False)(question).ents]
        caps = _CAPS.findall(question[1:])
        return self.embedding_match(list(dict.fromkeys(ents + caps)))
