"""The graph methods over a graph database (the database variants of activation, FRAG and
KG-Translator; the storage they read is :mod:`kgrag_plugins.index.graphdb`): per query, fetch
the seeds' subgraph, run in memory.

:class:`DBActivationRetriever` (the recommended ``activation`` retriever, spreading activation by
personalized PageRank) and :class:`DBFRAGRetriever` (FRAG, docs/methods.md §2) find their seeds
exactly as the in-memory retrievers do (question linking over the database's entity table,
dense passage seeds over the passage store), ask :meth:`PropertyGraphKG.subgraph_for` for the
seeds' neighbourhood, and run the unchanged in-memory retriever over a view of the index whose
graph is that subgraph. With ``hops=None`` the subgraph is the seeds' connected component, on
which PageRank equals PageRank on the whole graph, so the Evidence is the same as in memory
(tests/index/test_graphdb_parity.py). On 1M+ entity graphs FRAG runs its bounded walk
(:mod:`.frag.local_walk`) on the database and fetches only what it keeps (equal to memory
too); activation fetches a :data:`ACTIVATION_HOPS` ball by default and walks it with the whole
graph's degrees (a bounded approximation, measured in docs/graphdb.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..index.builders.linking import NameIndex, link_question
from ..index.graph import KnowledgeGraph
from ..index.graphdb.kg import PropertyGraphKG
from ..index.graphdb.parsekg import PropertyGraphParseKG
from ..index.store import KnowledgeIndex
from ..types import Evidence
from .activation import (
    DEFAULT_BM25_SEEDS,
    PUSH_MIN_NODES,
    ActivationRetriever,
    TextVectorCache,
    TitleMentions,
)
from .base import Retriever
from .frag.linking import TopicLinker
from .frag.local_walk import PUSH_EPS, LocalWalk, graph_source, push_walk, top_rows
from .frag.retriever import COMPLEX_HOPS, LARGE_GRAPH_ENTITIES, SIMPLE_HOPS, FRAGRetriever

__all__ = ["ACTIVATION_HOPS", "DBActivationRetriever", "DBFRAGRetriever", "DBTranslatorRetriever", "index_view"]

#: Hops of the ball :class:`DBActivationRetriever` fetches by default (``hops=None``: the exact component).
ACTIVATION_HOPS = 2


def index_view(
    index: KnowledgeIndex,
    graph: Any,
    *,
    relation_vectors: bool = False,
    entity_vectors: bool = False,
    parsekg: Any = None,
) -> KnowledgeIndex:
    """``index`` with ``graph`` in place of its graph (same passages, embedder and, with
    ``relation_vectors``, the index's relation vectors, stored or on demand: the vocabularies are equal; with
    ``entity_vectors``, its entity vectors when computed: the entity rows are equal) and
    ``parsekg`` as its ParseKG."""
    rel = index.relation_vectors if relation_vectors and index.has_relation_vectors else None
    ent = index.entity_vectors if entity_vectors and index.has_entity_vectors else None
    view = KnowledgeIndex(index.passages, graph, index.embedder, dict(index.manifest), None, ent, rel, parsekg)
    if relation_vectors and rel is None:  # rows embedded on demand are stored in (and read from) the index
        view.relation_vectors_of = index.relation_vectors_of  # type: ignore[method-assign]
    return view


def _check_aligned(index: KnowledgeIndex, kg: PropertyGraphKG) -> KnowledgeGraph:
    """The database's entity table, after checking it matches the index's entity rows and
    relation vocabulary (entity vectors and relation vectors are read by row)."""
    table = kg.entity_table()
    g = index.graph
    if g.num_entities and g.entity_ids != table.entity_ids:
        raise ValueError(
            "the index's graph and the graph database hold different entities; build the index with "
            "graph=PropertyGraphKG.entity_table() (or load the database from index.graph)"
        )
    if g.relations and g.relations != table.relations:
        raise ValueError("the index's graph and the graph database have different relation vocabularies")
    return table


def _db_trace(kg: PropertyGraphKG, sub: KnowledgeGraph) -> dict[str, Any]:
    return {"backend": kg.dialect.name, "entities": sub.num_entities, "triples": sub.num_triples}


class _QueryVector:
    """``embed_query`` that reuses one already computed query vector (the view embeds nothing twice)."""

    def __init__(self, index: KnowledgeIndex, text: str, vector: np.ndarray) -> None:
        self._index, self._text, self._vector = index, text, vector

    def __call__(self, text: str) -> np.ndarray:
        return self._vector if text == self._text else KnowledgeIndex.embed_query(self._index, text)


class _ViewActivation(ActivationRetriever):
    """ActivationRetriever over a fetched subgraph, linking with the whole graph's name index and
    spreading as on the whole graph (its ``spreading``; Chroma dense seeds from ``PUSH_MIN_NODES``).

    ``whole``: for a bounded fetch, each entity's distinct entity neighbours and each passage's
    entities in the whole graph (passage positions of the index); the walk then leaves every
    node with its whole-graph probabilities, and the mass that would leave the fetched part is
    dropped (as FRAG's local PageRank does)."""

    def __init__(
        self,
        index: KnowledgeIndex,
        names: NameIndex,
        titles: TitleMentions,
        large: bool,
        whole: tuple[np.ndarray, np.ndarray] | None = None,
        **options: Any,
    ) -> None:
        self._given_names, self._given_titles, self._given_large = names, titles, large
        self._whole = whole
        super().__init__(index, **options)

    def _degrees(self, m) -> np.ndarray:
        """The whole graph's degrees when given (mass leaving the fetched ball is dropped), else
        the view's own row sums."""
        if self._whole is None:
            return super()._degrees(m)
        nb, pdeg = self._whole
        return np.concatenate([self.entity_edge_weight * nb + self._mentions, pdeg]).astype(np.float64)

    @property
    def _large(self) -> bool:
        return self._given_large

    def _refresh(self) -> None:
        self._names = self._given_names
        self._build_matrix()
        self._titles = self._given_titles if self.bridge else None


class DBActivationRetriever(Retriever):
    """``ActivationRetriever`` (spreading activation by personalized PageRank over entities and
    passages) with the graph in a database.

    Args:
        index: passages, vectors and embedder (its graph may be just ``kg.entity_table()``).
        kg: the :class:`PropertyGraphKG` holding the graph.
        hops: how many hops (over triples and shared passages) to fetch around the sources
            (default :data:`ACTIVATION_HOPS`): PageRank then walks that ball with the whole
            graph's degrees and drops the mass leaving it, a bounded approximation (agreement
            with memory in docs/graphdb.md); ``None``: the sources' whole component, on which
            the Evidence equals the in-memory one (exact, but on a connected KB the whole graph).
        options: ``ActivationRetriever`` settings (damping, entity_weight, dense_seeds, ...).
    """

    name = "activation"

    def __init__(
        self, index: KnowledgeIndex, kg: PropertyGraphKG, *, hops: int | None = ACTIVATION_HOPS, **options: Any
    ) -> None:
        if hops is not None and hops < 0:
            raise ValueError(f"hops must be None (exact) or >= 0, got {hops}")
        self.kg = kg
        self.hops = hops
        self.options = options
        self.dense_seeds = int(options.get("dense_seeds", 5))
        self.bm25_seeds = int(options.get("bm25_seeds", DEFAULT_BM25_SEEDS))
        self.index = index
        self._refresh()

    def _refresh(self) -> None:
        self._table = _check_aligned(self.index, self.kg)
        self._names = NameIndex.from_graph(self._table)
        self._titles = TitleMentions([p.title for p in self.index.passages])
        # the whole graph's size class, not the fetched subgraph's (same spreading as in memory)
        self._large = self._table.num_entities + len(self.index.passages) >= PUSH_MIN_NODES

    def _retrieve(self, query: str, k: int) -> Evidence:
        qvec = self.index.embed_query(query)
        ents = link_question(self._table, query, names=self._names)
        store = self.index.passages
        vecs = store.vectors
        seeds_p: list[str] = []
        if self.dense_seeds > 0 and len(vecs):  # the passages ActivationRetriever seeds from
            n = min(self.dense_seeds, len(vecs))
            if self._large:
                seeds_p = [p.id for p, _ in store.dense_search(qvec, n)]
            else:
                sims = store.dense_scores(np.asarray(qvec, dtype=vecs.dtype))
                seeds_p = [store.at(int(i)).id for i in np.argpartition(-sims, n - 1)[:n]]
        if self.bm25_seeds > 0:  # the BM25 seed passages' component too (the same sources as in memory)
            seeds_p += [p.id for p, _ in self.index.passages.bm25_search(query, self.bm25_seeds)]
        sub = self.kg.subgraph_for(ents, self.hops, passages=seeds_p, via_passages=True)
        if sub.num_entities == 0:  # nothing linked: one isolated entity keeps the retriever's shape
            t = self._table
            sub = KnowledgeGraph.from_columns(t.entity_ids[:1], [t.name_of(t.entity_ids[0])], t.relations, [], [], [])
        view = index_view(self.index, sub)
        view.embed_query = _QueryVector(view, query, qvec)  # type: ignore[method-assign]
        whole = None if self.hops is None else self._whole_degrees(sub)
        ev = _ViewActivation(view, self._names, self._titles, self._large, whole, **self.options).retrieve(query, k)
        ev.trace["graph_db"] = {**_db_trace(self.kg, sub), "hops": self.hops}
        return ev

    def _whole_degrees(self, sub: KnowledgeGraph) -> tuple[np.ndarray, np.ndarray]:
        """The fetched entities' distinct neighbours and their passages' entity counts in the
        whole graph (passages by position in the index; 0 for those the subgraph does not link)."""
        store = self.index.passages
        nb = self.kg.neighbour_counts(sub.entity_ids)
        linked = [p for p in sub.passage_ids if p in store]
        pdeg = np.zeros(len(store), dtype=np.int64)
        if linked:
            pdeg[[store.position(p) for p in linked]] = self.kg.passage_degrees(linked)
        return nb, pdeg


class _ViewFRAG(FRAGRetriever):
    """FRAGRetriever over a fetched subgraph in its whole graph's size class (local PageRank and
    relation-vector chain scores from ``LARGE_GRAPH_ENTITIES``), walking with the whole graph's
    ``degrees`` (out, in) when given. ``walks``: k -> the bounded walk the database retriever ran
    (over whole-graph rows; the view holds what it kept), used instead of walking the view."""

    def __init__(
        self,
        index: KnowledgeIndex,
        local: bool,
        degrees: tuple[np.ndarray, np.ndarray] | None,
        walks: dict[int, tuple[LocalWalk, list[str]]] | None = None,
        **options: Any,
    ) -> None:
        self._given_local, self._degrees, self._walks = local, degrees, walks or {}
        super().__init__(index, **options)

    @property
    def _local(self) -> bool:
        return self._given_local

    def _walk_degrees(self) -> np.ndarray | None:
        if self._degrees is None:
            return None
        out, inn = self._degrees  # out-degrees for a directed walk, out + in for both ways
        return out + inn if self._pg.inverse else out

    def _pagerank(self, topics: Any, within: np.ndarray | None, degrees: np.ndarray | None = None) -> np.ndarray:
        return super()._pagerank(topics, within, self._walk_degrees())

    def _ball(self, seeds: np.ndarray, topics: Any, k: int, trace: dict) -> tuple[np.ndarray, np.ndarray]:
        if not (self._local and self.local_walk == "push"):
            return super()._ball(seeds, topics, k, trace)
        trace["local_pagerank"] = True
        n = self._pg.n
        if k in self._walks:  # walked in the database: its kept entities are this view's
            walk, ids = self._walks[k]
            rows = np.array([self.graph.index_of(e) for e in ids], dtype=np.int64)
            ppr = np.zeros(n)
            ppr[rows] = walk.scores[np.searchsorted(walk.rows, walk.kept)]
        else:  # the view holds the k-hop ball: the same walk, with the whole graph's degrees
            deg = self._walk_degrees()
            own_degree, neighbours = graph_source(self._pg)
            walk = push_walk(
                seeds, k, own_degree if deg is None else (lambda r: deg[r]), neighbours,
                damping=self.damping, eps=self.push_eps,
            )  # fmt: skip
            rows, ppr = walk.rows, walk.dense(n)
        trace["local_walk"] = walk.trace()
        return np.sort(rows), ppr


class DBFRAGRetriever(Retriever):
    """``FRAGRetriever`` with the graph in a database: link the topic entities, fetch their
    component (``hops=None``, exact) or ``hops``-neighbourhood, run FRAG's pipeline on it.

    ``options`` are ``FRAGRetriever`` settings (mode, classifier, path_ranker, simple_hops, ...).
    A ``hops`` smaller than the pipeline's k (2 simple, 4 complex) would cut paths: use at
    least ``complex_hops``.

    On a graph of ``LARGE_GRAPH_ENTITIES`` (1M) entities or more, in-memory FRAG ranks the k-hop
    neighbourhood by a local walk with the whole graph's transition probabilities. With
    ``local_walk="push"`` (the default) the bounded walk runs here, reading per round the edges of
    the entities it pushes (integers only) and the stored degrees, for each k the route may take;
    then only the entities FRAG keeps (its top ``max_nodes`` and the topics) and the triples among
    them are fetched. The complex pipeline's chain completion over the whole graph (a path ranker,
    ``chain_scope="graph"``) and ``local_walk="exact"`` fetch the k-hop ball and its entities'
    whole-graph degrees instead, and the view walks it in the same mode.
    """

    name = "frag"

    def __init__(self, index: KnowledgeIndex, kg: PropertyGraphKG, *, hops: int | None = None, **options: Any) -> None:
        from pathlib import Path

        from .frag.hop_classifier import HopClassifier
        from .frag.path_ranker import PathRanker

        # load saved models once, not per query
        if isinstance(options.get("classifier"), (str, Path)):
            options["classifier"] = HopClassifier.load(options["classifier"], embedder=index.embedder)
        if isinstance(options.get("path_ranker"), (str, Path)):
            options["path_ranker"] = PathRanker.load(options["path_ranker"], embedder=index.embedder)
        self.kg = kg
        self.hops = hops
        self.options = options
        self.index = index
        self._cache = TextVectorCache(20_000)  # chain-text vectors, shared by the per-query FRAGs
        self._refresh()

    def _refresh(self) -> None:
        self._table = _check_aligned(self.index, self.kg)
        self._names = NameIndex.from_graph(self._table)
        threshold = float(self.options.get("link_threshold", 0.85))
        self._linker = TopicLinker(self.index, self._table, self._names, threshold)
        self._local = self._table.num_entities >= LARGE_GRAPH_ENTITIES

    def _fetch_hops(self, route: str | None) -> int | None:
        """``hops``, or on a large graph the deepest neighbourhood FRAG will walk."""
        if self.hops is not None or not self._local:
            return self.hops
        simple = int(self.options.get("simple_hops", SIMPLE_HOPS))
        complex_ = int(self.options.get("complex_hops", COMPLEX_HOPS))
        only_simple = route == "simple" or (route is None and self.options.get("mode") == "simple")
        return simple if only_simple else max(simple, complex_)

    def _walk(self, topics: list[str], route: str | None) -> dict[int, tuple[LocalWalk, list[str]]] | None:
        """FRAG's bounded walk (:mod:`.frag.local_walk`) run on the database, for each k the
        question may take: the walk and the ids of the entities FRAG keeps (its top
        ``max_nodes`` by score, and the topics). ``None``: the pipeline needs the whole k-hop
        ball (the exact walk, or the complex pipeline's chain completion over the graph)."""
        o = self.options
        if o.get("local_walk", "push") != "push":
            return None
        simple, complex_ = int(o.get("simple_hops", SIMPLE_HOPS)), int(o.get("complex_hops", COMPLEX_HOPS))
        mode = route or (o.get("mode") if o.get("mode") in ("simple", "complex") else None)
        ks = [simple] if mode == "simple" else [complex_] if mode == "complex" else sorted({simple, complex_})
        ranker = o.get("path_ranker") is not None and o.get("chain_beam", 3)
        if ranker and o.get("chain_scope", "graph") == "graph" and complex_ in ks:
            return None
        inverse, max_nodes = bool(o.get("inverse", True)), int(o.get("max_nodes", 2000))
        seeds = [self._table.index_of(e) for e in topics]
        kg, walks = self.kg, {}
        for k in ks:
            walk = push_walk(
                seeds, k, lambda rows: kg.walk_degrees(rows, inverse), lambda rows: kg.walk_edges(rows, inverse),
                damping=float(o.get("damping", 0.8)), eps=float(o.get("push_eps", PUSH_EPS)),
            )  # fmt: skip
            walk.kept = top_rows(walk.rows, walk.scores, np.asarray(seeds, dtype=np.int64), max_nodes)
            walks[k] = (walk, kg.entity_ids_at(walk.kept))
        return walks

    def _retrieve(self, query: str, k: int) -> Evidence:
        return self.evidence(query, k)

    def evidence(
        self, question: str, k: int = 5, *, route: str | None = None, topic_entities: list[str] | None = None
    ) -> Evidence:
        """:meth:`FRAGRetriever.evidence` over the fetched subgraph (``topic_entities``: skip linking)."""
        self._sync_index()
        if topic_entities is not None:
            topics, how, unknown = list(dict.fromkeys(topic_entities)), "given", []
        else:
            topics, how, unknown = self._linker.link(question)
        local_hops = self._local and self.hops is None and topics
        walks = self._walk(topics, route) if local_hops else None
        if walks:  # the bounded walks ran in the database: fetch what they keep
            sub = self.kg.subgraph_for(sorted({e for _, ids in walks.values() for e in ids}), 0)
        else:  # no topic: FRAG returns no path (dense passages only); any small subgraph serves
            sub = (
                self.kg.subgraph_for(topics, self._fetch_hops(route))
                if topics
                else self.kg.subgraph_for(self.kg.entities_with_triples(1), 1)
            )
        view = index_view(self.index, sub, relation_vectors=True)
        degrees = self.kg.degrees(sub.entity_ids) if local_hops and not walks else None
        frag = _ViewFRAG(view, self._local, degrees, walks, **self.options)
        frag._cache = self._cache
        ev = frag.evidence(question, k, route=route, topic_entities=topics)  # type: ignore[arg-type]
        ev.trace["linking"] = how
        if unknown:
            ev.trace["unknown_topic_entities"] = unknown
        if not topics:
            ev.trace["error"] = "no topic entity found in the question" + (
                f" (not in the graph: {unknown})" if unknown else ""
            )
        ev.trace["graph_db"] = _db_trace(self.kg, sub)
        return ev


class _LinkedTable:
    """The entity table, with :meth:`entities_of` (a passage's entities, row order) answered
    by the database: what KG-Translator's bridge step reads from a graph (links, not triples)."""

    def __init__(self, table: KnowledgeGraph, kg: PropertyGraphKG) -> None:
        self._table, self._kg = table, kg

    def entities_of(self, passage_id: str) -> list[str]:
        rows = self._kg.passage_entities([passage_id])
        return sorted({x["e"] for x in rows}, key=self._table.index_of)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._table

    def __repr__(self) -> str:
        return f"_LinkedTable({self._table!r})"


class DBTranslatorRetriever(Retriever):
    """``TranslatorRetriever`` (KG-Translator, paper §3) with its ParseKG in a graph database.

    The translator reads the ParseKG (sentences, hyperrelations, entity roles), not the triple
    graph: load it with :meth:`PropertyGraphParseKG.load` after the graph. The entity table
    (names, aliases: entity translation) and the hyperrelation texts (relation windows, embedded
    once) are fetched once; an entity's roles and sentences, and a passage's entities (the
    bridge step), are asked of the database per question. Same Evidence as in memory.

    Args:
        index: passages, vectors and embedder (its graph may be just ``kg.entity_table()``).
        kg: the :class:`PropertyGraphKG` holding the graph.
        parsekg: the database's ParseKG (default: ``PropertyGraphParseKG(kg)``).
        options: ``TranslatorRetriever`` settings (alpha, beta, dataset, backend, llm, fusion, ...).
    """

    name = "translator"

    def __init__(
        self, index: KnowledgeIndex, kg: PropertyGraphKG, parsekg: PropertyGraphParseKG | None = None, **options: Any
    ) -> None:
        self.kg = kg
        self.parsekg = parsekg if parsekg is not None else PropertyGraphParseKG(kg)
        self.options = options
        self.index = index
        self._refresh()

    def _refresh(self) -> None:
        from .translator.retriever import TranslatorRetriever

        table = _check_aligned(self.index, self.kg)
        view = index_view(self.index, _LinkedTable(table, self.kg), entity_vectors=True, parsekg=self.parsekg)
        if self._same_parsekg():  # the index's cached name / window vectors are this ParseKG's
            view.load_derived = self.index.load_derived  # type: ignore[method-assign]
            view.save_derived = self.index.save_derived  # type: ignore[method-assign]
            view.derived_path = self.index.derived_path  # type: ignore[method-assign]
        self.translator = TranslatorRetriever(view, **self.options)

    def _same_parsekg(self) -> bool:
        """Whether the index holds the same ParseKG as the database (hyperrelations and pools)."""
        mem, db = getattr(self.index, "parsekg", None), self.parsekg
        if mem is None or (mem.num_sentences, mem.num_hyperrelations) != (db.num_sentences, db.num_hyperrelations):
            return False
        return (
            all(mem.hyperrelation(h) == db.hyperrelation(h) for h in range(mem.num_hyperrelations))
            and mem.head_entities() == db.head_entities()
            and mem.tail_entities() == db.tail_entities()
        )

    def prepare(self) -> dict[str, float]:
        """:meth:`TranslatorRetriever.prepare` (entity tables, name and relation-window vectors)."""
        return self.translator.prepare()

    def _retrieve(self, query: str, k: int) -> Evidence:
        before = self.kg.stats["queries"]
        ev = self.translator.retrieve(query, k)
        ev.trace["graph_db"] = {"backend": self.kg.dialect.name, "queries": self.kg.stats["queries"] - before}
        return ev
