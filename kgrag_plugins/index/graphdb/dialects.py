"""Cypher text per graph database for :class:`~.kg.PropertyGraphKG`.

The data follow each LlamaIndex property graph store's own schema, so the store's
``get`` / ``get_triplets`` see what we load, plus ``kg_*`` properties that make the graph
exact (entity row, triple index, passage row, aliases, description, every source passage):

* **Kùzu** (``KuzuPropertyGraphStore``, generic schema): node tables ``Entity`` and ``Chunk``,
  relation tables ``LINKS`` (Entity -> Entity, the relation in property ``label``) and
  ``MENTIONS`` (Chunk -> Entity); the ``kg_*`` columns are added with ``ALTER TABLE``.
* **FalkorDB / Neo4j** (``FalkorDBPropertyGraphStore`` / ``Neo4jPropertyGraphStore``): nodes
  ``:__Entity__`` (Neo4j also ``:__Node__``) and ``:Chunk``; a triple is a relationship whose
  *type* is the relation (backticks stripped, the exact text kept in property ``label``);
  ``(:Chunk)-[:MENTIONS]->(:__Entity__)``. Relationship types cannot be parameters, so triples
  are loaded with one batched ``UNWIND`` per relation.

Every bulk statement is a batched ``UNWIND $rows AS r ...`` (one round trip per batch: 40x
faster than a statement per row); on Kùzu the relationships go through ``COPY ... FROM (UNWIND
...)``, which looks endpoints up by primary key instead of joining against a node-table scan.
Reads take a list of ids (``UNWIND $ids AS x``), so a traversal costs one query per hop,
whatever the frontier size.
"""

from __future__ import annotations

from dataclasses import dataclass

DIALECTS = ("kuzu", "falkordb", "neo4j")


def quote(identifier: str) -> str:
    """A relationship type for FalkorDB / Neo4j: backtick-quoted, backticks stripped (as the
    FalkorDB store does; the exact relation text lives in the ``label`` property)."""
    return "`" + str(identifier).replace("`", "") + "`"


_EDGE_COLUMNS = "a.id AS h, r.kg_ti AS ti, r.label AS rel, b.id AS t, r.kg_src AS src"
_ENTITY_COLUMNS = (
    "e.id AS id, e.kg_row AS row, e.name AS name, e.label AS label, e.kg_desc AS dsc, e.kg_aliases AS aliases"
)
#: Parameters of :meth:`Dialect.inner_edges` and friends: ``$bk`` lists the fetched entities'
#: rows in ``$m`` buckets (bucket ``row % $m``), so "the tail is one of them" is a list index plus
#: a scan of a bucket of about one row, where ``IN $rows`` scans every row for every edge.


@dataclass(frozen=True)
class Dialect:
    """The statements one database needs (``{rel}`` in :attr:`create_triples` is the quoted
    relation for the labelled-relationship dialects)."""

    name: str
    entity: str  # node pattern label of an entity
    setup: tuple[str, ...]
    clear: tuple[str, ...]
    create_entities: str  # ``{label}``: the quoted entity type (one statement per type)
    create_triples: str
    triples_per_relation: bool
    create_chunks: str
    create_mentions: str
    set_meta: str
    get_meta: str
    #: FalkorDB: an untyped relationship variable costs a lookup in every relation type's matrix
    #: per edge (0.07 ms at 822 types), so the induced edges are read per relationship type
    #: (:meth:`inner_heads` then :meth:`inner_edges_typed`), guided by the ``kg_orel`` stored on
    #: each entity (the relation indices of its out-triples).
    typed_fetch: bool = False
    #: Kùzu: entity reads select the ``$ids`` entities by row (``$bk`` / ``$m``, bucketed as below)
    #: in one scan, not ``UNWIND $ids AS x MATCH (a {id: x})``: Kùzu 0.11 plans that as a join of the
    #: list with a scan of the whole node table, 2.1 s on a 1M-entity graph for 21 ids, where the
    #: bucketed scan took 67 ms (99 ms for 1,000 ids, 395 ms for 10,000; ``a.id IN $ids`` grows with
    #: the list: 74 ms, 1.5 s, 14 s). ``kg.PropertyGraphKG`` passes the buckets.
    row_keyed: bool = False

    def by_entity(self, pattern: str, ret: str, where: str = "") -> str:
        """A read of the ``$ids`` entities: ``pattern`` names them ``(a)`` (written ``{a}``), then
        ``where`` (more conditions) and ``ret`` (the RETURN clause, without the keyword)."""
        e = self.entity
        if self.row_keyed:
            cond = " AND ".join(c for c in (self._member("a.kg_row"), where) if c)
            return f"MATCH {pattern.format(a=f'(a:{e})')} WHERE {cond} RETURN {ret}"
        tail = f" WHERE {where}" if where else ""
        return f"UNWIND $ids AS x MATCH {pattern.format(a=f'(a:{e} {{id: x}})')}{tail} RETURN {ret}"

    def _member(self, row: str) -> str:
        """Whether entity row ``row`` is in the bucketed ``$bk`` (Kùzu lists are 1-based)."""
        if self.name == "kuzu":
            return f"list_contains($bk[{row} % $m + 1], {row})"
        return f"{row} IN $bk[{row} % $m]"

    def inner_edges(self) -> str:
        """The out-triples of the ``$ids`` entities whose tail is in ``$bk`` (the induced edges),
        filtered in the database before the relationship's properties are read."""
        e = self.entity
        member = self._member("b.kg_row")
        if self.row_keyed:  # Kùzu: heads and tails both by row, one scan
            return self.by_entity(f"{{a}}-[r{self._rel()}]->(b:{e})", _EDGE_COLUMNS, member)
        # FalkorDB / Neo4j: WITH keeps the planner from starting at the tails (a label scan per head)
        start = f"MATCH (a:{e} {{id: x}}) WITH a MATCH (a)"
        return f"UNWIND $ids AS x {start}-[r{self._rel()}]->(b:{e}) WHERE {member} RETURN {_EDGE_COLUMNS}"

    def inner_heads(self) -> str:
        """FalkorDB: the ``$ids`` entities with an out-triple into ``$bk``, without naming the
        relationship (no per-type lookups), packed in one string ``p``: per head ``"id:rels"``
        (internal id, its ``kg_orel`` space-separated, ``*`` when not stored), ``;`` between heads."""
        e = self.entity
        rels = "CASE WHEN a.kg_orel IS NULL THEN '*' ELSE string.join([x IN a.kg_orel | toString(x)], ' ') END"
        return (
            f"UNWIND $ids AS x MATCH (a:{e} {{id: x}}) WITH a MATCH (a)-->(b:{e}) WHERE {self._member('b.kg_row')} "
            f"WITH DISTINCT a RETURN string.join(collect(toString(id(a)) + ':' + {rels}), ';') AS p"
        )

    def inner_edges_typed(self, types: list[str]) -> str:
        """FalkorDB's :meth:`inner_edges`: one ``UNION ALL`` branch per quoted relationship type in
        ``types``, over the heads (internal ids) in ``$h0``, ``$h1``, ... One row per branch and
        relation: ``rel``, ``e`` (``"head-row ti tail-row ..."``: three numbers per triple in one
        string, where the client would parse three values in Python) and ``s`` (``[ti, sources]``
        of the triples that have sources)."""
        m = self._member("b.kg_row")
        ret = (
            "r.label AS rel, string.join(collect(toString(a.kg_row) + ' ' + toString(r.kg_ti) + ' ' + "
            "toString(b.kg_row)), ' ') AS e, collect(CASE WHEN size(r.kg_src) > 0 THEN [r.kg_ti, r.kg_src] END) AS s"
        )
        return " UNION ALL ".join(
            f"UNWIND $h{i} AS x MATCH (a) WHERE id(a) = x WITH a MATCH (a)-[r:{t}]->(b:{self.entity}) "
            f"WHERE {m} RETURN {ret}"
            for i, t in enumerate(types)
        )

    def out_edges(self) -> str:
        return self.by_entity(f"{{a}}-[r{self._rel()}]->(b:{self.entity})", _EDGE_COLUMNS)

    def in_edges(self) -> str:
        """The in-triples of the ``$ids`` entities (``a`` is the tail here; the columns as named)."""
        cols = "b.id AS h, r.kg_ti AS ti, r.label AS rel, a.id AS t, r.kg_src AS src"
        return self.by_entity(f"(b:{self.entity})-[r{self._rel()}]->{{a}}", cols)

    def walk_edges_both(self) -> str:
        """:meth:`walk_edges` of both directions in one statement (``UNION ALL``: a self-loop
        counts once per direction, as in the walk's degrees)."""
        return f"{self.walk_edges('out')} UNION ALL {self.walk_edges('in')}"

    def walk_edges(self, direction: str) -> str:
        """``(a, b, c)``: per entity pair, the rows of one of the ``$ids`` entities and of an entity
        it heads (``"out"``) or ends (``"in"``) ``c`` triples with: the only values FRAG's bounded
        walk reads (``methods.frag.local_walk``). ``count(r)``: FalkorDB returns one row per pair,
        not per triple, when a relationship variable is matched but not returned."""
        e, rel = self.entity, self._rel()
        pattern = f"{{a}}-[r{rel}]->(b:{e})" if direction == "out" else f"(b:{e})-[r{rel}]->{{a}}"
        ret = "a.kg_row AS a, b.kg_row AS b, count(r) AS c"
        if self.row_keyed:
            return self.by_entity(pattern, ret)
        # FalkorDB / Neo4j: WITH keeps the planner on the id index (see inner_edges)
        return f"UNWIND $ids AS x MATCH (a:{e} {{id: x}}) WITH a MATCH {pattern.format(a='(a)')} RETURN {ret}"

    def stored_degrees(self) -> str:
        """``(e, o, i)``: the out- / in-degrees stored on the ``$ids`` entities at load."""
        return self.by_entity("{a}", "a.id AS e, a.kg_out AS o, a.kg_in AS i")

    def degrees(self, direction: str) -> str:
        """``(e, n)``: how many entity-entity triples the ``$ids`` entities head (``"out"``) or end
        (``"in"``); entities with none are absent."""
        b, rel = f"(b:{self.entity})", self._rel()
        pattern = f"{{a}}-[r{rel}]->{b}" if direction == "out" else f"{b}-[r{rel}]->{{a}}"
        return self.by_entity(pattern, "a.id AS e, count(r) AS n")

    def neighbour_counts(self) -> str:
        """``(e, n)``: how many distinct entities the ``$ids`` entities share a triple with, either
        direction (itself for a self-loop); entities with none are absent."""
        return self.by_entity(f"{{a}}-[{self._rel()}]-(b:{self.entity})", "a.id AS e, count(DISTINCT b) AS n")

    def chunk_degrees(self) -> str:
        """``(p, n)``: how many entities each ``$ids`` passage mentions; passages with none are absent."""
        return f"UNWIND $ids AS x MATCH (c:Chunk {{id: x}})-[:MENTIONS]->(e:{self.entity}) RETURN x AS p, count(e) AS n"

    def neighbours(self) -> str:
        """Distinct neighbour ids of the ``$ids`` entities, either direction (one query per hop)."""
        return self.by_entity(f"{{a}}-[{self._rel()}]-(b:{self.entity})", "DISTINCT b.id AS e")

    def co_mentioned(self) -> str:
        """Distinct ids of the entities sharing a passage with the ``$ids`` entities."""
        return self.by_entity(f"{{a}}<-[:MENTIONS]-(c:Chunk)-[:MENTIONS]->(b:{self.entity})", "DISTINCT b.id AS e")

    def entity_chunks(self) -> str:
        return self.by_entity("(c:Chunk)-[:MENTIONS]->{a}", "a.id AS e, c.id AS p, c.kg_prow AS prow")

    def chunk_entities(self) -> str:
        return (
            f"UNWIND $ids AS x MATCH (c:Chunk {{id: x}})-[:MENTIONS]->(e:{self.entity}) "
            "RETURN e.id AS e, c.id AS p, c.kg_prow AS prow"
        )

    def all_entities(self) -> str:
        """Every entity with its stored whole-graph degrees (``kout`` / ``kin``, -1 or null if not stored)."""
        return f"MATCH (e:{self.entity}) WHERE e.kg_row >= 0 RETURN {_ENTITY_COLUMNS}, e.kg_out AS kout, e.kg_in AS kin"

    def any_triple_heads(self, n: int) -> str:
        return f"MATCH (a:{self.entity})-[r{self._rel()}]->(b:{self.entity}) RETURN a.id AS h LIMIT {int(n)}"

    def count_triples(self) -> str:
        return f"MATCH (a:{self.entity})-[r{self._rel()}]->(b:{self.entity}) RETURN count(r) AS n"

    def _rel(self) -> str:
        return ":LINKS" if self.name == "kuzu" else ""


KUZU = Dialect(
    name="kuzu",
    entity="Entity",
    setup=(
        "ALTER TABLE Entity ADD IF NOT EXISTS kg_row INT64 DEFAULT -1",
        "ALTER TABLE Entity ADD IF NOT EXISTS kg_desc STRING DEFAULT ''",
        "ALTER TABLE Entity ADD IF NOT EXISTS kg_aliases STRING[]",
        "ALTER TABLE Entity ADD IF NOT EXISTS kg_out INT64 DEFAULT -1",
        "ALTER TABLE Entity ADD IF NOT EXISTS kg_in INT64 DEFAULT -1",
        "ALTER TABLE LINKS ADD IF NOT EXISTS kg_ti INT64 DEFAULT -1",
        "ALTER TABLE LINKS ADD IF NOT EXISTS kg_src STRING[]",
        "ALTER TABLE Chunk ADD IF NOT EXISTS kg_prow INT64 DEFAULT -1",
        "CREATE NODE TABLE IF NOT EXISTS KgMeta(key STRING, value STRING, PRIMARY KEY(key))",
    ),
    # the markers first: a clear cut short leaves no graph that reads as loaded (kg.py)
    clear=("MATCH (m:KgMeta) DELETE m", "MATCH (c:Chunk) DETACH DELETE c", "MATCH (e:Entity) DETACH DELETE e"),
    create_entities=(
        "UNWIND $rows AS r CREATE (:Entity {id: r.id, name: r.name, label: r.label, kg_row: r.row, "
        "kg_desc: r.dsc, kg_aliases: r.aliases, kg_out: r.kout, kg_in: r.kin})"
    ),
    # Kùzu joins an UNWIND with MATCH by id as a scan of the node table per batch (27 s for 20k
    # MetaQA triples); COPY from the same UNWIND looks the primary keys up (4 s). Columns in
    # table order: FROM, TO, label, triplet_source_id, kg_ti, kg_src.
    create_triples="COPY LINKS FROM (UNWIND $rows AS r RETURN r.h, r.t, r.rel, r.src0, r.ti, r.src)",
    triples_per_relation=False,
    create_chunks="UNWIND $rows AS r CREATE (:Chunk {id: r.id, label: 'text_chunk', text: '', kg_prow: r.row})",
    create_mentions=(
        "COPY MENTIONS FROM (UNWIND $rows AS r RETURN r.p, r.e, 'MENTIONS', NULL) (from='Chunk', to='Entity')"
    ),
    set_meta="CREATE (:KgMeta {key: $key, value: $value})",
    get_meta="MATCH (m:KgMeta {key: $key}) RETURN m.value AS value",
    row_keyed=True,
)


def _labelled(name: str, entity_labels: str, setup: tuple[str, ...], typed_fetch: bool = False) -> Dialect:
    return Dialect(
        name=name,
        entity="__Entity__",
        setup=setup,
        clear=(
            "MATCH (m:KgMeta) DELETE m",
            "MATCH (c:Chunk) DETACH DELETE c",
            "MATCH (e:__Entity__) DETACH DELETE e",
        ),
        create_entities=(
            f"UNWIND $rows AS r CREATE (:{entity_labels}:{{label}} {{id: r.id, name: r.name, label: r.label, "
            "kg_row: r.row, kg_desc: r.dsc, kg_aliases: r.aliases, kg_out: r.kout, kg_in: r.kin"
            + (", kg_orel: r.orel})" if typed_fetch else "})")
        ),
        create_triples=(
            "UNWIND $rows AS r MATCH (a:__Entity__ {id: r.h}), (b:__Entity__ {id: r.t}) "
            "CREATE (a)-[:{rel} {label: r.rel, kg_ti: r.ti, kg_src: r.src, triplet_source_id: r.src0}]->(b)"
        ),
        triples_per_relation=True,
        create_chunks="UNWIND $rows AS r CREATE (:Chunk {id: r.id, text: '', kg_prow: r.row})",
        create_mentions=(
            "UNWIND $rows AS r MATCH (c:Chunk {id: r.p}), (e:__Entity__ {id: r.e}) CREATE (c)-[:MENTIONS]->(e)"
        ),
        set_meta="CREATE (:KgMeta {key: $key, value: $value})",
        get_meta="MATCH (m:KgMeta {key: $key}) RETURN m.value AS value",
        typed_fetch=typed_fetch,
    )


FALKORDB = _labelled(
    "falkordb",
    "__Entity__",
    (
        "CREATE INDEX FOR (n:__Entity__) ON (n.id)",
        "CREATE INDEX FOR (n:Chunk) ON (n.id)",
        "CREATE INDEX FOR (n:KgMeta) ON (n.key)",
    ),
    typed_fetch=True,
)
NEO4J = _labelled(
    "neo4j",
    "__Node__:__Entity__",
    (
        "CREATE INDEX kgrag_entity_id IF NOT EXISTS FOR (n:__Entity__) ON (n.id)",
        "CREATE INDEX kgrag_chunk_id IF NOT EXISTS FOR (n:Chunk) ON (n.id)",
        "CREATE INDEX kgrag_meta_key IF NOT EXISTS FOR (n:KgMeta) ON (n.key)",
    ),
)


def dialect(name: str) -> Dialect:
    """The :class:`Dialect` called ``name`` (one of :data:`DIALECTS`)."""
    try:
        return {"kuzu": KUZU, "falkordb": FALKORDB, "neo4j": NEO4J}[name]
    except KeyError:
        raise ValueError(f"unknown graph database dialect {name!r}; expected one of {DIALECTS}") from None
