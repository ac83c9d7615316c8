"""PropertyGraphKG: a :class:`~kgrag_plugins.index.graph.KnowledgeGraph` kept in a graph database.

The graph lives in a LlamaIndex property graph store (Kùzu embedded, FalkorDB or Neo4j server)
reached through a :class:`CypherStore` (the adapter is the LlamaIndex integration's
``graphdb.py``; this module imports no framework or driver). What runs where (docs/graphdb.md):

* **pushed down**: bulk load (batched ``UNWIND``), neighbourhood expansion (one query per hop
  over the whole frontier: neighbours, and co-mentioned entities for activation), entity and
  link lookups by id;
* **fetched**: the entity table (ids, names, aliases, descriptions: what linking and entity
  vectors need) once, and per query the seeds' neighbourhood as a small in-memory
  :class:`KnowledgeGraph` (:meth:`PropertyGraphKG.subgraph_for`) on which PageRank, spreading
  activation and FRAG's path search run unchanged.

The fetched subgraph keeps the global order: entity rows, triple indices and passage rows are
stored in the database (``kg_row``, ``kg_ti``, ``kg_prow``) and the subgraph lists them in that
order with the full relation vocabulary, so every tie-break of the in-memory methods (stable
sorts over rows and triple indices) is the same as on the whole graph.

A server lost mid-call (killed, restarted) raises one :class:`~..errors.GraphDBServerError`
naming its URL; the next call reconnects (the driver's pool) after first checking that the
graph is still there (a server without persistence comes back empty: ``ValueError`` saying to
load it again, instead of empty answers). A store with a ``server_epoch`` (the FalkorDB adapter:
a count of server restarts seen on new connections) gets the same check after a restart that
no call saw. The relation-vocabulary marker is written last by
:meth:`PropertyGraphKG.load` and deleted first when clearing, so a load cut short reads as no
graph. docs/reliability.md §9.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..._secrets import redact
from ..errors import GraphDBServerError
from ..graph import Direction, KnowledgeGraph, UnknownEntityError
from .dialects import Dialect, dialect, quote

log = logging.getLogger("kgrag_plugins.index.graphdb")

#: Rows per ``UNWIND`` batch when loading.
BATCH = 5000
#: Rows per Kùzu ``COPY ... FROM (UNWIND ...)`` statement (relationships): each statement costs
#: more as the table grows, so fewer, larger ones (1.36M triples: 245 s in 5,000-row statements,
#: 53 s in 100,000-row ones; docs/graphdb.md).
COPY_BATCH = 100_000
#: Ids per read query (``UNWIND $ids``).
READ_BATCH = 20000
#: Heads per induced-edge query (each statement also carries the bucketed rows of the whole
#: fetched set, so fewer, larger statements).
INNER_BATCH = 200_000
#: Relationship types per ``UNION ALL`` statement of FalkorDB's typed induced-edge fetch.
TYPES_PER_STATEMENT = 200
#: Driver exception class names (anywhere in the cause chain) that mean the server is gone:
#: redis-py's ``ConnectionError`` / ``TimeoutError``, Neo4j's ``ServiceUnavailable`` /
#: ``SessionExpired`` (builtin ``ConnectionError`` subclasses count too).
_LOST_SERVER = frozenset({"ConnectionError", "TimeoutError", "ServiceUnavailable", "SessionExpired"})
_SERVER_NAMES = {"falkordb": "FalkorDB", "neo4j": "Neo4j", "kuzu": "Kùzu"}


def _no_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` masked (error messages name the server, not its password)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])) if "@" in parts.netloc else url


def server_error(exc: BaseException, dialect: str, url: str | None) -> GraphDBServerError | None:
    """A one-line :class:`GraphDBServerError` when ``exc`` (or what caused it) says the server
    of ``url`` is unreachable or went away, else None."""
    chain, seen = [], set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    if not any(isinstance(x, ConnectionError) or {c.__name__ for c in type(x).__mro__} & _LOST_SERVER for x in chain):
        return None
    what = " ".join(redact(exc).split())[:200] or type(exc).__name__  # a driver's message may hold a URL
    name = _SERVER_NAMES.get(dialect, dialect)
    where = f"the {name} server at {_no_userinfo(url)}" if url else f"the {name} server"
    return GraphDBServerError(
        f"lost {where} ({type(exc).__name__}: {what}); start it again at the same address and retry: the next "
        "call reconnects by itself (a server without persistence comes back empty: load the graph again)"
    )


@runtime_checkable
class CypherStore(Protocol):
    """What :class:`PropertyGraphKG` needs from a graph database: a dialect name and a way to
    run one parameterised Cypher statement returning rows as dicts (a LlamaIndex
    ``PropertyGraphStore.structured_query``, wrapped by the adapter)."""

    dialect: str

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


class PropertyGraphKG:
    """A knowledge graph in a database: load it, expand neighbourhoods there, fetch subgraphs.

    Args:
        store: a :class:`CypherStore` (e.g. ``CypherAdapter(KuzuPropertyGraphStore(...))`` from
            the LlamaIndex adapter, or its ``kuzu_kg`` / ``falkordb_kg`` factories).
    """

    def __init__(self, store: CypherStore) -> None:
        self.store = store
        self.dialect: Dialect = dialect(store.dialect)
        self._relations: list[str] | None = None
        self._table: KnowledgeGraph | None = None
        #: Whole-graph (out, in) degrees by entity row, read with the entity table (None: not stored).
        self._degrees: tuple[np.ndarray, np.ndarray] | None = None
        self._row_ids: list[str] | None = None  # entity ids by row, for reads by row
        #: Statements sent and rows received (for the benchmark and the tests).
        self.stats = {"queries": 0, "rows": 0}
        #: Set when the server was lost: the next read first checks the graph is still there.
        self._lost = False
        self._epoch = getattr(store, "server_epoch", None)
        #: Called when the server is lost (objects caching reads of this database drop them).
        self.on_server_lost: list[Any] = []

    # ------------------------------------------------------------------ plumbing
    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._lost:
            self._check_still_loaded()
        try:
            rows = self.store.run(query, params or {})
        except Exception as e:
            err = server_error(e, self.dialect.name, getattr(self.store, "url", None))
            if err is None:
                raise
            self._server_lost()
            raise err from e
        if getattr(self.store, "server_epoch", None) != self._epoch:  # restarted since the last call
            self._server_lost()
            self._check_still_loaded()
        self.stats["queries"] += 1
        self.stats["rows"] += len(rows)
        return rows

    def _server_lost(self) -> None:
        """Forget what was read from the server (and make the next call check the graph)."""
        self._lost, self._relations, self._table, self._degrees, self._row_ids = True, None, None, None, None
        self._epoch = getattr(self.store, "server_epoch", None)
        for reset in self.on_server_lost:
            reset()

    def _check_still_loaded(self) -> None:
        """After a lost server: the graph must still be there (re-read its relation vocabulary)."""
        self._lost = False
        rows = self._run(self.dialect.get_meta, {"key": "relations"})
        if not rows:
            self._lost = True
            url = getattr(self.store, "url", None)
            where = f" at {_no_userinfo(url)}" if url else ""
            raise ValueError(
                f"the {self.dialect.name} database{where} holds no kgrag graph any more: its server was "
                "restarted without its data (no persistence) or a load was cut short; load the graph again with "
                "PropertyGraphKG.load"
            )

    def _read_entities(self, query: str, ids: Sequence[str], rows: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """A :meth:`Dialect.by_entity` read of ``ids``: by id list, or (a ``row_keyed`` dialect) by
        their bucketed entity rows in one statement (ids not in the graph match nothing; ``rows``:
        their entity rows when the caller has them)."""
        if not self.dialect.row_keyed:
            return self._read(query, ids)
        if rows is None:
            table = self.entity_table()
            rows = [table.index_of(e) for e in dict.fromkeys(ids) if e in table]
        return self._run(query, _buckets(rows)) if len(rows) else []

    def _read(self, query: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(0, len(ids), READ_BATCH):
            out.extend(self._run(query, {"ids": list(ids[i : i + READ_BATCH])}))
        return out

    def _bulk(self, query: str, rows: list[dict[str, Any]], batch: int) -> None:
        if query.startswith("COPY "):
            batch = max(batch, COPY_BATCH)
        for i in range(0, len(rows), batch):
            self._run(query, {"rows": rows[i : i + batch]})

    def setup(self, statements: Sequence[str] | None = None) -> None:
        """Create the ``kg_*`` columns / indexes, or run the given schema ``statements``
        (idempotent; "already exists" is ignored)."""
        for stmt in self.dialect.setup if statements is None else statements:
            try:
                self._run(stmt)
            except Exception as e:  # FalkorDB has no IF NOT EXISTS for indexes
                if "already" not in str(e).lower():
                    raise

    # ------------------------------------------------------------------ load
    def load(self, graph: KnowledgeGraph, *, batch: int = BATCH, clear: bool = True) -> dict[str, float]:
        """Write ``graph`` (entities, triples with all their sources, passage links) into the
        database with batched ``UNWIND`` statements; returns counts and seconds."""
        t0 = time.perf_counter()
        self._lost = False  # (re)loading is what a lost graph needs
        self.setup()
        if clear:
            for stmt in self.dialect.clear:
                self._run(stmt)
        d = self.dialect
        kout = np.diff(graph.adjacency("out").indptr).tolist()
        kin = np.diff(graph.adjacency("in").indptr).tolist()
        orel = _out_relations(graph) if d.typed_fetch else None
        ents = [
            {
                "id": e.id,
                "name": e.name,
                "label": e.type or "entity",
                "row": i,
                "dsc": e.description,
                "aliases": list(e.aliases),
                "kout": kout[i],
                "kin": kin[i],
                **({"orel": orel[i]} if orel is not None else {}),
            }
            for i, e in enumerate(graph.entities())
        ]
        by_label: dict[str, list[dict[str, Any]]] = {}
        for x in ents:  # FalkorDB / Neo4j: the type is a node label too (the stores' schema)
            by_label.setdefault(x["label"] if d.triples_per_relation else "", []).append(x)
        for label, rows in by_label.items():
            self._bulk(d.create_entities.replace("{label}", quote(label)), rows, batch)
        t1 = time.perf_counter()
        h, r, t = graph.triple_arrays()
        ids, rels = graph.entity_ids, graph.relations
        sources = graph.triple_sources()
        by_rel: dict[int, list[dict[str, Any]]] = {}
        for ti in range(len(h)):
            src = sources.get(ti, [])
            row = {
                "h": ids[h[ti]],
                "t": ids[t[ti]],
                "rel": rels[r[ti]],
                "ti": ti,
                "src": src,
                "src0": src[0] if src else None,
            }
            by_rel.setdefault(int(r[ti]) if d.triples_per_relation else 0, []).append(row)
        for ri, rows in by_rel.items():
            self._bulk(d.create_triples.replace("{rel}", quote(rels[ri])), rows, batch)
        t2 = time.perf_counter()
        pids = graph.passage_ids
        self._bulk(d.create_chunks, [{"id": p, "row": i} for i, p in enumerate(pids)], batch)
        links = graph.link_matrix().tocoo()
        mentions = [{"p": pids[int(c)], "e": ids[int(e)]} for e, c in zip(links.row, links.col)]
        self._bulk(d.create_mentions, mentions, batch)
        self._run(d.set_meta, {"key": "meta", "value": json.dumps(graph.meta, ensure_ascii=False)})
        # the relation vocabulary last: its presence says the load finished (``relations``)
        self._run(d.set_meta, {"key": "relations", "value": json.dumps(rels, ensure_ascii=False)})
        self._relations, self._table, self._degrees, self._row_ids = list(rels), None, None, None
        t3 = time.perf_counter()
        out = {
            "entities": len(ents),
            "triples": int(len(h)),
            "links": len(mentions),
            "entities_s": t1 - t0,
            "triples_s": t2 - t1,
            "links_s": t3 - t2,
            "total_s": t3 - t0,
        }
        log.info("loaded %s into %s: %s", graph, d.name, out)
        return out

    # ------------------------------------------------------------------ reads
    @property
    def relations(self) -> list[str]:
        """The relation vocabulary in the order of the loaded graph (``KnowledgeGraph.relations``)."""
        if self._relations is None:
            rows = self._run(self.dialect.get_meta, {"key": "relations"})
            if not rows:
                raise ValueError(
                    f"no kgrag graph in this {self.dialect.name} database: load one with PropertyGraphKG.load"
                )
            self._relations = list(json.loads(rows[0]["value"]))
        return list(self._relations)

    def entity_table(self) -> KnowledgeGraph:
        """Every entity (id, name, aliases, description, type; in row order) and the relation
        vocabulary as a triple-less :class:`KnowledgeGraph`: what question linking and entity
        vectors read. Fetched once and cached."""
        if self._table is None:
            rows = sorted(self._run(self.dialect.all_entities()), key=lambda x: x["row"])
            table = _graph(rows, self.relations, [], [])
            if [x["row"] for x in rows] != list(range(len(rows))):
                raise ValueError(
                    f"the {self.dialect.name} database's entity rows (kg_row) are not 0..n-1: load the graph "
                    "again with PropertyGraphKG.load (clear=True)"
                )
            kout = np.array([-1 if x.get("kout") is None else x["kout"] for x in rows], dtype=np.int64)
            kin = np.array([-1 if x.get("kin") is None else x["kin"] for x in rows], dtype=np.int64)
            self._degrees = (kout, kin) if len(rows) and (kout >= 0).all() and (kin >= 0).all() else None
            self._table = table
        return self._table

    def entities_with_triples(self, n: int = 1) -> list[str]:
        """Up to ``n`` entity ids that head a triple (a non-empty subgraph to run a method on)."""
        return [x["h"] for x in self._run(self.dialect.any_triple_heads(n))]

    def degrees(self, entity_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Out- and in-degrees (triples, parallel ones counted) of ``entity_ids`` in the whole
        graph, in that order: what a fetched part needs for the whole graph's walk probabilities.
        Read from the ``kg_out`` / ``kg_in`` stored at load (counted in the database for a graph
        loaded without them)."""
        table = self.entity_table()
        if self._degrees is not None:  # read with the entity table
            rows = np.array([table.index_of(e) for e in entity_ids], dtype=np.int64)
            return self._degrees[0][rows], self._degrees[1][rows]
        pos = {e: i for i, e in enumerate(entity_ids)}
        out, inn = np.full(len(pos), -1, dtype=np.int64), np.full(len(pos), -1, dtype=np.int64)
        for x in self._read_entities(self.dialect.stored_degrees(), list(pos)):
            out[pos[x["e"]]], inn[pos[x["e"]]] = (-1 if v is None else int(v) for v in (x["o"], x["i"]))
        if (out < 0).any() or (inn < 0).any():
            for deg, direction in ((out, "out"), (inn, "in")):
                deg[:] = 0
                for x in self._read_entities(self.dialect.degrees(direction), list(pos)):
                    deg[pos[x["e"]]] = int(x["n"])
        return out, inn

    def neighbour_counts(self, entity_ids: Sequence[str]) -> np.ndarray:
        """Distinct entities each of ``entity_ids`` shares a triple with in the whole graph (either
        direction, parallel triples once): its entity-entity degree in activation's graph."""
        pos = {e: i for i, e in enumerate(entity_ids)}
        out = np.zeros(len(pos), dtype=np.int64)
        for x in self._read_entities(self.dialect.neighbour_counts(), list(pos)):
            out[pos[x["e"]]] = int(x["n"])
        return out

    def passage_degrees(self, passage_ids: Sequence[str]) -> np.ndarray:
        """How many entities each of ``passage_ids`` is linked to in the whole graph."""
        pos = {p: i for i, p in enumerate(passage_ids)}
        out = np.zeros(len(pos), dtype=np.int64)
        for x in self._read(self.dialect.chunk_degrees(), list(pos)):
            out[pos[x["p"]]] = int(x["n"])
        return out

    def passage_entities(self, passage_ids: Sequence[str]) -> list[dict[str, Any]]:
        """``{"e": entity id, "p": passage id, "prow": passage row}`` per link of the passages."""
        return self._read(self.dialect.chunk_entities(), list(passage_ids))

    def num_triples(self) -> int:
        return int(self._run(self.dialect.count_triples())[0]["n"])

    def neighbors(self, entity_id: str, direction: Direction = "both") -> list[tuple[str, str, str]]:
        """Like :meth:`KnowledgeGraph.neighbors`: ``(neighbour id, relation, "out"|"in")`` in
        triple order, answered by the database."""
        self._check([entity_id])
        out: list[tuple[int, str, str, str]] = []
        d = self.dialect
        if direction in ("out", "both"):
            out += [(x["ti"], x["t"], x["rel"], "out") for x in self._read_entities(d.out_edges(), [entity_id])]
        if direction in ("in", "both"):
            out += [(x["ti"], x["h"], x["rel"], "in") for x in self._read_entities(d.in_edges(), [entity_id])]
        out.sort(key=lambda x: x[0])
        return [(nb, rel, d) for _, nb, rel, d in out]

    def k_hop(self, seeds: Iterable[str], k: int, direction: Direction = "both") -> dict[str, int]:
        """Like :meth:`KnowledgeGraph.k_hop` (entity id -> hop distance), expanded in the database
        one hop at a time (one query per hop and direction for the whole frontier)."""
        dist = {s: 0 for s in dict.fromkeys(seeds)}
        self._check(list(dist))
        frontier = list(dist)
        for hop in range(1, k + 1):
            if not frontier:
                break
            nxt: list[str] = []
            for e in self._expand(frontier, direction)[0]:
                if e not in dist:
                    dist[e] = hop
                    nxt.append(e)
            frontier = nxt
        return dist

    def walk_edges(self, rows: Sequence[int], inverse: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The triples of the entities at ``rows`` (entity-table rows; their in-triples too when
        ``inverse``) as ``(owner, other)``: per triple the index into ``rows`` of the entity and
        the row of the triple's other end, one per triple (parallel ones repeated): the edges
        FRAG's bounded walk pushes along (``methods.frag.local_walk.push_walk``)."""
        rows = [int(r) for r in rows]
        pos = {r: i for i, r in enumerate(rows)}
        ids = [] if self.dialect.row_keyed else self.entity_ids_at(rows)
        query = self.dialect.walk_edges_both() if inverse else self.dialect.walk_edges("out")
        got = [(pos[int(x["a"])], int(x["b"]), int(x["c"])) for x in self._read_entities(query, ids, rows)]
        owner, other, count = np.asarray(got, dtype=np.int64).reshape(-1, 3).T
        return np.repeat(owner, count), np.repeat(other, count)

    def walk_degrees(self, rows: Sequence[int], inverse: bool = True) -> np.ndarray:
        """Whole-graph walk degrees of the entities at ``rows``: out + in triples (out only when
        not ``inverse``), parallel ones counted, as in-memory FRAG's ``PathGraph``."""
        self.entity_table()
        if self._degrees is not None:  # stored at load, read with the entity table
            idx = np.asarray(rows, dtype=np.int64)
            out, inn = self._degrees[0][idx], self._degrees[1][idx]
        else:
            out, inn = self.degrees(self.entity_ids_at(rows))
        return (out + inn if inverse else out).astype(np.float64)

    def entity_ids_at(self, rows: Sequence[int]) -> list[str]:
        """Entity ids of entity-table rows (the id list is copied from the table once)."""
        if self._row_ids is None:
            self._row_ids = list(self.entity_table().entity_ids)
        return [self._row_ids[int(r)] for r in rows]

    def subgraph_for(
        self,
        seeds: Iterable[str],
        hops: int | None = None,
        *,
        passages: Iterable[str] = (),
        via_passages: bool = False,
    ) -> KnowledgeGraph:
        """The seeds' neighbourhood as an in-memory :class:`KnowledgeGraph`.

        ``hops=None`` fetches the closure (the connected component of the seeds, and of the
        ``passages`` when given), which makes PageRank on the subgraph equal to PageRank on
        the whole graph; an int stops after that many hops. ``via_passages`` also walks
        entity -> passage -> entity links (the entity+passage graph of ``ActivationRetriever``).
        Induced on the reached entities: all their triples among them, all their passage links.
        """
        ents = list(dict.fromkeys(seeds))
        self._check(ents)
        d = self.dialect
        pids = list(dict.fromkeys(passages))
        if pids:  # the passages' own entities start the walk with the seeds
            ents += [x["e"] for x in self._read(d.chunk_entities(), pids)]
            ents = list(dict.fromkeys(ents))
        seen_e = set(ents)
        frontier = ents
        hop = 0
        while frontier and (hops is None or hop < hops):
            hop += 1
            new = [x["e"] for x in self._read_entities(d.neighbours(), frontier)]
            if via_passages:
                new += [x["e"] for x in self._read_entities(d.co_mentioned(), frontier)]
            frontier = [e for e in dict.fromkeys(new) if e not in seen_e]
            seen_e.update(frontier)
        return self._induced(sorted(seen_e))

    # ------------------------------------------------------------------ helpers
    def _check(self, ids: Sequence[str]) -> None:
        table = self.entity_table()
        for e in ids:
            if e not in table:
                raise UnknownEntityError(f"unknown entity id {e!r}", entity_id=e, graph=table)

    def _expand(self, frontier: Sequence[str], direction: Direction) -> tuple[list[str], list[dict[str, Any]]]:
        """Neighbour ids of ``frontier`` (and, for one direction, the edge rows) in the database."""
        if direction == "both":
            return [x["e"] for x in self._read_entities(self.dialect.neighbours(), frontier)], []
        rows: list[dict[str, Any]] = []
        nbrs: list[str] = []
        if direction in ("out", "both"):
            got = self._read_entities(self.dialect.out_edges(), frontier)
            rows += got
            nbrs += [x["t"] for x in got]
        if direction in ("in", "both"):
            got = self._read_entities(self.dialect.in_edges(), frontier)
            rows += got
            nbrs += [x["h"] for x in got]
        return nbrs, rows

    def _induced(self, ids: list[str]) -> KnowledgeGraph:
        """Entities ``ids`` with the triples among them and their passage links: the entities
        from the cached entity table, the triples and links fetched."""
        table = self.entity_table()
        rows = sorted(table.index_of(e) for e in ids)
        every = table.entity_ids  # one copy
        ent_rows = [_entity_row(table, every[i], i) for i in rows]
        ids = [x["id"] for x in ent_rows]
        edges = {x["ti"]: x for x in self.inner_edges(ids, rows)}
        links = self._read_entities(self.dialect.entity_chunks(), ids, rows)
        return _graph(ent_rows, self.relations, [edges[t] for t in sorted(edges)], links)

    def inner_edges(self, ids: Sequence[str], rows: Sequence[int]) -> list[dict[str, Any]]:
        """The triples among the entities ``ids`` (their rows ``rows``): ``{h, ti, rel, t, src}``
        rows, any order. The "tail is one of them" filter runs in the database, on the tail's
        row (bucketed, see :mod:`.dialects`), before any relationship property is read."""
        d = self.dialect
        bucketed = _buckets(rows)
        if d.row_keyed:  # heads and tails selected by row in one statement
            return self._run(d.inner_edges(), bucketed) if len(rows) else []
        buckets, m = bucketed["bk"], bucketed["m"]
        out: list[dict[str, Any]] = []
        ids_of = self.entity_table().entity_ids if d.typed_fetch else []
        for i in range(0, len(ids), INNER_BATCH):
            batch = {"ids": list(ids[i : i + INNER_BATCH]), "bk": buckets, "m": m}
            if not d.typed_fetch:
                out += self._run(d.inner_edges(), batch)
                continue
            by_type: dict[str, list[int]] = {}
            typ = [quote(r) for r in self.relations]
            every = list(dict.fromkeys(typ))
            packed = self._run(d.inner_heads(), batch)
            for head in packed[0]["p"].split(";") if packed and packed[0]["p"] else ():
                a, _, orel = head.partition(":")
                for t in every if orel == "*" else {typ[int(ri)] for ri in orel.split()}:  # "*": no kg_orel
                    by_type.setdefault(t, []).append(int(a))
            types = list(by_type)
            for j in range(0, len(types), TYPES_PER_STATEMENT):
                part = types[j : j + TYPES_PER_STATEMENT]
                params: dict[str, Any] = {"bk": buckets, "m": m}
                params.update({f"h{k}": by_type[t] for k, t in enumerate(part)})
                out += _unpack(self._run(d.inner_edges_typed(part), params), ids_of)
        return out


def _buckets(rows: Sequence[int]) -> dict[str, Any]:
    """``{"bk", "m"}``: entity rows in ``m`` buckets by ``row % m`` (:meth:`Dialect._member`)."""
    m = max(1, len(rows))
    buckets: list[list[int]] = [[] for _ in range(m)]
    for r in rows:
        buckets[int(r) % m].append(int(r))
    return {"bk": buckets, "m": m}


def _out_relations(graph: KnowledgeGraph) -> list[list[int]]:
    """Per entity row, the sorted distinct relation indices of its out-triples (``kg_orel``)."""
    h, r, _ = graph.triple_arrays()
    pairs = (
        np.unique(np.stack([h.astype(np.int64), r.astype(np.int64)], axis=1), axis=0) if len(h) else np.zeros((0, 2))
    )
    out: list[list[int]] = [[] for _ in range(graph.num_entities)]
    for hi, ri in pairs.tolist():
        out[int(hi)].append(int(ri))
    return out


def _unpack(rows: list[dict[str, Any]], ids: Sequence[str]) -> list[dict[str, Any]]:
    """Edge rows from :meth:`Dialect.inner_edges_typed`'s packed rows (``ids``: entity ids by row)."""
    out: list[dict[str, Any]] = []
    for x in rows:
        rel = x["rel"]
        src = {int(ti): list(s) for ti, s in x["s"] or ()}
        v = [int(n) for n in x["e"].split()]
        for h, ti, t in zip(v[::3], v[1::3], v[2::3]):
            out.append({"h": ids[h], "ti": ti, "rel": rel, "t": ids[t], "src": src.get(ti, [])})
    return out


def _entity_row(table: KnowledgeGraph, entity_id: str, i: int) -> dict[str, Any]:
    """Entity ``entity_id`` (row ``i``) of the entity table as a fetched row (what :func:`_graph` reads)."""
    e = table.entity(entity_id)
    return {
        "id": e.id,
        "row": i,
        "name": e.name,
        "label": e.type or "entity",
        "dsc": e.description,
        "aliases": list(e.aliases),
    }


def _graph(
    ent_rows: list[dict[str, Any]], relations: list[str], edges: list[dict[str, Any]], links: list[dict[str, Any]]
) -> KnowledgeGraph:
    """A KnowledgeGraph from fetched rows (entities and edges already in global order)."""
    ids = [x["id"] for x in ent_rows]
    pos = {e: i for i, e in enumerate(ids)}
    rid = {r: i for i, r in enumerate(relations)}
    h = np.array([pos[x["h"]] for x in edges], dtype=np.int32)
    r = np.array([rid[x["rel"]] for x in edges], dtype=np.int32)
    t = np.array([pos[x["t"]] for x in edges], dtype=np.int32)
    g = KnowledgeGraph.from_columns(
        ids,
        [x["name"] for x in ent_rows],
        relations,
        h,
        r,
        t,
        aliases=[list(x.get("aliases") or []) for x in ent_rows],
        descriptions=[x.get("dsc") or "" for x in ent_rows],
        types=["" if x.get("label") in (None, "entity") else x["label"] for x in ent_rows],
        dedupe=False,
    )
    for x in edges:
        if x.get("src"):
            g.add_triple(x["h"], x["rel"], x["t"], list(x["src"]))
    for x in sorted(links, key=lambda x: (x["prow"], pos[x["e"]])):
        g.link(x["e"], x["p"])
    return g
