"""A relation-chain scorer for FRAG's path ranking (PRM, METHODS.md §2 step 7), trained from
question-answer pairs on the KG itself.

FRAG ranks verbalised paths with the cross-encoder bge-reranker-v2-m3, which cannot be
downloaded here; a zero-shot bi-encoder on relation names ranks the right relation chain first
for only about half of MetaQA's questions (measured, ``docs/frag.md``). Trained KGQA systems
learn which relation chain a question asks for; this module does the same, cheaply:

- **Weak labels** (:func:`best_chains`): for a training question with its topic entity and gold
  answers, every relation chain of length 1..``max_hops`` from the topic is followed with set
  semantics (both edge directions; intermediate sets larger than ``hub_cap`` nodes are not
  expanded further, since chains through hubs such as a genre are not reasoning chains) and
  the chain whose end set has the best F1 against the answers is the label (the shortest on
  ties). No annotation of chains is needed, only (question, topic, answers).
- **Model**: multinomial logistic regression from the MiniLM embedding of the question (topic
  mention replaced by "it", :func:`relation_query`) to the chain vocabulary, L2-regularised,
  solved with scipy's L-BFGS in seconds on CPU.
- **Use**: ``FRAGRetriever(path_ranker=...)`` scores each candidate path by the log-probability
  of its chain; chains outside the vocabulary fall back to the bi-encoder, below known chains.

Save/load is one ``.npz`` file (atomic), tied to the embedder and to the KG's relation names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...models.embed import Embedder, default_embedder
from ...models.persist import load_npz, save_npz
from .hop_classifier import TOPIC_MARK

Chain = tuple[str, ...]
INVERSE_PREFIX = "~"


def relation_query(question: str, topic_names: Iterable[str] = ()) -> str:
    """The text compared with relation chains: ``question`` with ``[bracketed]`` spans and the
    topic entities' names replaced by "it" (a name says nothing about which relations to follow)."""
    text = TOPIC_MARK.sub("it", question)
    for name in topic_names:
        if len(name) > 2:
            text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "it", text, flags=re.I)
    return " ".join(text.split())


def chain_key(relations: Sequence[str], inverse: Sequence[bool]) -> Chain:
    """A chain as relation names, inverse steps prefixed with ``~``."""
    return tuple((INVERSE_PREFIX if inv else "") + r for r, inv in zip(relations, inverse))


def _f1(found: np.ndarray, gold: np.ndarray) -> float:
    if not len(found) or not len(gold):
        return 0.0
    tp = len(np.intersect1d(found, gold, assume_unique=True))
    return 0.0 if tp == 0 else 2 * tp / (len(found) + len(gold))


def best_chains(
    pg: Any, topics: np.ndarray, answers: np.ndarray, *, max_hops: int = 3, hops: int | None = None, hub_cap: int = 1000
) -> tuple[list[tuple[int, ...]], float]:
    """The relation chains (signed relation ids of ``pg``, a FRAG ``_PathGraph``) from ``topics``
    whose end sets best match ``answers`` (F1), and that F1. Several chains tie when they reach
    the same set (a director who also wrote every film); ``hops`` restricts the length, else the
    shortest tied chains win."""
    topics = np.unique(np.asarray(topics, dtype=np.int64))
    answers = np.unique(np.asarray(answers, dtype=np.int64))
    level: dict[tuple[int, ...], np.ndarray] = {(): topics}
    best: list[tuple[int, ...]] = []
    best_f1 = 0.0
    for depth in range(1, (hops or max_hops) + 1):
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for chain, nodes in level.items():
            if depth > 1 and len(nodes) > hub_cap:
                continue
            pos, _ = pg.gather(nodes)
            if not len(pos):
                continue
            rel, dst = pg.rel[pos], pg.dst[pos].astype(np.int64)
            order = np.argsort(rel, kind="stable")
            rel, dst = rel[order], dst[order]
            cuts = np.flatnonzero(np.diff(rel)) + 1
            for r_group, d_group in zip(np.split(rel, cuts), np.split(dst, cuts)):
                ends = np.setdiff1d(np.unique(d_group), topics, assume_unique=True)
                if not len(ends):
                    continue
                key = chain + (int(r_group[0]),)
                nxt[key] = ends
                if hops is None or depth == hops:
                    f = _f1(ends, answers)
                    if f > best_f1 + 1e-9:
                        best, best_f1 = [key], f
                    elif best and abs(f - best_f1) <= 1e-9 and len(key) == len(best[0]):
                        best.append(key)
        level = nxt
    return best, best_f1


class PathRanker:
    """Question -> relation-chain distribution (see the module docstring)."""

    def __init__(self, embedder: Embedder | None = None, *, l2: float = 0.1) -> None:
        self.embedder = embedder
        self.l2 = l2
        self.chains: list[Chain] = []
        self.weights: np.ndarray | None = None  # (D, C)
        self.bias: np.ndarray | None = None  # (C,)
        self._index: dict[Chain, int] = {}

    def _embedder(self) -> Embedder:
        if self.embedder is None:
            self.embedder = default_embedder()
        return self.embedder

    def __len__(self) -> int:
        return len(self.chains)

    def __contains__(self, chain: object) -> bool:
        return chain in self._index

    # ------------------------------------------------------------------ training
    def fit(
        self, queries: Sequence[str], chains: Sequence[Chain | Sequence[Chain]], *, vectors: np.ndarray | None = None
    ) -> "PathRanker":
        """Train on relation queries (:func:`relation_query`) and their label chains; a question
        may carry several tied chains (soft target, uniform over them)."""
        from scipy.optimize import minimize

        if len(queries) != len(chains):
            raise ValueError(f"{len(queries)} queries but {len(chains)} chains")
        targets = [[c] if c and isinstance(c[0], str) else list(c) for c in chains]
        vocab = sorted({c for t in targets for c in t})
        if len(vocab) < 2:
            raise ValueError("training needs questions labelled with at least two different chains")
        X = vectors if vectors is not None else np.asarray(self._embedder().embed(list(queries), progress=False))
        X = np.asarray(X, dtype=np.float64)
        self.chains = vocab
        self._index = {c: i for i, c in enumerate(self.chains)}
        n, d = X.shape
        c = len(self.chains)
        Y = np.zeros((n, c))
        for i, t in enumerate(targets):
            Y[i, [self._index[x] for x in t]] = 1.0 / len(t)

        def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
            W, b = theta[: d * c].reshape(d, c), theta[d * c :]
            Z = X @ W + b
            Z -= Z.max(axis=1, keepdims=True)
            P = np.exp(Z)
            P /= P.sum(axis=1, keepdims=True)
            nll = -np.sum(Y * np.log(P + 1e-12)) / n
            G = (P - Y) / n
            gW = X.T @ G + self.l2 * W / n
            return nll + 0.5 * self.l2 * np.sum(W * W) / n, np.concatenate([gW.ravel(), G.sum(axis=0)])

        res = minimize(loss, np.zeros(d * c + c), jac=True, method="L-BFGS-B", options={"maxiter": 500})
        self.weights = res.x[: d * c].reshape(d, c).astype(np.float32)
        self.bias = res.x[d * c :].astype(np.float32)
        return self

    # ------------------------------------------------------------------ inference
    def log_probs(self, query_vector: np.ndarray) -> np.ndarray:
        """Log-probabilities over :attr:`chains` for one query vector."""
        if self.weights is None or self.bias is None:
            raise ValueError("the path ranker is not trained (fit() or PathRanker.load())")
        z = np.asarray(query_vector, dtype=np.float32) @ self.weights + self.bias
        z = z - z.max()
        return z - np.log(np.exp(z).sum())

    def score(self, query_vector: np.ndarray, chains: Sequence[Chain]) -> np.ndarray:
        """Log-probability of each chain; ``nan`` for chains outside the vocabulary."""
        lp = self.log_probs(query_vector)
        return np.array([lp[self._index[c]] if c in self._index else np.nan for c in chains], dtype=np.float64)

    def predict(self, queries: Sequence[str]) -> list[Chain]:
        """The most likely chain per query."""
        if self.weights is None or self.bias is None:
            raise ValueError("the path ranker is not trained (fit() or PathRanker.load())")
        X = np.asarray(self._embedder().embed(list(queries), progress=False), dtype=np.float32)
        return [self.chains[int(i)] for i in (X @ self.weights + self.bias).argmax(axis=1)]

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the ranker atomically to ``path`` (``.npz``)."""
        if self.weights is None:
            raise ValueError("nothing to save: the path ranker is not trained")
        return save_npz(
            path,
            self._embedder(),
            weights=self.weights,
            bias=self.bias,
            l2=self.l2,
            chains=np.array(json.dumps([list(c) for c in self.chains])),
        )

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder | None = None) -> "PathRanker":
        """Load a saved ranker; the embedder must be the one it was trained with."""
        r = cls(embedder)
        d = load_npz(path, r._embedder(), "path ranker")
        r.l2 = float(d["l2"])
        r.weights, r.bias = d["weights"], d["bias"]
        r.chains = [tuple(c) for c in json.loads(str(d["chains"]))]
        r._index = {c: i for i, c in enumerate(r.chains)}
        return r
