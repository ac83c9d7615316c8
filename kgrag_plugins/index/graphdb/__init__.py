"""Knowledge graphs in graph databases behind LlamaIndex's ``PropertyGraphStore``.

:class:`PropertyGraphKG` loads a :class:`~kgrag_plugins.index.graph.KnowledgeGraph` into Kùzu,
FalkorDB or Neo4j and answers neighbourhood queries there; :class:`PropertyGraphParseKG` keeps
KG-Translator's ParseKG in the same database. The retrievers that run the graph methods on what
they fetch (``DBActivationRetriever``, ``DBFRAGRetriever``, ``DBTranslatorRetriever``) are method
variants and live above the storage, in :mod:`kgrag_plugins.methods.graphdb`. The store
adapter lives in the LlamaIndex adapter module ``integrations/<LlamaIndex>/graphdb.py``. Nothing here imports a
framework or a database driver until it is used. See docs/graphdb.md.
"""

from __future__ import annotations

from ..._lazy import lazy_getattr

__all__ = [
    "CypherStore",
    "FalkorDBServer",
    "PropertyGraphKG",
    "PropertyGraphParseKG",
]


__getattr__ = lazy_getattr(
    __name__,
    {
        "CypherStore": ".kg",
        "PropertyGraphKG": ".kg",
        "PropertyGraphParseKG": ".parsekg",
        "FalkorDBServer": ".server",
    },
)
