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
        return f"MATCH (e:{self.entity}) WHERE e.kg_row >= 0 RETURN {_ENTITY_COLUMNS}"

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


def _labelled(name: str, entity_labels: str, setup: tuple[str, ...]) -> Dialect:
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
            "kg_row: r.row, kg_desc: r.dsc, kg_aliases: r.aliases, kg_out: r.kout, kg_in: r.kin})"
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
    )


FALKORDB = _labelled(
    "falkordb",
    "__Entity__",
    (
        "CREATE INDEX FOR (n:__Entity__) ON (n.id)",
        "CREATE INDEX FOR (n:Chunk) ON (n.id)",
        "CREATE INDEX FOR (n:KgMeta) ON (n.key)",
    ),
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
