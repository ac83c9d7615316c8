"""Spreading-activation engine shared by KG-Infused RAG (docs/methods.md §1) and SA-RAG (§4).

Both methods start from seed entities found by embedding similarity, grow an activated part of
the knowledge graph round by round (KG-Infused: LLM/embedding triple selection over a frontier;
SA-RAG: weighted breadth-first accumulation) and hand back the activated facts. The pieces they
share live here:

- :func:`seed_entities` — top-k entities by cosine between the query and entity vectors
  (``"name: description"``; KG-Infused RAG §3.2 / SA-RAG §3 step 2).
- :func:`out_triples` — an entity's outgoing triples, capped by a seeded random sample
  (KG-Infused code: ``N_MAX_TRIPLES_EACH_ENTITY`` = 50, ``random.sample`` with seed 42).
- :func:`rescale` — SA-RAG's edge-weight rescaling ``max(0, (w - c) / (1 - c))``, c = 0.4.
- :func:`spread_bfs` — SA-RAG's per-seed BFS accumulation ``a(v) <- min(1, a(v) + w·a(u))``.
- :class:`ActivationMemory` — activated entities with their values, accumulated triples
  (ordered, de-duplicated), the explored set, frontier bookkeeping with the per-round cap
  (``MAX_ENTITIES_PER_ROUND`` = 10) and a per-round trace.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..index.graph import KnowledgeGraph
from ..index.store import KnowledgeIndex
from ..types import Evidence, Fact, ScoredPassage, note_fallback
from .activation_rank import TitleMentions, bridge_rank, second_hop  # noqa: F401  (TitleMentions: re-exported)
from .base import Retriever

#: KG-Infused RAG caps (docs/methods.md §1(b)).
MAX_TRIPLES_PER_ENTITY = 50
MAX_ENTITIES_PER_ROUND = 10
#: From this many nodes (entities + passages; about 40k passages of Wikipedia text) the
#: activation retriever takes its dense seeds from the Chroma index instead of a product with
#: every passage vector (and, with ``spreading="auto"``, spreads by residual push).
PUSH_MIN_NODES = 150_000
#: ``ActivationRetriever(spreading=...)`` values (see its docstring).
SPREADING = ("auto", "push", "power")
#: Residual below which push stops moving a node's mass (sources carry mass 1 in all). 5e-5: on the
#: 100k-passage index the top-5 passages match exact PageRank as often as at 1e-5 (99 of 100
#: questions), and forced on the four shared halves R@5 equals power iteration on all four.
PUSH_EPS = 5e-5
#: BM25 top passages added as activation sources (chosen leave-one-dataset-out).
DEFAULT_BM25_SEEDS = 1


def rescale(weights: np.ndarray | float, c: float = 0.4) -> np.ndarray | float:
    """SA-RAG edge weights: ``max(0, (w - c) / (1 - c))`` (paper §5.5 "linear factor c")."""
    if not 0 <= c < 1:
        raise ValueError(f"rescaling constant c must be in [0, 1), got {c}")
    out = np.maximum(0.0, (np.asarray(weights, dtype=np.float64) - c) / (1.0 - c))
    return float(out) if np.ndim(out) == 0 else out


def seed_entities(index: KnowledgeIndex, query_vector: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The ``k`` entities whose vectors are most similar (cosine) to the query.

    Entity vectors embed ``"name: description"`` (SA-RAG's text; KG-Infused RAG's code embeds the
    description alone — one vector per entity serves both, a documented deviation).
    """
    vecs = index.entity_vectors
    if vecs is None or k < 1:
        return []
    sims = vecs @ np.asarray(query_vector, dtype=vecs.dtype)
    k = min(k, len(sims))
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    ids = index.graph.entity_ids
    return [(ids[i], float(sims[i])) for i in top]


def out_triples(graph: KnowledgeGraph, entity_id: str, cap: int = MAX_TRIPLES_PER_ENTITY, seed: int = 42) -> list[int]:
    """Indices of an entity's outgoing triples, in triple order; a seeded random sample of
    ``cap`` (kept in triple order) when there are more (KG-Infused RAG code)."""
    out = graph.adjacency("out")
    row = graph.index_of(entity_id)
    tis = sorted(int(t) - 1 for t in out.data[out.indptr[row] : out.indptr[row + 1]])
    if cap and len(tis) > cap:
        tis = sorted(random.Random(seed).sample(tis, cap))
    return tis


def triple_text(graph: KnowledgeGraph, ti: int, sep: str = " ") -> str:
    """Verbalise triple ``ti`` with entity names: ``"head relation tail"`` (``sep=" | "`` gives
    KG-Infused RAG's ``head | relation | tail``)."""
    t = graph.triple(ti)
    return sep.join((graph.name_of(t.head), t.relation, graph.name_of(t.tail)))


class TextVectorCache:
    """A bounded, thread-safe LRU map text -> vector, shared by the methods that embed triple
    texts or queries on the fly (SA-RAG's lazy edge vectors, KG-Infused RAG's candidates)."""

    def __init__(self, size: int) -> None:
        self.size = max(0, int(size))
        self._d: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._d)

    def get_many(self, keys: Sequence[str]) -> list[np.ndarray | None]:
        out: list[np.ndarray | None] = []
        with self._lock:
            for key in keys:
                v = self._d.get(key)
                if v is not None:
                    self._d.move_to_end(key)
                    self.hits += 1
                else:
                    self.misses += 1
                out.append(v)
        return out

    def put_many(self, keys: Sequence[str], values: Sequence[np.ndarray]) -> None:
        if not self.size:
            return
        with self._lock:
            for key, v in zip(keys, values):
                self._d[key] = v
                self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)

    def vectors(self, texts: Sequence[str], embed) -> tuple[np.ndarray, int]:
        """Vectors of ``texts`` (rows in order); only distinct misses go to ``embed(list) -> array``.
        Returns the stacked vectors (shape ``(0, 0)`` for no texts) and how many were embedded."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32), 0
        cached = self.get_many(texts)
        missing = list(dict.fromkeys(t for t, v in zip(texts, cached) if v is None))
        fresh: dict[str, np.ndarray] = {}
        if missing:
            vecs = np.asarray(embed(missing), dtype=np.float32)
            self.put_many(missing, vecs)
            fresh = dict(zip(missing, vecs))
        return np.stack([v if v is not None else fresh[t] for t, v in zip(texts, cached)]), len(missing)


def triple_fact(graph: KnowledgeGraph, ti: int, score: float, sep: str = " ") -> Fact:
    """Triple ``ti`` as a :class:`~kgrag_plugins.types.Fact` (``data``: head/relation/tail ids, sources)."""
    t = graph.triple(ti)
    data = {"head": t.head, "relation": t.relation, "tail": t.tail, "sources": t.source_ids}
    return Fact(triple_text(graph, ti, sep), kind="fact", score=score, data=data)


def spread_bfs(
    adjacency: Mapping[Any, Sequence[tuple[Any, float]]],
    seeds: Sequence[Any],
    activation: dict[Any, float] | None = None,
) -> dict[Any, float]:
    """SA-RAG spreading activation (docs/methods.md §4(b); code ``_diffusion_process``).

    For each seed in order: ``a(seed) = max(1, a(seed))``; a BFS from the seed with a fresh
    visited set expands every node at most once, using its activation at expansion time, and
    updates *every* neighbour ``a(v) <- min(1, a(v) + w_uv · a(u))`` (already visited
    neighbours gain activation too but do not re-spread it). Activations persist across seeds.
    ``adjacency`` maps a node to ``(neighbour, rescaled weight)`` pairs (undirected: both
    directions listed). Returns the activation dict (updated in place when given).
    """
    act: dict[Any, float] = activation if activation is not None else {}
    for s in seeds:
        act[s] = max(1.0, act.get(s, 0.0))
        visited = {s}
        queue: deque[Any] = deque([s])
        while queue:
            u = queue.popleft()
            au = act.get(u, 0.0)
            for v, w in adjacency.get(u, ()):
                if w > 0:
                    act[v] = min(1.0, act.get(v, 0.0) + w * au)
                if v not in visited:
                    visited.add(v)
                    queue.append(v)
    return act


@dataclass
class RoundTrace:
    """What one activation round did (all entity references are ids)."""

    round: int
    frontier: list[str]
    candidates: int = 0
    selected: list[str] = field(default_factory=list)  # verbalised triples chosen this round
    activated: dict[str, float] = field(default_factory=dict)  # newly activated entity -> value
    next_frontier: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ActivationMemory:
    """Activation state of one query: ``G_q^act`` and ``E_q^act`` (KG-Infused RAG Eq. 5).

    - ``activation``: entity id -> activation value in [0, 1] (insertion order = activation order)
    - ``triples``: accumulated triple indices, de-duplicated, in selection order
    - ``explored``: entities that were ever in a frontier (never expanded twice)
    - ``rounds``: one :class:`RoundTrace` per round
    """

    def __init__(self, graph: KnowledgeGraph, seeds: Iterable[tuple[str, float]] = ()) -> None:
        self.graph = graph
        self.seeds: list[tuple[str, float]] = []
        self.activation: dict[str, float] = {}
        self.triples: list[int] = []
        self._triple_set: set[int] = set()
        self.explored: set[str] = set()
        self.rounds: list[RoundTrace] = []
        for eid, score in seeds:
            self.seeds.append((eid, float(score)))
            self.activate(eid, 1.0)

    def activate(self, entity_id: str, value: float = 1.0) -> float:
        """Raise an entity's activation to at least ``value`` (capped at 1); returns it."""
        v = min(1.0, max(self.activation.get(entity_id, 0.0), float(value)))
        self.activation[entity_id] = v
        return v

    def add_triples(self, triple_ids: Iterable[int], *, value: float | None = 1.0) -> list[int]:
        """Add triples (order kept, duplicates and already-held triples dropped); returns the new
        ones. Their endpoints are activated with ``value`` (``None``: leave activation alone)."""
        new: list[int] = []
        for ti in triple_ids:
            ti = int(ti)
            if ti in self._triple_set:
                continue
            self._triple_set.add(ti)
            self.triples.append(ti)
            new.append(ti)
            if value is not None:
                t = self.graph.triple(ti)
                self.activate(t.head, value)
                self.activate(t.tail, value)
        return new

    def next_frontier(self, triple_ids: Iterable[int], cap: int = MAX_ENTITIES_PER_ROUND) -> list[str]:
        """KG-Infused RAG Eq. 6: tails of ``triple_ids`` not yet explored, de-duplicated in order,
        truncated to ``cap``; they are marked explored."""
        out: list[str] = []
        for ti in triple_ids:
            tail = self.graph.triple(int(ti)).tail
            if tail in self.explored or tail in out:
                continue
            out.append(tail)
            if cap and len(out) >= cap:
                break
        self.explored.update(out)
        return out

    def facts(self, scores: Mapping[int, float] | None = None, sep: str = " ") -> list[Fact]:
        """The accumulated triples as :class:`~kgrag_plugins.types.Fact` (``kind="fact"``)."""
        return [triple_fact(self.graph, ti, float((scores or {}).get(ti, 1.0)), sep) for ti in self.triples]

    def trace(self) -> dict[str, Any]:
        """JSON-able trace: seeds, rounds, final activation (entity names included)."""
        g = self.graph
        return {
            "seeds": [{"id": e, "name": g.name_of(e), "score": round(s, 4)} for e, s in self.seeds],
            "rounds": [r.to_dict() for r in self.rounds],
            "activated": {e: round(v, 4) for e, v in self.activation.items()},
            "activated_names": {g.name_of(e): round(v, 4) for e, v in self.activation.items()},
            "facts": [triple_text(g, ti) for ti in self.triples],
        }


# =========================================================================== the recommended retriever
def _rrf(*scores: np.ndarray, k: int = 60, depth: int = 100) -> np.ndarray:
    """Reciprocal-rank fusion of score vectors over the same passages (top ``depth`` of each)."""
    out = np.zeros(len(scores[0]))
    for sc in scores:
        top = np.argsort(-sc, kind="stable")[:depth]
        out[top] += 1.0 / (k + 1 + np.arange(len(top)))
    return out


class _Cosines:
    """Passage cosines to the query computed per row on demand (large corpora, where the dense
    seeds come from the Chroma index and only the bridge candidates need a cosine)."""

    def __init__(self, store: Any, q: np.ndarray) -> None:
        self._store, self._q = store, q

    def __getitem__(self, i: Any) -> Any:
        """The cosine of row ``i`` (a float), or of rows ``i`` (an array, scored in one call)."""
        if np.ndim(i):
            return self._store.dense_scores(self._q, np.asarray(i))
        return float(self._store.dense_scores(self._q, np.array([i]))[0])

    def __len__(self) -> int:
        return len(self._store.vectors)

    def full(self) -> np.ndarray:
        return self._store.dense_scores(self._q)


class ActivationRetriever(Retriever):
    """The project's recommended LLM-free spreading-activation retriever (``"activation"``).

    Activation spreads by personalized PageRank (a form of spreading activation with decay
    ``damping`` per hop and restart at the sources) over one graph whose nodes are the
    entities *and* the passages of the index: passage–entity edges from the mention links
    (weight 1) and entity–entity edges from the triples (weight ``entity_edge_weight``, 0.5;
    undirected, parallel triples count once). Two kinds of sources are activated:

    - **question entities** (:func:`~kgrag_plugins.index.builders.linking.link_question`: NER +
      name n-grams), each weighted by its specificity ``1 / #passages mentioning it`` (the
      node specificity of HippoRAG), the group carrying ``entity_weight`` (2) of mass;
    - **the best dense passages**: the top ``dense_seeds`` (5) by cosine, weighted by a softmax
      of their cosine with temperature ``temperature`` (0.02), the group carrying mass 1.

    Passages are ranked by the activation they end with. This is the fusion with the dense
    ranking: dense evidence enters as activation at the passage nodes, graph evidence moves
    it to passages that share entities with the question and with the best dense hits (the
    bridge passages of multi-hop questions). Passage scores are the PPR mass each passage ends
    with (``score_kind``). A question with no linked entity spreads from the passage seeds only
    (``trace["fallback"]``: ``"passage seeds only"``, ``"no entity found"``); with no passage
    vectors either it falls back to dense search.

    **Bridge expansion** (``bridge`` slots, 2; 0 turns it off): the last ``bridge`` places of
    the top-k (at most half of k) go to the passages whose *titles the first-ranked passage
    names* (:class:`TitleMentions`), best dense cosine to the question first, when they are not
    already ranked above. Activation reaches a bridge page only through an entity the graph
    linked; a title mention needs no NER span ("an Australian politician" names the page
    "Politician"). Measured leave-one-dataset-out (``benchmarks/loo_activation.py``).

    **BM25 seeds** (``bm25_seeds``, 1): the BM25 top passages join the sources as a third group
    (softmax of their BM25 scores, mass 1). One seed was chosen leave-one-dataset-out
    (``benchmarks/loo_activation.py``, docs/activation.md): the exact-name page a question asks
    about is often BM25's first hit and not in the dense top 5; five seeds cost MuSiQue points.
    ``fusion="rrf"`` (reciprocal-rank fusion of the activation and dense rankings, k = 60) is
    off: it was lower on every set.

    Two rank-for-the-reader options (issue 35; off by default, measured in the same script):
    ``bm25_mass`` scales the BM25 group's mass (1 by default; a single BM25 seed otherwise weighs
    as much as the five dense seeds together), and ``bridge_promote`` (a cosine margin, ``None``:
    off) moves the first bridge page right after the first passage (place 2, the chain's second
    hop) when its cosine to the question is at least the second passage's minus the margin;
    with ``chain_check`` only when place 2 holds no page the question or the first passage names
    by title and the question does not name the bridge page itself.
    ``second_hop`` (:func:`~.activation_rank.second_hop`): when place 2 does not continue the
    chain from place 1 (no page the question or the first passage names, no question entity's
    page, no passage mentioning a *bridge entity*: one the first passage mentions and the
    question does not), the top-k passage that does moves to place 2 (``trace["second_hop"]``).

    **Spreading** (``spreading``, ``"push"``): residual push (:meth:`push`, cost follows the
    sources' neighbourhood, not the graph), ``"power"`` (power iteration over the whole matrix, the
    exact fixed point to ``tol``; every published figure before 2026-11-28 was measured so) or
    ``"auto"`` (power below ``PUSH_MIN_NODES`` nodes). Push at ``PUSH_EPS`` gives the same R@5 as
    power on all four shared halves and R@2 equal or higher (``benchmarks/loo_activation.py
    --configs default,power,push``), in half the time (docs/activation.md).

    Facts are the triples among the most activated entities; the trace lists sources, the top
    activated entities and their values (and ``bridges``, the pages placed by the expansion).

    Settings were chosen once on the shared development halves of MuSiQue, 2Wiki, HotpotQA
    and PopQA together (no per-dataset values); see ``docs/activation.md``.
    """

    name = "activation"
    score_kind = "PPR mass"

    def __init__(
        self,
        index: KnowledgeIndex,
        *,
        damping: float = 0.5,
        entity_weight: float = 2.0,
        dense_seeds: int = 5,
        temperature: float = 0.02,
        entity_edge_weight: float = 0.5,
        bridge: int = 2,
        bm25_seeds: int = DEFAULT_BM25_SEEDS,
        bm25_mass: float = 1.0,
        bridge_promote: float | None = None,
        chain_check: bool = False,
        second_hop: bool = False,
        fusion: str | None = None,
        spreading: str = "push",
        max_iter: int = 50,
        tol: float = 1e-6,
        max_facts: int = 10,
    ) -> None:
        if index.graph.num_entities == 0:
            raise ValueError(
                "ActivationRetriever needs an index with a knowledge graph linked to its passages "
                "(KnowledgeIndex.build(..., builder='mentions'))"
            )
        if not 0 < damping < 1:
            raise ValueError(f"damping must be in (0, 1), got {damping}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if bridge < 0 or bm25_seeds < 0:
            raise ValueError(f"bridge and bm25_seeds must be >= 0, got {bridge} and {bm25_seeds}")
        if bm25_mass < 0:
            raise ValueError(f"bm25_mass must be >= 0, got {bm25_mass}")
        if bridge_promote is not None and not bridge_promote >= 0:
            raise ValueError(f"bridge_promote must be None or a margin >= 0, got {bridge_promote!r}")
        if fusion not in (None, "rrf"):
            raise ValueError(f"fusion must be None or 'rrf', got {fusion!r}")
        if spreading not in SPREADING:
            raise ValueError(f"spreading must be one of {', '.join(SPREADING)}, got {spreading!r}")
        self.index = index
        self.damping = damping
        self.entity_weight = entity_weight
        self.dense_seeds = dense_seeds
        self.temperature = temperature
        self.entity_edge_weight = entity_edge_weight
        self.bridge = bridge
        self.bm25_seeds = bm25_seeds
        self.bm25_mass = bm25_mass
        self.bridge_promote = bridge_promote
        self.chain_check = chain_check
        self.second_hop = second_hop
        self.fusion = fusion
        self.spreading = spreading
        self.max_iter = max_iter
        self.tol = tol
        self.max_facts = max_facts
        self._refresh()

    def _refresh(self) -> None:
        """(Re)build the name index and the entity+passage transition matrix from the index."""
        from ..index.builders.linking import NameIndex

        self._names = NameIndex.from_graph(self.index.graph)
        self._build_matrix()
        self._titles = TitleMentions([p.title for p in self.index.passages]) if self.bridge else None

    def _build_matrix(self) -> None:
        import scipy.sparse as sp

        g, store = self.index.graph, self.index.passages
        n_e, n_p = g.num_entities, len(store)
        links = g.link_matrix().tocoo()
        cols = self.index.graph_passage_positions()
        pos = cols[links.col] if links.nnz else np.zeros(0, np.int64)
        keep = pos >= 0
        link = sp.csr_matrix((np.ones(int(keep.sum())), (links.row[keep], pos[keep])), shape=(n_e, n_p))
        link.data[:] = 1.0
        adj = g.adjacency("out").copy()
        adj.data = np.ones_like(adj.data, dtype=np.float64)
        adj = (adj + adj.T).tocsr()
        adj.data = np.minimum(adj.data, 1.0) * self.entity_edge_weight
        m = sp.bmat([[adj, link], [link.T, None]], format="csr")
        self._mentions = np.asarray(link.sum(axis=1)).ravel()  # passages per entity
        self._n_e, self._n_p = n_e, n_p
        deg = self._degrees(m)
        inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
        self._trans = (sp.diags(inv) @ m).T.tocsr()  # column-stochastic where deg > 0
        self._rows = None  # its transpose, built on the first push
        self._dangling = deg == 0

    def _degrees(self, m) -> np.ndarray:
        """Row sums of the walk matrix ``m`` (a subclass walking a fetched subgraph divides by the
        whole graph's degrees instead)."""
        return np.asarray(m.sum(axis=1)).ravel()

    def _sources(
        self, query: str, qvec: np.ndarray
    ) -> tuple[np.ndarray, list[tuple[str, float]], list[tuple[int, float]], np.ndarray | None]:
        from ..index.builders.linking import link_question

        n_e = self._n_e
        s = np.zeros(n_e + self._n_p)
        g = self.index.graph
        ents = link_question(g, query, names=self._names)
        ent_w: list[tuple[str, float]] = []
        if ents:
            rows = np.array([g.index_of(e) for e in ents])
            w = 1.0 / np.maximum(1.0, self._mentions[rows])
            w = self.entity_weight * w / w.sum()
            s[rows] += w
            ent_w = [(e, float(x)) for e, x in zip(ents, w)]
        psg_w: list[tuple[int, float]] = []
        store = self.index.passages
        vecs = store.vectors
        q = np.asarray(qvec, dtype=vecs.dtype)
        large = self._large  # the dense seeds from Chroma's index
        sims = (_Cosines(store, q) if large else store.dense_scores(q)) if len(vecs) else None
        if self.dense_seeds > 0 and sims is not None:
            n = min(self.dense_seeds, len(vecs))
            if large:
                hits = store.dense_search(qvec, n)
                top = np.array([store.position(p.id) for p, _ in hits], dtype=np.int64)
                top_sims = np.array([x for _, x in hits])
            else:
                top = np.argpartition(-sims, n - 1)[:n]
                top = top[np.argsort(-sims[top], kind="stable")]
                top_sims = sims[top]
            w = np.exp((top_sims - top_sims[0]) / self.temperature)
            w /= w.sum()
            s[n_e + top] += w
            psg_w = [(int(i), float(x)) for i, x in zip(top, w)]
        if self.bm25_seeds > 0 and self.bm25_mass > 0:  # BM25 top passages, softmax, mass bm25_mass
            hits = self.index.passages.bm25_search(query, self.bm25_seeds)
            if hits:
                pos = np.array([self.index.passages.position(p.id) for p, _ in hits])
                sc = np.array([x for _, x in hits])
                w = np.exp(sc - sc.max())
                w = self.bm25_mass * w / w.sum()
                s[n_e + pos] += w
                psg_w += [(int(i), float(x)) for i, x in zip(pos, w)]
        return s, ent_w, psg_w, sims

    @property
    def _large(self) -> bool:
        """At least ``PUSH_MIN_NODES`` nodes: dense seeds from Chroma (and push with ``"auto"``)."""
        return self._n_e + self._n_p >= PUSH_MIN_NODES

    def spread(self, sources: np.ndarray) -> np.ndarray:
        """Personalized PageRank from ``sources`` (entity rows then passage positions).

        ``spreading="power"``: power iteration over the whole matrix until the L1 change is below
        ``tol`` (cost follows the graph); ``"push"``: :meth:`push` (cost follows the mass);
        ``"auto"``: power below ``PUSH_MIN_NODES`` nodes, push from there."""
        if self.spreading == "push" or (self.spreading == "auto" and self._large):
            return self.push(sources)
        s = sources / sources.sum()
        r = s.copy()
        d = self.damping
        for _ in range(self.max_iter):
            nxt = d * (self._trans @ r + r[self._dangling].sum() * s) + (1 - d) * s
            done = np.abs(nxt - r).sum() < self.tol
            r = nxt
            if done:
                break
        return r

    def push(self, sources: np.ndarray, eps: float = PUSH_EPS) -> np.ndarray:
        """The same personalized PageRank by residual push (Andersen, Chung & Lang 2006), one
        vectorised round at a time: every node whose residual exceeds ``eps`` keeps ``1 - damping``
        of it and passes ``damping`` to its out-neighbours (a dangling node: back to the sources).
        Each value is within about ``eps`` times the node count reached of the fixed point."""
        s = sources / sources.sum()
        if self._rows is None:
            self._rows = self._trans.T.tocsr()  # row u = where u's mass goes
        d, rows = self.damping, self._rows
        r, res = np.zeros_like(s), s.copy()
        while True:
            act = np.flatnonzero(res > eps)
            if not len(act):
                return r
            m = res[act]
            res[act] = 0.0
            r[act] += (1 - d) * m
            dang = self._dangling[act]
            if dang.any():
                res += d * float(m[dang].sum()) * s
                act, m = act[~dang], m[~dang]
            if len(act):
                res += rows[act].T @ (d * m)

    def _retrieve(self, query: str, k: int) -> Evidence:
        qvec = self.index.embed_query(query)
        sources, ent_w, psg_w, sims = self._sources(query, qvec)
        trace: dict[str, Any] = {"retriever": self.name}
        if sources.sum() <= 0:  # no linked entity and an index without passage vectors
            hits = self.index.passages.dense_search(qvec, k)
            trace["score_kind"] = "cosine"
            note_fallback(trace, "dense", "no entity found and no passage seeds")
            return Evidence(query, [ScoredPassage(p, s) for p, s in hits], trace=trace)
        if not ent_w:
            note_fallback(trace, "passage seeds only", "no entity found")
        act = self.spread(sources)
        ent, psg = act[: self._n_e], act[self._n_e :]
        if self.fusion == "rrf" and sims is not None:
            psg = _rrf(psg, sims.full() if isinstance(sims, _Cosines) else sims)
            trace["score_kind"] = "fusion rank (RRF)"
        n = min(k, len(psg))
        top = np.argpartition(-psg, n - 1)[:n] if n else np.zeros(0, int)
        top = [int(i) for i in top[np.argsort(-psg[top], kind="stable")] if psg[i] > 0]
        store = self.index.passages
        top, bridged = self._bridge(top, k, sims, query)
        if self.second_hop:
            top, moved = second_hop(
                top,
                graph=self.index.graph,
                passage_of=store.at,
                question_entities=[e for e, _ in ent_w],
                sims=sims,
                query=query,
            )
            if moved:
                trace["second_hop"] = moved
        passages = []
        for i in top:  # bridged passages keep the order they were placed in (scores non-increasing)
            score = float(psg[i]) if not passages else min(float(psg[i]), passages[-1].score)
            passages.append(ScoredPassage(store.at(i), score))
        g = self.index.graph
        ids = g.entity_ids
        m = min(20, len(ent))
        top_e = np.argpartition(-ent, m - 1)[:m] if m else np.zeros(0, int)
        top_e = top_e[np.argsort(-ent[top_e], kind="stable")]
        peak = float(ent[top_e[0]]) if len(top_e) and ent[top_e[0]] > 0 else 1.0
        activated = [(ids[i], float(ent[i]) / peak) for i in top_e if ent[i] > 0]
        trace.update(
            seeds=[{"id": e, "name": g.name_of(e), "weight": round(w, 4)} for e, w in ent_w],
            passage_seeds=[{"id": store.at(i).id, "weight": round(w, 4)} for i, w in psg_w],
            activated=[{"id": e, "name": g.name_of(e), "activation": round(v, 4)} for e, v in activated],
        )
        if bridged:
            src = store.at(top[0]).id
            trace["bridges"] = [{"id": store.at(i).id, "title": store.at(i).title, "from": src} for i in bridged]
        facts = self._facts(activated)
        return Evidence(query, passages, facts, trace)

    def _bridge(self, top: list[int], k: int, sims: Any, query: str = "") -> tuple[list[int], list[int]]:
        """Bridge expansion (:func:`~.activation_rank.bridge_rank`): the last ``min(bridge, k // 2)``
        places go to the pages the first passage names by title. Returns (ranking, bridged)."""
        slots = min(self.bridge, k // 2)
        if not slots or not top or self._titles is None or sims is None:
            return top, []
        return bridge_rank(
            top,
            k,
            slots,
            titles=self._titles,
            passage_of=self.index.passages.at,
            sims=sims,
            query=query,
            promote=self.bridge_promote,
            chain_check=self.chain_check,
        )

    def _facts(self, activated: list[tuple[str, float]]) -> list[Fact]:
        """Triples joining two of the most activated entities, strongest first."""
        if not self.max_facts or len(activated) < 2:
            return []
        g = self.index.graph
        val = {g.index_of(e): v for e, v in activated}
        rows = np.fromiter(val, dtype=np.int64, count=len(val))
        act = np.fromiter(val.values(), dtype=np.float64, count=len(val))
        out = g.adjacency("out")[rows]  # only the edges between activated entities (hubs have thousands)
        src = np.repeat(np.arange(len(rows)), np.diff(out.indptr))
        tgt = out.indices
        keep = np.isin(tgt, rows) & (tgt != rows[src])
        where = {int(u): i for i, u in enumerate(rows)}
        tgt_pos = np.array([where[int(v)] for v in tgt[keep]], dtype=np.int64)
        score = np.sqrt(act[src[keep]] * act[tgt_pos])
        found = dict(zip((out.data[keep].astype(np.int64) - 1).tolist(), score.tolist()))
        best = sorted(found.items(), key=lambda x: (-x[1], x[0]))[: self.max_facts]
        return [triple_fact(g, ti, round(score, 4)) for ti, score in best]
