"""KnowledgeGraph: entities, triples and entity<->passage links with CSR adjacency.

Storage is columnar so a Wikidata5M-sized graph fits in a few GB: triples are three int32
arrays (head, relation, tail) over an entity table and a relation vocabulary. CSR adjacency
in both directions is built lazily with scipy and cached until the next mutation. networkx is
only used for small ``subgraph`` views. Graphs of :data:`MMAP_MIN_ENTITIES` entities or more are
saved memory-mapped and open in seconds (:mod:`.graph_mmap`); smaller ones as JSON + NPY.
"""

from __future__ import annotations

import copy
import json
import logging
from array import array
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Literal, Sequence

import numpy as np
import scipy.sparse as sp

from ..types import Entity, Triple
from . import graph_mmap
from .unknown_entity import UnknownEntityError  # raised by every lookup; importable from here too

Direction = Literal["out", "in", "both"]
log = logging.getLogger(__name__)


#: ``save`` writes the memory-mapped format (:mod:`.graph_mmap`) from this many entities on.
MMAP_MIN_ENTITIES = 100_000
#: The attributes a memory-mapped graph reads from its files (:func:`.graph_mmap.open_mapped`).
_MAPPED_COLUMNS = frozenset("_ids _names _descs _types _aliases _eidx _h _r _t _triple_src _ent_passages".split())


@dataclass
class Removal:
    """Outcome of :meth:`KnowledgeGraph.remove_passages`: masks over the old entity rows and
    triple indices (``True`` = kept) and the ids of removed entities."""

    entity_keep: np.ndarray
    triple_keep: np.ndarray
    removed_entities: list[str]


class KnowledgeGraph:
    """An in-memory directed multigraph of entities and relation-labelled triples.

    Entities are addressed by string id (internally by row index). Triples keep the ids of the
    passages they were read from; entities are linked to the passages that mention them.

    A graph opened from the memory-mapped format (:attr:`mapped`) reads its columns from the
    mapped files; its first mutation copies it into memory (O(entities), see :meth:`_own`), so
    every method works on both forms with the same results.
    """

    def __init__(self) -> None:
        # Entities are stored column-wise (no per-entity object) so millions fit in memory.
        self._ids: list[str] = []
        self._names: list[str] = []
        self._aliases: list[tuple[str, ...]] = []
        self._descs: list[str] = []
        self._types: list[str] = []
        self._eidx: dict[str, int] = {}
        self._relations: list[str] = []
        self._ridx: dict[str, int] = {}
        self._h = array("i")
        self._r = array("i")
        self._t = array("i")
        self._triple_key: dict[tuple[int, int, int], int] | None = None
        self._triple_src: dict[int, list[int]] = {}
        self._passage_ids: list[str] = []
        self._pidx: dict[str, int] = {}
        self._ent_passages: dict[int, set[int]] = {}
        self._cache: dict[str, object] = {}
        #: Small JSON-able facts about the graph kept by builders (saved as meta.json).
        self.meta: dict = {}
        self._mapped: Path | None = None  # the directory of a memory-mapped graph

    @property
    def mapped(self) -> bool:
        """Whether the graph reads memory-mapped files (opened from the mapped format, unchanged)."""
        return self._mapped is not None

    def _own(self) -> None:
        """Before a mutation: copy a memory-mapped graph into the in-memory form; O(entities), once."""
        if self._mapped is None:
            return
        log.info("materialising the memory-mapped graph from %s for a change (%d entities)", self._mapped, len(self))
        self._ids, self._names, self._descs, self._types = (
            list(c) for c in (self._ids, self._names, self._descs, self._types)
        )
        self._aliases = [self._aliases[i] for i in range(len(self._ids))]
        self._eidx = {e: i for i, e in enumerate(self._ids)}
        self._h, self._r, self._t = (array("i", np.asarray(a, dtype=np.int32).tobytes()) for a in self._arrays())
        self._triple_src = {k: list(v) for k, v in self._triple_src.items()}
        self._ent_passages = {k: set(v) for k, v in self._ent_passages.items()}
        self._triple_key = None
        self._cache.clear()
        self._mapped = None

    def __deepcopy__(self, memo: dict) -> "KnowledgeGraph":
        """A deep copy; a memory-mapped graph is copied into memory (the mapped files cannot be
        pickled) and stays mapped itself (``add_passages`` copies the graph it extends)."""
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        mapped = self._mapped is not None
        for key, value in self.__dict__.items():
            if mapped and key in _MAPPED_COLUMNS:
                setattr(new, key, value)  # read-only columns, replaced by materialize below
            elif key == "_cache":
                new._cache = {} if mapped else copy.deepcopy(value, memo)
            else:
                setattr(new, key, copy.deepcopy(value, memo))
        new._own()
        return new

    # ------------------------------------------------------------------ building
    def add_entity(self, entity: Entity) -> int:
        """Add an entity (or merge aliases/description into an existing one); return its row."""
        self._own()
        i = self._eidx.get(entity.id)
        if i is not None:
            old = self._aliases[i]
            new = tuple(a for a in dict.fromkeys(entity.aliases) if a not in old and a != self._names[i])
            if new:
                self._aliases[i] = old + new
            self._descs[i] = self._descs[i] or entity.description
            self._types[i] = self._types[i] or entity.type
            return i
        i = len(self._ids)
        self._ids.append(entity.id)
        self._names.append(entity.name)
        self._aliases.append(tuple(a for a in dict.fromkeys(entity.aliases) if a != entity.name))
        self._descs.append(entity.description)
        self._types.append(entity.type)
        self._eidx[entity.id] = i
        self._cache.clear()
        return i

    def set_name(self, entity_id: str, name: str) -> None:
        """Rename an entity; the old name becomes an alias."""
        self._own()
        i = self._row(entity_id)
        old = self._names[i]
        if old != name:
            self._aliases[i] = tuple(a for a in dict.fromkeys((*self._aliases[i], old)) if a != name)
            self._names[i] = name

    def set_description(self, entity_id: str, description: str) -> None:
        """Replace an entity's description."""
        self._own()
        self._descs[self._row(entity_id)] = description

    def _relation_index(self, relation: str) -> int:
        r = self._ridx.get(relation)
        if r is None:
            r = len(self._relations)
            self._relations.append(relation)
            self._ridx[relation] = r
        return r

    def _passage_index(self, pid: str) -> int:
        p = self._pidx.get(pid)
        if p is None:
            p = len(self._passage_ids)
            self._passage_ids.append(pid)
            self._pidx[pid] = p
        return p

    def add_triple(self, head: str, relation: str, tail: str, source_ids: Iterable[str] = ()) -> int:
        """Add ``head -relation-> tail`` (entities must exist); duplicates merge their sources."""
        self._own()
        h, t = self._row(head), self._row(tail)
        r = self._relation_index(relation)
        if self._triple_key is None:
            self._triple_key = {(a, b, c): i for i, (a, b, c) in enumerate(zip(self._h, self._r, self._t))}
        key = (h, r, t)
        ti = self._triple_key.get(key)
        if ti is None:
            ti = len(self._h)
            self._h.append(h)
            self._r.append(r)
            self._t.append(t)
            self._triple_key[key] = ti
            self._cache.clear()
        srcs = [self._passage_index(s) for s in source_ids]
        if srcs:
            cur = self._triple_src.setdefault(ti, [])
            cur.extend(s for s in srcs if s not in cur)
        return ti

    def link(self, entity_id: str, passage_id: str) -> None:
        """Record that ``passage_id`` mentions ``entity_id``."""
        self._own()
        e = self._row(entity_id)
        self._ent_passages.setdefault(e, set()).add(self._passage_index(passage_id))
        self._cache.pop("links", None)
        self._cache.pop("links_csc", None)

    @classmethod
    def from_columns(
        cls,
        ids: Sequence[str],
        names: Sequence[str],
        relations: Sequence[str],
        heads: np.ndarray,
        rels: np.ndarray,
        tails: np.ndarray,
        *,
        aliases: Sequence[Sequence[str]] | None = None,
        descriptions: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        dedupe: bool = True,
    ) -> "KnowledgeGraph":
        """Bulk-build a graph from columns (the path for curated KGs with millions of triples).

        ``heads``/``tails`` are entity row indices into ``ids``, ``rels`` indices into
        ``relations``. Duplicate triples are dropped with ``dedupe`` (one ``np.unique``), which
        avoids the per-triple dict that :meth:`add_triple` keeps.
        """
        g = cls()
        n = len(ids)
        g._ids = list(ids)
        g._eidx = {e: i for i, e in enumerate(g._ids)}
        if len(g._eidx) != n:
            raise ValueError("from_columns: entity ids are not unique")
        g._names = list(names)
        empty: tuple[str, ...] = ()
        g._aliases = [tuple(a) if a else empty for a in aliases] if aliases is not None else [empty] * n
        g._descs = list(descriptions) if descriptions is not None else [""] * n
        g._types = list(types) if types is not None else [""] * n
        if not (len(g._names) == len(g._aliases) == len(g._descs) == len(g._types) == n):
            raise ValueError("from_columns: entity columns differ in length")
        g._relations = list(relations)
        g._ridx = {r: i for i, r in enumerate(g._relations)}
        h, r, t = (np.ascontiguousarray(x, dtype=np.int32) for x in (heads, rels, tails))
        if not (len(h) == len(r) == len(t)):
            raise ValueError("from_columns: triple columns differ in length")
        if len(h):
            if h.min() < 0 or t.min() < 0 or max(h.max(), t.max()) >= n:
                raise ValueError("from_columns: triple endpoint outside the entity table")
            if r.min() < 0 or r.max() >= len(g._relations):
                raise ValueError("from_columns: triple relation outside the relation table")
        if dedupe and len(h):
            if (n + 1) ** 2 * (len(g._relations) + 1) < 2**62:
                key = (h.astype(np.int64) * (len(g._relations) + 1) + r) * (n + 1) + t
                _, first = np.unique(key, return_index=True)
            else:  # ids too large to pack into one int64: unique over rows
                _, first = np.unique(np.stack([h, r, t], axis=1), axis=0, return_index=True)
            first.sort()
            h, r, t = h[first], r[first], t[first]
        g._h, g._r, g._t = array("i", h.tobytes()), array("i", r.tobytes()), array("i", t.tobytes())
        return g

    def remove_passages(self, passage_ids: Iterable[str]) -> "Removal":
        """Forget passages: unlink them, drop the triples read only from them, and drop entities
        that no remaining passage mentions (with their triples). Curated triples (no sources) and
        entities never linked to a passage stay. Returns what was kept, so callers can compact
        arrays aligned with entity rows or triple indices (vectors)."""
        self._own()
        gone = {self._pidx[p] for p in passage_ids if p in self._pidx}
        n_e, n_t = len(self._ids), len(self._h)
        ekeep = np.ones(n_e, dtype=bool)
        tkeep = np.ones(n_t, dtype=bool)
        if not gone:
            return Removal(ekeep, tkeep, [])
        for e, ps in self._ent_passages.items():
            if ps & gone:
                ps -= gone
                if not ps:
                    ekeep[e] = False
        for ti, srcs in self._triple_src.items():
            kept = [p for p in srcs if p not in gone]
            if len(kept) != len(srcs):
                srcs[:] = kept
                if not kept:
                    tkeep[ti] = False
        h, r, t = (a.copy() for a in self._arrays())
        tkeep &= ekeep[h] & ekeep[t]
        removed = [self._ids[i] for i in np.flatnonzero(~ekeep)]
        if removed and "title_entities" in self.meta:
            gone_ids = set(removed)
            self.meta["title_entities"] = [e for e in self.meta["title_entities"] if e not in gone_ids]
        # compact entities
        erow = np.cumsum(ekeep) - 1
        keep_rows = np.flatnonzero(ekeep)
        self._ids = [self._ids[i] for i in keep_rows]
        self._names = [self._names[i] for i in keep_rows]
        self._aliases = [self._aliases[i] for i in keep_rows]
        self._descs = [self._descs[i] for i in keep_rows]
        self._types = [self._types[i] for i in keep_rows]
        self._eidx = {e: i for i, e in enumerate(self._ids)}
        # compact passages
        pkeep = [p for p in range(len(self._passage_ids)) if p not in gone]
        prow = {old: new for new, old in enumerate(pkeep)}
        self._passage_ids = [self._passage_ids[p] for p in pkeep]
        self._pidx = {p: i for i, p in enumerate(self._passage_ids)}
        self._ent_passages = {
            int(erow[e]): {prow[p] for p in ps} for e, ps in self._ent_passages.items() if ekeep[e] and ps
        }
        # compact triples
        trow = np.cumsum(tkeep) - 1
        self._triple_src = {
            int(trow[ti]): [prow[p] for p in srcs] for ti, srcs in self._triple_src.items() if tkeep[ti] and srcs
        }
        self._h = array("i", erow[h[tkeep]].astype(np.int32).tobytes())
        self._r = array("i", r[tkeep].astype(np.int32).tobytes())
        self._t = array("i", erow[t[tkeep]].astype(np.int32).tobytes())
        self._triple_key = None
        self._cache.clear()
        return Removal(ekeep, tkeep, removed)

    # ------------------------------------------------------------------ lookups
    def _row(self, entity_id: str) -> int:
        try:
            return self._eidx[entity_id]
        except KeyError:
            raise UnknownEntityError(f"unknown entity id {entity_id!r}", entity_id=entity_id, graph=self) from None

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._eidx

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def num_entities(self) -> int:
        return len(self._ids)

    @property
    def num_triples(self) -> int:
        return len(self._h)

    @property
    def relations(self) -> list[str]:
        """The relation vocabulary (index = relation id)."""
        return list(self._relations)

    @property
    def entity_ids(self) -> Sequence[str]:
        """Entity ids by row: a list (a copy), or for a memory-mapped graph a read-only sequence
        decoding ids on access (no O(entities) copy)."""
        return self._ids if self._mapped is not None else list(self._ids)

    def _entity_at(self, i: int) -> Entity:
        return Entity(self._ids[i], self._names[i], list(self._aliases[i]), self._descs[i], self._types[i])

    def entity(self, entity_id: str) -> Entity:
        """The entity with this id (a copy: change it with ``add_entity``/``set_description``)."""
        return self._entity_at(self._row(entity_id))

    def entities(self) -> Iterator[Entity]:
        if self._mapped is not None:  # one sequential pass over each mapped column
            cols = zip(self._ids, self._names, self._aliases, self._descs, self._types)
            return (Entity(e, n, list(a), d, t) for e, n, a, d, t in cols)
        return (self._entity_at(i) for i in range(len(self._ids)))

    def name_of(self, entity_id: str) -> str:
        return self._names[self._row(entity_id)]

    def index_of(self, entity_id: str) -> int:
        """Row index of an entity (the position in vectors and PPR score arrays)."""
        return self._row(entity_id)

    def names(self) -> dict[str, str]:
        """Entity id -> name, for verbalising triples and paths."""
        return dict(zip(self._ids, self._names))

    def triple(self, i: int) -> Triple:
        src = [self._passage_ids[p] for p in self._triple_src.get(i, ())]
        return Triple(self._ids[self._h[i]], self._relations[self._r[i]], self._ids[self._t[i]], src)

    def triple_sources(self) -> dict[int, list[str]]:
        """Triple index -> the passage ids it was read from, for the triples that have any."""
        return {i: [self._passage_ids[p] for p in srcs] for i, srcs in self._triple_src.items() if srcs}

    def triples(self) -> Iterator[Triple]:
        return (self.triple(i) for i in range(len(self._h)))

    def passages_of(self, entity_id: str) -> list[str]:
        """Passages that mention an entity."""
        return sorted(self._passage_ids[p] for p in self._ent_passages.get(self._row(entity_id), ()))

    def entities_of(self, passage_id: str) -> list[str]:
        """Entities mentioned by a passage."""
        p = self._pidx.get(passage_id)
        if p is None:
            return []
        if "links_csc" not in self._cache:
            self._cache["links_csc"] = self.link_matrix().tocsc()
        links = self._cache["links_csc"]
        return [self._ids[e] for e in links.indices[links.indptr[p] : links.indptr[p + 1]]]

    # ------------------------------------------------------------------ matrices
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isinstance(self._h, np.ndarray):  # memory-mapped
            return self._h, self._r, self._t  # type: ignore[return-value]
        return (
            np.frombuffer(self._h, dtype=np.int32) if len(self._h) else np.zeros(0, np.int32),
            np.frombuffer(self._r, dtype=np.int32) if len(self._r) else np.zeros(0, np.int32),
            np.frombuffer(self._t, dtype=np.int32) if len(self._t) else np.zeros(0, np.int32),
        )

    def _csr(self, direction: Literal["out", "in"]) -> sp.csr_matrix:
        """Entity x entity CSR; ``data`` holds triple index + 1 (0 would be dropped as sparse)."""
        key = f"csr_{direction}"
        if key not in self._cache:
            h, _, t = self._arrays()
            rows, cols = (h, t) if direction == "out" else (t, h)
            n = len(self._ids)
            data = np.arange(1, len(h) + 1, dtype=np.int64)
            # Build CSR by hand: the coo->csr constructor would sum parallel edges.
            # One stable argsort of a packed int64 key (3x faster than lexsort at 21M edges).
            order = np.argsort(rows.astype(np.int64) * max(n, 1) + cols, kind="stable")
            indptr = np.zeros(n + 1, dtype=np.int64)
            indptr[1:] = np.cumsum(np.bincount(rows, minlength=n))
            m = sp.csr_matrix((data[order], cols[order], indptr), shape=(n, n))
            self._cache[key] = m
        return self._cache[key]  # type: ignore[return-value]

    def triple_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(heads, relations, tails)`` as int32 arrays over triple indices (entity rows and
        positions in :attr:`relations`); read-only views, no copy."""
        return self._arrays()

    def adjacency(self, direction: Literal["out", "in"] = "out") -> sp.csr_matrix:
        """CSR adjacency (rows = source entity); ``data - 1`` is the triple index per edge."""
        return self._csr(direction)

    def link_matrix(self) -> sp.csr_matrix:
        """Entity x passage incidence (rows = entities, columns = ``passage_ids`` order)."""
        if "links" not in self._cache and self._mapped is not None:  # straight from the mapped link arrays
            self._cache["links"] = self._ent_passages.csr(len(self._passage_ids))  # type: ignore[attr-defined]
        if "links" not in self._cache:
            rows, cols = [], []
            for e, ps in self._ent_passages.items():
                rows.extend([e] * len(ps))
                cols.extend(ps)
            m = sp.csr_matrix(
                (np.ones(len(rows), dtype=np.float32), (rows, cols)),
                shape=(len(self._ids), len(self._passage_ids)),
            )
            self._cache["links"] = m
        return self._cache["links"]  # type: ignore[return-value]

    @property
    def passage_ids(self) -> list[str]:
        """Passage ids known to the graph (column order of ``link_matrix``)."""
        return list(self._passage_ids)

    # ------------------------------------------------------------------ traversal
    def neighbors(self, entity_id: str, direction: Direction = "both") -> list[tuple[str, str, str]]:
        """Adjacent edges as ``(neighbor_id, relation, "out"|"in")`` in triple order."""
        e = self._row(entity_id)
        out: list[tuple[int, str, str]] = []
        for d in ("out", "in") if direction == "both" else (direction,):
            m = self._csr(d)  # type: ignore[arg-type]
            lo, hi = m.indptr[e], m.indptr[e + 1]
            for nb, ti in zip(m.indices[lo:hi], m.data[lo:hi]):
                out.append((int(ti) - 1, self._ids[nb], d))
        out.sort(key=lambda x: x[0])
        return [(nb, self._relations[self._r[ti]], d) for ti, nb, d in out]

    def k_hop(self, seeds: Iterable[str], k: int, direction: Direction = "both") -> dict[str, int]:
        """Breadth-first neighbourhood: entity id -> hop distance (seeds at 0), up to ``k`` hops."""
        mats = [self._csr(d) for d in (("out", "in") if direction == "both" else (direction,))]  # type: ignore[arg-type]
        dist: dict[int, int] = {}
        queue: deque[int] = deque()
        for s in seeds:
            i = self._row(s)
            if i not in dist:
                dist[i] = 0
                queue.append(i)
        while queue:
            u = queue.popleft()
            if dist[u] >= k:
                continue
            for m in mats:
                for v in m.indices[m.indptr[u] : m.indptr[u + 1]]:
                    v = int(v)
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        queue.append(v)
        return {self._ids[i]: d for i, d in dist.items()}

    def subgraph(self, entity_ids: Iterable[str]):
        """The induced subgraph as a ``networkx.MultiDiGraph`` (edges keyed by relation)."""
        import networkx as nx

        rows = {self._row(e) for e in entity_ids}
        g = nx.MultiDiGraph()
        for i in rows:
            g.add_node(self._ids[i], name=self._names[i], type=self._types[i], description=self._descs[i])
        out = self._csr("out")
        for u in rows:
            lo, hi = out.indptr[u], out.indptr[u + 1]
            for v, ti in zip(out.indices[lo:hi], out.data[lo:hi]):
                if int(v) in rows:
                    rel = self._relations[self._r[int(ti) - 1]]
                    g.add_edge(self._ids[u], self._ids[v], key=rel, relation=rel)
        return g

    def personalized_pagerank(
        self,
        seeds: dict[str, float],
        *,
        damping: float = 0.85,
        directed: bool = False,
        max_iter: int = 100,
        tol: float = 1e-8,
        within: np.ndarray | None = None,
        degrees: np.ndarray | None = None,
    ) -> np.ndarray:
        """Personalized PageRank over the entity graph (power iteration, scipy sparse).

        ``seeds`` maps entity id -> restart weight (normalised to sum 1). Edges are treated as
        undirected unless ``directed``; parallel edges add weight. Dangling mass restarts at the
        seeds. Returns scores aligned with entity rows (``index_of``), summing to 1.

        ``within`` (entity rows, the seeds among them): the walk is confined to those rows (local
        PageRank); transition probabilities stay those of the whole graph and mass that would
        leave is dropped, so scores outside are 0 and the cost follows the rows' edges, not the
        graph's size. ``degrees`` (per row): the degrees of a larger graph this one was fetched
        from (a database's k-hop ball), used for the transition probabilities instead of its own."""
        n = len(self._ids)
        if n == 0:
            return np.zeros(0)
        s = np.zeros(n)
        for eid, w in seeds.items():
            s[self._row(eid)] += float(w)
        if s.sum() <= 0:
            raise ValueError("personalized_pagerank needs at least one seed with positive weight")
        s /= s.sum()
        key = f"trans_{directed}"
        trans = self._cache.get(key) if degrees is None else None
        if trans is None:
            a = self._csr("out").copy()
            a.data = np.ones_like(a.data, dtype=np.float64)
            a = (a if directed else a + a.T).tocsr()
            deg = np.asarray(a.sum(axis=1) if degrees is None else degrees, dtype=np.float64).ravel()
            inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
            trans = (sp.diags(inv) @ a).T.tocsr(), deg == 0
            if degrees is None:  # the graph's own walk is kept; one with given degrees is not
                self._cache[key] = trans
        pt, dangling = trans  # type: ignore[misc]
        if within is not None:
            rows = np.asarray(within, dtype=np.int64)
            if len(rows) > 1 and not (rows[1:] > rows[:-1]).all():  # k_hop gives sorted rows already
                rows = np.unique(rows)
            sub = pt[rows][:, rows].tocsr()
            s_sub, dang = s[rows], dangling[rows]
            if s_sub.sum() <= 0:
                raise ValueError("personalized_pagerank: no seed lies inside `within`")
            r_sub = s_sub.copy()
            for _ in range(max_iter):
                nxt = damping * (sub @ r_sub + r_sub[dang].sum() * s_sub) + (1 - damping) * s_sub
                r_sub, done = nxt, np.abs(nxt - r_sub).sum() < tol
                if done:
                    break
            out = np.zeros(n)
            out[rows] = r_sub
            return out
        r = s.copy()
        for _ in range(max_iter):
            nxt = damping * (pt @ r + r[dangling].sum() * s) + (1 - damping) * s
            r, done = nxt, np.abs(nxt - r).sum() < tol
            if done:
                break
        return r

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path, *, mapped: bool | None = None) -> None:
        """Write the graph into ``directory``. Callers handle atomicity.

        ``mapped``: the memory-mapped format (:func:`.graph_mmap.save_mapped`); ``None`` picks it
        for a mapped graph and for graphs of :data:`MMAP_MIN_ENTITIES` entities or more, else
        JSON + NPY. ``load`` reads both."""
        if mapped is None:
            mapped = self._mapped is not None or self.num_entities >= MMAP_MIN_ENTITIES
        if mapped and self._mapped is not None:  # unchanged since opened: copy its files
            graph_mmap.copy_mapped(self._mapped, directory, self.meta)
            return
        if mapped:
            h, r, t = self._arrays()
            columns = graph_mmap.GraphColumns(
                ids=self._ids, names=self._names, descs=self._descs, types=self._types, aliases=self._aliases,
                relations=self._relations, passage_ids=self._passage_ids, heads=h, rels=r, tails=t,
                csr_out=self._csr("out"), csr_in=self._csr("in"), sources=self._triple_src,
                links=self._ent_passages, meta=self.meta,
            )  # fmt: skip
            graph_mmap.save_mapped(columns, directory)
            return
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "entities.jsonl", "w", encoding="utf-8") as f:
            for i in range(len(self._ids)):
                f.write(json.dumps(self._entity_at(i).to_dict(), ensure_ascii=False) + "\n")
        (d / "relations.json").write_text(json.dumps(self._relations, ensure_ascii=False), encoding="utf-8")
        (d / "passage_ids.json").write_text(json.dumps(self._passage_ids), encoding="utf-8")
        h, r, t = self._arrays()
        np.save(d / "triples.npy", np.stack([h, r, t], axis=1) if len(h) else np.zeros((0, 3), np.int32))
        src_keys = np.array(sorted(self._triple_src), dtype=np.int64)
        src_ptr = np.zeros(len(src_keys) + 1, dtype=np.int64)
        src_idx = []
        for j, k in enumerate(src_keys):
            src_idx.extend(self._triple_src[int(k)])
            src_ptr[j + 1] = len(src_idx)
        np.savez(d / "triple_sources.npz", keys=src_keys, indptr=src_ptr, indices=np.array(src_idx, np.int64))
        (d / "meta.json").write_text(json.dumps(self.meta, ensure_ascii=False), encoding="utf-8")
        links = self.link_matrix()
        np.savez(d / "links.npz", indptr=links.indptr, indices=links.indices, shape=np.array(links.shape))

    @classmethod
    def load(cls, directory: str | Path) -> "KnowledgeGraph":
        """Read a graph written by ``save`` (either format; a mapped one is opened memory-mapped);
        a missing or corrupt file raises ``ValueError``."""
        d = Path(directory)
        g = cls()
        try:
            if (d / graph_mmap.FORMAT_FILE).is_file():
                return cls._open_mapped(d)
            with open(d / "entities.jsonl", encoding="utf-8") as f:
                for line_no, line in enumerate(f, 1):
                    if line.strip():
                        e = Entity.from_dict(json.loads(line))
                        g._eidx[e.id] = len(g._ids)
                        g._ids.append(e.id)
                        g._names.append(e.name)
                        g._aliases.append(tuple(e.aliases))
                        g._descs.append(e.description)
                        g._types.append(e.type)
            g._relations = json.loads((d / "relations.json").read_text(encoding="utf-8"))
            g._ridx = {r: i for i, r in enumerate(g._relations)}
            g._passage_ids = json.loads((d / "passage_ids.json").read_text(encoding="utf-8"))
            g._pidx = {p: i for i, p in enumerate(g._passage_ids)}
            tr = np.load(d / "triples.npy").astype(np.int32)
            g._h, g._r, g._t = (
                array("i", tr[:, 0].tobytes()),
                array("i", tr[:, 1].tobytes()),
                array("i", tr[:, 2].tobytes()),
            )
            with np.load(d / "triple_sources.npz") as z:
                keys, ptr, idx = z["keys"], z["indptr"], z["indices"]
            g._triple_src = {int(k): idx[ptr[j] : ptr[j + 1]].tolist() for j, k in enumerate(keys)}
            if (d / "meta.json").is_file():
                g.meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
            with np.load(d / "links.npz") as z:
                indptr, indices = z["indptr"], z["indices"]
            for e in range(len(indptr) - 1):
                if indptr[e + 1] > indptr[e]:
                    g._ent_passages[e] = set(indices[indptr[e] : indptr[e + 1]].tolist())
        except FileNotFoundError as e:
            raise ValueError(f"knowledge graph in {d} is incomplete: missing {Path(e.filename).name}") from e
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            raise ValueError(f"knowledge graph in {d} is corrupt: {e}") from e
        return g

    @classmethod
    def _open_mapped(cls, d: Path) -> "KnowledgeGraph":
        """A graph over the memory-mapped columns in ``d`` (:func:`.graph_mmap.open_mapped`)."""
        c = graph_mmap.open_mapped(d)
        g = cls()
        g._ids, g._names, g._descs, g._types, g._aliases = c.ids, c.names, c.descs, c.types, c.aliases
        g._eidx, g._relations, g._passage_ids = c.eidx, c.relations, c.passage_ids
        g._ridx = {r: i for i, r in enumerate(g._relations)}
        g._pidx = {p: i for i, p in enumerate(g._passage_ids)}
        g._h, g._r, g._t = c.heads, c.rels, c.tails
        g._triple_src, g._ent_passages, g.meta = c.sources, c.links, c.meta
        g._cache["csr_out"], g._cache["csr_in"] = c.csr_out, c.csr_in
        g._mapped = d
        return g

    def __repr__(self) -> str:
        return (
            f"KnowledgeGraph(entities={self.num_entities}, triples={self.num_triples}, "
            f"relations={len(self._relations)}, passages={len(self._passage_ids)}"
            + (", mapped)" if self._mapped is not None else ")")
        )
