"""KG completion as evidence for KGQA: FRAG's relation chains walked over the KB *and* the KGE.

Know³-RAG answers KG incompleteness with *global predicted entities* (Know³-RAG §4.3, App. A
Algorithm 1; docs/methods.md §5(a) step 4): tails a KG-embedding model predicts along a relation the
question asks for, when the KG itself has no such edge, checked by the relative triple score
(§4.2 Eq. 2). On KGQA the relation is FRAG's predicted relation chain:

1. **Chain.** FRAG's trained path ranker gives the question's most probable relation chain
   (docs/methods.md §2(a) step 7 with our trained ranker; without a ranker: the chain of FRAG's best path).
2. **Walk** (:meth:`ChainCompleter.walk`): from the topic entity, hop by hop along the chain
   (``~r`` = an inverse step: heads ``h`` of ``(h, r, x)``). Each frontier entity follows its KB
   edges; one with *no* KB edge of that relation gets ``top_k`` predicted ones instead, scored
   over the entities of the type the step expects (:func:`slot_types`) by

   ``log_softmax(KGE) + prior_weight * log p(t | r) + local_bonus * [t is a KB neighbour]
   + rule_weight * conf(t)``

   - the KGE's global prediction (tails by ``score_tails``, heads of inverse steps by the
     model's reciprocal relation), as a log-softmax over the candidates;
   - the relation's tail prior ``p(t | r)`` (frequency of ``t`` at that end of ``r`` in the KB,
     +0.5 smoothing): ComplEx has no per-entity bias, so entities that lost most of their
     triples get near-flat scores and the prior breaks the tie (e.g. English for a language);
   - **local candidates**: Know³'s local neighbour entities (App. A: tails of the entity's
     relation in the KG, ranked by the KGE) are, when the asked relation is missing, the entity's
     KB neighbours through *other* relations (a film's writer is often its director);
   - **mined rules** (optional ``path_rules``, :class:`~kgrag_plugins.models.kge_rules.PathRules`):
     ``conf(t)`` is the largest confidence of a rule mined from the KB that predicts ``t``
     (``directed_by(x,y) <= written_by(x,y)``, a tag naming the person); a large ``rule_weight``
     puts rule-predicted entities first (docs/kge.md, "Mined rules").
   The KGE only predicts from entities it was trained on (one that lost every triple has no
   embedding); at most ``beam`` frontier entities are completed per hop; frontiers above
   ``max_frontier`` stop the walk (hubs).
3. **Verification.** Each predicted edge gets the verifier's score
   (:class:`~kgrag_plugins.methods.know3.scoring.TripleVerifier`, lower = more consistent); a
   completed path's score is its worst (largest) edge score, ``None`` when an edge could not be
   scored (the reason is kept).
4. **Ranking.** Ends reached by KB edges only come first (``predicted == 0``), then by the number
   of predicted edges, then by the summed log-scores of the predicted edges.

:class:`Know3FRAGRetriever` merges these with FRAG's answers by a :class:`MergeRule` per
predicted chain length; the rules are measured on training questions (``eval/kgqa_know3.py``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...index.graph import KnowledgeGraph
from ...models.kge_rules import role_counts
from ...types import Evidence, Fact, Path
from ..base import Retriever
from ..frag.path_ranker import INVERSE_PREFIX, Chain, chain_key
from ..frag.paths import PathGraph
from .relaxed import RelaxedWalker

logger = logging.getLogger(__name__)

__all__ = ["ChainCompleter", "Completion", "Know3FRAGRetriever", "MergeRule", "parse_step", "slot_types"]

#: Overlap coefficient at which two relation ends are taken to hold the same entity type.
TYPE_OVERLAP = 0.3


def parse_step(step: str) -> tuple[str, bool]:
    """A chain step ``"r"`` / ``"~r"`` -> ``(relation, inverse)``."""
    inv = step.startswith(INVERSE_PREFIX)
    return (step[len(INVERSE_PREFIX) :] if inv else step), inv


@dataclass
class Completion:
    """One answer reached along a chain: its path, which edges the KGE predicted, and scores.

    ``logp``: summed KGE log-softmax of the predicted edges (0 for KB-only paths);
    ``verifier``: the worst verifier score of the predicted edges (lower = more consistent;
    ``None`` if no edge was predicted or one could not be scored, see ``reason``)."""

    answer: str
    nodes: list[str]
    relations: list[str]
    inverse: list[bool]
    predicted: list[bool]
    logp: float = 0.0
    verifier: float | None = None
    reason: str | None = None
    chain: Chain = ()
    edge_scores: list[float | None] = field(default_factory=list)

    @property
    def n_predicted(self) -> int:
        return int(sum(self.predicted))

    def triples(self) -> list[tuple[str, str, str]]:
        """The path's edges as KG triples ``(head, relation, tail)`` (inverse steps turned round)."""
        out = []
        for i, (r, inv) in enumerate(zip(self.relations, self.inverse)):
            a, b = self.nodes[i], self.nodes[i + 1]
            out.append((b, r, a) if inv else (a, r, b))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "nodes": self.nodes,
            "relations": self.relations,
            "inverse": self.inverse,
            "predicted": self.predicted,
            "logp": round(self.logp, 4),
            "verifier": None if self.verifier is None else round(float(self.verifier), 4),
            "reason": self.reason,
        }


@dataclass
class _State:
    node: int
    nodes: list[int]
    predicted: list[bool]
    logp: float
    edge_scores: list[float | None]
    reason: str | None


class ChainCompleter:
    """Walk relation chains over a KB plus KGE-predicted edges (see the module docstring).

    Args:
        graph: the (possibly incomplete) KB the KGE was trained on.
        kge: a :class:`~kgrag_plugins.models.kge.KGEModel` (``score_tails``, ``score_many``,
            ``has_entity``, ``has_relation``, ``entity_ids``).
        verifier: optional :class:`~kgrag_plugins.methods.know3.scoring.TripleVerifier`; each
            predicted edge is scored with ``score_triple``.
        top_k: predictions per completed frontier entity; beam: frontier entities completed per
            hop (best first); max_frontier: larger frontiers stop the walk.
        path_rules: optional :class:`~kgrag_plugins.models.kge_rules.PathRules` mined from ``graph``
            (entity rows = the graph's), used by steps with a ``rule_weight``.
    """

    def __init__(
        self,
        graph: KnowledgeGraph,
        kge: Any,
        verifier: Any = None,
        *,
        top_k: int = 3,
        beam: int = 5,
        max_frontier: int = 1000,
        type_overlap: float = TYPE_OVERLAP,
        path_rules: Any = None,
    ) -> None:
        if top_k < 1 or beam < 1:
            raise ValueError(f"top_k and beam must be >= 1, got {top_k}, {beam}")
        self.graph = graph
        self.kge = kge
        self.verifier = verifier
        self.top_k = top_k
        self.beam = beam
        self.max_frontier = max_frontier
        self.type_overlap = type_overlap
        if path_rules is not None and path_rules.num_entities != graph.num_entities:
            raise ValueError(
                f"path_rules were mined over {path_rules.num_entities} entities, the graph has "
                f"{graph.num_entities}: mine them from this graph (PathRules.from_graph)"
            )
        self.path_rules = path_rules
        self._pg = PathGraph(graph, inverse=True)
        self._ids = graph.entity_ids
        self._rel_ids = {r: i for i, r in enumerate(graph.relations)}
        kidx = {e: i for i, e in enumerate(kge.entity_ids)}
        #: graph row -> KGE row (-1: the KGE has no embedding for it)
        self._kge_row = np.array([kidx.get(e, -1) for e in self._ids], dtype=np.int64)
        #: signed relation id -> graph rows at the far end of a step (the type the step expects)
        self._range = slot_types(graph, type_overlap)
        #: signed relation id -> how often each entity row is at the far end of a step in the KB
        self._counts = role_counts(*graph.triple_arrays(), graph.num_entities, len(graph.relations))
        self._score_cache: dict[tuple[str, str, str], Any] = {}

    def rebased(self, graph: KnowledgeGraph) -> "ChainCompleter":
        """The same completer over ``graph`` (the KB after an update): the same KGE and settings,
        the verifier's known triples and the mined rules (same options) taken from ``graph``.
        Entities the KGE never saw are walked over KB edges but never predicted; retrain the KGE
        (:func:`~kgrag_plugins.index.kge.kge_for_index`) for them."""
        from .scoring import TripleVerifier

        verifier = self.verifier
        if isinstance(verifier, TripleVerifier):  # another verifier is kept as given
            verifier = TripleVerifier(
                self.kge, graph, method=verifier.method, aggregate=verifier.aggregate, sides=verifier.sides
            )
        rules = self.path_rules
        if rules is not None:
            from ...models.kge_rules import PathRules

            rules = PathRules.from_graph(graph, **getattr(rules, "options", {}))
        return ChainCompleter(
            graph,
            self.kge,
            verifier,
            top_k=self.top_k,
            beam=self.beam,
            max_frontier=self.max_frontier,
            type_overlap=self.type_overlap,
            path_rules=rules,
        )

    # ------------------------------------------------------------------ KB and KGE steps
    def _signed(self, step: str) -> int | None:
        rel, inv = parse_step(step)
        rid = self._rel_ids.get(rel)
        if rid is None:
            return None
        return rid + self._pg.R if inv else rid

    def kb_next(self, node: int, signed: int) -> np.ndarray:
        """Graph rows one KB edge of ``signed`` away from ``node``."""
        pos, _ = self._pg.gather(np.array([node]))
        return np.unique(self._pg.dst[pos][self._pg.rel[pos] == signed]).astype(np.int64)

    def predict(
        self, node: int, step: str, *, prior_weight: float = 0.0, local_bonus: float = 0.0, rule_weight: float = 0.0
    ) -> list[tuple[int, float]]:
        """Predicted far ends of one step from ``node``: ``top_k`` ``(graph row, log-score)``, best
        first, over the type-consistent candidates (module docstring, step 2); ``[]`` when the
        KGE cannot score it."""
        signed = self._signed(step)
        rel, inv = parse_step(step)
        eid = self._ids[node]
        if signed is None or self._kge_row[node] < 0 or not self.kge.has_relation(rel):
            return []
        cands = self._range[signed]
        cands = cands[(cands != node) & (self._kge_row[cands] >= 0)]
        if not len(cands):
            return []
        scores = self._scores(eid, rel, inv, cands)
        if scores is None:
            return []
        ok = np.isfinite(scores)
        cands, scores = cands[ok], scores[ok]
        if not len(cands):
            return []
        total = _log_softmax(scores)
        if prior_weight:
            total = total + prior_weight * _log_softmax(np.log(self._counts[signed][cands] + 0.5))
        if local_bonus:
            pos, _ = self._pg.gather(np.array([node]))
            total = total + local_bonus * np.isin(cands, self._pg.dst[pos])
        if rule_weight and self.path_rules is not None:
            total = total + rule_weight * self.path_rules.confidences([node], signed)[0][cands]
        total = _log_softmax(total)
        top = np.argsort(-total, kind="stable")[: self.top_k]
        return [(int(cands[i]), float(total[i])) for i in top]

    def _scores(self, eid: str, rel: str, inv: bool, cands: np.ndarray) -> np.ndarray | None:
        """KGE scores of ``cands`` (graph rows) as tails of ``(eid, rel, ·)`` or, ``inv``, as heads
        of ``(·, rel, eid)``: one all-entity pass (the model's reciprocal relation row for heads
        when it has one, :meth:`KGEModel.score_all_rows`), else ``score_many``."""
        if not inv:
            all_scores = self.kge.score_tails(eid, rel)
            return None if all_scores is None else np.asarray(all_scores, dtype=np.float64)[self._kge_row[cands]]
        if all(hasattr(self.kge, a) for a in ("score_all_rows", "entity_row", "relation_row", "num_relations")):
            import torch

            hi, ri = self.kge.entity_row(eid), self.kge.relation_row(rel)
            if hi is None or ri is None:
                return None
            sc = self.kge.score_all_rows(torch.tensor([hi]), torch.tensor([ri + self.kge.num_relations]))[0]
            return np.asarray(sc.numpy(), dtype=np.float64)[self._kge_row[cands]]
        return np.asarray(self.kge.score_many([(self._ids[c], rel, eid) for c in cands]), dtype=np.float64)

    def _verify(self, triple: tuple[str, str, str]) -> tuple[float | None, str | None]:
        if self.verifier is None:
            return None, "no verifier"
        ts = self._score_cache.get(triple)
        if ts is None:
            ts = self.verifier.score_triple(*triple)
            self._score_cache[triple] = ts
        return ts.score, getattr(ts, "reason", None)

    # ------------------------------------------------------------------ the walk
    def kb_walk(self, topic: str, chain: Sequence[str]) -> bool:
        """Whether the KB alone reaches an entity other than ``topic`` along ``chain``."""
        if topic not in self.graph or not chain:
            return False
        signed_steps = [self._signed(s) for s in chain]
        if any(s is None for s in signed_steps):
            return False
        start = self.graph.index_of(topic)
        nodes = np.array([start])
        for signed in signed_steps:
            if not len(nodes) or len(nodes) > self.max_frontier:
                return False
            pos, _ = self._pg.gather(nodes)
            nodes = np.unique(self._pg.dst[pos][self._pg.rel[pos] == signed])
        return bool(len(np.setdiff1d(nodes, [start])))

    def walk(
        self,
        topic: str,
        chain: Sequence[str],
        *,
        prior_weight: float = 0.0,
        local_bonus: float = 0.0,
        rule_weight: float = 0.0,
    ) -> list[Completion]:
        """Every end reached from ``topic`` along ``chain`` (see the module docstring), ranked;
        the topic itself is never an answer. Unknown relations or topic: ``[]``."""
        if topic not in self.graph or not chain:
            return []
        signed_steps = [self._signed(s) for s in chain]
        if any(s is None for s in signed_steps):
            return []
        start = self.graph.index_of(topic)
        weights = {"prior_weight": prior_weight, "local_bonus": local_bonus, "rule_weight": rule_weight}
        frontier: dict[int, _State] = {start: _State(start, [start], [], 0.0, [], None)}
        for step, signed in zip(chain, signed_steps):
            assert signed is not None
            if len(frontier) > self.max_frontier:
                return []
            nxt: dict[int, _State] = {}
            missing: list[_State] = []
            for st in frontier.values():
                ends = self.kb_next(st.node, signed)
                if not len(ends):
                    missing.append(st)
                for w in ends.tolist():
                    if w in st.nodes:
                        continue
                    _keep(nxt, _State(w, st.nodes + [w], st.predicted + [False], st.logp, st.edge_scores, st.reason))
            missing.sort(key=lambda s: (sum(s.predicted), -s.logp))
            for st in missing[: self.beam]:
                for w, lp in self.predict(st.node, step, **weights):
                    if w in st.nodes:
                        continue
                    rel, inv = parse_step(step)
                    a, b = self._ids[st.node], self._ids[w]
                    score, why = self._verify((b, rel, a) if inv else (a, rel, b))
                    reason = st.reason or (None if score is not None else why or "not scorable")
                    scores = st.edge_scores + [score]
                    _keep(nxt, _State(w, st.nodes + [w], st.predicted + [True], st.logp + lp, scores, reason))
            frontier = nxt
            if not frontier:
                return []
        out = []
        for st in frontier.values():
            if st.node == start:
                continue
            scored = [s for s in st.edge_scores if s is not None]
            worst = max(scored) if scored and len(scored) == len(st.edge_scores) else None
            rels = [parse_step(s) for s in chain]
            out.append(
                Completion(
                    answer=self._ids[st.node],
                    nodes=[self._ids[n] for n in st.nodes],
                    relations=[r for r, _ in rels],
                    inverse=[i for _, i in rels],
                    predicted=list(st.predicted),
                    logp=st.logp,
                    verifier=worst,
                    reason=st.reason,
                    chain=tuple(chain),
                    edge_scores=list(st.edge_scores),
                )
            )
        out.sort(key=lambda c: (c.n_predicted, -c.logp, c.answer))
        return out


def slot_types(graph: KnowledgeGraph, overlap: float = TYPE_OVERLAP) -> dict[int, np.ndarray]:
    """Entity types without a type system: signed relation id (``r``: its tails, ``r + R``: its
    heads) -> the graph rows of that relation end's type. The ends ("slots") of all relations are
    merged (union-find) when their entity sets overlap by at least ``overlap`` of the smaller one
    (overlap coefficient); a slot's type is the union of its group's entities. So a film that lost
    its ``directed_by`` triple still counts as a film (it is a head of ``release_year``), and a
    director whose only film lost it still counts as a person (a tail of ``written_by``)."""
    h, r, t = (a.astype(np.int64) for a in graph.triple_arrays())
    R = len(graph.relations)
    sets = [np.unique(t[r == i]) for i in range(R)] + [np.unique(h[r == i]) for i in range(R)]
    parent = list(range(2 * R))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a in range(2 * R):
        for b in range(a + 1, 2 * R):
            small = min(len(sets[a]), len(sets[b]))
            if small and len(np.intersect1d(sets[a], sets[b], assume_unique=True)) >= overlap * small:
                parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for s in range(2 * R):
        groups.setdefault(find(s), []).append(s)
    union = {g: np.unique(np.concatenate([sets[s] for s in members])) for g, members in groups.items()}
    return {s: union[find(s)] for s in range(2 * R)}


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    m = float(x.max())
    return x - m - math.log(float(np.exp(x - m).sum()))


def _keep(states: dict[int, _State], st: _State) -> None:
    """Keep the better state per node: fewer predicted edges, then higher log-probability."""
    cur = states.get(st.node)
    if cur is None or (sum(st.predicted), -st.logp) < (sum(cur.predicted), -cur.logp):
        states[st.node] = st


# --------------------------------------------------------------------------- the KGQA retriever


@dataclass(frozen=True)
class MergeRule:
    """How completions are scored and accepted for one predicted chain length (see
    :class:`Know3FRAGRetriever`): prediction weights (:meth:`ChainCompleter.predict`), the
    verifier gate ``theta`` (accept a completion whose verifier score is at most ``theta``;
    ``None``: no gate) and the least path-ranker probability of the chain."""

    prior_weight: float = 1.0
    local_bonus: float = 4.0
    theta: float | None = None
    #: complete only when the path ranker gives the chain at least this probability
    min_chain_prob: float = 0.0
    #: weight of the mined rules' confidence (0: unused; needs ``ChainCompleter(path_rules=...)``)
    rule_weight: float = 0.0
    #: > 0: rank by the relaxed walk (:class:`~.relaxed.RelaxedWalker`, other linking relations
    #: weighted ``relax_eps`` at the inner hops) instead of the KGE completion; no verifier gate
    relax_eps: float = 0.0
    #: the relaxed walk's random-walk normalisation (``False``: weighted path counts)
    relax_normalise: bool = True
    #: the relaxed walk's substitution weights: ``"uniform"`` or ``"rules"`` (mined confidences)
    relax_weights: str = "uniform"

    @property
    def relaxed(self) -> bool:
        """Whether this rule ranks by the relaxed walk rather than the KGE completion."""
        return self.relax_eps > 0

    @property
    def name(self) -> str:
        if self.relaxed:
            kind = "random walk" if self.relax_normalise else "path counts"
            w = f"rules x{self.relax_eps:g}" if self.relax_weights == "rules" else f"eps {self.relax_eps:g}"
            return f"relaxed walk ({w}, {kind}, chain p >= {self.min_chain_prob:g})"
        gate = "no gate" if self.theta is None else f"verifier <= {self.theta:.4g}"
        rules = f", rules {self.rule_weight:g}" if self.rule_weight else ""
        return (
            f"complete (prior {self.prior_weight:g}, local {self.local_bonus:g}{rules}, "
            f"chain p >= {self.min_chain_prob:g}, {gate})"
        )

    def applies(self, chain_logp: float | None) -> bool:
        """Whether the predicted chain is probable enough (no probability: always)."""
        return chain_logp is None or math.exp(chain_logp) >= self.min_chain_prob

    def to_dict(self) -> dict[str, Any]:
        return {
            "prior_weight": self.prior_weight,
            "local_bonus": self.local_bonus,
            "theta": self.theta,
            "min_chain_prob": self.min_chain_prob,
            "rule_weight": self.rule_weight,
            "relax_eps": self.relax_eps,
            "relax_normalise": self.relax_normalise,
            "relax_weights": self.relax_weights,
        }


#: Chain lengths keyed in :attr:`Know3FRAGRetriever.rules` (longer chains use the last).
MAX_RULE_HOPS = 3


class Know3FRAGRetriever(Retriever):
    """FRAG plus Know³ KG completion (Know³-RAG §4.3 global prediction).

    Runs ``frag`` (a :class:`~kgrag_plugins.methods.frag.FRAGRetriever`), takes the question's
    predicted relation chain (the path ranker's most probable chain, else the chain of FRAG's
    best path) and merges, "KB first": when the KB has the chain from the topic entity, FRAG's
    answers are returned unchanged (``answer_source`` ``"paths"``); otherwise, when ``rules``
    has a :class:`MergeRule` for the chain's length (1, 2, 3+), the chain is walked with
    :class:`ChainCompleter` and the completed answers its gate accepts come first, then FRAG's
    (``"completion"``); with no rule, a chain less probable than the rule's ``min_chain_prob``
    or nothing accepted, FRAG's answers stand. A rule with ``relax_eps > 0`` ranks instead by
    the relaxed walk along the chain (:class:`~.relaxed.RelaxedWalker`, built on first use from
    the graph unless ``relaxed`` is given): its ends come first, then FRAG's (``"relaxed"``).
    ``rules=None`` applies the default :class:`MergeRule` to every length; ``{}`` never
    completes. Completed paths are returned as facts (``kind="completion"``) before FRAG's paths.
    """

    name = "know3:frag"

    def __init__(
        self,
        frag: Any,
        completer: ChainCompleter,
        *,
        rules: dict[int, MergeRule] | None = None,
        relaxed: RelaxedWalker | None = None,
    ) -> None:
        self.frag = frag
        self.index = frag.index
        self.completer = completer
        self.rules: dict[int, MergeRule] = (
            {h: MergeRule() for h in range(1, MAX_RULE_HOPS + 1)} if rules is None else dict(rules)
        )
        if relaxed is not None and relaxed.graph is not frag.graph:
            raise ValueError("the relaxed walker was built over another graph than FRAG's")
        if completer.graph is not frag.graph:
            raise ValueError("the completer was built over another graph than FRAG's")
        self._relaxed = relaxed

    def _refresh(self) -> None:
        """The index changed (``index.revision``): FRAG rebuilds from the new graph, the completer
        is rebased on it (:meth:`ChainCompleter.rebased`) and the relaxed walker rebuilt on first
        use, so no answer mixes the old KB with the new one. The merge rules stay as tuned."""
        self.frag._sync_index()
        graph = self.frag.graph
        if self.completer.graph is not graph:
            self.completer = self.completer.rebased(graph)
        if self._relaxed is not None and self._relaxed.graph is not graph:
            self._relaxed = RelaxedWalker(graph, max_fan=self._relaxed.max_fan)

    @property
    def relaxed(self) -> RelaxedWalker:
        """The relaxed walker over FRAG's graph (built on first use)."""
        self._sync_index()
        if self._relaxed is None:
            self._relaxed = RelaxedWalker(self.frag.graph)
        return self._relaxed

    def relaxed_answers(self, topics: Sequence[str], chain: Sequence[str], rule: MergeRule) -> list[str]:
        """Names of the relaxed walk's best ends along ``chain`` with ``rule``'s weights."""
        ends = self.relaxed.walk(
            topics, chain, eps=rule.relax_eps, normalise=rule.relax_normalise, weights=rule.relax_weights
        )
        return [self.frag.graph.name_of(e) for e, _ in ends]

    @property
    def mode(self) -> str:
        return str(self.frag.mode)

    @property
    def graph(self) -> KnowledgeGraph:
        return self.frag.graph

    def rule_for(self, chain: Sequence[str] | None) -> MergeRule | None:
        """The merge rule for a chain's length (``None``: keep FRAG's answers)."""
        return self.rules.get(min(len(chain), MAX_RULE_HOPS)) if chain else None

    def predicted_chain(
        self, question: str, topics: Sequence[str], ev: Evidence | None = None
    ) -> tuple[Chain | None, float | None]:
        """The question's most probable relation chain and its log-probability (``None``
        without a path ranker: the chain of FRAG's best path in ``ev``)."""
        ranker = getattr(self.frag, "path_ranker", None)
        if ranker is not None and len(ranker):
            rq = self.frag.relation_query(question, topics)
            lp = ranker.log_probs(self.frag.index.embed_query(rq), rq)
            best = int(np.argmax(lp))
            return tuple(ranker.chains[best]), float(lp[best])
        paths = [f for f in (ev.facts if ev is not None else []) if f.kind == "path"]
        if not paths:
            return None, None
        d = paths[0].data
        return chain_key(d["relations"], d["inverse"]), None

    def completions(self, topics: Sequence[str], chain: Sequence[str], rule: MergeRule) -> list[Completion]:
        """The chain walked from every topic entity with ``rule``'s weights, ranked."""
        comps: list[Completion] = []
        for t in topics:
            comps += self.completer.walk(
                t, chain, prior_weight=rule.prior_weight, local_bonus=rule.local_bonus, rule_weight=rule.rule_weight
            )
        comps.sort(key=lambda c: (c.n_predicted, -c.logp, c.answer))
        return comps

    def merge(
        self, frag_answers: Sequence[str], comps: Sequence[Completion], theta: float | None
    ) -> tuple[list[str], str, list[Completion]]:
        """``(answer names, answer_source, completions used)``: accepted completions first when the
        walk needed a prediction (``comps[0].n_predicted > 0``), else FRAG's answers."""
        used = [c for c in comps if theta is None or (c.verifier is not None and c.verifier <= theta)]
        if not comps or comps[0].n_predicted == 0 or not used:
            return list(frag_answers), "paths", []
        names = [self.frag.graph.name_of(c.answer) for c in used]
        return list(dict.fromkeys(names + list(frag_answers))), "completion", used

    @staticmethod
    def merge_relaxed(frag_answers: Sequence[str], relaxed: Sequence[str]) -> tuple[list[str], str]:
        """``(answer names, answer_source)``: the relaxed walk's ends first, then FRAG's
        (``"relaxed"``); FRAG's answers alone when the walk reached nothing (``"paths"``)."""
        if not relaxed:
            return list(frag_answers), "paths"
        return list(dict.fromkeys([*relaxed, *frag_answers])), "relaxed"

    def _retrieve(self, query: str, k: int) -> Evidence:
        ev = self.frag.evidence(query, k)
        topics = list(ev.trace.get("topic_entities") or [])
        chain, logp = self.predicted_chain(query, topics, ev)
        frag_answers = list(ev.trace.get("answers") or [])
        answers, source, used = frag_answers, "paths", []
        rule = self.rule_for(chain)
        trace: dict[str, Any] = {
            "predicted_chain": list(chain) if chain else None,
            "predicted_chain_logp": None if logp is None else round(logp, 4),
        }
        if chain:
            in_kb = any(self.completer.kb_walk(t, chain) for t in topics)
            trace["chain_in_kb"] = in_kb
            if not in_kb and rule is None:
                trace["completion"] = f"off for {len(chain)}-hop chains (no merge rule)"
            elif not in_kb and rule is not None and not rule.applies(logp):
                trace["completion"] = f"off: chain probability below {rule.min_chain_prob:g}"
            elif not in_kb and rule is not None and rule.relaxed:
                relaxed = self.relaxed_answers(topics, chain, rule)
                trace["merge_rule"] = rule.to_dict()
                trace["relaxed_answers"] = relaxed
                answers, source = self.merge_relaxed(frag_answers, relaxed)
            elif not in_kb and rule is not None:
                comps = self.completions(topics, chain, rule)
                answers, source, used = self.merge(frag_answers, comps, rule.theta)
                trace["merge_rule"] = rule.to_dict()
                trace["completions"] = [c.to_dict() for c in comps[:10]]
                if comps and not used:
                    trace["completion"] = f"rejected: no completion with a verifier score <= {rule.theta}"
        names = self.frag._name_map(n for c in used for n in c.nodes)
        facts = [
            Fact(
                Path(c.nodes, c.relations, inverse=c.inverse).verbalize(names),
                kind="completion",
                score=c.logp,
                data={**c.to_dict(), "hops": len(c.relations)},
            )
            for c in used
        ]
        ev.facts = facts + list(ev.facts)
        ev.trace.update(trace)
        ev.trace.update(retriever=self.name, answers=answers, answer_source=source)
        return ev
