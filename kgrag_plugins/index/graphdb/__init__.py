"""Knowledge graphs in graph databases behind LlamaIndex's ``PropertyGraphStore`` (issue 19).

:class:`PropertyGraphKG` loads a :class:`~kgrag_plugins.index.graph.KnowledgeGraph` into Kùzu,
FalkorDB or Neo4j and answers neighbourhood queries there; :class:`DBActivationRetriever` and
:class:`DBFRAGRetriever` run the graph methods on the subgraph it fetches per query. The store
adapter lives in the LlamaIndex adapter module ``integrations/<LlamaIndex>/graphdb.py``. Nothing here imports a
framework or a database driver until it is used. See docs/graphdb.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CypherStore", "DBActivationRetriever", "DBFRAGRetriever", "FalkorDBServer", "PropertyGraphKG"]


def __getattr__(name: str) -> Any:
    if name in ("CypherStore", "PropertyGraphKG"):
        from . import kg

        return getattr(kg, name)
    if name in ("DBActivationRetriever", "DBFRAGRetriever"):
        from . import retrieve

        return getattr(retrieve, name)
    if name == "FalkorDBServer":
        from .server import FalkorDBServer

        return FalkorDBServer
    raise AttributeError(name)
