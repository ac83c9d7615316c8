"""Training loop of :mod:`kgrag_plugins.models.kge` (Know³-RAG §3.2's ComplEx verifier; docs/methods.md §5(a);
docs/kge.md "Training").

Per query ``(h, r, ·)`` (reciprocal relations included; batches hold one relation, except that
relations with fewer than ``pool_below`` queries share mixed batches with uniform negatives) a sampled
softmax: the true tail against ``negatives`` shared samples, a share ``type_negatives`` drawn
uniformly from the relation's tails in the training triples (type-consistent) and the rest
uniformly from all entities; each logit is corrected by ``-log Q(e)``, its expected count under
that mixture (``logq``), so the loss follows the full 1-N softmax; samples equal to the target are
masked. ``full_softmax=True`` scores every query against all entities instead (the 1-N
cross-entropy of Lacroix et al. 2018 that ComplEx-N3 is usually trained with; dense gradients, so
dense Adagrad; no sampled negatives; meant for ComplEx / DistMult: RotatE's distance scores were
not tuned for it). ``in_batch=True`` is the first version (the batch's own tails as extra, uncorrected
negatives; measured worse, docs/kge.md). N3 regularisation for ComplEx / DistMult; Adagrad
(sparse gradients) or SparseAdam. Early stopping on the filtered MRR of a validation split.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from .kge_eval import KnownTails, RowScorer, both_directions, compose, match_all, match_pairs

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


def _init(name: str, ent: "torch.nn.Embedding", rel: "torch.nn.Embedding", scale: float) -> None:
    import torch

    with torch.no_grad():
        if name in ("complex", "distmult"):
            ent.weight.normal_(0.0, scale)
            rel.weight.normal_(0.0, scale)
        else:
            b = 6.0 / math.sqrt(ent.weight.shape[1])
            ent.weight.uniform_(-b, b)
            if name == "rotate":
                rel.weight.uniform_(-math.pi, math.pi)
            else:
                rel.weight.uniform_(-b, b)


def _n3(name: str, *vecs: "torch.Tensor") -> "torch.Tensor":
    """N3 regulariser (Lacroix et al. 2018): sum of cubed moduli (complex) or |x|^3."""
    total = 0.0
    for v in vecs:
        if name == "complex":
            a, b = v.chunk(2, -1)
            total = total + ((a * a + b * b).clamp_min(1e-18) ** 1.5).sum()
        else:
            total = total + (v.abs() ** 3).sum()
    return total


def fit_embeddings(
    idx: np.ndarray,
    valid: np.ndarray,
    n_ent: int,
    n_rel: int,
    cfg: dict[str, Any],
    *,
    seed: int,
    device: str,
    progress: bool,
    time_budget: float | None,
) -> tuple["torch.Tensor", "torch.Tensor", dict[str, Any]]:
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from ..config import progress_enabled

    name, dim = cfg["model"], int(cfg["dim"])
    if name in ("complex", "rotate") and dim % 2:
        raise ValueError(f"{name} needs an even dim (real + imaginary halves), got {dim}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    full = bool(cfg.get("full_softmax", False))  # 1-N: every entity is a candidate, dense gradients
    ent = torch.nn.Embedding(n_ent, dim, sparse=not full)
    rel = torch.nn.Embedding(2 * n_rel, dim // 2 if name == "rotate" else dim, sparse=not full)
    _init(name, ent, rel, float(cfg.get("init", 1e-3)))
    ent, rel = ent.to(device), rel.to(device)
    params = list(ent.parameters()) + list(rel.parameters())
    if cfg.get("optimizer", "adagrad") == "adam":
        opt: torch.optim.Optimizer = (torch.optim.Adam if full else torch.optim.SparseAdam)(params, lr=cfg["lr"])
    else:
        opt = torch.optim.Adagrad(params, lr=cfg["lr"])
    queries = both_directions(idx, n_rel)
    by_rel = [np.flatnonzero(queries[:, 1] == r) for r in range(2 * n_rel)]
    type_tails = [np.unique(queries[sel, 2]) for sel in by_rel]
    known = KnownTails(np.concatenate([idx, valid]) if len(valid) else idx, n_ent, n_rel)
    bs, k_neg = int(cfg["batch_size"]), int(cfg["negatives"])
    k_type = int(round(k_neg * float(cfg["type_negatives"])))
    reg = float(cfg["reg"]) if name in ("complex", "distmult") else 0.0
    in_batch, logq = bool(cfg.get("in_batch", True)), bool(cfg.get("logq", True))
    # Relations with fewer queries than ``pool_below`` are trained in mixed batches: one batch per
    # relation label made corpus graphs (thousands of rare free-text labels) run thousands of tiny
    # batches per epoch. Mixed batches draw all negatives uniformly (no single relation's types).
    pool_below = int(cfg.get("pool_below", 0) or 0)
    pooled = np.concatenate([sel for sel in by_rel if 0 < len(sel) < pool_below] or [np.zeros(0, np.int64)])
    best_mrr, best_state, best_epoch, bad = -1.0, None, 0, 0
    history: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    epochs = int(cfg["epochs"])
    outer = tqdm(range(1, epochs + 1), desc=f"kge {name} d{dim}", unit="epoch", disable=not progress_enabled(progress))
    for epoch in outer:
        batches = []
        for sel in by_rel:
            if len(sel) >= pool_below:
                perm = rng.permutation(sel)
                batches += [perm[s : s + bs] for s in range(0, len(perm), bs)]
        if len(pooled):  # rare relations share mixed batches (uniform negatives only)
            perm = rng.permutation(pooled)
            batches += [perm[s : s + bs] for s in range(0, len(perm), bs)]
        total, seen = 0.0, 0
        inner = tqdm(
            rng.permutation(len(batches)), desc=f"epoch {epoch}", leave=False, disable=not progress_enabled(progress)
        )
        for b in inner:
            q = queries[batches[b]]
            r = int(q[0, 1])
            mixed = bool((q[:, 1] != r).any())
            tt = type_tails[r] if not mixed else np.zeros(0, np.int64)
            neg_t = tt if len(tt) <= k_type else tt[rng.integers(0, len(tt), k_type)]
            negs = np.concatenate([neg_t, rng.integers(0, n_ent, k_neg - len(neg_t))])
            hn, tn = q[:, 0], q[:, 2]
            h = torch.as_tensor(hn, device=device)
            t = torch.as_tensor(tn, device=device)
            he = ent(h)
            re = rel(torch.as_tensor(q[:, 1], device=device)) if mixed else rel(torch.full_like(h, r))
            qv = compose(name, he, re)
            if full:  # candidates = every entity (1-N cross-entropy; the target's row is its own index)
                te = ent(t)
                logits = match_all(name, qv, ent.weight)
                loss = F.cross_entropy(logits, t)
            elif in_batch:  # candidates = the batch's tails + samples; same-head tails and duplicates masked
                bad_in = (tn[None, :] == tn[:, None]) | (hn[None, :] == hn[:, None])
                np.fill_diagonal(bad_in, False)
                mask = torch.as_tensor(np.concatenate([bad_in, negs[None, :] == tn[:, None]], 1), device=device)
                cand = torch.cat([t, torch.as_tensor(negs, device=device)])
                logits = match_all(name, qv, ent(cand)).masked_fill(mask, float("-inf"))
                loss = F.cross_entropy(logits, torch.arange(len(q), device=device))
                te = ent(t)
            else:  # candidates = own tail + samples, with the sampled-softmax log Q correction
                te = ent(t)
                pos = match_pairs(name, qv, te)[:, None]
                neg = match_all(name, qv, ent(torch.as_tensor(negs, device=device)))
                if logq and len(tt):  # (mixed batches: uniform Q, the correction cancels)
                    in_type = np.isin(negs, tt)
                    q_neg = np.where(in_type, min(1.0, k_type / len(tt)), 0.0) + (k_neg - len(neg_t)) / n_ent
                    q_pos = min(1.0, k_type / len(tt)) + (k_neg - len(neg_t)) / n_ent
                    pos = pos - math.log(q_pos)
                    neg = neg - torch.as_tensor(np.log(q_neg), dtype=neg.dtype, device=device)[None, :]
                neg = neg.masked_fill(torch.as_tensor(negs[None, :] == tn[:, None], device=device), float("-inf"))
                logits = torch.cat([pos, neg], 1)
                loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=device))
            if reg:
                loss = loss + reg * _n3(name, he, re, te) / len(q)
            opt.zero_grad()
            loss.backward()
            with warnings.catch_warnings():  # torch's notice that sparse invariant checks are off
                warnings.filterwarnings("ignore", message="Sparse invariant checks")
                opt.step()
            total += float(loss.detach()) * len(q)
            seen += len(q)
        row: dict[str, Any] = {"epoch": epoch, "loss": round(total / max(seen, 1), 5)}
        if len(valid):
            scorer = RowScorer(name, ent.weight.detach(), rel.weight.detach(), n_rel, cfg["directions"])
            mrr = scorer.evaluate(valid, known, desc="valid")["mrr"]
            row["valid_mrr"] = round(mrr, 5)
            if mrr > best_mrr:
                best_mrr, best_epoch, bad = mrr, epoch, 0
                best_state = (ent.weight.detach().cpu().clone(), rel.weight.detach().cpu().clone())
            else:
                bad += 1
        row["seconds"] = round(time.perf_counter() - t0, 1)
        history.append(row)
        log.info("kge %s epoch %d: %s", name, epoch, row)
        outer.set_postfix({k: v for k, v in row.items() if k in ("loss", "valid_mrr")})
        if len(valid) and bad >= int(cfg["patience"]):
            break
        if time_budget is not None and time.perf_counter() - t0 > time_budget:
            log.info("kge: time budget of %.0f s reached after epoch %d", time_budget, epoch)
            break
    outer.close()
    E, R = best_state if best_state is not None else (ent.weight.detach().cpu(), rel.weight.detach().cpu())
    info = {
        "epochs_run": len(history),
        "best_epoch": best_epoch or len(history),
        "valid_mrr": round(best_mrr, 5) if best_state is not None else None,
        "history": history,
        "train_seconds": round(time.perf_counter() - t0, 1),
    }
    return E, R, info
