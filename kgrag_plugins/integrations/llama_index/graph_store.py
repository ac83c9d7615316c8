"""A LlamaIndex ``PropertyGraphStore`` as the KG source of a ``KnowledgeIndex``, and back.

Import (:func:`graph_from_property_graph_store`)::

    EntityNode(name, label, properties)     -> Entity(id=properties["kgrag_id"] or node.id, name, type=label,
                                                      description=properties["description"])
    (EntityNode) -[Relation(label)]-> (EntityNode) -> Triple(head, label, tail, source_ids)
    (ChunkNode)  -[any relation]->   (EntityNode) -> link(entity, chunk id)      # "MENTIONS"

Triple sources come from the relation's ``triplet_source_id`` (what LlamaIndex's extractors
write) or ``source_ids`` property; the entities of a sourced triple are linked to that passage.
Export (:func:`graph_to_property_graph_store`) writes the same shape (entity names made unique
with the id when two entities share one, the real name then in ``kgrag_name``; ``kgrag_id`` /
``description`` / ``aliases`` in the properties; with an index also a ``ChunkNode`` per passage
and ``MENTIONS`` relations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.graph_stores.types import ChunkNode, EntityNode, Relation

from ...index.graph import KnowledgeGraph
from ...types import Entity, Passage

if TYPE_CHECKING:  # pragma: no cover
    from ...index.store import KnowledgeIndex

__all__ = ["graph_from_property_graph_store", "graph_to_property_graph_store", "passages_from_property_graph_store"]

#: Relation label of a passage -> entity link.
MENTIONS = "MENTIONS"


def _all_nodes(store: Any) -> list[Any]:
    return list(store.get())


def _all_triplets(store: Any, nodes: list[Any]) -> list[tuple[Any, Any, Any]]:
    graph = getattr(store, "graph", None)  # SimplePropertyGraphStore: every triplet directly
    if graph is not None and callable(getattr(graph, "get_triplets", None)):
        return list(graph.get_triplets())
    ids = [n.id for n in nodes]
    return list(store.get_triplets(ids=ids)) if ids else []  # other stores: triplets touching any node


def _entity_id(node: Any) -> str:
    return str(node.properties.get("kgrag_id") or node.id)


def _sources(rel: Any) -> list[str]:
    props = rel.properties or {}
    out = [str(s) for s in props.get("source_ids") or []]
    src = props.get("triplet_source_id")
    if src and str(src) not in out:
        out.append(str(src))
    return out


def graph_from_property_graph_store(store: Any) -> KnowledgeGraph:
    """A :class:`~kgrag_plugins.index.graph.KnowledgeGraph` from a LlamaIndex property graph store."""
    nodes = _all_nodes(store)
    graph = KnowledgeGraph()

    def add(node: Any) -> str:
        eid = _entity_id(node)
        props = node.properties or {}
        label = getattr(node, "label", "") or ""
        aliases = [str(a) for a in props.get("aliases") or []]
        graph.add_entity(
            Entity(
                eid,
                str(props.get("kgrag_name") or getattr(node, "name", "") or eid),
                aliases,
                str(props.get("description") or ""),
                "" if label == "entity" else label,
            )
        )
        return eid

    for node in nodes:
        if isinstance(node, EntityNode):
            add(node)
    for head, rel, tail in _all_triplets(store, nodes):
        if isinstance(head, ChunkNode) and isinstance(tail, EntityNode):
            graph.link(add(tail), head.id)
        elif isinstance(head, EntityNode) and isinstance(tail, ChunkNode):
            graph.link(add(head), tail.id)
        elif isinstance(head, EntityNode) and isinstance(tail, EntityNode):
            h, t, sources = add(head), add(tail), _sources(rel)
            graph.add_triple(h, str(rel.label), t, sources)
            for pid in sources:
                graph.link(h, pid)
                graph.link(t, pid)
    return graph


def passages_from_property_graph_store(store: Any) -> list[Passage]:
    """The store's ``ChunkNode`` s as passages (id = node id, ``title`` from the properties)."""
    out = []
    for node in _all_nodes(store):
        if isinstance(node, ChunkNode):
            props = node.properties or {}
            out.append(Passage(node.id, node.text, str(props.get("title") or "")))
    return out


def graph_to_property_graph_store(source: KnowledgeGraph | KnowledgeIndex, store: Any = None) -> Any:
    """Write the graph (and, for an index, its passages as ``ChunkNode`` s) into ``store``
    (default a new ``SimplePropertyGraphStore``); returns the store."""
    if store is None:
        from llama_index.core.graph_stores import SimplePropertyGraphStore

        store = SimplePropertyGraphStore()
    graph = source if isinstance(source, KnowledgeGraph) else source.graph
    counts: dict[str, int] = {}
    for e in graph.entities():
        counts[e.name] = counts.get(e.name, 0) + 1
    node_of: dict[str, EntityNode] = {}
    for e in graph.entities():
        name = e.name if counts[e.name] == 1 else f"{e.name} ({e.id})"
        props: dict[str, Any] = {"kgrag_id": e.id}
        if name != e.name:
            props["kgrag_name"] = e.name  # the real name of a disambiguated node
        if e.description:
            props["description"] = e.description
        if e.aliases:
            props["aliases"] = list(e.aliases)
        node_of[e.id] = EntityNode(name=name, label=e.type or "entity", properties=props)
    relations = []
    for t in graph.triples():
        props = {"source_ids": list(t.source_ids)}
        if t.source_ids:
            props["triplet_source_id"] = t.source_ids[0]
        relations.append(
            Relation(label=t.relation, source_id=node_of[t.head].id, target_id=node_of[t.tail].id, properties=props)
        )
    chunks: list[ChunkNode] = []
    if not isinstance(source, KnowledgeGraph):
        for p in source.passages:
            chunks.append(ChunkNode(text=p.text, id_=p.id, properties={"title": p.title}))
        held = {c.id for c in chunks}
        for eid, node in node_of.items():
            for pid in graph.passages_of(eid):
                if pid in held:
                    relations.append(Relation(label=MENTIONS, source_id=pid, target_id=node.id))
    store.upsert_nodes([*node_of.values(), *chunks])
    store.upsert_relations(relations)
    return store
