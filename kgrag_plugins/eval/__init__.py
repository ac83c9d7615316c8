"""Evaluation: benchmark loaders (``datasets``) and answer/retrieval metrics (``metrics``).

Example::

    from kgrag_plugins.eval import load_dataset, recall_at_k, mean

    ds = load_dataset("musique", limit=10)  # reads KGRAG_DATA_DIR (default ../shared/data)
    scores = [recall_at_k(my_retrieve(q.question), q.supporting_passage_ids, 5) for q in ds.questions]
    print(mean(scores))
"""

from .datasets import (
    ALIASES,
    DATASETS,
    Dataset,
    Question,
    load_corpus_jsonl,
    load_dataset,
    load_questions_jsonl,
)
from .metrics import (
    accuracy,
    accuracy_raw,
    answer_recall_at_k,
    answer_scores,
    exact_match,
    f1_score,
    hits_at_1,
    mean,
    normalize_answer,
    recall_at_k,
)

__all__ = [
    "ALIASES",
    "DATASETS",
    "Dataset",
    "Question",
    "load_corpus_jsonl",
    "load_dataset",
    "load_questions_jsonl",
    "accuracy",
    "accuracy_raw",
    "answer_recall_at_k",
    "answer_scores",
    "exact_match",
    "f1_score",
    "hits_at_1",
    "mean",
    "normalize_answer",
    "recall_at_k",
]
