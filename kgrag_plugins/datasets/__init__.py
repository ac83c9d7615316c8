"""Benchmark data below training and evaluation: loaders (``loaders``), answer and retrieval metrics
(``metrics``) and the cached index of a dataset's corpus (``indexes``).

Example::

    from kgrag_plugins.datasets import load_dataset, mean, recall_at_k

    ds = load_dataset("musique", limit=10)  # reads KGRAG_DATA_DIR (default ~/.cache/kgrag/data)
    scores = [recall_at_k(my_retrieve(q.question), q.supporting_passage_ids, 5) for q in ds.questions]
    print(mean(scores))
"""

from .indexes import dataset_index
from .loaders import (
    ALIASES,
    DATASETS,
    CorpusFormatError,
    Dataset,
    Question,
    bundled_file,
    load_corpus_jsonl,
    load_dataset,
    load_questions_jsonl,
    sample_corpus,
    sample_questions,
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
    percentile,
    recall_at_k,
)

__all__ = [
    "ALIASES",
    "DATASETS",
    "CorpusFormatError",
    "Dataset",
    "Question",
    "bundled_file",
    "load_corpus_jsonl",
    "load_dataset",
    "load_questions_jsonl",
    "sample_corpus",
    "sample_questions",
    "accuracy",
    "accuracy_raw",
    "answer_recall_at_k",
    "answer_scores",
    "exact_match",
    "f1_score",
    "hits_at_1",
    "mean",
    "normalize_answer",
    "percentile",
    "recall_at_k",
    "dataset_index",
]
