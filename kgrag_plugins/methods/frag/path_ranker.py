"""A relation-chain scorer for FRAG's path ranking (PRM, docs/methods.md §2(a) step 7), trained from
question-answer pairs on the KG itself.

FRAG ranks verbalised paths with the cross-encoder bge-reranker-v2-m3, which cannot be
downloaded here; a zero-shot bi-encoder on relation names ranks the right relation chain first
for only about half of MetaQA's questions (measured, ``docs/frag.md``). Trained KGQA systems
learn which relation chain a question asks for; this module does the same, cheaply:

- **Weak labels** (:func:`best_chains`): for a training question with its topic entity and gold
  answers, every relation chain of length 1..``max_hops`` from the topic is followed with set
  semantics (both edge directions; intermediate sets larger than ``hub_cap`` nodes are not
  expanded further: a cost bound, which changes no label on MetaQA's training questions,
  docs/frag.md) and
  the chain whose end set has the best F1 against the answers is the label (the shortest on
  ties). No annotation of chains is needed, only (question, topic, answers).
- **Model**: multinomial logistic regression from the MiniLM embedding of the question (topic
  mention replaced by "it", :func:`relation_query`) to the chain vocabulary, L2-regularised,
  solved with scipy's L-BFGS in seconds on CPU. With ``lexical_dim`` > 0 the
  features also hold a hashed bag of the query's word unigrams and bigrams (:func:`lexical_features`,
  L2-normalised, sparse): a sentence embedding puts "which person wrote it" next to "which
  person directed it", the words tell them apart.
- **Use**: ``FRAGRetriever(path_ranker=...)`` scores each candidate path by the log-probability
  of its chain; chains outside the vocabulary fall back to the bi-encoder, below known chains.

Save/load is one ``.npz`` file (atomic), tied to the embedder and to the KG's relation names.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...models.embed import Embedder, default_embedder
from ...models.persist import load_npz, save_npz
from .hop_classifier import TOPIC_MARK

logger = logging.getLogger(__name__)
Chain = tuple[str, ...]
INVERSE_PREFIX = "~"
#: :func:`best_chains` does not extend a chain whose intermediate end set is larger: a cost bound
#: that changes no label on MetaQA's training questions (docs/frag.md).
HUB_CAP = 1000


def relation_query(question: str, topic_names: Iterable[str] = ()) -> str:
    """The text compared with relation chains: ``question`` with ``[bracketed]`` spans and the
    topic entities' names replaced by "it" (a name says nothing about which relations to follow)."""
    text = TOPIC_MARK.sub("it", question)
    for name in topic_names:
        if len(name) > 2:
            text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "it", text, flags=re.I)
    return " ".join(text.split())


def lexical_features(queries: Sequence[str], dim: int) -> Any:
    """Hashed (CRC32) binary bag of lower-cased word unigrams and bigrams, rows L2-normalised:
    a ``scipy.sparse`` CSR matrix ``(len(queries), dim)``."""
    from scipy import sparse

    rows, cols = [], []
    for i, q in enumerate(queries):
        words = re.findall(r"\w+", q.lower())
        grams = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
        idx = sorted({zlib.crc32(g.encode("utf-8")) % dim for g in grams})
        rows += [i] * len(idx)
        cols += idx
    vals = np.ones(len(cols), dtype=np.float64)
    m = sparse.csr_matrix((vals, (rows, cols)), shape=(len(queries), dim))
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    return sparse.diags(1.0 / np.maximum(norms, 1e-12)) @ m


def chain_key(relations: Sequence[str], inverse: Sequence[bool]) -> Chain:
    """A chain as relation names, inverse steps prefixed with ``~``."""
    return tuple((INVERSE_PREFIX if inv else "") + r for r, inv in zip(relations, inverse))


def _f1(found: np.ndarray, gold: np.ndarray) -> float:
    if not len(found) or not len(gold):
        return 0.0
    tp = len(np.intersect1d(found, gold, assume_unique=True))
    return 0.0 if tp == 0 else 2 * tp / (len(found) + len(gold))


def best_chains(
    pg: Any,
    topics: np.ndarray,
    answers: np.ndarray,
    *,
    max_hops: int = 3,
    hops: int | None = None,
    hub_cap: int = HUB_CAP,
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


def chain_ends(pg: Any, topics: np.ndarray, chain: Sequence[int]) -> np.ndarray:
    """The end set of one signed relation chain (as :func:`best_chains` returns it) from
    ``topics``, followed with the same set semantics: each step's ends without the topics."""
    topics = np.unique(np.asarray(topics, dtype=np.int64))
    nodes = topics
    for r in chain:
        pos, _ = pg.gather(nodes)
        nodes = np.setdiff1d(np.unique(pg.dst[pos][pg.rel[pos] == r].astype(np.int64)), topics, assume_unique=True)
        if not len(nodes):
            break
    return nodes


class PathRanker:
    """Question -> relation-chain distribution (see the module docstring)."""

    def __init__(
        self, embedder: Embedder | None = None, *, l2: float = 0.1, lexical_dim: int = 0, ties: str = "uniform"
    ) -> None:
        if lexical_dim < 0:
            raise ValueError(f"lexical_dim must be >= 0, got {lexical_dim}")
        if ties not in ("uniform", "set"):
            raise ValueError(f"ties must be 'uniform' or 'set', got {ties!r}")
        self.ties = ties
        self._warned = False
        self.embedder = embedder
        self.l2 = l2
        self.lexical_dim = lexical_dim
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
        may carry several tied chains: ``ties="uniform"`` trains towards a uniform split over
        them; ``"set"`` maximises the probability of the tied set (partial-label likelihood), so
        the chains of untied questions with the same wording decide which of the tied ones wins
        (a director who also wrote the film does not teach "which person wrote" -> director)."""
        from scipy.optimize import minimize

        if len(queries) != len(chains):
            raise ValueError(f"{len(queries)} queries but {len(chains)} chains")
        targets = [[c] if c and isinstance(c[0], str) else list(c) for c in chains]
        vocab = sorted({c for t in targets for c in t})
        if len(vocab) < 2:
            raise ValueError("training needs questions labelled with at least two different chains")
        X = vectors if vectors is not None else np.asarray(self._embedder().embed(list(queries), progress=False))
        X = np.asarray(X, dtype=np.float64)
        L = lexical_features(queries, self.lexical_dim) if self.lexical_dim else None
        self.chains = vocab
        self._index = {c: i for i, c in enumerate(self.chains)}
        n, d_dense = X.shape
        d = d_dense + self.lexical_dim
        c = len(self.chains)
        Y = np.zeros((n, c))
        for i, t in enumerate(targets):
            Y[i, [self._index[x] for x in t]] = 1.0 / len(t)
        M = (Y > 0).astype(np.float64)

        def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
            W, b = theta[: d * c].reshape(d, c), theta[d * c :]
            Z = X @ W[:d_dense] + b
            if L is not None:
                Z += L @ W[d_dense:]
            Z -= Z.max(axis=1, keepdims=True)
            P = np.exp(Z)
            P /= P.sum(axis=1, keepdims=True)
            if self.ties == "set":  # -log P(tied set); its gradient: P minus P renormalised on the set
                mass = (P * M).sum(axis=1, keepdims=True)
                nll = -np.sum(np.log(mass + 1e-12)) / n
                G = (P - P * M / (mass + 1e-12)) / n
            else:
                nll = -np.sum(Y * np.log(P + 1e-12)) / n
                G = (P - Y) / n
            gW = np.vstack([X.T @ G, L.T @ G]) if L is not None else X.T @ G
            gW += self.l2 * W / n
            return nll + 0.5 * self.l2 * np.sum(W * W) / n, np.concatenate([gW.ravel(), G.sum(axis=0)])

        res = minimize(loss, np.zeros(d * c + c), jac=True, method="L-BFGS-B", options={"maxiter": 500})
        self.weights = res.x[: d * c].reshape(d, c).astype(np.float32)
        self.bias = res.x[d * c :].astype(np.float32)
        return self

    # ------------------------------------------------------------------ inference
    def logits(self, vectors: np.ndarray, queries: Sequence[str] | None = None) -> np.ndarray:
        """Chain logits ``(len(vectors), len(chains))`` for query vectors and, when the ranker
        has lexical features, the relation queries they embed. Without the queries a lexical
        ranker scores with its embedding weights only (a WARNING is logged once per ranker)."""
        if self.weights is None or self.bias is None:
            raise ValueError("the path ranker is not trained (fit() or PathRanker.load())")
        V = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        d = V.shape[1]
        z = V @ self.weights[:d] + self.bias
        if self.lexical_dim:
            if queries is not None and len(queries) != len(V):
                raise ValueError(f"{len(V)} query vectors but {len(queries)} relation queries")
            if queries is not None:
                z = z + np.asarray(lexical_features(queries, self.lexical_dim) @ self.weights[d:], dtype=np.float32)
            elif not self._warned:
                self._warned = True
                logger.warning("path ranker with word features called without the relation query: embedding only")
        return z

    def log_probs(self, query_vector: np.ndarray, query: str | None = None) -> np.ndarray:
        """Log-probabilities over :attr:`chains` for one query vector (and its relation query
        text, needed with lexical features)."""
        z = self.logits(query_vector, None if query is None else [query])[0]
        z = z - z.max()
        return z - np.log(np.exp(z).sum())

    def score(self, query_vector: np.ndarray, chains: Sequence[Chain], query: str | None = None) -> np.ndarray:
        """Log-probability of each chain; ``nan`` for chains outside the vocabulary."""
        lp = self.log_probs(query_vector, query)
        return np.array([lp[self._index[c]] if c in self._index else np.nan for c in chains], dtype=np.float64)

    def predict(self, queries: Sequence[str]) -> list[Chain]:
        """The most likely chain per query."""
        if self.weights is None or self.bias is None:
            raise ValueError("the path ranker is not trained (fit() or PathRanker.load())")
        X = np.asarray(self._embedder().embed(list(queries), progress=False), dtype=np.float32)
        return [self.chains[int(i)] for i in self.logits(X, list(queries)).argmax(axis=1)]

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
            lexical_dim=self.lexical_dim,
            chains=np.array(json.dumps([list(c) for c in self.chains])),
        )

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder | None = None) -> "PathRanker":
        """Load a saved ranker; the embedder must be the one it was trained with."""
        r = cls(embedder)
        d = load_npz(path, r._embedder(), "path ranker")
        r.l2 = float(d["l2"])
        r.lexical_dim = int(d["lexical_dim"]) if "lexical_dim" in d else 0
        r.weights, r.bias = d["weights"], d["bias"]
        r.chains = [tuple(c) for c in json.loads(str(d["chains"]))]
        r._index = {c: i for i, c in enumerate(r.chains)}
        return r
