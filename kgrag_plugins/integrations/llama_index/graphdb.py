"""LlamaIndex ``PropertyGraphStore`` s as the database of a :class:`PropertyGraphKG`.

:class:`CypherAdapter` wraps a Kùzu, FalkorDB or Neo4j property graph store and exposes what
:class:`~kgrag_plugins.index.graphdb.kg.PropertyGraphKG` needs: the Cypher dialect and
``run(query, params)``, which is the store's ``structured_query`` (the only store method the
graph backend calls; ``get`` / ``get_triplets`` keep working on what it loads). Factories:

* :func:`kuzu_kg` — Kùzu embedded in a directory (``KuzuPropertyGraphStore``, generic schema);
* :func:`falkordb_kg` — a FalkorDB server (``FalkorDBPropertyGraphStore``);
* :func:`neo4j_kg` — a Neo4j server (``Neo4jPropertyGraphStore``; needs
  ``llama-index-graph-stores-neo4j``, not installed by the ``graphdb`` extra).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from ..._secrets import mask_url, register_secret, split_userinfo
from ...index.graphdb.dialects import DIALECTS
from ...index.graphdb.kg import PropertyGraphKG

__all__ = ["CypherAdapter", "RedisRestarts", "dialect_of", "falkordb_kg", "kuzu_kg", "neo4j_kg"]


def dialect_of(store: Any) -> str:
    """``"kuzu"`` / ``"falkordb"`` / ``"neo4j"`` from the store's class name."""
    name = type(store).__name__.lower()
    for d in DIALECTS:
        if d in name:
            return d
    raise ValueError(
        f"{type(store).__name__} is not a supported property graph store; use KuzuPropertyGraphStore, "
        "FalkorDBPropertyGraphStore or Neo4jPropertyGraphStore (or pass dialect=)"
    )


class CypherAdapter:
    """A LlamaIndex ``PropertyGraphStore`` as a :class:`~kgrag_plugins.index.graphdb.kg.CypherStore`.

    Rows come back unsanitised: the stores' default ``value_sanitize`` drops lists of 128+
    items (e.g. a triple with many source passages), so construct the store with
    ``sanitize_query_output=False`` (the factories do) or the adapter refuses it. ``url``: the
    server's address, named by the error raised when the server is lost (the factories set it);
    kept with any ``user:password@`` masked (the store holds the real one).
    """

    def __init__(
        self, store: Any, dialect: str | None = None, url: str | None = None, restarts: "RedisRestarts | None" = None
    ) -> None:
        if getattr(store, "sanitize_query_output", False):
            raise ValueError("construct the property graph store with sanitize_query_output=False")
        self.store = store
        self.dialect = dialect or dialect_of(store)
        self.url = mask_url(url) if url else url
        self._restarts = restarts

    @property
    def server_epoch(self) -> int | None:
        """Server restarts seen so far (None: not watched); ``PropertyGraphKG`` re-checks its graph
        when this changes."""
        return self._restarts.count if self._restarts is not None else None

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return list(self.store.structured_query(query, param_map=params or {}) or [])


class RedisRestarts:
    """A redis-py ``redis_connect_func``: every new connection reads the server's ``run_id`` (new
    at each server start) and counts the changes, so a FalkorDB restarted between two calls is
    noticed. One ``INFO server`` per connection, none per statement."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, conn: Any) -> None:
        conn.on_connect()
        conn.send_command("INFO", "server")
        info = conn.read_response()
        m = re.search(r"run_id:(\w+)", info.decode(errors="replace") if isinstance(info, bytes) else str(info))
        with self._lock:
            if m and self.run_id is not None and m.group(1) != self.run_id:
                self.count += 1
            self.run_id = m.group(1) if m else self.run_id


def kuzu_kg(path: str | Path) -> PropertyGraphKG:
    """A :class:`PropertyGraphKG` in a Kùzu database at ``path`` (created when missing)."""
    try:
        import kuzu
        from llama_index.graph_stores.kuzu import KuzuPropertyGraphStore
    except ImportError as e:
        raise ImportError(f"{e}; Kùzu needs the graphdb extra: pip install 'kgrag-plugins[graphdb]'") from e

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    store = KuzuPropertyGraphStore(
        kuzu.Database(str(p)), has_structured_schema=False, use_vector_index=False, sanitize_query_output=False
    )
    return PropertyGraphKG(CypherAdapter(store))


def falkordb_kg(url: str, graph: str = "kgrag", *, timeout: float | None = 600.0) -> PropertyGraphKG:
    """A :class:`PropertyGraphKG` in graph ``graph`` of the FalkorDB server at ``url``
    (``redis://host:port``). ``timeout``: seconds a statement may take before the client gives
    up (``None``: wait forever); redis-py 8's own default of 5 s fails the fetch of a large
    neighbourhood (docs/graphdb.md). A lost server raises ``GraphDBServerError``; a restart is
    noticed on the next call (docs/reliability.md §9)."""
    try:
        from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore
    except ImportError as e:
        raise ImportError(f"{e}; FalkorDB needs the graphdb extra: pip install 'kgrag-plugins[graphdb]'") from e

    split_userinfo(url)  # registers the URL's password: redact() masks it in our messages
    restarts = RedisRestarts()
    store = FalkorDBPropertyGraphStore(
        url, database=graph, refresh_schema=False, sanitize_query_output=False, socket_timeout=timeout,
        redis_connect_func=restarts,
    )  # fmt: skip
    return PropertyGraphKG(CypherAdapter(store, url=url, restarts=restarts))


def neo4j_kg(url: str, username: str, password: str, database: str = "neo4j") -> PropertyGraphKG:
    """A :class:`PropertyGraphKG` in a Neo4j server (``bolt://host:7687``)."""
    try:
        from llama_index.graph_stores.neo4j import Neo4jPropertyGraphStore
    except ImportError as e:
        raise ImportError(f"{e}; Neo4j needs: pip install llama-index-graph-stores-neo4j") from e

    register_secret(password)  # redact() masks it in our messages
    store = Neo4jPropertyGraphStore(
        username=username, password=password, url=url, database=database, refresh_schema=False,
        sanitize_query_output=False,
    )  # fmt: skip
    return PropertyGraphKG(CypherAdapter(store, url=url))
