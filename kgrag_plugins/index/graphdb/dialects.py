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

    def _member(self, row: str) -> str:
        """Whether entity row ``row`` is in the bucketed ``$bk`` (Kùzu lists are 1-based)."""
        if self.name == "kuzu":
            return f"list_contains($bk[{row} % $m + 1], {row})"
        return f"{row} IN $bk[{row} % $m]"

    def inner_edges(self) -> str:
        """The out-triples of the ``$ids`` entities whose tail is in ``$bk`` (the induced edges),
        filtered in the database before the relationship's properties are read."""
        e = self.entity
        # FalkorDB / Neo4j: WITH keeps the planner from starting at the tails (a label scan per
        # head); Kùzu plans this from the heads and fails to re-run a prepared WITH form
        # ("Cannot evaluate expression with type VARIABLE")
        start = f"MATCH (a:{e} {{id: x}})" + ("" if self.name == "kuzu" else " WITH a MATCH (a)")
        member = self._member("b.kg_row")
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
        e = self.entity
        return f"UNWIND $ids AS x MATCH (a:{e} {{id: x}})-[r{self._rel()}]->(b:{e}) RETURN {_EDGE_COLUMNS}"

    def in_edges(self) -> str:
        e = self.entity
        return f"UNWIND $ids AS x MATCH (a:{e})-[r{self._rel()}]->(b:{e} {{id: x}}) RETURN {_EDGE_COLUMNS}"

    def stored_degrees(self) -> str:
        """``(e, o, i)``: the out- / in-degrees stored on the ``$ids`` entities at load."""
        return f"UNWIND $ids AS x MATCH (e:{self.entity} {{id: x}}) RETURN e.id AS e, e.kg_out AS o, e.kg_in AS i"

    def degrees(self, direction: str) -> str:
        """``(e, n)``: how many entity-entity triples the ``$ids`` entities head (``"out"``) or end
        (``"in"``); entities with none are absent."""
        e, rel = self.entity, self._rel()
        a, b = f"(a:{e} {{id: x}})", f"(b:{e})"
        pattern = f"{a}-[r{rel}]->{b}" if direction == "out" else f"{b}-[r{rel}]->{a}"
        return f"UNWIND $ids AS x MATCH {pattern} RETURN x AS e, count(r) AS n"

    def neighbour_counts(self) -> str:
        """``(e, n)``: how many distinct entities the ``$ids`` entities share a triple with, either
        direction (itself for a self-loop); entities with none are absent."""
        e = self.entity
        return f"UNWIND $ids AS x MATCH (a:{e} {{id: x}})-[{self._rel()}]-(b:{e}) RETURN x AS e, count(DISTINCT b) AS n"

    def chunk_degrees(self) -> str:
        """``(p, n)``: how many entities each ``$ids`` passage mentions; passages with none are absent."""
        return f"UNWIND $ids AS x MATCH (c:Chunk {{id: x}})-[:MENTIONS]->(e:{self.entity}) RETURN x AS p, count(e) AS n"

    def neighbours(self) -> str:
        """Distinct neighbour ids of the ``$ids`` entities, either direction (one query per hop)."""
        e = self.entity
        return f"UNWIND $ids AS x MATCH (a:{e} {{id: x}})-[{self._rel()}]-(b:{e}) RETURN DISTINCT b.id AS e"

    def co_mentioned(self) -> str:
        """Distinct ids of the entities sharing a passage with the ``$ids`` entities."""
        e = self.entity
        return (
            f"UNWIND $ids AS x MATCH (a:{e} {{id: x}})<-[:MENTIONS]-(c:Chunk)-[:MENTIONS]->(b:{e}) "
            "RETURN DISTINCT b.id AS e"
        )

    def entity_chunks(self) -> str:
        return (
            f"UNWIND $ids AS x MATCH (c:Chunk)-[:MENTIONS]->(e:{self.entity} {{id: x}}) "
            "RETURN e.id AS e, c.id AS p, c.kg_prow AS prow"
        )

    def chunk_entities(self) -> str:
        return (
            f"UNWIND $ids AS x MATCH (c:Chunk {{id: x}})-[:MENTIONS]->(e:{self.entity}) "
            "RETURN e.id AS e, c.id AS p, c.kg_prow AS prow"
        )

    def entities(self) -> str:
        return f"UNWIND $ids AS x MATCH (e:{self.entity} {{id: x}}) RETURN {_ENTITY_COLUMNS}"

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
