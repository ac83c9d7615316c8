"""FRAG's reasoning-aware hop classifier (METHODS.md §2 step 2), LLM-free and CPU-trained.

FRAG labels a question *simple* (reasoning path of at most ``delta`` = 2 hops) or *complex*
from the question alone, with a fine-tuned DeBERTa-v3 classifier. No hub model can be
downloaded here, so this is a logistic-regression head over features any install has:

- the MiniLM sentence embedding of the question (the paper's input normalisation: first letter
  upper-cased, a trailing "?" added);
- cheap query statistics: word count, capitalised spans (entity mentions), relation-chain cues
  (possessives, "of the", relative pronouns, nested wh-words, prepositions, passive "-ed by",
  copulas), commas. The last four cues raised held-out macro-F1 (``kgrag train hop-classifier``
  defaults) on MuSiQue from 0.730 to 0.786, MetaQA 0.939 -> 0.969, 2Wiki 0.897 -> 0.910.

Training is L2-regularised logistic regression solved with scipy's L-BFGS on standardised
features (seconds on CPU). :meth:`HopClassifier.adapt` refits on the old data plus new
(question, label) pairs, which is FRAG-F's feedback step (labels from counting the hops of
the path an LLM picked, METHODS.md §2 step 10). Save/load is one ``.npz`` file, written
atomically.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from ...models.embed import Embedder, default_embedder
from ...models.persist import load_npz, save_npz

SIMPLE, COMPLEX = "simple", "complex"
_WORD = re.compile(r"[A-Za-z0-9']+")
_CAPSPAN = re.compile(r"(?:\b[A-Z][\w'.-]*(?:\s+(?:of|the|de|von|and)?\s*[A-Z][\w'.-]*)*)")
_CUES = {
    "possessive": re.compile(r"'s\b|s'\s"),
    "of_the": re.compile(r"\bof (?:the|a|an)\b", re.I),
    "relative": re.compile(r"\b(?:who|whom|whose|which|that|where|when)\b", re.I),
    "wh": re.compile(r"\b(?:what|who|whom|whose|which|where|when|how)\b", re.I),
    "also": re.compile(r"\b(?:also|same|both|as well)\b", re.I),
    "film_of": re.compile(r"\b(?:films?|movies?|books?|songs?|albums?)\b", re.I),
    "preposition": re.compile(r"\b(?:of|in|by|for|from|with|on|at|to|during|after|before)\b", re.I),
    "passive": re.compile(r"\b\w+(?:ed|s)\b\s+(?:by|in|to|from|at)\b", re.I),
    "the": re.compile(r" the ", re.I),
    "copula": re.compile(r"\b(?:is|was|are|were)\b", re.I),
}
#: Bumped when the features change; a saved classifier of another version is refused on load.
FEATURES_VERSION = 2


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
    """Cheap structural features of one question (see the module docstring)."""
    words = _WORD.findall(q)
    body = q[1:] if q else q  # the sentence-initial capital is not a mention
    caps = [m.group(0) for m in _CAPSPAN.finditer(body)]
    feats = [len(words) / 10.0, len(caps), q.count(",")]
    feats += [len(rx.findall(q)) for rx in _CUES.values()]
    return np.asarray(feats, dtype=np.float64)


class HopClassifier:
    """Simple (≤ ``delta`` hops) vs complex questions; see the module docstring."""

    def __init__(self, embedder: Embedder | None = None, *, delta: int = 2, l2: float = 1.0) -> None:
        if delta < 1:
            raise ValueError(f"delta must be >= 1, got {delta}")
        self.embedder = embedder
        self.delta = delta
        self.l2 = l2
        self.weights: np.ndarray | None = None
        self.bias = 0.0
        self._mean: np.ndarray | None = None
        self._std: np.ndarray | None = None
        self._X: np.ndarray | None = None  # training features, kept for adapt()
        self._y: np.ndarray | None = None

    # ------------------------------------------------------------------ features
    def _embedder(self) -> Embedder:
        if self.embedder is None:
            self.embedder = default_embedder()
        return self.embedder

    def features(self, questions: Sequence[str]) -> np.ndarray:
        qs = [normalize_question(q) for q in questions]
        if any(not q for q in qs):
            raise ValueError("questions must be non-empty strings")
        emb = np.asarray(self._embedder().embed(qs, progress=False), dtype=np.float64)
        stats = np.stack([question_stats(q) for q in qs])
        return np.hstack([emb, stats])

    def labels(self, hops: Sequence[int]) -> np.ndarray:
        """1 (complex) where hops > delta, else 0."""
        return (np.asarray(hops) > self.delta).astype(np.float64)

    # ------------------------------------------------------------------ training
    def _fit_arrays(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None) -> None:
        from scipy.optimize import minimize

        if len(np.unique(y)) < 2:
            raise ValueError("training needs both simple and complex questions")
        self._mean = X.mean(axis=0)
        self._std = X.std(axis=0) + 1e-6
        Z = (X - self._mean) / self._std
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

        res = minimize(loss, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": 500})
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
        Z = (self.features(questions) - self._mean) / self._std
        return 1.0 / (1.0 + np.exp(-(Z @ self.weights + self.bias)))

    def predict(self, questions: Sequence[str]) -> list[str]:
        return [COMPLEX if p >= 0.5 else SIMPLE for p in self.predict_proba(questions)]

    def route(self, question: str) -> str:
        """``"simple"`` or ``"complex"`` for one question."""
        return self.predict([question])[0]

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the trained head (and its training features, for adapt) atomically to ``path``."""
        if self.weights is None:
            raise ValueError("nothing to save: the classifier is not trained")
        return save_npz(
            path,
            self._embedder(),
            weights=self.weights,
            bias=self.bias,
            mean=self._mean,
            std=self._std,
            delta=self.delta,
            l2=self.l2,
            X=self._X,
            y=self._y,
            features_version=FEATURES_VERSION,
        )

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder | None = None) -> "HopClassifier":
        """Load a saved classifier; the embedder must be the one it was trained with."""
        clf = cls(embedder)
        d = load_npz(path, clf._embedder(), "hop classifier")
        version = int(d["features_version"]) if "features_version" in d else 1
        if version != FEATURES_VERSION:
            raise ValueError(
                f"{path} uses hop-classifier features v{version}, this library v{FEATURES_VERSION}: "
                "retrain it with `kgrag train hop-classifier`"
            )
        clf.delta, clf.l2 = int(d["delta"]), float(d["l2"])
        clf.weights, clf.bias = d["weights"], float(d["bias"])
        clf._mean, clf._std, clf._X, clf._y = d["mean"], d["std"], d["X"], d["y"]
        return clf


# --------------------------------------------------------------------------- LLM-free router

RouteName = Literal["simple", "complex"]
_RELATIVE = re.compile(r"\b(?:that|which|who|whom|whose|where|when)\b", re.I)
_CHAIN_CUES = re.compile(
    r"\b(?:share[sd]?|same|also|co-?(?:star|writ|direct|act|produc)\w*|other|as well)\b"
    r"|'s\b|\bof (?:the|a|an)\b|\bby\b",
    re.I,
)


def heuristic_route(question: str) -> RouteName:
    """LLM-free, training-free router (METHODS.md §2(e)): ``"complex"`` when the question strings
    together at least three relational cues (relative pronouns, possessives, "of the", "by",
    "share"/"same"/"also"), else ``"simple"``."""
    body = TOPIC_MARK.sub(" X ", question)
    cues = len(_RELATIVE.findall(body)) + len(_CHAIN_CUES.findall(body))
    return COMPLEX if cues >= 3 else SIMPLE


def count_hops(path_text: str) -> int:
    """Hops of a verbalised path: the number of arrows divided by two (FRAG-F, §2 step 10);
    ``<-`` arrows of inverse edges count like ``->``."""
    return (path_text.count("->") + path_text.count("<-")) // 2
