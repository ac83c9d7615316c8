"""``UnknownEntityError``: an entity id that is not in the graph, with close-id hints.

The graph it is raised for is anything with ``len``, ``entity_ids`` and ``name_of`` (an index's
``KnowledgeGraph``, a graph database's entity table): this module needs no graph class.
"""

from __future__ import annotations

from typing import Protocol, Sequence

#: Close-id hints of :class:`UnknownEntityError` are computed on graphs up to this many entities.
HINT_MAX_ENTITIES = 200_000
#: At most this many ids are compared for a hint (beyond: those sharing the first character).
HINT_MAX_CANDIDATES = 20_000


class EntityTable(Protocol):
    """What a hint reads of the graph: its size, entity ids and names."""

    def __len__(self) -> int: ...

    @property
    def entity_ids(self) -> Sequence[str]: ...

    def name_of(self, entity_id: str) -> str: ...


class UnknownEntityError(KeyError):
    """An entity id that is not in the graph.

    Raised with ``entity_id=`` and ``graph=``, its message ends with up to 3 close ids (difflib,
    case-insensitive), computed lazily when the message is read, so code that catches the error
    pays nothing. The work is bounded: no hint on graphs over :data:`HINT_MAX_ENTITIES`
    entities, and at most :data:`HINT_MAX_CANDIDATES` ids (those sharing the first character
    on larger graphs) are compared.
    """

    def __init__(self, *args: object, entity_id: str | None = None, graph: "EntityTable | None" = None) -> None:
        super().__init__(*args)
        self.entity_id = entity_id
        self._graph = graph
        self._close: list[str] | None = None
        self._compared = 0

    def close_ids(self, n: int = 3) -> list[str]:
        """Up to ``n`` (at most 3 are kept) entity ids similar to the unknown one, best first
        (empty when none is similar or the graph is too large to search)."""
        g, key = self._graph, self.entity_id
        if self._close is None:
            self._close = []
            if g is not None and isinstance(key, str) and key.strip() and len(g) <= HINT_MAX_ENTITIES:
                import difflib

                q = key.strip().casefold()
                ids = g.entity_ids
                if len(ids) > HINT_MAX_CANDIDATES:
                    ids = [e for e in ids if e[:1].casefold() == q[:1]][:HINT_MAX_CANDIDATES]
                folded: dict[str, str] = {}
                for e in ids:
                    folded.setdefault(e.casefold(), e)
                self._compared = len(ids)
                self._close = [folded[m] for m in difflib.get_close_matches(q, list(folded), n=3, cutoff=0.6)]
        return self._close[:n]

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        msg = str(self.args[0]) if self.args else "unknown entity"
        g = self._graph
        if g is None:
            return msg
        if len(g) > HINT_MAX_ENTITIES:
            return f"{msg} (graph of {len(g)} entities: no close-id search; check the id's spelling)"
        close = self.close_ids()
        if not close and not self._compared:  # blank or non-string id: nothing to compare
            return msg
        if not close:
            scope = f"the graph's {len(g)}" if self._compared == len(g) else f"{self._compared} of the graph's {len(g)}"
            return f"{msg}; no similar id among {scope} entities"
        listed = ", ".join(repr(e) if g.name_of(e) == e else f"{e!r} ({g.name_of(e)})" for e in close)
        return f"{msg}; did you mean {listed}?"
