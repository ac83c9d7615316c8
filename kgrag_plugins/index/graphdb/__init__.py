"""Knowledge graphs in graph databases behind LlamaIndex's ``PropertyGraphStore`` (issue 19).

:class:`PropertyGraphKG` loads a :class:`~kgrag_plugins.index.graph.KnowledgeGraph` into Kùzu,
FalkorDB or Neo4j and answers neighbourhood queries there; :class:`DBActivationRetriever` and
:class:`DBFRAGRetriever` run the graph methods on the subgraph it fetches per query;
:class:`PropertyGraphParseKG` keeps KG-Translator's ParseKG in the same database, which
:class:`DBTranslatorRetriever` reads. The store
adapter lives in the LlamaIndex adapter module ``integrations/<LlamaIndex>/graphdb.py``. Nothing here imports a
framework or a database driver until it is used. See docs/graphdb.md.
"""

from __future__ import annotations

from ..._lazy import lazy_getattr

__all__ = [
    "CypherStore",
    "DBActivationRetriever",
    "DBFRAGRetriever",
    "DBTranslatorRetriever",
    "FalkorDBServer",
    "PropertyGraphKG",
    "PropertyGraphParseKG",
]


__getattr__ = lazy_getattr(
    __name__,
    {
        "CypherStore": ".kg",
        "PropertyGraphKG": ".kg",
        "DBActivationRetriever": ".retrieve",
        "DBFRAGRetriever": ".retrieve",
        "DBTranslatorRetriever": ".retrieve",
        "PropertyGraphParseKG": ".parsekg",
        "FalkorDBServer": ".server",
    },
)
