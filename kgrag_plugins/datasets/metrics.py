"""Answer and retrieval metrics, following the conventions of the papers we reproduce.

Answer metrics (per question; callers average with :func:`mean`):

* :func:`exact_match` / :func:`f1_score` - SQuAD v1.1 ``evaluate-v1.1.py`` (Rajpurkar et al., 2016):
  answers are compared after :func:`normalize_answer`; F1 is the bag-of-tokens F1. Both take the
  **maximum over gold aliases** (``metric_max_over_ground_truths`` in the SQuAD script, also used by
  HotpotQA / MuSiQue / HippoRAG). Note: KG-Infused RAG's released scorer compares the prediction with
  the *last* gold alias only; we deliberately take the max, which can only score higher.
* :func:`accuracy` (reported as ``acc``) - substring accuracy after SQuAD normalisation: 1.0 if any
  normalised gold answer is a substring of the normalised prediction (PopQA / Self-RAG style).
* :func:`accuracy_raw` (reported as ``acc_raw``) - KG-Infused RAG's own "Acc" (docs/methods.md §1(f),
  ``kg_infused_rag/utils/eval.py``): any gold alias, lower-cased, is a substring of the lower-cased
  prediction, with no other normalisation. Use it to compare with KG-Infused RAG's tables.
* :func:`answer_scores` - ``{"em", "f1", "acc", "acc_raw"}`` of one prediction, for answer benches.
* :func:`hits_at_1` - KGQA Hits@1 as computed by RoG / FRAG / GNN-RAG (``eval_hit``): the top prediction
  counts as a hit if any normalised gold is a substring of it.

Retrieval metrics:

* :func:`recall_at_k` - passage Recall@k of HippoRAG / HippoRAG 2 / GFM-RAG:
  ``|set(top_k) & set(gold)| / |set(gold)|`` per question.
* :func:`answer_recall_at_k` - DPR's ``has_answer`` top-k retrieval accuracy (Karpukhin et al., 2020):
  1.0 if a gold answer occurs, on token boundaries, in one of the top-k passages.

All functions accept ``golds`` as one string or a list of aliases.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "normalize_answer",
    "exact_match",
    "f1_score",
    "accuracy",
    "accuracy_raw",
    "answer_scores",
    "recall_at_k",
    "answer_recall_at_k",
    "hits_at_1",
    "mean",
]

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD v1.1 answer normalisation.

    Lower-case, remove ASCII punctuation (deleted, not replaced by a space: ``"U.S."`` -> ``"us"``),
    remove the articles ``a``/``an``/``the``, and collapse whitespace - in the order of the official
    ``evaluate-v1.1.py`` (``white_space_fix(remove_articles(remove_punc(lower(s))))``).
    """
    s = str(s).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _gold_list(golds: str | Iterable[str]) -> list[str]:
    if isinstance(golds, str):
        out = [golds]
    else:
        out = [str(g) for g in golds]
    if not out:
        raise ValueError("no gold answers given (skip questions without gold answers)")
    return out


def _em_single(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _f1_single(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:  # SQuAD v1.1: also 0 when both sides normalise to nothing
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, golds: str | list[str]) -> float:
    """SQuAD exact match: 1.0 if the normalised prediction equals a normalised gold alias.

    Maximum over aliases (SQuAD ``metric_max_over_ground_truths``). Raises ``ValueError`` when
    ``golds`` is empty.
    """
    return max(_em_single(prediction, g) for g in _gold_list(golds))


def f1_score(prediction: str, golds: str | list[str]) -> float:
    """SQuAD token F1 between prediction and gold, maximum over gold aliases.

    Tokens are the whitespace tokens of :func:`normalize_answer`; overlap counts multiplicity
    (``Counter`` intersection). F1 = 2PR/(P+R), 0.0 when no token is shared. KG-Infused RAG's code
    scores against the last alias only; we take the max over all aliases (SQuAD/HotpotQA convention).
    Raises ``ValueError`` when ``golds`` is empty.
    """
    return max(_f1_single(prediction, g) for g in _gold_list(golds))


def accuracy(prediction: str, golds: str | list[str]) -> float:
    """Substring accuracy after SQuAD normalisation (``acc``; PopQA / Self-RAG style).

    1.0 if any normalised gold is a substring of the normalised prediction. KG-Infused RAG's
    "Acc" does not normalise beyond lower-casing: that is :func:`accuracy_raw` (``acc_raw``). Golds that normalise
    to the empty string (e.g. ``"the"``) are ignored, since they would match anything. The match is
    character-level, as in the original code (gold ``"art"`` matches prediction ``"martin"``).
    """
    pred = normalize_answer(prediction)
    for g in _gold_list(golds):
        ng = normalize_answer(g)
        if ng and ng in pred:
            return 1.0
    return 0.0


def accuracy_raw(prediction: str, golds: str | list[str]) -> float:
    """KG-Infused RAG's "Acc" (docs/methods.md §1(f)): 1.0 if any gold alias, lower-cased, is a
    substring of the lower-cased prediction. No other normalisation: punctuation and articles
    count (gold ``"U.S."`` does not match ``"US Army"``; gold ``"The Beatles"`` does not match
    ``"Beatles"``), unlike :func:`accuracy`. Empty gold strings are ignored (they would match
    anything). Raises ``ValueError`` when ``golds`` is empty.
    """
    pred = str(prediction).lower()
    return float(any(g and g.lower() in pred for g in _gold_list(golds)))


def answer_scores(prediction: str, golds: str | list[str]) -> dict[str, float]:
    """``em`` / ``f1`` (SQuAD, max over aliases), ``acc`` (normalised substring, :func:`accuracy`)
    and ``acc_raw`` (KG-Infused RAG's lower-case substring, :func:`accuracy_raw`) of one prediction."""
    return {
        "em": exact_match(prediction, golds),
        "f1": f1_score(prediction, golds),
        "acc": accuracy(prediction, golds),
        "acc_raw": accuracy_raw(prediction, golds),
    }


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def recall_at_k(retrieved_ids: Sequence[str], gold_ids: Iterable[str], k: int) -> float:
    """Passage Recall@k (HippoRAG / GFM-RAG): fraction of distinct gold ids among the top ``k``.

    ``len(set(retrieved_ids[:k]) & set(gold_ids)) / len(set(gold_ids))`` for one question;
    average over questions with :func:`mean`. A question without gold passages has no defined
    recall: this raises ``ValueError`` and the caller should skip such questions (and report how
    many were skipped).
    """
    _check_k(k)
    gold = set(gold_ids)
    if not gold:
        raise ValueError("recall_at_k: empty gold_ids (skip questions without gold passages)")
    top = set(list(retrieved_ids)[:k])
    return len(top & gold) / len(gold)


def _answer_tokens(text: str) -> list[str]:
    # NFD like DPR's has_answer (composed/decomposed accents compare equal), then SQuAD normalisation.
    return normalize_answer(unicodedata.normalize("NFD", str(text))).split()


def _contains_subsequence(tokens: list[str], sub: list[str]) -> bool:
    n = len(sub)
    if n == 0 or n > len(tokens):
        return False
    first = sub[0]
    for i in range(len(tokens) - n + 1):
        if tokens[i] == first and tokens[i : i + n] == sub:
            return True
    return False


def answer_recall_at_k(passage_texts: Sequence[str], golds: str | list[str], k: int) -> float:
    """DPR ``has_answer`` top-k accuracy: 1.0 if any gold occurs in any of the top ``k`` passages.

    DPR style token-boundary match: the tokens of the normalised gold (NFD unicode, then
    :func:`normalize_answer`, split on whitespace) must occur as a contiguous token subsequence of
    the normalised passage tokens - so ``"Hall"`` does not match ``"Halloween"``. Unlike DPR's regex
    tokenizer, punctuation is deleted rather than split off (``"Jean-Paul"`` -> ``"jeanpaul"``, on
    both sides). Golds that normalise to nothing are ignored. Raises ``ValueError`` for empty golds.
    """
    _check_k(k)
    gold_tokens = [t for t in (_answer_tokens(g) for g in _gold_list(golds)) if t]
    for text in list(passage_texts)[:k]:
        tokens = _answer_tokens(text)
        if any(_contains_subsequence(tokens, gt) for gt in gold_tokens):
            return 1.0
    return 0.0


def hits_at_1(prediction: str | Sequence[str], golds: str | list[str]) -> float:
    """KGQA Hits@1 (RoG / FRAG / GNN-RAG ``eval_hit`` convention).

    The top prediction (the first element when a list is given; 0.0 for an empty list) is a hit if
    any normalised gold answer is a substring of the normalised prediction - FRAG/RoG's
    ``match(prediction, answer)`` does ``normalize(answer) in normalize(prediction)``. Golds that
    normalise to the empty string are ignored.
    """
    if isinstance(prediction, str):
        top = prediction
    else:
        preds = list(prediction)
        if not preds:
            return 0.0
        top = str(preds[0])
    return accuracy(top, golds)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (numpy's linear interpolation); 0.0 for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else 0.0


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; 0.0 for an empty input."""
    vals = [float(v) for v in values]
    return sum(vals) / len(vals) if vals else 0.0


def sign_test_p(better: int, worse: int) -> float:
    """Two-sided exact sign test: the chance of a split at least this uneven between ``better``
    and ``worse`` (ties left out) if either way were equally likely; 1.0 with no changes."""
    n, k = better + worse, min(better, worse)
    return min(1.0, 2 * sum(math.comb(n, j) for j in range(k + 1)) / 2**n) if n else 1.0
