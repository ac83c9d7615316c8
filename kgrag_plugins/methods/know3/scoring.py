"""Triple verifier scores (Know³-RAG §3.2 Eq. 1-2; docs/methods.md §5(a)-(b); docs/kge.md "Verifier scores").

Convention: every score here is **lower = more consistent with the KG** (the paper accepts an
answer when its score ``s_t < θ_t``).

* ``"relative"`` (paper Eq. 2): ``|KGE(h, r, t) - mean_j KGE(ref_j)|`` with references = the
  KG's known triples with the same head (the code's same-head reference set, docs/methods.md §5(b));
  for a reciprocal relation ``~r`` (``(h, ~r, t)`` = the KB's ``(t, r, h)``) the references are
  the reciprocal known triples with head ``h`` (the KB triples with tail ``h``). Triples whose
  head has no reference are skipped with a reason.
* ``"raw"``: ``-KGE(h, r, t)``.
* ``"type_rank"``: the filtered rank of ``t`` among the entities of the type the relation
  expects (every tail of ``r`` in the KG), by ``KGE(h, r, ·)``, normalised to [0, 1] (0 = best);
  the other known tails of ``(h, r)`` are left out of the ranking (classic filtered setting).
  With ``sides="both"`` it is the mean of that rank and the head's rank among the relation's heads
  given the tail, so a triple whose *head* is the doubtful part is judged as well.

An answer's score aggregates its scorable triples: ``"mean"`` (the released code's
``score_feature``, default) or ``"sum"`` (paper Eq. 1). The default method is chosen by
triple-classification ROC-AUC on MetaQA (``kgrag train kge --dataset metaqa``, docs/kge.md).

**Plausibility** (:func:`plausibility`; ``TripleScore.plausibility``, ``Verification.plausibility``)
is the same judgement the way people read a score: in [0, 1], **higher = more plausible**, a
strictly decreasing function of the score (it orders triples exactly as the score does, reversed,
and a threshold θ on the score is the threshold ``plausibility(θ)`` on it). The scores themselves
are unchanged. Per method:

* ``"type_rank"``: ``1 - score``, the share of the same-type candidates the KGE ranks below the
  triple's entity (1: it beats every other entity of the type; 0.5: a median candidate).
* ``"relative"``: ``1 / (1 + score)``, 1 when the triple's KGE score equals its head's reference
  mean, 0.5 at one KGE unit from it.
* ``"raw"``: ``1 / (1 + exp(score))`` = ``sigmoid(KGE(h, r, t))``, 0.5 at KGE = 0.

An answer aggregated with ``"sum"`` is mapped through its mean per scored triple.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    from ...index.graph import KnowledgeGraph
    from ...models.kge import KGEModel

log = logging.getLogger(__name__)

METHODS = ("relative", "raw", "type_rank")
AGGREGATES = ("mean", "sum")
#: Default verifier score (measured: triple-classification ROC-AUC on MetaQA, docs/kge.md).
DEFAULT_METHOD = "type_rank"
#: Same-type rank of the tail only (``"tail"``, measured better on MetaQA, docs/kge.md) or the mean
#: with the head's rank among the heads of the relation given the tail (``"both"``).
DEFAULT_SIDES = "tail"
_LOWER = "lower = more consistent with the KG"
_HIGHER = "higher = more plausible"


def plausibility(score: float | None, method: str = DEFAULT_METHOD) -> float | None:
    """A verifier score of ``method`` as a plausibility in [0, 1], higher = more plausible (the
    module docstring gives the mapping per method); ``None`` for ``None``."""
    if score is None or np.isnan(score):
        return None
    if method == "type_rank":
        value = 1.0 - score
    elif method == "relative":
        value = 1.0 / (1.0 + max(0.0, score))
    elif method == "raw":
        value = 1.0 / (1.0 + float(np.exp(min(score, 700.0))))
    else:
        raise ValueError(f"unknown verifier method {method!r}; expected one of {', '.join(METHODS)}")
    return float(min(1.0, max(0.0, value)))


def _num(x: float | None) -> str:
    return "None" if x is None else f"{x:.4g}"


@dataclass
class TripleScore:
    """One triple's scores. ``raw`` is the KGE score (higher = more plausible); ``relative`` and
    ``type_rank`` follow the lower-is-better convention; ``score`` is the verifier's method value
    (lower = more consistent) and ``plausibility`` the same in [0, 1], higher = more plausible
    (:func:`plausibility`); ``reason`` says why a triple (or one of its scores) was skipped."""

    head: str
    relation: str
    tail: str
    raw: float | None = None
    relative: float | None = None
    type_rank: float | None = None
    score: float | None = None
    reason: str | None = None
    plausibility: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        why = f", reason={self.reason!r}" if self.reason else ""
        return (
            f"TripleScore({self.head!r} -[{self.relation}]-> {self.tail!r}: score={_num(self.score)} ({_LOWER}), "
            f"plausibility={_num(self.plausibility)} ({_HIGHER}), raw KGE={_num(self.raw)} ({_HIGHER}){why})"
        )


@dataclass
class Verification:
    """An answer's aggregate score (lower = more consistent; ``None`` when no triple was scorable,
    with ``reason``), its :attr:`plausibility` (higher = more plausible) and the per-triple breakdown."""

    score: float | None
    triples: list[TripleScore] = field(default_factory=list)
    method: str = DEFAULT_METHOD
    aggregate: str = "mean"
    reason: str | None = None

    @property
    def scored(self) -> int:
        return sum(t.score is not None for t in self.triples)

    @property
    def plausibility(self) -> float | None:
        """The aggregate score as a plausibility in [0, 1], higher = more plausible (a ``"sum"``
        through its mean per scored triple; :func:`plausibility`)."""
        if self.score is None:
            return None
        per = self.score / max(1, self.scored) if self.aggregate == "sum" else self.score
        return plausibility(per, self.method)

    def __repr__(self) -> str:
        why = f", reason={self.reason!r}" if self.reason else ""
        return (
            f"Verification(score={_num(self.score)} ({self.method} {self.aggregate}, {_LOWER}), "
            f"plausibility={_num(self.plausibility)} ({_HIGHER}), "
            f"{self.scored} of {len(self.triples)} triples scored{why})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "plausibility": self.plausibility,
            "method": self.method,
            "aggregate": self.aggregate,
            "reason": self.reason,
            "scored": self.scored,
            "triples": [t.to_dict() for t in self.triples],
        }


class TripleVerifier:
    """Scores triples against a KG with a :class:`~kgrag_plugins.models.kge.KGEModel`.

    ``triples``: the KG's known facts (a :class:`KnowledgeGraph` or ``(head, relation, tail)``
    strings with KG relation labels): the reference triples of Eq. 2, the relation type sets of the
    same-type rank and the known tails it filters out.
    """

    def __init__(
        self,
        kge: "KGEModel",
        triples: "Sequence[tuple[str, str, str]] | KnowledgeGraph",
        *,
        method: str = DEFAULT_METHOD,
        aggregate: str = "mean",
        sides: str = DEFAULT_SIDES,
    ) -> None:
        from ...models.kge_eval import KnownTails

        if method not in METHODS:
            raise ValueError(f"unknown verifier method {method!r}; expected one of {', '.join(METHODS)}")
        if aggregate not in AGGREGATES:
            raise ValueError(f"unknown aggregate {aggregate!r}; expected one of {', '.join(AGGREGATES)}")
        if sides not in ("tail", "both"):
            raise ValueError(f"sides must be 'tail' or 'both', got {sides!r}")
        self.kge, self.method, self.aggregate, self.sides = kge, method, aggregate, sides
        rows = _known_rows(kge, triples)
        self.known_rows = rows
        self.num_known = len(rows)
        n, m = kge.num_entities, kge.num_relations
        self._known = KnownTails(rows, n, m)
        # same-head reference means (Eq. 2): row e = mean KGE of the known triples with head e;
        # row n + e = the same for the reciprocal triples (t, ~r, h), i.e. known triples with tail e
        ref_sum = np.zeros(2 * n)
        self._ref_count = np.zeros(2 * n, dtype=np.int64)
        for col, rel_shift, off in ((0, 0, 0), (2, m, n)):
            heads, tails = rows[:, col], rows[:, 2 - col]
            for s in range(0, len(rows), 65_536):
                sl = slice(s, s + 65_536)
                sc = kge.score_rows(heads[sl], rows[sl, 1] + rel_shift, tails[sl]).astype(np.float64)
                ref_sum += np.bincount(heads[sl] + off, weights=sc, minlength=2 * n)
            self._ref_count += np.bincount(heads + off, minlength=2 * n)
        with np.errstate(invalid="ignore", divide="ignore"):
            self._ref_mean = np.where(self._ref_count > 0, ref_sum / np.maximum(self._ref_count, 1), np.nan)
        # relation type sets (tails of r in the KG; heads for the reciprocal rows R..2R-1), sorted
        self._types = [np.unique(rows[rows[:, 1] == r, 2]) for r in range(m)]
        self._types += [np.unique(rows[rows[:, 1] == r, 0]) for r in range(m)]

    # ------------------------------------------------------------------ scores by rows (batched)
    def score_rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """``raw``, ``relative`` and ``type_rank`` (float64, ``nan`` = not computable) of KGE row
        triples ``[B, 3]`` (relation rows ``R..2R-1`` are reciprocal relations)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        h, r, t = rows[:, 0], rows[:, 1], rows[:, 2]
        raw = np.zeros(len(rows), dtype=np.float64)
        for s in range(0, len(rows), 65_536):
            raw[s : s + 65_536] = self.kge.score_rows(h[s : s + 65_536], r[s : s + 65_536], t[s : s + 65_536])
        n, m = self.kge.num_entities, self.kge.num_relations
        relative = np.abs(raw - self._ref_mean[np.where(r < m, h, h + n)]) if len(rows) else raw.copy()
        ranks = [self._side_ranks(h, r, t)]
        if self.sides == "both":
            m = self.kge.num_relations
            ranks.append(self._side_ranks(t, (r + m) % (2 * m), h))
        stack = np.stack(ranks)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-nan columns stay nan
            type_rank = np.nanmean(stack, axis=0) if len(rows) else raw.copy()
        return {"raw": raw, "relative": relative, "type_rank": type_rank}

    def _side_ranks(self, h: np.ndarray, r: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Filtered rank of each tail ``t[i]`` among the type set of ``r[i]`` by ``KGE(h[i], r[i], ·)``,
        normalised to [0, 1] (ties count half); known tails of ``(h[i], r[i])`` and ``t[i]`` itself
        are left out; ``nan`` when nothing is left to rank against."""
        out = np.full(len(h), np.nan)
        for rr in np.unique(r):
            types = self._types[int(rr)]
            if not len(types):
                continue
            sel = np.flatnonzero(r == rr)
            step = max(1, min(256, 20_000_000 // len(types)))
            for s in range(0, len(sel), step):
                q = sel[s : s + step]
                sc = self.kge.score_candidates_rows(h[q], r[q], types)  # [b, |T|]
                pos = np.searchsorted(types, t[q])
                inside = (pos < len(types)) & (types[np.minimum(pos, len(types) - 1)] == t[q])
                own = np.empty(len(q), dtype=np.float32)
                own[inside] = sc[np.flatnonzero(inside), pos[inside]]
                if (~inside).any():
                    out_rows = np.flatnonzero(~inside)
                    own[out_rows] = self.kge.score_candidates_rows(
                        h[q][out_rows], r[q][out_rows], t[q][out_rows]
                    ).diagonal()
                better = (sc > own[:, None]).astype(np.float64) + 0.5 * (sc == own[:, None])
                # left out: the candidate itself and the other known tails of (h, r)
                a, b = self._known.ranges(h[q], r[q])
                krow = np.repeat(np.arange(len(q)), b - a)
                kval = np.concatenate([self._known.vals[x:y] for x, y in zip(a, b)]) if len(krow) else krow
                krow = np.concatenate([krow, np.flatnonzero(inside)])
                kpos = np.concatenate([np.searchsorted(types, kval), pos[inside]])
                ok = kpos < len(types)
                ok[ok] &= types[kpos[ok]] == np.concatenate([kval, t[q][inside]])[ok]
                flat = np.unique(krow[ok] * len(types) + kpos[ok])
                better.reshape(-1)[flat] = 0.0
                left = len(types) - np.bincount(flat // len(types), minlength=len(q))
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[q] = np.where(left > 0, better.sum(1) / np.maximum(left, 1), np.nan)
        return out

    def _rows(self, triples: Sequence[tuple[str, str, str]]) -> tuple[np.ndarray, list[TripleScore]]:
        """KGE rows of the scorable triples (-1 rows for unknown ids) and the TripleScores to fill."""
        kge = self.kge
        per, rows = [], []
        for h, r, t in triples:
            ts = TripleScore(h, r, t)
            hi, ri, ti = kge.entity_row(h), kge.relation_row(r), kge.entity_row(t)
            parts = (("head", h, hi), ("relation", r, ri), ("tail", t, ti))
            missing = [f"{what} {name!r}" for what, name, row in parts if row is None]
            if missing:
                ts.reason = "unknown to the KGE: " + ", ".join(missing)
                rows.append((-1, -1, -1))
            else:
                rows.append((hi, ri, ti))
            per.append(ts)
        return np.array(rows, dtype=np.int64).reshape(-1, 3), per

    def score_triples(self, triples: Sequence[tuple[str, str, str]]) -> list[TripleScore]:
        """:meth:`score_triple` of many triples in one batched pass."""
        rows, per = self._rows(triples)
        ok = np.flatnonzero(rows[:, 0] >= 0)
        if not len(ok):
            return per
        vals = self.score_rows(rows[ok])
        for j, i in enumerate(ok):
            ts = per[i]
            ts.raw = float(vals["raw"][j])
            ts.relative = None if np.isnan(vals["relative"][j]) else float(vals["relative"][j])
            ts.type_rank = None if np.isnan(vals["type_rank"][j]) else float(vals["type_rank"][j])
            ts.score = {"relative": ts.relative, "raw": -ts.raw, "type_rank": ts.type_rank}[self.method]
            ts.plausibility = plausibility(ts.score, self.method)
            if ts.score is None:
                if self.method == "relative":
                    ts.reason = f"no reference triples with head {ts.head!r}"
                else:
                    rel = self.kge.relation_ids[rows[i, 1] % self.kge.num_relations]
                    ts.reason = f"no other entity of the type relation {rel!r} expects"
        return per

    def score_triple(self, h: str, r: str, t: str) -> TripleScore:
        """All three scores of one triple; ``score`` is this verifier's method (``None`` + ``reason``
        when it cannot be computed: unknown id, no reference triple, empty type set)."""
        return self.score_triples([(h, r, t)])[0]

    # ------------------------------------------------------------------ answers
    def verify(self, triples: Sequence[tuple[str, str, str]]) -> Verification:
        """Score an answer's triples and aggregate the scorable ones (mean or sum)."""
        per = self.score_triples(list(triples))
        vals = [p.score for p in per if p.score is not None]
        if not vals:
            why = (
                "no triples"
                if not per
                else "no scorable triple (" + "; ".join(sorted({p.reason or "" for p in per})) + ")"
            )
            return Verification(None, per, self.method, self.aggregate, why)
        agg = float(np.sum(vals)) if self.aggregate == "sum" else float(np.mean(vals))
        return Verification(agg, per, self.method, self.aggregate, None)

    def calibrate(self, percentile: float = 90.0, sample: int = 2000, seed: int = 0) -> float:
        """θ_0 = the ``percentile`` of this verifier's scores over ``sample`` true triples (fixed
        ``seed``): with the default 90, such a fact is accepted 90 % of the time. The paper tunes
        θ_0 per model and dataset (App. Table 6); this is the calibrated default.

        The true triples are the KGE's **held-out** validation triples when it has them
        (``kge.valid_rows``): a trained KGE has fitted its training triples, whose same-type rank
        is then 0 for nearly all of them, so their percentile says nothing about the unseen facts
        an answer states (it gave θ_0 = 0 and no answer was ever accepted before T). A KGE
        without them (given by the caller, format 1) falls back to the known triples.
        ``calibration_source`` says which was used."""
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {percentile!r}")
        held = getattr(self.kge, "valid_rows", None)
        use_held = held is not None and len(held) > 0
        rows = held if use_held else self.known_rows
        self.calibration_source = "held-out" if use_held else "known"
        if not len(rows):
            raise ValueError("no known triples to calibrate on")
        rng = np.random.default_rng(seed)
        pick = rng.choice(len(rows), size=min(sample, len(rows)), replace=False)
        sc = self.score_rows(rows[pick])
        vals = -sc["raw"] if self.method == "raw" else sc[self.method]
        vals = vals[~np.isnan(vals)]
        if not len(vals):
            raise ValueError("no known triple could be scored; cannot calibrate")
        return float(np.percentile(vals, percentile))


def _known_rows(kge: "KGEModel", triples: "Sequence[tuple[str, str, str]] | KnowledgeGraph") -> np.ndarray:
    """Known triples as KGE rows ``[N, 3]`` (int64, distinct); triples with ids unknown to the KGE
    are dropped (counted in a DEBUG log)."""
    from ...index.graph import KnowledgeGraph

    if isinstance(triples, KnowledgeGraph):
        emap = np.array([-1 if (x := kge.entity_row(e)) is None else x for e in triples.entity_ids], dtype=np.int64)
        rmap = np.array([-1 if (x := kge.relation_row(r)) is None else x for r in triples.relations], dtype=np.int64)
        h, r, t = (np.asarray(a, dtype=np.int64) for a in triples.triple_arrays())
        rows = np.stack([emap[h], rmap[r], emap[t]], axis=1) if len(h) else np.zeros((0, 3), np.int64)
    else:
        rel_cache: dict[str, int] = {}
        out = []
        for h, r, t in triples:
            if r not in rel_cache:
                x = kge.relation_row(r)
                rel_cache[r] = -1 if x is None else x
            hi, ti = kge.entity_row(h), kge.entity_row(t)
            out.append((-1 if hi is None else hi, rel_cache[r], -1 if ti is None else ti))
        rows = np.array(out, dtype=np.int64).reshape(-1, 3)
    ok = (rows >= 0).all(axis=1)
    if not ok.all():
        log.debug("TripleVerifier: %d known triples have ids unknown to the KGE; left out", int((~ok).sum()))
    rows = rows[ok]
    return np.unique(rows, axis=0) if len(rows) else rows


def verifier_for_index(index: Any, *, train: bool = True, **kwargs: Any) -> TripleVerifier | None:
    """A :class:`TripleVerifier` over ``index``'s graph with :func:`~kgrag_plugins.index.kge.kge_for_index`
    (``None`` when there is no KGE and ``train`` is off). ``kwargs``: ``method``, ``aggregate``."""
    from ...index.kge import kge_for_index

    kge = kge_for_index(index, train=train)
    return None if kge is None else TripleVerifier(kge, index.graph, **kwargs)
