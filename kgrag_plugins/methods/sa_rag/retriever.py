"""SA-RAG: Spreading Activation RAG (Pavlović, Krész, Hajdu, arXiv 2512.15922; docs/methods.md §4, §6.3).

LLM-free retrieval (:class:`SARAGRetriever`, docs/methods.md §4(a) steps 1-10) for one query string x:

1. ``e_x`` = the L2-normalised query vector.
2. **Seeds**: the ``k`` entities whose ``"name: description"`` vectors are closest to ``e_x``
   (:func:`~kgrag_plugins.methods.activation.seed_entities`). SA-RAG ranks *description* nodes
   and keeps their distinct entities; our graph holds one description per entity, so this is
   simply the top-``k`` entities.
3. **Subgraph**: the seeds plus every entity reachable from a seed by a *directed* (out-edge)
   path of length 1..``hops``; then every triple with both endpoints in that set. Raw weight
   ``s = cos(e_x, emb("head relation tail"))`` with entity names. Edge vectors come from the
   index (``KnowledgeIndex.triple_vectors``: every triple embedded once, as the paper does at
   ingestion) or, for KGs too large for that, are embedded per query through an LRU cache
   (``edge_vectors="lazy"``).
4. The seeds are also the initially activated entities (activation 1).
5. Rescaled weights ``w = max(0, (s - c) / (1 - c))``, c = 0.4; activation spreads over the
   edges *undirected*. When several triples join the same pair of entities, the pair's weight is
   the largest of theirs (one neighbour entry per pair; the paper's Neo4j adjacency keeps one
   entry per relationship, whose order then decides which one counts; the maximum is the
   order-free reading). Self-loops do not spread activation.
6. Spreading activation (:func:`~kgrag_plugins.methods.activation.spread_bfs`): per seed, a BFS
   over the whole subgraph updating ``a(v) <- min(1, a(v) + w_uv a(u))``; neighbour lists in
   the order the pairs were first met (edges ranked by closeness to the seeds, see below).
7. Activated set ``A = {v : a(v) > activation_threshold}`` (0.5, strict).
8. **Documents**: every passage linked to an entity of ``A``, kept when
   ``cos(passage vector, e_x) >= document_threshold`` (0.45), sorted by that cosine (the
   passage's score), descending; no cap.
9. **Key relationships**: triples with both endpoints in ``A`` and rescaled weight
   ``>= relation_threshold`` (0.45 on the rescaled weight = the released code; the paper's
   text gives 0.5), sorted by weight, descending. They become the Evidence's facts.
10. :meth:`SARAGRetriever.context` renders ``"### Context \\n"`` + documents + key relationships.

**Subgraph cap** (a speed option, not in the paper; off by default). SA-RAG (§3, docs/methods.md §4(a)
step 3) spreads over the *whole* directed ``hops``-hop closure of the seeds, so the default is
``max_edges=None``, the paper's setting. On a dense LLM-free graph that closure is a large part
of the graph, so ``max_edges=N`` bounds the per-query work: when the subgraph has more than
``N`` triples we keep those closest to the seeds *as the spreading sees them*: distances are hop
counts from the nearest seed over the subgraph's edges taken undirected; triples are ranked by
the distance of their nearer endpoint, then of their farther endpoint, then by triple index, and
the first ``N`` are kept (entities left without a kept triple drop out; seeds stay). The same
ranking orders the neighbour lists when there is no cap. When the cap cuts, the trace says so
(``trace["subgraph"]["capped"]`` and ``trace["max_edges_cut"]``) and a DEBUG line is logged.
:data:`SPEED_MAX_EDGES` = 2000 is the value tuned on the MuSiQue mentions graph (23,388
entities, 81,018 triples), first 50 questions, k=3, h=4: the uncapped subgraph has a median of
6,628 entities and 27,296 triples (p90 7,827 / 31,228), while the triples that touch a seed or a
seed's neighbour (every triple on a path of at most two edges from a seed) number 507 at the
median and 1,761 at p90. Since activation decays as a product of rescaled weights (an entity
needs > 0.5), entities farther out are rarely activated; 2000 keeps that inner part whole for
about nine questions in ten. ``kgrag bench`` runs the paper default as ``sa-rag`` and the cap
as ``sa-rag-cap2000``.

:class:`SARAGCoT` is SA-RAG + CoT iterative retrieval (docs/methods.md §6.3): reasoning calls that
summarise the context and either stop or ask a follow-up question, whose text alone drives the
next SA retrieval, then a final answering call. Prompts: :mod:`.sa_rag_prompts`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...index.store import KnowledgeIndex
from ...models.prompting import data_block
from ...types import Evidence, ScoredPassage
from ..activation import (
    ActivationMemory,
    RoundTrace,
    TextVectorCache,
    rescale,
    seed_entities,
    spread_bfs,
    triple_text,
)
from ..base import Retriever
from ..facts import readable_facts

__all__ = [
    "CONTEXT_HEADER",
    "DEFAULT_MAX_EDGES",
    "RELATIONS_HEADER",
    "SARAGRetriever",
    "SPEED_MAX_EDGES",
]

logger = logging.getLogger(__name__)

#: First line of a context string (12 characters, the trailing space included, as in the paper's code).
CONTEXT_HEADER = "### Context "
#: Header of the key-relationship block of a context string.
RELATIONS_HEADER = "**Key relationships**"

#: The paper's subgraph: no cap on its triples (SA-RAG §3; docs/methods.md §4(a) step 3).
DEFAULT_MAX_EDGES: int | None = None
#: The speed option (see "Subgraph cap" in the module docstring): about the p90 number of
#: triples within one undirected hop of the seeds' neighbourhood on the MuSiQue mentions graph
#: (k=3, h=4). Not the paper's; tuned on MuSiQue.
SPEED_MAX_EDGES = 2000


def _csr_positions(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions of all CSR entries of ``rows`` (the row slices concatenated, vectorised)."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    starts = np.asarray(indptr[rows], dtype=np.int64)
    counts = np.asarray(indptr[rows + 1], dtype=np.int64) - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total, dtype=np.int64)


def _undirected_distance(nodes: np.ndarray, heads: np.ndarray, tails: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Hop distance from the nearest seed over the subgraph's edges taken undirected, indexed by
    entity row (entries outside ``nodes`` are meaningless). Unreachable nodes get a large value."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    m = len(nodes)
    hl, tl = np.searchsorted(nodes, heads), np.searchsorted(nodes, tails)
    adj = coo_matrix((np.ones(len(hl), dtype=np.float32), (hl, tl)), shape=(m, m)).tocsr()
    sl = np.unique(np.searchsorted(nodes, seeds))
    d = shortest_path(adj, directed=False, unweighted=True, indices=sl)
    d = np.atleast_2d(d).min(axis=0)
    d[~np.isfinite(d)] = np.iinfo(np.int32).max // 2
    out = np.zeros(int(nodes.max()) + 1 if m else 0, dtype=np.int64)
    out[nodes] = d.astype(np.int64)
    return out


@dataclass
class _Subgraph:
    """Step 3's subgraph: entity rows with their hop distance and the kept triples, in rank order."""

    hop: dict[int, int]  # entity row -> hop distance from the nearest seed (kept entities only)
    heads: np.ndarray  # entity rows
    tails: np.ndarray
    triples: np.ndarray  # triple indices
    reachable_entities: int
    reachable_edges: int
    capped: bool


class SARAGRetriever(Retriever):
    """SA-RAG retrieval (docs/methods.md §4(a) steps 1-10), LLM-free; see the module docstring.

    Args:
        index: a :class:`~kgrag_plugins.index.store.KnowledgeIndex` with a knowledge graph whose
            entities are linked to passages (e.g. ``builder="mentions"``); entity vectors are
            computed on first use if the index has none.
        k: number of seed entities (the paper's k: 3 for MuSiQue, 10 for 2WikiMultiHopQA).
        hops: length bound h of the directed paths that define the subgraph (4 / 3).
        c: weight rescaling constant, ``max(0, (s - c) / (1 - c))``.
        activation_threshold: an entity is activated when its activation is strictly above this.
        document_threshold: minimum query-passage cosine of a returned passage.
        relation_threshold: minimum *rescaled* weight of a key relationship (code: 0.45; the
            paper's text: 0.5).
        max_edges: ``None`` (default, the paper's): spread over the whole subgraph. An integer
            caps the subgraph's triples (closest to the seeds kept), a speed option that is not in
            the paper (:data:`SPEED_MAX_EDGES` = 2000 was tuned on MuSiQue); a cut is flagged in
            the trace (``max_edges_cut``).
        edge_vectors: where edge-text vectors come from. ``"index"``: the index's
            :attr:`~kgrag_plugins.index.store.KnowledgeIndex.triple_vectors` (every triple embedded
            once and stored with the index, like the paper's ingestion-time ``RELATED_TO``
            embeddings; computed on first use); ``"lazy"``: embed only the edges of each query's
            subgraph through an LRU cache (for KGs too large to embed whole); ``"auto"``
            (default): ``"index"`` up to 2M triples, else ``"lazy"``.
        edge_cache_size: entries of the edge-text vector LRU cache (``"lazy"`` mode; about
            1.6 kB each at 384 dimensions).

    Note the two different k: ``self.k`` is the number of seeds; ``retrieve(query, k)`` returns
    at most ``k`` passages (see :meth:`_retrieve`).

    Calibration: the defaults are the paper's, tuned for bge-large-en-v1.5, whose cosines run
    higher than MiniLM's (this package's default embedder). On the MuSiQue mentions index
    (first 50 questions, k=3, h=4) they return a median of 1 passage (none for 5 questions;
    Recall@5 0.45); ``c=0.2, document_threshold=0.3`` return a median of 11 (Recall@5 0.60).
    """

    name = "sa-rag"
    score_kind = "cosine"
    #: The paper's per-dataset k (seed entities) and h (hops), sa-rag.md §5.4.
    DATASET_DEFAULTS: dict[str, dict[str, int]] = {
        "musique": {"k": 3, "hops": 4},
        "2wikimultihopqa": {"k": 10, "hops": 3},
    }

    def __init__(
        self,
        index: KnowledgeIndex,
        *,
        k: int = 3,
        hops: int = 4,
        c: float = 0.4,
        activation_threshold: float = 0.5,
        document_threshold: float = 0.45,
        relation_threshold: float = 0.45,
        max_edges: int | None = DEFAULT_MAX_EDGES,
        edge_vectors: str = "auto",
        edge_cache_size: int = 100_000,
    ) -> None:
        graph = index.graph
        if graph.num_entities == 0:
            raise ValueError(
                "SA-RAG needs an index with a knowledge graph whose entities are linked to passages "
                "(build it with builder='mentions', 'parsekg' or 'llm'); this index has no entities"
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k (number of seed entities) must be a positive integer, got {k!r}")
        if isinstance(hops, bool) or not isinstance(hops, int) or hops < 0:
            raise ValueError(f"hops must be a non-negative integer, got {hops!r}")
        if not 0 <= c < 1:
            raise ValueError(f"rescaling constant c must be in [0, 1), got {c}")
        if max_edges is not None and (isinstance(max_edges, bool) or not isinstance(max_edges, int) or max_edges < 1):
            raise ValueError(f"max_edges must be a positive integer or None, got {max_edges!r}")
        vecs = index.entity_vectors
        if vecs is None or len(vecs) != graph.num_entities:
            raise ValueError(
                "SA-RAG needs an index with a knowledge graph and entity vectors (one per entity); "
                f"got {None if vecs is None else len(vecs)} vectors for {graph.num_entities} entities"
            )
        self.index = index
        self.k = k
        self.hops = hops
        self.c = float(c)
        self.activation_threshold = float(activation_threshold)
        self.document_threshold = float(document_threshold)
        self.relation_threshold = float(relation_threshold)
        self.max_edges = max_edges
        if edge_vectors not in ("auto", "index", "lazy"):
            raise ValueError(f"edge_vectors must be 'auto', 'index' or 'lazy', got {edge_vectors!r}")
        if edge_vectors == "auto":
            edge_vectors = "index" if graph.num_triples <= 2_000_000 else "lazy"
        self.edge_vectors = edge_vectors
        self._edge_cache = TextVectorCache(edge_cache_size)  # keyed by edge text: survives index updates
        self._refresh()

    def _refresh(self) -> None:
        """(Re)read the graph arrays; called again when the index changes (``index.revision``)."""
        graph = self.index.graph
        self._ids = graph.entity_ids
        self._out = graph.adjacency("out")
        self._links = graph.link_matrix().tocsr()
        self._pids = graph.passage_ids
        self._ppos = self.index.graph_passage_positions()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(k={self.k}, hops={self.hops}, c={self.c}, "
            f"activation_threshold={self.activation_threshold}, document_threshold={self.document_threshold}, "
            f"relation_threshold={self.relation_threshold}, max_edges={self.max_edges})"
        )

    @classmethod
    def for_dataset(cls, name: str, index: KnowledgeIndex, **overrides: Any) -> "SARAGRetriever":
        """A retriever with the paper's k and h for a benchmark (sa-rag.md §5.4).

        ``musique*`` -> k=3, h=4; ``2wiki*`` -> k=10, h=3. Any other dataset gets the MuSiQue
        setting: it is the paper's setting with the smaller seed set and the deeper, more
        selective spreading, the safer default for an unknown multi-hop corpus. ``overrides``
        (any constructor argument) win over the defaults.
        """
        key = name.strip().lower()
        if key.startswith("2wiki"):
            params = dict(cls.DATASET_DEFAULTS["2wikimultihopqa"])
        else:
            params = dict(cls.DATASET_DEFAULTS["musique"])
        params.update(overrides)
        return cls(index, **params)

    # ------------------------------------------------------------------ steps
    def _subgraph(self, seed_rows: Sequence[int]) -> _Subgraph:
        """Step 3: directed ``hops``-hop closure of the seeds and its induced triples (capped)."""
        indptr, indices = self._out.indptr, self._out.indices
        n = self.index.graph.num_entities
        dist = np.full(n, -1, dtype=np.int32)
        frontier = np.unique(np.asarray(seed_rows, dtype=np.int64))
        dist[frontier] = 0
        for d in range(1, self.hops + 1):
            nb = np.unique(indices[_csr_positions(indptr, frontier)])
            nb = nb[dist[nb] < 0]
            if not len(nb):
                break
            dist[nb] = d
            frontier = nb
        nodes = np.flatnonzero(dist >= 0)
        pos = _csr_positions(indptr, nodes)
        heads = np.repeat(nodes, np.asarray(indptr[nodes + 1] - indptr[nodes], dtype=np.int64))
        tails = np.asarray(indices[pos], dtype=np.int64)
        keep = dist[tails] >= 0
        heads, tails = heads[keep], tails[keep]
        tis = np.asarray(self._out.data[pos][keep], dtype=np.int64) - 1
        reachable_edges = len(tis)
        capped = self.max_edges is not None and reachable_edges > self.max_edges
        # Rank edges by closeness to the seeds as the (undirected) spreading sees it: the
        # distance of the nearer endpoint, then of the farther one, then triple index.
        ud = _undirected_distance(nodes, heads, tails, np.asarray(seed_rows, dtype=np.int64))
        near = np.minimum(ud[heads], ud[tails])
        far = np.maximum(ud[heads], ud[tails])
        order = np.lexsort((tis, far, near))
        heads, tails, tis = heads[order], tails[order], tis[order]
        if capped:
            heads, tails, tis = heads[: self.max_edges], tails[: self.max_edges], tis[: self.max_edges]
            kept = np.unique(np.concatenate([heads, tails, np.asarray(seed_rows, dtype=np.int64)]))
        else:
            kept = nodes
        return _Subgraph(
            hop={int(r): int(dist[r]) for r in kept},
            heads=heads,
            tails=tails,
            triples=tis,
            reachable_entities=len(nodes),
            reachable_edges=reachable_edges,
            capped=capped,
        )

    def _edge_vectors(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Vectors of edge texts through the LRU cache; returns them and how many were embedded."""
        return self._edge_cache.vectors(texts, lambda miss: self.index.embedder.embed(miss, progress=False))

    def acquire(self, query: str) -> Evidence:
        """SA-RAG knowledge acquisition for one query string (docs/methods.md §4(a) steps 1-10).

        Returns every passage that passes ``document_threshold`` (sorted by query cosine, which
        is the score; no cap), the key relationships as facts (``kind="fact"``, score = rescaled
        weight, ``data`` with head/relation/tail ids, raw cosine and source passages) and a
        JSON-able trace.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        self._sync_index()
        graph = self.index.graph
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        qv = np.asarray(self.index.embed_query(query), dtype=np.float32)
        seeds = seed_entities(self.index, qv, self.k)
        t1 = time.perf_counter()
        timings["embed_and_seed_ms"] = (t1 - t0) * 1e3

        sub = self._subgraph([graph.index_of(e) for e, _ in seeds])
        ids = self._ids
        t2 = time.perf_counter()
        timings["subgraph_ms"] = (t2 - t1) * 1e3

        if self.edge_vectors == "index" and len(sub.triples):
            evecs, embedded = self.index.triple_vectors[np.asarray(sub.triples, dtype=np.int64)], 0
        else:
            evecs, embedded = self._edge_vectors([triple_text(graph, int(ti)) for ti in sub.triples])
        raw = (evecs @ qv).astype(np.float64) if len(sub.triples) else np.zeros(0)
        weights = np.atleast_1d(rescale(raw, self.c)) if len(raw) else np.zeros(0)
        t3 = time.perf_counter()
        timings["edge_weights_ms"] = (t3 - t2) * 1e3

        # Undirected adjacency, one entry per entity pair with the largest weight of its triples.
        pair_w: dict[tuple[str, str], float] = {}
        for h, t, w in zip(sub.heads, sub.tails, weights):
            if h == t:
                continue
            u, v = ids[h], ids[t]
            key = (u, v) if u <= v else (v, u)
            if key not in pair_w or w > pair_w[key]:
                pair_w[key] = float(w)
        adjacency: dict[str, list[tuple[str, float]]] = {e: [] for e, _ in seeds}
        for (u, v), w in pair_w.items():
            adjacency.setdefault(u, []).append((v, w))
            adjacency.setdefault(v, []).append((u, w))

        memory = ActivationMemory(graph, seeds)
        seed_ids = [e for e, _ in seeds]
        memory_seeds = set(seed_ids)
        spread_bfs(adjacency, seed_ids, activation=memory.activation)
        activated = sorted(
            (e for e, a in memory.activation.items() if a > self.activation_threshold),
            key=lambda e: -memory.activation[e],
        )
        active = set(activated)
        t4 = time.perf_counter()
        timings["spread_ms"] = (t4 - t3) * 1e3

        # Step 8: documents of the activated entities, pruned by query cosine.
        rows = np.array(sorted(graph.index_of(e) for e in activated), dtype=np.int64)
        cols = np.unique(self._links.indices[_csr_positions(self._links.indptr, rows)])
        cols = cols[self._ppos[cols] >= 0]
        cos = self.index.passages.dense_scores(qv, self._ppos[cols]) if len(cols) else np.zeros(0)
        keep = cos >= self.document_threshold
        order = sorted(np.flatnonzero(keep), key=lambda i: (-float(cos[i]), int(cols[i])))
        store = self.index.passages
        passages = [ScoredPassage(store.get(self._pids[int(cols[i])]), float(cos[i])) for i in order]

        # Step 9: key relationships among activated entities.
        rel_idx = [
            i
            for i in range(len(sub.triples))
            if ids[sub.heads[i]] in active and ids[sub.tails[i]] in active and weights[i] >= self.relation_threshold
        ]
        rel_idx.sort(key=lambda i: -float(weights[i]))  # stable: ties keep the hop order
        memory.add_triples((int(sub.triples[i]) for i in rel_idx), value=None)
        facts = memory.facts({int(sub.triples[i]): float(weights[i]) for i in rel_idx})
        for f, i in zip(facts, rel_idx):
            f.data["raw_weight"] = round(float(raw[i]), 6)
        t5 = time.perf_counter()
        timings["documents_ms"] = (t5 - t4) * 1e3
        timings["total_ms"] = (t5 - t0) * 1e3

        memory.rounds.append(
            RoundTrace(
                round=1,
                frontier=seed_ids,
                candidates=len(sub.triples),
                selected=[f.text for f in facts],
                activated={e: round(memory.activation[e], 4) for e in activated if e not in memory_seeds},
                extra={"touched": sum(1 for a in memory.activation.values() if a > 0)},
            )
        )
        names: dict[str, float] = {}
        for e in activated:
            nm = graph.name_of(e)
            names[nm] = max(names.get(nm, 0.0), round(memory.activation[e], 4))
        hop_counts: dict[str, int] = {}
        for d in sub.hop.values():
            hop_counts[str(d)] = hop_counts.get(str(d), 0) + 1
        trace: dict[str, Any] = {
            "retriever": self.name,
            "score_kind": self.score_kind,
            "k": self.k,
            "hops": self.hops,
            "c": self.c,
            "thresholds": {
                "activation": self.activation_threshold,
                "document": self.document_threshold,
                "relation": self.relation_threshold,
            },
            "seeds": [{"id": e, "name": graph.name_of(e), "score": round(s, 4)} for e, s in seeds],
            "subgraph": {
                "entities": len(sub.hop),
                "edges": int(len(sub.triples)),
                "pairs": len(pair_w),
                "entities_by_hop": hop_counts,
                "reachable_entities": int(sub.reachable_entities),
                "reachable_edges": int(sub.reachable_edges),
                "capped": bool(sub.capped),
                "max_edges": self.max_edges,
                "edge_texts_embedded": int(embedded),
            },
            "activation": names,
            "activated": [
                {"id": e, "name": graph.name_of(e), "activation": round(memory.activation[e], 4)} for e in activated
            ],
            "rounds": [r.to_dict() for r in memory.rounds],
            "documents": {"candidates": int(len(cols)), "kept": len(passages)},
            "relations": len(facts),
            "timings_ms": {key: round(v, 2) for key, v in timings.items()},
        }
        if sub.capped:  # the speed option cut the paper's subgraph: say so (module docstring)
            trace["max_edges_cut"] = {
                "max_edges": self.max_edges,
                "kept_edges": int(len(sub.triples)),
                "reachable_edges": int(sub.reachable_edges),
            }
            logger.debug(
                "SA-RAG subgraph cut to %d of %d triples by max_edges=%s (speed option, not the paper's)",
                len(sub.triples),
                sub.reachable_edges,
                self.max_edges,
            )
        if not passages:
            trace["note"] = (
                f"no document passed the threshold (cos >= {self.document_threshold}) among "
                f"{len(cols)} passage(s) of {len(activated)} activated entit{'y' if len(activated) == 1 else 'ies'}"
            )
        return Evidence(query, passages, readable_facts(facts, self.index), trace)

    def _retrieve(self, query: str, k: int) -> Evidence:
        """:meth:`acquire`, then the first ``k`` passages by query cosine.

        No padding: SA-RAG returns only passages that pass ``document_threshold``, so when fewer
        than ``k`` pass, fewer are returned (faithful to the method). All key relationships are
        kept. ``trace["returned"]`` / ``trace["available"]`` give the counts.
        """
        ev = self.acquire(query)
        out = ev.top(k)
        out.trace["available"] = len(ev.passages)
        out.trace["returned"] = len(out.passages)
        return out

    @staticmethod
    def context(evidence: Evidence) -> str:
        """The SA-RAG context string (docs/methods.md §4(a) step 10).

        ``"### Context \\n"`` + the documents (``title\\ntext``; the paper's corpus had no titles)
        joined by blank lines + ``"\\n**Key relationships**\\n"`` + one relationship per line.
        Documents and relationships sit in ``<passages>`` / ``<facts>`` data blocks (escaped;
        :func:`~kgrag_plugins.models.prompting.data_block`), an addition to the paper's format.
        """
        docs = data_block("passages", "\n\n".join(sp.passage.embed_text for sp in evidence.passages))
        rels = data_block("facts", [f.display for f in evidence.facts])
        return f"{CONTEXT_HEADER}\n{docs}\n{RELATIONS_HEADER}\n{rels}"

    @property
    def edge_cache_stats(self) -> dict[str, int]:
        """Size, hits and misses of the edge-text vector cache."""
        return {"size": len(self._edge_cache), "hits": self._edge_cache.hits, "misses": self._edge_cache.misses}
