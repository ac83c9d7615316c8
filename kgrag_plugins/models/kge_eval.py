"""Batched filtered link-prediction evaluation and ROC-AUC for KG embeddings (Know³-RAG §3.2,
docs/methods.md §5(a): the ComplEx verifier; docs/kge.md "Evaluation").

Filtered rank of a target tail ``t`` for the query ``(h, r, ·)``::

    rank = 1 + #{e : s(e) > s(t)} + #{e != t : s(e) == s(t)} / 2 - #{k in known(h, r), k != t : s(k) > s(t)} - ...

i.e. the entities scoring above the target are counted chunk by chunk over the entity table
(bounded memory), and the known true tails of ``(h, r)`` other than the target (train + valid +
test) are subtracted by scoring them directly, so no ``[queries x entities]`` mask is built.
Head prediction uses the reciprocal query ``(t, r^-1, ·)``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

#: Queries scored against all entities per step.
EVAL_BATCH = 256
#: Entities scored per chunk (bounded memory: ``EVAL_BATCH x ENTITY_CHUNK`` floats at a time).
ENTITY_CHUNK = 65_536


#: KGE models (scoring functions below).
MODELS = ("complex", "rotate", "transe", "distmult")


def _complex_mul(e: "torch.Tensor", w: "torch.Tensor", conj: bool) -> "torch.Tensor":
    import torch

    a, b = e.chunk(2, -1)
    c, d = w.chunk(2, -1)
    if conj:
        d = -d
    return torch.cat([a * c - b * d, a * d + b * c], -1)


def compose(name: str, e: "torch.Tensor", w: "torch.Tensor", reverse: bool = False) -> "torch.Tensor":
    """The query vector ``q`` of ``(e, w, ·)``; with ``reverse`` the vector ``q'`` such that
    ``s(x, w, e) = match(q', x)`` (what the reciprocal direction needs)."""
    import torch

    if name == "complex":
        return _complex_mul(e, w, conj=reverse)
    if name == "distmult":
        return e * w
    if name == "rotate":
        return _complex_mul(e, torch.cat([torch.cos(w), torch.sin(w)], -1), conj=reverse)
    if name == "transe":
        return e - w if reverse else e + w
    raise ValueError(f"unknown KGE model {name!r}; expected one of {', '.join(MODELS)}")


def match_all(name: str, q: "torch.Tensor", ents: "torch.Tensor") -> "torch.Tensor":
    """Scores ``[B, N]`` of queries ``q [B, D]`` against entity vectors ``ents [N, D]``."""
    import torch

    if name in ("complex", "distmult"):
        return q @ ents.T
    d2 = (q * q).sum(1, keepdim=True) + (ents * ents).sum(1)[None, :] - 2.0 * (q @ ents.T)
    return -torch.sqrt(d2.clamp_min(1e-12))


def match_pairs(name: str, q: "torch.Tensor", t: "torch.Tensor") -> "torch.Tensor":
    """Scores ``[B]`` of each query against its own entity vector."""
    if name in ("complex", "distmult"):
        return (q * t).sum(-1)
    return -((q - t) ** 2).sum(-1).clamp_min(1e-12).sqrt()


class RowScorer:
    """Scores over entity / relation rows of one set of weights (relation rows ``R..2R-1`` are the
    reciprocal relations). ``directions="both"`` averages ``s(h, r, t)`` and ``s(t, r^-1, h)``."""

    def __init__(self, name: str, E: "torch.Tensor", R: "torch.Tensor", num_relations: int, directions: str) -> None:
        if name not in MODELS:
            raise ValueError(f"unknown KGE model {name!r}; expected one of {', '.join(MODELS)}")
        if directions not in ("both", "tail"):
            raise ValueError(f"directions must be 'both' or 'tail', got {directions!r}")
        self.name, self.E, self.R = name, E, R
        self.num_relations, self.directions = num_relations, directions

    def _queries(self, h: "torch.Tensor", r: "torch.Tensor") -> list["torch.Tensor"]:
        e = self.E[h]
        qs = [compose(self.name, e, self.R[r])]
        if self.directions == "both":
            m = self.num_relations
            qs.append(compose(self.name, e, self.R[(r + m) % (2 * m)], reverse=True))
        return qs

    def score_all(self, h: "torch.Tensor", r: "torch.Tensor", lo: int = 0, hi: int | None = None) -> "torch.Tensor":
        """Scores ``[B, hi - lo]`` of entity rows ``lo:hi`` as tails of ``(h[i], r[i], ·)``."""
        import torch

        ents = self.E[lo:hi]
        with torch.no_grad():
            qs = self._queries(h, r)
            out = match_all(self.name, qs[0], ents)
            for q in qs[1:]:
                out = (out + match_all(self.name, q, ents)) * 0.5
        return out

    def score_candidates(self, h: "torch.Tensor", r: "torch.Tensor", cand: "torch.Tensor") -> "torch.Tensor":
        """Scores ``[B, C]`` of the entity rows ``cand`` (shared by all queries) as tails of ``(h[i], r[i], ·)``."""
        import torch

        ents = self.E[cand]
        with torch.no_grad():
            qs = self._queries(h, r)
            out = match_all(self.name, qs[0], ents)
            for q in qs[1:]:
                out = (out + match_all(self.name, q, ents)) * 0.5
        return out

    def score_pairs(self, h: "torch.Tensor", r: "torch.Tensor", t: "torch.Tensor") -> "torch.Tensor":
        """Scores of ``(h[i], r[i], t[i])``; ``t`` may be ``[B, K]`` (K tails per query)."""
        import torch

        with torch.no_grad():
            qs = self._queries(h, r)
            te = self.E[t]
            if t.dim() == 2:
                qs = [q[:, None, :] for q in qs]
            out = match_pairs(self.name, qs[0], te)
            for q in qs[1:]:
                out = (out + match_pairs(self.name, q, te)) * 0.5
        return out

    def evaluate(
        self, triples: np.ndarray, known: "KnownTails", *, progress: bool = False, desc: str = "filtered ranks"
    ) -> dict[str, float]:
        """Filtered MRR / Hits@1/3/10 over head and tail prediction of row triples ``[N, 3]``."""
        queries = both_directions(triples, self.num_relations)
        ranks = filtered_ranks(self.score_all, self.score_pairs, queries, known, progress=progress, desc=desc)
        return {**rank_metrics(ranks), "queries": int(len(queries))}


class KnownTails:
    """The known true tails of every ``(head, relation-row)`` query, sorted for vectorised lookup.

    ``relation-row`` counts reciprocal relations: ``r + num_relations`` is ``r^-1`` (its "tails"
    are the heads of ``r``)."""

    def __init__(self, triples: np.ndarray, num_entities: int, num_relations: int) -> None:
        h, r, t = (triples[:, i].astype(np.int64) for i in range(3))
        self.num_entities, self.num_relations = num_entities, num_relations
        keys = np.concatenate([h * 2 * num_relations + r, t * 2 * num_relations + r + num_relations])
        vals = np.concatenate([t, h])
        order = np.lexsort((vals, keys))
        self.keys, self.vals = keys[order], vals[order]

    def key(self, h: np.ndarray, r: np.ndarray) -> np.ndarray:
        return np.asarray(h, np.int64) * 2 * self.num_relations + np.asarray(r, np.int64)

    def ranges(self, h: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = self.key(h, r)
        return np.searchsorted(self.keys, k, "left"), np.searchsorted(self.keys, k, "right")

    def tails(self, h: int, r: int) -> np.ndarray:
        a, b = self.ranges(np.array([h]), np.array([r]))
        return self.vals[a[0] : b[0]]

    def contains(self, h: np.ndarray, r: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether each ``(h[i], r[i], t[i])`` is known (vectorised)."""
        k = self.key(h, r)
        a = np.searchsorted(self.keys, k, "left")
        b = np.searchsorted(self.keys, k, "right")
        out = np.zeros(len(k), dtype=bool)
        for i in np.flatnonzero(b > a):  # short ranges: a Python loop over hits only
            seg = self.vals[a[i] : b[i]]
            j = np.searchsorted(seg, t[i])
            out[i] = j < len(seg) and seg[j] == t[i]
        return out


def filtered_ranks(
    score_all: Callable[["torch.Tensor", "torch.Tensor", int, int], "torch.Tensor"],
    score_pairs: Callable[["torch.Tensor", "torch.Tensor", "torch.Tensor"], "torch.Tensor"],
    queries: np.ndarray,
    known: KnownTails,
    *,
    batch_size: int = EVAL_BATCH,
    entity_chunk: int = ENTITY_CHUNK,
    progress: bool = False,
    desc: str = "filtered ranks",
) -> np.ndarray:
    """Filtered ranks (float, ties counted half) of ``queries[:, 2]`` for ``(queries[:, 0], queries[:, 1], ·)``.

    ``score_all(h, r, lo, hi)`` scores the entity rows ``lo:hi`` for each query; ``score_pairs(h, r, t)``
    scores given tails (``[B]`` or ``[B, K]``). ``queries`` rows are ``(head, relation-row, tail)``."""
    import torch
    from tqdm.auto import tqdm

    from ..config import progress_enabled

    n = known.num_entities
    out = np.zeros(len(queries), dtype=np.float64)
    # ranks are counted on the CPU: a model on a GPU returns its scores there (a no-op on the CPU)
    all_on_gpu, pairs_on_gpu = score_all, score_pairs
    score_all = lambda *a: all_on_gpu(*a).cpu()  # noqa: E731
    score_pairs = lambda *a: pairs_on_gpu(*a).cpu()  # noqa: E731
    bar = tqdm(total=len(queries), desc=desc, unit="q", disable=not progress_enabled(progress), leave=False)
    with torch.no_grad():
        for s in range(0, len(queries), batch_size):
            q = queries[s : s + batch_size]
            h, r, t = (torch.as_tensor(q[:, i], dtype=torch.long) for i in range(3))
            # the target's score is read from the same all-entity computation it is compared
            # with (a separately computed pair score can differ in the last bits)
            chunks = [(lo, min(n, lo + entity_chunk)) for lo in range(0, n, entity_chunk)]
            first = score_all(h, r, *chunks[0]) if len(chunks) == 1 else None
            target = torch.empty(len(q), dtype=torch.float32)
            for lo, hi in chunks:
                inside = ((t >= lo) & (t < hi)).nonzero().flatten()
                if len(inside):
                    sc = first if first is not None else score_all(h[inside], r[inside], lo, hi)
                    rows = inside if first is not None else torch.arange(len(inside))
                    target[inside] = sc[rows, t[inside] - lo].float()
            greater = torch.zeros(len(q), dtype=torch.float64)
            for lo, hi in chunks:
                sc = first if first is not None else score_all(h, r, lo, hi)
                above = (sc > target[:, None]).double() + 0.5 * (sc == target[:, None]).double()
                inside = ((t >= lo) & (t < hi)).nonzero().flatten()
                above[inside, t[inside] - lo] = 0.0  # the target itself (exactly, whatever the rounding)
                greater += above.sum(1)
            # subtract the known true tails (other than the target) that score above it
            a, b = known.ranges(q[:, 0], q[:, 1])
            lens = b - a
            if lens.sum():
                rows = np.repeat(np.arange(len(q)), lens)
                idx = np.concatenate([known.vals[x:y] for x, y in zip(a, b)])
                keep = idx != q[rows, 2]
                rows, idx = rows[keep], idx[keep]
                if len(rows):
                    rt = torch.as_tensor(rows)
                    ks = score_pairs(h[rt], r[rt], torch.as_tensor(idx, dtype=torch.long))
                    tg = target[rt]
                    sub = (ks > tg).double() + 0.5 * (ks == tg).double()
                    greater -= torch.zeros(len(q), dtype=torch.float64).index_add_(0, rt, sub)
            out[s : s + len(q)] = 1.0 + greater.numpy()
            bar.update(len(q))
    bar.close()
    return out


def rank_metrics(ranks: np.ndarray) -> dict[str, float]:
    """MRR and Hits@1/3/10 of filtered ranks."""
    ranks = np.asarray(ranks, dtype=np.float64)
    if not len(ranks):
        return {"mrr": float("nan"), "hits@1": float("nan"), "hits@3": float("nan"), "hits@10": float("nan")}
    return {
        "mrr": float(np.mean(1.0 / ranks)),
        "hits@1": float(np.mean(ranks <= 1)),
        "hits@3": float(np.mean(ranks <= 3)),
        "hits@10": float(np.mean(ranks <= 10)),
    }


def both_directions(triples: np.ndarray, num_relations: int) -> np.ndarray:
    """Tail queries ``(h, r, t)`` followed by reciprocal head queries ``(t, r + R, h)``."""
    tr = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    inv = np.stack([tr[:, 2], tr[:, 1] + num_relations, tr[:, 0]], axis=1)
    return np.concatenate([tr, inv])


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """ROC-AUC of ``positive`` scored above ``negative`` (higher = more positive); ties count half.
    sklearn's ``roc_auc_score`` when installed, else the same number from ranks (Mann-Whitney U);
    ``nan`` values are dropped."""
    pos = np.asarray(positive, dtype=np.float64)
    neg = np.asarray(negative, dtype=np.float64)
    pos, neg = pos[~np.isnan(pos)], neg[~np.isnan(neg)]
    if not len(pos) or not len(neg):
        return float("nan")
    try:
        from sklearn.metrics import roc_auc_score
    except ImportError:  # the rank formula below gives the same number
        pass
    else:
        labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
        return float(roc_auc_score(labels, np.r_[pos, neg]))
    allv = np.concatenate([pos, neg])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty(len(allv), dtype=np.float64)
    sv = allv[order]
    # average ranks of ties
    starts = np.r_[0, np.flatnonzero(np.diff(sv)) + 1]
    ends = np.r_[starts[1:], len(sv)]
    avg = (starts + ends - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, ends - starts)
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0
    return float(u / (len(pos) * len(neg)))


def split_holdout(triples: np.ndarray, fraction: float, *, seed: int = 0, max_count: int | None = None) -> np.ndarray:
    """Boolean mask of held-out rows: ``fraction`` of the triples (at most ``max_count``), chosen at
    random (``seed``) among those whose head and tail keep at least one triple outside the held-out
    part, so every held-out entity has a trained embedding."""
    tr = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    want = int(round(len(tr) * fraction))
    if max_count is not None:
        want = min(want, max_count)
    mask = np.zeros(len(tr), dtype=bool)
    if want <= 0:
        return mask
    n = int(max(tr[:, 0].max(), tr[:, 2].max())) + 1
    deg = np.bincount(tr[:, 0], minlength=n) + np.bincount(tr[:, 2], minlength=n)
    chosen = 0
    for i in np.random.default_rng(seed).permutation(len(tr)):
        h, t = tr[i, 0], tr[i, 2]
        if deg[h] > 1 and deg[t] > 1 and h != t:
            mask[i] = True
            deg[h] -= 1
            deg[t] -= 1
            chosen += 1
            if chosen >= want:
                break
    return mask
