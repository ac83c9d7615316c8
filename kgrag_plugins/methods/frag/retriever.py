"""FRAG: hop-aware routing between a simple and a complex path-retrieval pipeline (docs/methods.md §2).

A question is classified *simple* (reasoning path of at most δ = 2 hops) or *complex*
(:class:`~kgrag_plugins.methods.hop_classifier.HopClassifier`, §2 step 2) and answered from the
paths of the pipeline that suits it (§2 steps 3-7, paper defaults):

1. **k-hop neighbourhood** of the topic entities (k = 2 simple, 4 complex).
2. **Personalized PageRank** on the whole graph, restart at the topic entities, damping 0.8,
   keeping the top n = 2000 neighbourhood nodes (the query subgraph is induced by them). When
   the neighbourhood has at most n nodes every node is kept (PageRank then only breaks ties, 5.).
   On graphs of ``LARGE_GRAPH_ENTITIES`` (1M) entities or more the walk is confined to the
   k-hop neighbourhood (local PageRank; our deviation for Wikidata5M-size KGs, docs/scale.md),
   and zero-shot chain scores use relation vectors instead of embedding chain texts.
3. **Relation pruning**: the distinct relation names of the subgraph ranked by similarity to the
   question, top m = 64 kept; the topic entities plus both endpoints of kept edges induce the
   pruned subgraph.
4. **Path search**: simple, every simple path of length 1..2 from a topic entity; complex, one
   breadth-first (unit-weight shortest) path from the topic entity to every node within 4 hops.
   Paths ending in an unnamed CVT node (``m.``/``g.`` ids) are dropped.
5. **Verbalisation** ``e0 -> r1 -> e1 -> ...``; an edge walked against a triple's direction is
   written ``e0 <- r1 <- e1`` (the triple is ``e1 r1 e0``), so inverse relations are explicit.
6. **Path ranking**, top u = 32.

Choices where the paper's parts are not available here or the released code is unspecific
(each explained at length in docs/frag.md):

- **Scorers**: a bi-encoder (§2(e)) scores the question against each path's verbalised relation
  chain; ``reranker=(query, texts) -> scores`` re-scores with a cross-encoder as the paper does.
- **Direction**: both ways (``inverse=True``), inverse edges marked; parallel edges kept. **Topic
  entities**: ``[brackets]``/``topic_entities=``, else NER + n-grams + embedding match (≥ 0.85).
- **Chain-guided completion** (our addition; trained path ranker only): the complex pipeline
  also walks the ``chain_beam`` (3) most probable relation chains, over the whole graph
  (``chain_scope="graph"``), with set semantics (a node may repeat, never the topic).
  ``path_ranker=None, chain_beam=0``: the paper's pipelines (``frag-zeroshot-simple``/``-complex``).
- **Route by chain length**, **ties by supporting paths** (with a path ranker): a chain
  longer than δ routes complex; equal scores go by paths reaching the end, then PageRank.
- **Answers**: LLM-free, top paths' end entities, or their passages plus dense top k by cosine
  (+ ``path_bonus``) on corpus graphs; with an LLM, the paper's reasoning prompt (§2 step 8).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path as FilePath
from typing import Any, Callable, Literal

import numpy as np

from ...index.graph import UnknownEntityError
from ...index.store import KnowledgeIndex
from ...models.llm import as_llm
from ...models.replies import check_text, complete_validated
from ...types import Answer, Evidence, Fact, Path, ScoredPassage, note_fallback
from ..activation import TextVectorCache
from ..base import Retriever
from ..facts import readable_facts
from .hop_classifier import (
    COMPLEX,
    SIMPLE,
    HopClassifier,
    RouteName,
    heuristic_route,
    strip_topic_marks,
)
from .linking import TopicLinker
from .local_walk import PUSH_EPS, graph_source, push_walk, top_rows
from .path_ranker import PathRanker, chain_key, relation_query
from .paths import Candidates, PathGraph, humanise_relation, rank_order, shortest_paths, walk_paths
from .prompts import ANSWER_MAX_TOKENS, STOP, hop_estimation_prompt, hop_schema, parse_hop_estimate, reasoning_prompt

#: Longest accepted LLM answer line (characters).
MAX_ANSWER_CHARS = 300

__all__ = ["FRAGRetriever"]

Reranker = Callable[[str, Sequence[str]], Sequence[float]]

#: Most distinct relation chains per question scored by embedding their verbalisation.
MAX_CHAIN_TEXTS = 256
#: Largest relation vocabulary for which chains are embedded as texts (curated KGs).
MAX_CHAIN_TEXT_RELATIONS = 1000
#: From this many entities (Wikidata5M size; docs/scale.md) step 2's PageRank runs on the k-hop
#: neighbourhood only (the whole-graph walk took ~18 s per question there) and zero-shot chain
#: scores are the mean cosine of the chain's relations; below, the paper's walk and chain texts.
LARGE_GRAPH_ENTITIES = 1_000_000
#: The paper's k (neighbourhood depth) of the simple and the complex pipeline (§2 step 1).
SIMPLE_HOPS, COMPLEX_HOPS = 2, 4
_CVT = re.compile(r"^[mg]\.[0-9a-z_]+$")


# --------------------------------------------------------------------------- retriever


class FRAGRetriever(Retriever):
    """FRAG's hop-aware path retrieval over a knowledge index (see the module docstring).

    Args:
        index: a :class:`KnowledgeIndex` whose graph has triples (a curated KG such as MetaQA's,
            or a corpus graph; passages linked to entities are returned for the latter).
        classifier: a trained :class:`HopClassifier` or the path of one saved with
            ``kgrag train hop-classifier``; ``None`` uses :func:`heuristic_route`.
        mode: ``"auto"`` routes each question; ``"simple"`` / ``"complex"`` force one pipeline
            (FRAG-Simple / FRAG-Complex of the paper's ablation).
        llm: optional; used only by :meth:`answer` (reasoning prompt) and :meth:`feedback`.
        simple_hops, complex_hops, max_nodes, max_relations, max_paths, damping: the paper's
            k = 2 / 4, n = 2000, m = 64, u = 32 and PageRank damping 0.8.
        inverse: walk edges against their direction too (needed for one-way KGs such as MetaQA).
        path_ranker: a :class:`~kgrag_plugins.methods.path_ranker.PathRanker` (or its saved
            path) trained on question-answer pairs of this KG (``kgrag train path-ranker``):
            paths are scored by the log-probability of their relation chain.
        chain_beam: with a path ranker, the complex pipeline also walks the ``chain_beam`` most
            probable relation chains (chain-guided completion, our addition; see the module
            docstring); 0 = off, as in the paper.
        chain_scope: ``"graph"`` (default) walks the guided chains over the whole graph with
            set semantics (a chain may pass a node twice, never the topic); ``"subgraph"``
            walks simple paths inside the pruned subgraph (earlier releases).
        route_by_chain: ``mode="auto"`` with a path ranker: a question routed *simple* whose most
            probable chain is longer than ``simple_hops`` goes to the complex pipeline.
        support_ties: with a path ranker, paths of equal score put the end reached by more
            paths of the same chain first, then PageRank (``False``: PageRank only, as before).
        reranker: optional ``(query, texts) -> scores`` cross-encoder for relations and paths.
        max_candidates: cap on enumerated paths per question (hub entities); the cap is reported.
        passage_pool: corpus graphs: passages of path entities considered before the cosine cut.
        path_bonus: corpus graphs: added to the cosine of passages linked to path entities (0.1,
            chosen on the shared MuSiQue and 2Wiki halves among 0, 0.03, 0.06, 0.1, 0.15, 1).
        local_walk: graphs of ``LARGE_GRAPH_ENTITIES`` or more: ``"push"`` (default) ranks a
            bounded ball by forward push (:mod:`.local_walk`; ``push_eps``: its residual per unit
            degree), ``"exact"`` walks the whole k-hop ball (its cost grows with hubs' balls).
    """

    name = "frag"
    score_kind = "cosine (+ path_bonus for passages of path entities)"

    def __init__(
        self,
        index: KnowledgeIndex,
        *,
        classifier: HopClassifier | str | FilePath | None = None,
        mode: Literal["auto", "simple", "complex"] = "auto",
        llm: Any = None,
        simple_hops: int = SIMPLE_HOPS,
        complex_hops: int = COMPLEX_HOPS,
        max_nodes: int = 2000,
        max_relations: int = 64,
        max_paths: int = 32,
        damping: float = 0.8,
        inverse: bool = True,
        path_ranker: PathRanker | str | FilePath | None = None,
        chain_beam: int = 3,
        chain_scope: Literal["graph", "subgraph"] = "graph",
        route_by_chain: bool = True,
        support_ties: bool = True,
        reranker: Reranker | None = None,
        rerank_pool: int = 256,
        max_candidates: int = 200_000,
        link_threshold: float = 0.85,
        passage_pool: int = 50,
        path_bonus: float = 0.1,
        local_walk: Literal["push", "exact"] = "push",
        push_eps: float = PUSH_EPS,
    ) -> None:
        if index.graph.num_triples == 0:
            raise ValueError(
                "FRAGRetriever needs a knowledge graph with triples: load a curated KG "
                "(kgrag_plugins.index.importers.load_kg) or build one (builder='mentions'/'parsekg'/'llm')"
            )
        if mode not in ("auto", "simple", "complex"):
            raise ValueError(f"mode must be 'auto', 'simple' or 'complex', got {mode!r}")
        if not 0 < damping < 1:
            raise ValueError(f"damping must be in (0, 1), got {damping}")
        for label, v in (("simple_hops", simple_hops), ("complex_hops", complex_hops), ("max_paths", max_paths)):
            if v < 1:
                raise ValueError(f"{label} must be >= 1, got {v}")
        if isinstance(classifier, (str, FilePath)):
            classifier = HopClassifier.load(classifier, embedder=index.embedder)
        if isinstance(path_ranker, (str, FilePath)):
            path_ranker = PathRanker.load(path_ranker, embedder=index.embedder)
        self.path_ranker = path_ranker
        self.index = index
        self.graph = index.graph
        self.classifier = classifier
        self.mode = mode
        self.llm = as_llm(llm) if llm is not None else None
        #: Prompt overrides (:meth:`set_prompt`): ``"reasoning"``, ``"hop_estimation"``.
        self.prompts: dict[str, str] = {}
        self.simple_hops = simple_hops
        self.complex_hops = complex_hops
        self.max_nodes = max_nodes
        self.max_relations = max_relations
        self.max_paths = max_paths
        self.damping = damping
        self.reranker = reranker
        self.rerank_pool = rerank_pool
        self.max_candidates = max_candidates
        self.link_threshold = link_threshold
        self.passage_pool = passage_pool
        self.path_bonus = path_bonus
        self._inverse = inverse
        if local_walk not in ("push", "exact") or not push_eps > 0:
            raise ValueError(f"local_walk must be 'push' or 'exact' and push_eps > 0, got {local_walk!r}, {push_eps}")
        self.local_walk, self.push_eps = local_walk, push_eps
        self._refresh()
        self.chain_beam = chain_beam
        if chain_scope not in ("graph", "subgraph"):
            raise ValueError(f"chain_scope must be 'graph' or 'subgraph', got {chain_scope!r}")
        self.chain_scope = chain_scope
        self.route_by_chain = route_by_chain
        self.support_ties = support_ties
        self._cache = TextVectorCache(20_000)  # keyed by chain text: survives index updates
        if mode == "simple":
            self.name = "frag-simple"
        elif mode == "complex":
            self.name = "frag-complex"

    def _refresh(self) -> None:
        """(Re)build the path graph, name index and id tables from the index's current graph;
        called again when the index changes (``index.revision``)."""
        from ...index.builders.linking import NameIndex

        graph = self.index.graph
        self.graph = graph
        self._pg = PathGraph(graph, self._inverse)
        self._names = NameIndex.from_graph(graph)
        self._linker = TopicLinker(self.index, graph, self._names, self.link_threshold)
        self._relations = graph.relations
        self._ids = graph.entity_ids
        self._rel_ids = {r: i for i, r in enumerate(self._relations)}

    # ------------------------------------------------------------------ routing
    def route(self, question: str) -> tuple[RouteName, float | None]:
        """The pipeline for ``question`` and, with a classifier, P(complex)."""
        if self.mode != "auto":
            return self.mode, None  # type: ignore[return-value]
        if self.classifier is None:
            return heuristic_route(question), None
        p = float(self.classifier.predict_proba([strip_topic_marks(question)])[0])
        return (COMPLEX if p >= 0.5 else SIMPLE), p

    # ------------------------------------------------------------------ linking
    def link(self, question: str) -> tuple[list[str], str, list[str]]:
        """Topic entities of a question: ``(entity ids, how, unknown bracketed names)``; see
        :meth:`.linking.TopicLinker.link`."""
        self._sync_index()
        self._linker.threshold = float(self.link_threshold)
        return self._linker.link(question)

    # ------------------------------------------------------------------ scoring helpers
    @property
    def _local(self) -> bool:
        """A graph of ``LARGE_GRAPH_ENTITIES`` or more: PageRank stays in the k-hop neighbourhood
        and zero-shot chains score by relation vectors (a database view keeps its whole graph's class)."""
        return self._pg.n >= LARGE_GRAPH_ENTITIES

    def _pagerank(
        self, topics: Sequence[str], within: np.ndarray | None, degrees: np.ndarray | None = None
    ) -> np.ndarray:
        """FRAG's personalized PageRank from the topic entities (``within``: local, in the hood;
        ``degrees``: a larger graph's, for a fetched part of it)."""
        return self.graph.personalized_pagerank(
            dict.fromkeys(topics, 1.0),
            damping=self.damping,
            directed=not self._pg.inverse,
            tol=1e-6,
            within=within,
            degrees=degrees,
        )

    def _ball(self, seeds: np.ndarray, topics: Sequence[str], k: int, trace: dict) -> tuple[np.ndarray, np.ndarray]:
        """Steps 1-2: the k-hop neighbourhood (sorted rows) and the PageRank (per graph row), the
        graph's own (also the tie-break of path ranking; parallel edges add weight, both ways when
        ``inverse``); from LARGE_GRAPH_ENTITIES on local: the push walk's ball or the exact one."""
        trace["local_pagerank"] = local = self._local
        if local and self.local_walk == "push":
            walk = push_walk(seeds, k, *graph_source(self._pg), damping=self.damping, eps=self.push_eps)
            trace["local_walk"] = walk.trace()
            return walk.rows, walk.dense(self._pg.n)
        hood = self._pg.k_hop(seeds, k)
        return hood, self._pagerank(topics, hood if local else None)

    def _relation_phrase(self, rel: int) -> str:
        R = self._pg.R
        return humanise_relation(self._relations[rel % R]) + (" (inverse)" if rel >= R else "")

    def _chain_text(self, rels: Sequence[int]) -> str:
        return " / ".join(self._relation_phrase(int(r)) for r in rels if r >= 0)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.index.embedder.embed(texts, progress=False), dtype=np.float32)

    def relation_query(self, question: str, topic_ids: Sequence[str]) -> str:
        """The text compared with relation chains (:func:`~kgrag_plugins.methods.path_ranker.relation_query`)."""
        return relation_query(question, [self.graph.name_of(e) for e in topic_ids])

    # ------------------------------------------------------------------ pipeline
    def paths(
        self, question: str, *, route: RouteName | None = None, topic_entities: Sequence[str] | None = None
    ) -> tuple[list[Path], dict[str, Any]]:
        """Run FRAG's retrieval for one question: the top ``max_paths`` paths and a trace."""
        self._sync_index()
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        trace: dict[str, Any] = {"retriever": self.name}
        if topic_entities is not None:
            for e in topic_entities:
                if e not in self.graph:
                    raise UnknownEntityError(f"unknown topic entity id {e!r}", entity_id=e, graph=self.graph)
            topics, how, unknown = list(dict.fromkeys(topic_entities)), "given", []
        else:
            topics, how, unknown = self.link(question)
        trace.update(topic_entities=topics, linking=how)
        if unknown:
            trace["unknown_topic_entities"] = unknown
        p_complex = None
        query, qv = self.relation_query(question, topics), None
        if route is None:
            route, p_complex = self.route(question)
            if (
                route == SIMPLE
                and topics
                and self.mode == "auto"
                and self.route_by_chain
                and self.path_ranker is not None
            ):
                qv = self.index.embed_query(query)
                top = self.path_ranker.chains[int(np.argmax(self.path_ranker.log_probs(qv, query)))]
                if len(top) > self.simple_hops:  # the ranker reads a longer chain: complex pipeline
                    route = COMPLEX
                    trace["route_by_chain"] = "/".join(top)
        trace.update(route=route, p_complex=p_complex)
        timings["link_route_ms"] = (time.perf_counter() - t0) * 1e3
        if not topics:
            trace["error"] = "no topic entity found in the question" + (
                f" (not in the graph: {unknown})" if unknown else ""
            )
            trace["timings_ms"] = timings
            trace["answers"] = []
            return [], trace
        seeds = np.array([self.graph.index_of(e) for e in topics], dtype=np.int64)
        k = self.simple_hops if route == SIMPLE else self.complex_hops

        # 1-2. k-hop neighbourhood, PageRank top-n
        t = time.perf_counter()
        hood, ppr = self._ball(seeds, topics, k, trace)
        keep = top_rows(hood, ppr[hood], seeds, self.max_nodes)
        in_s = np.zeros(self._pg.n, dtype=bool)
        in_s[keep] = True
        timings["subgraph_ms"] = (time.perf_counter() - t) * 1e3
        trace.update(
            k=k, neighbourhood=int(len(hood)), subgraph_nodes=int(len(keep)), pagerank=len(hood) > self.max_nodes
        )

        # 3. relation pruning
        t = time.perf_counter()
        if qv is None:
            qv = self.index.embed_query(query)
        in_s = self._prune_relations(in_s, seeds, keep, query, qv, trace)
        timings["relations_ms"] = (time.perf_counter() - t) * 1e3

        # 4. path search
        t = time.perf_counter()
        if route == SIMPLE:
            cands = Candidates.concat([self._simple_paths(int(s), in_s) for s in seeds], 2)
        else:
            cands = Candidates.concat(
                [shortest_paths(self._pg, int(s), in_s, self.complex_hops) for s in seeds]
                + [self._chain_paths(seeds, in_s, query, qv, trace)],
                self.complex_hops,
            )
            cands = cands.unique()
        if len(cands) > self.max_candidates:
            trace["candidates_truncated_from"] = len(cands)
            cands = cands.select(np.arange(self.max_candidates))
        cands = self._drop_cvt_ends(cands)
        timings["search_ms"] = (time.perf_counter() - t) * 1e3
        trace["candidate_paths"] = len(cands)

        # 5-6. rank, verbalise top u
        t = time.perf_counter()
        out = self._rank(cands, query, qv, ppr)
        timings["rank_ms"] = (time.perf_counter() - t) * 1e3
        timings["total_ms"] = (time.perf_counter() - t0) * 1e3
        trace["timings_ms"] = {key: round(v, 2) for key, v in timings.items()}
        trace["answers"] = self._end_names(out)
        return out, trace

    def _prune_relations(
        self, in_s: np.ndarray, seeds: np.ndarray, keep: np.ndarray, query: str, qv: np.ndarray, trace: dict
    ) -> np.ndarray:
        pos, owner = self._pg.gather(keep)
        inside = in_s[self._pg.dst[pos]]
        pos, owner = pos[inside], owner[inside]
        base = self._pg.rel[pos] % self._pg.R
        present = np.unique(base)
        trace["relations"] = int(len(present))
        if len(present) <= self.max_relations:
            return in_s
        if self.reranker is not None:
            names = [humanise_relation(self._relations[int(r)]) for r in present]
            scores = np.asarray(self.reranker(query, names), dtype=np.float64)
        else:  # relation vectors: the index's when loaded, else only the present relations embedded
            scores = self._relation_cosines(present, qv)[present]
        kept = present[np.argsort(-scores, kind="stable")[: self.max_relations]]
        ok = np.isin(base, kept)
        nodes = np.union1d(np.union1d(keep[owner[ok]], self._pg.dst[pos[ok]]), seeds)
        pruned = np.zeros_like(in_s)
        pruned[nodes] = True
        trace["relations_kept"] = int(len(kept))
        trace["pruned_nodes"] = int(len(nodes))
        return pruned

    def _simple_paths(self, s: int, in_s: np.ndarray) -> Candidates:
        """All simple paths of length 1..simple_hops from ``s`` inside ``in_s`` (FRAG's BFS module)."""
        return walk_paths(self._pg, s, in_s, self.simple_hops, self.simple_hops, self.max_candidates)

    def _chain_paths(
        self, seeds: np.ndarray, in_s: np.ndarray, query: str, qv: np.ndarray, trace: dict[str, Any]
    ) -> Candidates:
        """Chain-guided completion of the complex pipeline (needs a path ranker): paths along the
        ``chain_beam`` most probable relation chains of at most ``complex_hops`` hops."""
        if self.path_ranker is None or not self.chain_beam:
            return Candidates.empty(self.complex_hops)
        lp = self.path_ranker.log_probs(qv, query)
        graph_scope = self.chain_scope == "graph"
        scope = np.ones(self._pg.n, dtype=bool) if graph_scope else in_s
        parts, used = [], []
        for ci in np.argsort(-lp):
            chain = self._chain_ids(self.path_ranker.chains[int(ci)])
            if chain is None or len(chain) > self.complex_hops:
                continue
            used.append("/".join(self.path_ranker.chains[int(ci)]))
            parts += [
                walk_paths(
                    self._pg, int(s), scope, len(chain), self.complex_hops, self.max_candidates, chain, graph_scope
                )
                for s in seeds
            ]
            if len(used) >= self.chain_beam:
                break
        trace["guided_chains"] = used
        return Candidates.concat(parts, self.complex_hops)

    def _chain_ids(self, chain: Sequence[str]) -> list[int] | None:
        """Signed relation ids of a chain key (``~`` = inverse); ``None`` if a relation is unknown
        or inverse edges are not walked."""
        out = []
        for step in chain:
            inv = step.startswith("~")
            rid = self._rel_ids.get(step[1:] if inv else step)
            if rid is None or (inv and not self._pg.inverse):
                return None
            out.append(rid + self._pg.R if inv else rid)
        return out

    def _drop_cvt_ends(self, cands: Candidates) -> Candidates:
        if not len(cands):
            return cands
        ends = cands.ends()
        uniq = np.unique(ends)
        ids = self._ids
        cvt = [u for u in uniq.tolist() if _CVT.match(ids[u]) and self.graph.name_of(ids[u]) == ids[u]]
        return cands.select(~np.isin(ends, cvt)) if cvt else cands

    def _rank(self, cands: Candidates, query: str, qv: np.ndarray, ppr: np.ndarray) -> list[Path]:
        if not len(cands):
            return []
        chains, inverse = np.unique(cands.rels, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        chain_scores = self._chain_scores(chains, query, qv, inverse)
        score = chain_scores[inverse]
        ends = cands.ends()
        tie = ppr[ends]
        support = self.support_ties and self.path_ranker is not None
        order = rank_order(score, ends, tie, inverse if support else None)
        if self.reranker is not None:
            pool = order[: self.rerank_pool]
            paths = [self._verbalise(cands, int(i)) for i in pool]
            strings = [p.verbalize(self._name_map(p.nodes)) for p in paths]
            rs = np.asarray(self.reranker(query, strings), dtype=np.float64)
            order = pool[np.argsort(-rs, kind="stable")]
            score = score.copy()
            score[pool] = rs
        out = []
        for i in order[: self.max_paths]:
            p = self._verbalise(cands, int(i))
            p.score = float(score[i])
            out.append(p)
        return out

    def _chain_scores(self, chains: np.ndarray, query: str, qv: np.ndarray, inverse: np.ndarray) -> np.ndarray:
        """Score per unique chain: the path ranker's log-probability when one is set (chains it
        has not seen rank below all known ones, by bi-encoder cosine), else the bi-encoder
        cosine (:meth:`_zero_shot`)."""
        if self.path_ranker is None:
            return self._zero_shot(chains, qv)
        R = self._pg.R
        keys = [chain_key([self._relations[r % R] for r in c if r >= 0], [r >= R for r in c if r >= 0]) for c in chains]
        scores = self.path_ranker.score(qv, keys, query)
        unknown = np.isnan(scores)
        if unknown.any():
            known_paths = int(np.isin(inverse, np.flatnonzero(~unknown)).sum())
            if known_paths < self.max_paths:
                scores[unknown] = -1e3 + self._zero_shot(chains[unknown], qv)
            else:
                scores[unknown] = -1e4
        return scores

    def _zero_shot(self, chains: np.ndarray, qv: np.ndarray) -> np.ndarray:
        """Cosine between the relation query and each verbalised chain (vectors cached across
        questions). On graphs with more than ``MAX_CHAIN_TEXT_RELATIONS`` relations (corpus
        graphs, whose relations are phrases, so chains rarely repeat), of ``LARGE_GRAPH_ENTITIES``
        entities or more, or above ``MAX_CHAIN_TEXTS`` distinct chains: the mean cosine of the chain's relations (the
        index's relation vectors), so a question never embeds many long texts."""
        if len(chains) <= MAX_CHAIN_TEXTS and len(self._relations) <= MAX_CHAIN_TEXT_RELATIONS and not self._local:
            vecs, _ = self._cache.vectors([self._chain_text(c) for c in chains], self._embed)
            return np.asarray(vecs, dtype=np.float64) @ np.asarray(qv, dtype=np.float64)
        valid = chains >= 0
        rel_ids = np.where(valid, chains % self._pg.R, 0)
        rel_cos = self._relation_cosines(np.unique(rel_ids[valid]), qv)
        per = np.where(valid, rel_cos[rel_ids], 0.0)
        return per.sum(axis=1) / np.maximum(valid.sum(axis=1), 1)

    def _relation_cosines(self, needed: np.ndarray, qv: np.ndarray) -> np.ndarray:
        """Cosine of ``qv`` with relations ``needed`` (an array over all relations, 0 elsewhere):
        ``index.relation_vectors_of`` -- the index's relation vectors when stored
        (``kgrag index --precompute relations``), else only ``needed`` is embedded and persisted in
        the index for later questions and processes. MuSiQue's mentions graph has 59,475 relation
        phrases (226.8 s to embed all on 2 cores); one question reads 5 to ~12,000 of them (issue
        36 item 4). Same vectors either way (a text's vector does not depend on its batch)."""
        out = np.zeros(len(self._relations))
        if not len(needed):
            return out
        vecs = self.index.relation_vectors_of(needed)
        # float64: a float32 dot product's rounding follows the BLAS kernel's summation order, which
        # can differ between processes; the committed figures were measured with float64
        out[needed] = np.asarray(vecs, dtype=np.float64) @ np.asarray(qv, dtype=np.float64)
        return out

    def _verbalise(self, cands: Candidates, i: int) -> Path:
        ids = self._ids
        L = int(cands.lengths[i])
        nodes = [ids[int(n)] for n in cands.nodes[i, : L + 1]]
        rels = [int(r) for r in cands.rels[i, :L]]
        R = self._pg.R
        return Path(nodes=nodes, relations=[self._relations[r % R] for r in rels], inverse=[r >= R for r in rels])

    def _name_map(self, entity_ids: Iterable[str]) -> dict[str, str]:
        """Names of the given entities only (not the whole graph's: this is per question)."""
        return {e: self.graph.name_of(e) for e in entity_ids}

    def _end_names(self, paths: list[Path]) -> list[str]:
        return list(dict.fromkeys(self.graph.name_of(p.nodes[-1]) for p in paths))

    # ------------------------------------------------------------------ Retriever
    def _retrieve(self, query: str, k: int) -> Evidence:
        return self.evidence(query, k)

    def evidence(
        self, question: str, k: int = 5, *, route: RouteName | None = None, topic_entities: Sequence[str] | None = None
    ) -> Evidence:
        """:meth:`paths` as an :class:`Evidence`: the paths as facts (``kind="path"``, ``data``
        with nodes, relations, inverse flags, answer entity, hops), passages linked to path
        entities (corpus graphs), the trace (route, topic entities, sizes, timings, ``answers``,
        ``score_kind``; ``fallback`` when the passages are the dense ones alone: no topic entity
        or no path). ``route`` forces a pipeline (the LangGraph router's nodes use it)."""
        if route is not None and route not in (SIMPLE, COMPLEX):
            raise ValueError(f"route must be 'simple' or 'complex', got {route!r}")
        paths, trace = self.paths(question, route=route, topic_entities=topic_entities)
        names = self._name_map(n for p in paths for n in p.nodes)
        facts = [
            Fact(
                p.verbalize(names),
                kind="path",
                score=p.score,
                data={
                    "nodes": p.nodes,
                    "relations": p.relations,
                    "inverse": list(p.inverse or []),
                    "answer": p.nodes[-1],
                    "hops": len(p.relations),
                },
            )
            for p in paths
        ]
        passages = self._passages(question, paths, k, trace)
        trace["score_kind"] = self.score_kind
        if passages and not paths:  # the dense passages alone: no path led anywhere
            why = "no path found" if trace.get("topic_entities") else "no topic entity found"
            note_fallback(trace, "dense", why)
        return Evidence(question, passages, readable_facts(facts, self.index), trace)

    def _passages(self, query: str, paths: list[Path], k: int, trace: dict[str, Any]) -> list[ScoredPassage]:
        """Corpus graphs: the passages linked to the entities of the top paths (best paths first,
        end entity first, at most ``passage_pool``) and the dense top ``k``, ranked together by
        cosine with the question, path passages plus ``path_bonus``."""
        store = self.index.passages
        if not len(store):
            return []
        pool: list[str] = []
        seen: set[str] = set()
        for p in paths:
            for eid in reversed(p.nodes):
                for pid in self.graph.passages_of(eid):
                    if pid in store and pid not in seen and len(pool) < self.passage_pool:
                        seen.add(pid)
                        pool.append(pid)
        qv = np.asarray(self.index.embed_query(query), dtype=np.float32)
        scores: dict[str, float] = {}
        if pool:
            pos = np.array([store.position(pid) for pid in pool])
            scores = dict(zip(pool, (store.dense_scores(qv, pos) + self.path_bonus).tolist()))
        for psg, sc in store.dense_search(qv, k):
            scores.setdefault(psg.id, float(sc))
        out = dict(sorted(scores.items(), key=lambda kv: -kv[1])[:k])
        trace["passages_from_paths"] = sum(pid in seen for pid in out)
        return [ScoredPassage(store.get(pid), sc) for pid, sc in out.items()]

    # ------------------------------------------------------------------ answers
    def set_prompt(self, key: str, template: str) -> None:
        """Replace prompt ``key`` (``"reasoning"``: :data:`.prompts.REASONING`, ``"hop_estimation"``:
        :data:`.prompts.HOP_ESTIMATION`) with a ``str.format`` template using ``{paths}`` and ``{question}``
        (both filled data-escaped, the paths inside a ``<paths>`` block)."""
        if key not in ("reasoning", "hop_estimation"):
            raise KeyError(f"unknown FRAG prompt {key!r}; keys: 'reasoning', 'hop_estimation'")
        got = set(re.findall(r"\{(\w+)\}", template))
        if got != {"paths", "question"}:
            raise ValueError(f"prompt {key!r} must use the fields ['paths', 'question'], got {sorted(got)}")
        self.prompts[key] = str(template)

    def answer(self, question: str, *, evidence: Evidence | None = None) -> Answer:
        """With an LLM: FRAG's reasoning prompt over the top paths (first line of the reply; valid
        when non-empty, at most 300 characters, not symbols, not a refusal; an invalid reply is
        asked once more). LLM-free, when the call fails or the reply stays invalid: the end
        entity of the best path (``metadata["llm_error"]`` says why, WARNING logged)."""
        ev = evidence if evidence is not None else self.retrieve(question, k=5)
        paths = [f.display for f in ev.facts if f.kind == "path"]
        answers = ev.trace.get("answers") or []
        fallback = answers[0] if answers else ""
        meta: dict[str, Any] = {"route": ev.trace.get("route"), "answers": answers}
        if self.llm is None:
            return Answer(question, fallback, ev, {**meta, "llm": False})
        errors: list[dict[str, Any]] = []
        text = complete_validated(
            self.llm,
            reasoning_prompt(strip_topic_marks(question), paths, self.prompts.get("reasoning")),
            lambda reply: check_text(reply, single_line=True, max_chars=MAX_ANSWER_CHARS),
            step="answer",
            errors=errors,
            stop=STOP,
            max_tokens=ANSWER_MAX_TOKENS,
            temperature=0.01,
        )
        if text is None:
            return Answer(question, fallback, ev, {**meta, "llm": True, "llm_error": errors[-1]["error"]})
        return Answer(question, text, ev, {**meta, "llm": True})

    def estimate_hops(self, question: str, paths: Sequence[str]) -> int | None:
        """FRAG-F: ask the LLM which path answers the question and count its hops. Valid reply:
        ``NO`` (-> ``None``) or a first line with a path of 1..4 hops; anything else is asked once
        more, then ``None`` (the question stays unlabelled; WARNING logged)."""
        if self.llm is None:
            raise ValueError("estimate_hops needs an llm")
        hops = complete_validated(
            self.llm,
            hop_estimation_prompt(question, paths, self.prompts.get("hop_estimation")),
            parse_hop_estimate,
            step="hop_estimation",
            stop=STOP,
            schema=hop_schema(paths),
        )
        return hops or None

    def feedback(self, questions: Sequence[str], *, fraction: float = 0.25, seed: int = 0) -> dict[str, Any]:
        """FRAG-F (§2 step 10): sample ``fraction`` of ``questions`` (seed 0), label each complex
        iff the LLM-picked path of the currently routed pipeline has more than δ hops, and adapt
        the classifier on these labels. Returns counts; the classifier is updated in place."""
        if self.classifier is None or self.llm is None:
            raise ValueError("feedback needs a trained classifier and an llm")
        qs = list(questions)
        sample = random.Random(seed).sample(qs, max(1, int(len(qs) * fraction))) if qs else []
        labelled_q, labels = [], []
        for q in sample:
            ev = self.retrieve(q, k=1)
            hops = self.estimate_hops(strip_topic_marks(q), [f.text for f in ev.facts])
            if hops is not None:
                labelled_q.append(strip_topic_marks(q))
                labels.append(hops)
        if labelled_q:
            self.classifier.adapt(labelled_q, labels)
        return {
            "sampled": len(sample),
            "labelled": len(labelled_q),
            "complex": sum(h > self.classifier.delta for h in labels),
        }
