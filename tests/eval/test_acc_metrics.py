"""KG-Infused RAG's raw Acc beside the SQuAD-normalised one (issue 13 item 12; docs/methods.md §1(f)).

``acc_raw``: any gold alias, lower-cased, is a substring of the lower-cased prediction, nothing
else normalised. ``acc``: the same after SQuAD normalisation (punctuation and articles removed).
"""

from __future__ import annotations

import pytest
from faithful_kgqa import write_tiny_metaqa

from kgrag_plugins.datasets import accuracy_raw, answer_scores
from kgrag_plugins.datasets.metrics import accuracy
from kgrag_plugins.eval.bench import run_bench


@pytest.mark.parametrize(
    ("prediction", "golds", "acc", "acc_raw"),
    [
        ("He was born in PARIS, France.", ["paris"], 1.0, 1.0),  # lower-casing both sides
        ("the US Army", ["U.S."], 1.0, 0.0),  # punctuation counts in the raw Acc
        ("Beatles", ["The Beatles"], 1.0, 0.0),  # so do articles
        ("The end", ["The"], 0.0, 1.0),  # a gold that normalises to nothing still matches raw
        ("Jean Paul", ["Jean-Paul"], 0.0, 0.0),  # "jeanpaul" vs "jean paul"; raw keeps the hyphen
        ("London", ["Paris", "london"], 1.0, 1.0),  # any alias
        ("anything", [""], 0.0, 0.0),  # an empty gold never matches
    ],
)
def test_acc_raw_is_kg_infused_lowercase_substring(prediction, golds, acc, acc_raw):
    assert accuracy(prediction, golds) == acc
    assert accuracy_raw(prediction, golds) == acc_raw


def test_acc_answer_scores_report_both_names():
    s = answer_scores("the US Army", ["U.S."])
    assert s == {"em": 0.0, "f1": pytest.approx(2 / 3), "acc": 1.0, "acc_raw": 0.0}
    with pytest.raises(ValueError, match="no gold answers"):
        accuracy_raw("x", [])


def test_acc_raw_is_in_the_kgqa_bench_report(tmp_path):
    root = write_tiny_metaqa(tmp_path)
    report = run_bench("metaqa", ["frag-zeroshot-simple"], data_dir=root, per_hop=2, train_per_hop=0, progress=False)
    r = report["results"]["frag-zeroshot-simple"]
    assert 0.0 <= r["acc_raw"] <= 1.0 and all("acc_raw" in b for b in r["by_hops"].values())
    # MetaQA answers are plain entity names: the raw and the normalised top-1 match agree here
    assert r["acc_raw"] == r["hits@1"]
