"""Know³ on the KGQA bench: an incomplete KB and FRAG + KGE completion.

``kgrag bench --dataset metaqa --kb-keep 0.5 --retrievers frag,know3:frag``
(Know³-RAG §4.3 global prediction, App. A; docs/methods.md §5(a) step 4; the classical
"half KB" test of KGQA with KG embeddings, EmbedKGQA ACL 2020):

- **Incomplete KB** (:func:`keep_kb`): a fixed-seed random fraction ``kb_keep`` of the KB's
  triples is kept (a ``numpy`` permutation with ``seed``, the first ``round(kb_keep * n)`` rows
  kept). The removed triples are never seen: FRAG's paths, the path ranker's chain labels, the
  hop labels (h_min), the KGE and the verifier's reference triples all read the kept graph only.
  Every entity stays in the kept graph, those that lost all their triples as isolated entities
  (counted in the report): a question's topic entity is therefore always an entity of the kept
  graph, and question selection (exclusions, evaluation sample, training questions) is computed
  on the *full* KB before the triples are dropped, so both settings evaluate the same questions.
- **KGE** (:func:`kge_for_kb`): trained by the bench itself with
  :func:`~kgrag_plugins.models.kge.train_kge` (:data:`KB_KGE_OPTIONS` unless ``kge_options`` are
  given) on the kept triples only, cached under
  ``<cache>/kge/<dataset>-keep<F>-seed<S>-<model>-<config hash>-<graph fingerprint>/`` (the
  cache is ``$KGRAG_CACHE_DIR`` or ``.kgrag_cache``); a cached model is reused only when the
  kept graph's fingerprint matches. The report gives the training seconds (those of the run that
  trained it when loaded from the cache, with ``loaded_from_cache``).
- **Merge rules** (:func:`tune_merge`), chosen on *training* questions (never the evaluated
  ones; ``TUNE_PER_HOP`` per hop), one per predicted chain length (1, 2, 3+): keep FRAG's
  answers, or complete with a prior weight (0 / 1), a local-candidate bonus (0 / 4), a weight of
  the rules mined from the kept KB (0 / 1000, :class:`~kgrag_plugins.models.kge_rules.PathRules`;
  1000 = rule-predicted entities first), a least
  path-ranker probability of the chain (0 / 0.3 / 0.5) and a verifier gate (none, or the
  verifier's calibrated thresholds ``TripleVerifier.calibrate(p)``, p = 99 / 95 / 90 / 75 / 50:
  the p-th percentile of its scores over the KGE's held-out triples, or over known KB triples for
  a KGE cached before the held-out split was stored); or, instead of the KGE, the relaxed walk
  along the chain (:class:`~kgrag_plugins.methods.know3.relaxed.RelaxedWalker`: at the inner hops
  the other linking relations weighted by 1 / 5 times their mined substitution confidence, or
  uniformly 0.1 / 1; random walk or path counts). Completion is used for a chain
  length only when it beats FRAG alone there significantly (one-sided sign test at 5 % on the
  questions where the two answers differ in correctness). The path ranker that predicts the
  chains was trained on the same training questions (in-sample chains).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..config import progress_enabled
from ..datasets.loaders import Question
from ..datasets.metrics import hits_at_1
from ..index.graph import KnowledgeGraph

logger = logging.getLogger(__name__)

#: Verifier-gate percentiles tried by :func:`tune_merge` (``None`` = no gate).
GATE_PERCENTILES: tuple[float | None, ...] = (None, 99.0, 95.0, 90.0, 75.0, 50.0)
#: Prior weights and local-candidate bonuses tried by :func:`tune_merge` (``ChainCompleter.predict``).
PRIOR_WEIGHTS: tuple[float, ...] = (0.0, 1.0)
LOCAL_BONUSES: tuple[float, ...] = (0.0, 4.0)
#: Weights of the mined rules' confidence tried by :func:`tune_merge` (1000: rule-predicted
#: entities first; docs/kge.md "Mined rules"); used only when the completer has ``path_rules``.
RULE_WEIGHTS: tuple[float, ...] = (0.0, 1000.0)
#: Relaxed walks tried by :func:`tune_merge` (:class:`~kgrag_plugins.methods.know3.relaxed.RelaxedWalker`):
#: ``(weights, eps)``, the mined substitution rules' confidence times 1 / 5 first, then a uniform
#: 0.1 / 1; each with the random-walk normalisation and with path counts.
RELAX_WALKS: tuple[tuple[str, float], ...] = (("rules", 1.0), ("rules", 5.0), ("uniform", 0.1), ("uniform", 1.0))
#: Least path-ranker probabilities of the predicted chain tried by :func:`tune_merge`.
CHAIN_PROBS: tuple[float, ...] = (0.0, 0.3, 0.5)
#: Training questions per hop used to choose the merge rules (300 until 2026-11-29: on two random
#: half KBs, 1,000 gave the more reliable choice; docs/know3.md).
TUNE_PER_HOP = 1000
#: ``train_kge`` options of the bench's KGE (``kge_options=None``): the half-KB sweep's best CPU
#: setting, chosen on validation triples (docs/kge.md: N3 0.1, early stopping; validation MRR
#: 0.178 against 0.127 for the library defaults, about 165 s on 2 idle cores).
KB_KGE_OPTIONS: dict[str, Any] = {"reg": 0.1, "epochs": 200, "patience": 3}
#: A merge rule replaces FRAG alone only if it wins a one-sided sign test at 5 % (z = 1.645).
SIGN_TEST_Z = 1.645


# --------------------------------------------------------------------------- the incomplete KB


def split_kb(num_triples: int, kb_keep: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(kept rows, removed rows)`` of a KB's triple table, each sorted; disjoint, together all
    rows. ``round(kb_keep * num_triples)`` rows are kept, chosen by a ``seed``-ed permutation."""
    if not 0 < kb_keep <= 1:
        raise ValueError(f"kb_keep must be in (0, 1], got {kb_keep}")
    perm = np.random.default_rng(seed).permutation(num_triples)
    n_keep = int(round(kb_keep * num_triples))
    return np.sort(perm[:n_keep]), np.sort(perm[n_keep:])


def keep_kb(graph: KnowledgeGraph, kb_keep: float, *, seed: int = 0) -> tuple[KnowledgeGraph, dict[str, Any]]:
    """The graph with only the kept triples (:func:`split_kb`; every entity kept, see the module
    docstring) and a report: ``kb_keep``, ``seed``, ``triples_kept`` / ``triples_removed``,
    ``isolated_entities`` (entities with triples in the full KB and none in the kept one).
    ``kb_keep == 1`` returns ``graph`` itself."""
    h, r, t = graph.triple_arrays()
    kept, removed = split_kb(len(h), kb_keep, seed)
    report: dict[str, Any] = {
        "kb_keep": kb_keep,
        "seed": seed,
        "triples_full": int(len(h)),
        "triples_kept": int(len(kept)),
        "triples_removed": int(len(removed)),
    }
    if not len(removed):
        return graph, {**report, "isolated_entities": 0}
    ents = list(graph.entities())
    out = KnowledgeGraph.from_columns(
        [e.id for e in ents],
        [e.name for e in ents],
        graph.relations,
        h[kept],
        r[kept],
        t[kept],
        aliases=[e.aliases for e in ents],
        descriptions=[e.description for e in ents],
        types=[e.type for e in ents],
        dedupe=False,
    )
    out.meta = dict(graph.meta)
    n = graph.num_entities
    before = np.bincount(np.concatenate([h, t]), minlength=n) > 0
    after = np.bincount(np.concatenate([h[kept], t[kept]]), minlength=n) > 0
    report["isolated_entities"] = int((before & ~after).sum())
    return out, report


def isolated_topics(graph: KnowledgeGraph, questions: Sequence[Question]) -> int:
    """How many questions' topic entity has no triple in ``graph``."""
    h, _, t = graph.triple_arrays()
    deg = np.bincount(np.concatenate([h, t]), minlength=graph.num_entities)
    return sum(
        1 for q in questions if q.topic_entity and q.topic_entity in graph and not deg[graph.index_of(q.topic_entity)]
    )


def graph_fingerprint(graph: KnowledgeGraph) -> str:
    """SHA-1 of the graph's entity ids, relations and triple columns."""
    d = hashlib.sha1()
    d.update("\n".join(graph.entity_ids).encode())
    d.update(b"\0" + "\n".join(graph.relations).encode() + b"\0")
    for a in graph.triple_arrays():
        d.update(np.ascontiguousarray(a, dtype=np.int32).tobytes())
    return d.hexdigest()


def kb_triples(graph: KnowledgeGraph) -> list[tuple[str, str, str]]:
    """The graph's triples as ``(head id, relation, tail id)``."""
    ids, rels = graph.entity_ids, graph.relations
    h, r, t = graph.triple_arrays()
    return [(ids[a], rels[b], ids[c]) for a, b, c in zip(h.tolist(), r.tolist(), t.tolist())]


# --------------------------------------------------------------------------- the KGE


def _train_config(train_kwargs: dict[str, Any]) -> dict[str, Any]:
    from ..models.kge import train_kge

    sig = inspect.signature(train_kge)
    cfg = {
        k: p.default
        for k, p in sig.parameters.items()
        if p.default is not inspect.Parameter.empty and k not in ("progress", "device")
    }
    cfg.update({k: v for k, v in train_kwargs.items() if k not in ("progress", "device")})
    return cfg


def kge_for_kb(
    graph: KnowledgeGraph,
    *,
    dataset: str,
    kb_keep: float,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    train_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """The KGE for (the kept part of) a KGQA dataset's KB: loaded from the cache when its graph
    fingerprint matches, else trained on ``graph``'s triples only and saved there (see the
    module docstring). Returns ``(KGEModel, report)``."""
    from ..config import cache_dir as default_cache_dir
    from ..models.kge import KGEModel, train_kge

    train_kwargs = dict(train_kwargs or {})
    cfg = _train_config(train_kwargs)
    fp = graph_fingerprint(graph)
    chash = hashlib.sha1(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:8]
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", f"{dataset}-keep{kb_keep:g}-seed{seed}-{cfg.get('model', 'kge')}").lower()
    path = Path(cache_dir or default_cache_dir()) / "kge" / f"{slug}-{chash}-{fp[:12]}"
    side = path / "bench.json"
    if side.is_file():
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
            if meta.get("fingerprint") == fp:
                t = time.perf_counter()
                model = KGEModel.load(path)
                return model, {**meta, "path": str(path), "loaded_from_cache": True,
                               "load_seconds": round(time.perf_counter() - t, 2)}  # fmt: skip
        except (OSError, ValueError, KeyError) as e:  # damaged entry: train again
            logger.warning("retraining the cached KGE at %s: %s", path, e)
    triples = kb_triples(graph)
    t = time.perf_counter()
    model, train_report = train_kge(triples, progress=progress, **train_kwargs)
    seconds = time.perf_counter() - t
    model.save(path)
    meta = {
        "fingerprint": fp,
        "config": cfg,
        "train_triples": len(triples),
        "train_seconds": round(seconds, 2),
        "train_report": train_report,
    }
    tmp = side.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, side)
    return model, {**meta, "path": str(path), "loaded_from_cache": False}


# --------------------------------------------------------------------------- the merge rule


def _rule_grid(
    prior_weights: Sequence[float],
    local_bonuses: Sequence[float],
    chain_probs: Sequence[float],
    thetas: dict[str, float | None],
    rule_weights: Sequence[float] = (0.0,),
    relax_walks: Sequence[tuple[str, float]] = (),
) -> list[tuple[str, Any]]:
    """Candidate rules; within each weight setting the more probable chain and the stricter gate
    first (so ties go to the stricter rule). Gates with equal thresholds are tried once. The
    relaxed-walk rules (``relax_walks``; random walk before path counts) come last."""
    from ..methods.know3.completion import MergeRule

    gates: dict[float | None, str] = {}
    for gate, theta in sorted(thetas.items(), key=lambda kv: (kv[1] is None, kv[1] or 0.0)):
        gates.setdefault(theta, gate)
    out = []
    for rw in rule_weights:
        for pw in prior_weights:
            for lb in local_bonuses:
                for mp in sorted(chain_probs, reverse=True):
                    for theta, gate in gates.items():
                        rules = f", rules {rw:g}" if rw else ""
                        name = f"complete (prior {pw:g}, local {lb:g}{rules}, chain p >= {mp:g}, {gate})"
                        out.append((name, MergeRule(pw, lb, theta, mp, rule_weight=rw)))
    for weights, eps in relax_walks:
        for normalise in (True, False):
            for mp in sorted(chain_probs, reverse=True):
                rule = MergeRule(0.0, 0.0, None, mp, relax_eps=eps, relax_normalise=normalise, relax_weights=weights)
                out.append((rule.name, rule))
    return out


def tune_merge(
    retriever: Any,
    questions: Sequence[Question],
    *,
    prior_weights: Sequence[float] = PRIOR_WEIGHTS,
    local_bonuses: Sequence[float] = LOCAL_BONUSES,
    chain_probs: Sequence[float] = CHAIN_PROBS,
    percentiles: Sequence[float | None] = GATE_PERCENTILES,
    rule_weights: Sequence[float] | None = None,
    relax_walks: Sequence[tuple[str, float]] = RELAX_WALKS,
    progress: bool = True,
) -> dict[str, Any]:
    """Choose ``retriever.rules`` (one :class:`~kgrag_plugins.methods.know3.completion.MergeRule`
    or none per predicted chain length) by Hits@1 on ``questions`` (training questions).

    Only questions whose predicted chain is missing from the KB for their topic are affected by
    the rule (the others keep FRAG's answers under every rule), so only those are run. Per chain
    length, "FRAG alone" is kept unless a rule beats it significantly (one-sided sign test at 5 %
    over the questions where the two differ, :data:`SIGN_TEST_Z`); the best such rule wins, ties
    going to the earlier one of the grid (lower prior weight and local bonus, then the stricter
    chain probability and gate first, rules unused before used). Gates are the verifier's
    calibrated thresholds (``TripleVerifier.calibrate(p)``, ``None`` = no gate). ``rule_weights``
    (default :data:`RULE_WEIGHTS` when the completer has mined ``path_rules``, else ``(0,)``);
    ``relax_walks`` adds relaxed-walk rules (``(weights, eps)`` pairs, :data:`RELAX_WALKS`; ``()``: none)."""
    from ..methods.know3.completion import MAX_RULE_HOPS

    verifier = retriever.completer.verifier
    thetas: dict[str, float | None] = {}
    for p in percentiles:
        if p is None:
            thetas["no gate"] = None
        elif verifier is not None:
            thetas[f"verifier <= p{p:g}"] = float(verifier.calibrate(percentile=p))
    if rule_weights is None:
        rule_weights = RULE_WEIGHTS if getattr(retriever.completer, "path_rules", None) is not None else (0.0,)
    grid = _rule_grid(prior_weights, local_bonuses, chain_probs, thetas, rule_weights, relax_walks)
    hits: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts = {"questions": len(questions), "no_chain": 0, "chain_in_kb": 0, "chain_missing": 0}
    t0 = time.perf_counter()
    for q in tqdm(questions, desc="know3 merge tuning", disable=not progress_enabled(progress), leave=False):
        topics = retriever.frag.link(q.question)[0]
        chain, logp = retriever.predicted_chain(q.question, topics)
        if not chain or not topics:
            counts["no_chain"] += 1
            continue
        if any(retriever.completer.kb_walk(t, chain) for t in topics):
            counts["chain_in_kb"] += 1
            continue
        counts["chain_missing"] += 1
        length = min(len(chain), MAX_RULE_HOPS)
        frag_answers = retriever.frag.evidence(q.question, 32).trace.get("answers") or []
        hits[length]["frag alone"].append(hits_at_1(frag_answers, q.answers))
        walks: dict[tuple[float, float, float], list] = {}
        relaxed: dict[tuple[float, bool, str], list[str]] = {}
        for name, rule in grid:
            answers = frag_answers
            if rule.applies(logp) and rule.relaxed:
                rkey = (rule.relax_eps, rule.relax_normalise, rule.relax_weights)
                if rkey not in relaxed:
                    relaxed[rkey] = retriever.relaxed_answers(topics, chain, rule)
                answers, _ = retriever.merge_relaxed(frag_answers, relaxed[rkey])
            elif rule.applies(logp):
                key = (rule.prior_weight, rule.local_bonus, rule.rule_weight)
                if key not in walks:
                    walks[key] = retriever.completions(topics, chain, rule)
                answers, _, _ = retriever.merge(frag_answers, walks[key], rule.theta)
            hits[length][name].append(hits_at_1(answers, q.answers))
    chosen: dict[int, Any] = {}
    by_length: dict[str, Any] = {}
    for length in sorted(hits):
        base = np.asarray(hits[length]["frag alone"])
        table = {name: float(np.mean(v)) for name, v in hits[length].items()}
        signs = {}
        for name, _ in grid:
            v = np.asarray(hits[length][name])
            wins, losses = int(((v > 0) & (base == 0)).sum()), int(((v == 0) & (base > 0)).sum())
            signs[name] = {"wins": wins, "losses": losses, "significant": _significant(wins, losses)}
        best = "frag alone"
        for name, _ in grid:
            if signs[name]["significant"] and table[name] > table[best] + 1e-9:
                best = name
        if best != "frag alone":
            chosen[length] = dict(grid)[best]
        by_length[str(length)] = {
            "chain_missing_questions": len(base),
            "chosen": best,
            "hits@1": {name: round(v, 4) for name, v in table.items()},
            "vs_frag": signs,
        }
    retriever.rules = chosen
    return {
        **counts,
        "thresholds": thetas,
        "by_chain_length": by_length,
        "rules": {str(k): v.to_dict() for k, v in chosen.items()},
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _significant(wins: int, losses: int, z: float = SIGN_TEST_Z) -> bool:
    """One-sided sign test (normal approximation) on the questions where a rule and FRAG alone
    differ: the rule must win more than ``z`` standard deviations above a tie."""
    return wins - losses > z * float(np.sqrt(wins + losses)) if wins + losses else False


def tuning_sample(train: Sequence[Question], per_hop: int = TUNE_PER_HOP) -> list[Question]:
    """The first ``per_hop`` training questions of each hop count (the training list is already
    shuffled with a fixed seed by :func:`~kgrag_plugins.eval.kgqa.split_questions`)."""
    by_hop: dict[int, list[Question]] = defaultdict(list)
    for q in train:
        if len(by_hop[int(q.hops or 0)]) < per_hop:
            by_hop[int(q.hops or 0)].append(q)
    return [q for h in sorted(by_hop) for q in by_hop[h]]


def build_know3_frag(
    frag: Any,
    graph: KnowledgeGraph,
    train: Sequence[Question],
    *,
    dataset: str,
    kb_keep: float,
    kb_seed: int = 0,
    cache_dir: str | Path | None = None,
    kge_options: dict[str, Any] | None = None,
    tune_per_hop: int = TUNE_PER_HOP,
    path_rules: bool = True,
    progress: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """``know3:frag`` around a configured FRAG retriever: KGE (:func:`kge_for_kb`), verifier
    (default method), :class:`~kgrag_plugins.methods.know3.completion.ChainCompleter` (with
    :class:`~kgrag_plugins.models.kge_rules.PathRules` mined from the kept KB when ``path_rules``),
    the relaxed walker over the kept KB, and the merge rule chosen on ``tune_per_hop`` training
    questions per hop (:func:`tune_merge`; the rules' weight and the relaxed walk are among its
    choices)."""
    from ..methods.know3.completion import ChainCompleter, Know3FRAGRetriever
    from ..methods.know3.relaxed import RelaxedWalker
    from ..methods.know3.scoring import TripleVerifier
    from ..models.kge_rules import PathRules

    kge, kge_report = kge_for_kb(
        graph, dataset=dataset, kb_keep=kb_keep, seed=kb_seed, cache_dir=cache_dir,
        train_kwargs=KB_KGE_OPTIONS if kge_options is None else kge_options, progress=progress,
    )  # fmt: skip
    t = time.perf_counter()
    verifier = TripleVerifier(kge, graph)
    mined = PathRules.from_graph(graph) if path_rules else None
    completer = ChainCompleter(graph, kge, verifier, path_rules=mined)
    walker = RelaxedWalker(frag.graph)
    retriever = Know3FRAGRetriever(frag, completer, rules={}, relaxed=walker)
    setup_s = time.perf_counter() - t
    tuning = tune_merge(retriever, tuning_sample(train, tune_per_hop), progress=progress)
    report = {
        "kge": kge_report,
        "verifier": {
            "method": getattr(verifier, "method", None),
            "aggregate": getattr(verifier, "aggregate", None),
            "setup_seconds": round(setup_s, 2),
        },
        "completion": {"top_k": completer.top_k, "beam": completer.beam, "max_frontier": completer.max_frontier},
        "path_rules": None if mined is None else mined.to_dict(list(graph.relations)),
        "relaxed_walk": {
            "linking_relations": walker.linking,
            "max_fan": walker.max_fan,
            "substitution_confidence": {
                f"{s} <= {o}": round(c, 4) for (s, o), c in sorted(walker.confidence.items()) if c >= 0.01
            },
        },
        "merge_tuning": tuning,
    }
    return retriever, report
