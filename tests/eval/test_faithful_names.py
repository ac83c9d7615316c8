"""The KGQA bench's FRAG ablation rows are the paper's pipelines, and our additions are named
(issue 13 item 10; FRAG §5.3 ablation, docs/methods.md §2).

``frag-zeroshot-simple`` / ``frag-zeroshot-complex`` run FRAG-Simple / FRAG-Complex with no
trained path ranker and no chain-guided completion; ``frag`` keeps our additions and the report
says which they are; the old names, which meant the ranked pipelines, are refused with the new ones.
"""

from __future__ import annotations

import pytest
from faithful_kgqa import write_tiny_metaqa

from kgrag_plugins.eval import kgqa
from kgrag_plugins.eval.bench import run_bench
from kgrag_plugins.methods.frag import retriever as frag_retriever


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    return write_tiny_metaqa(tmp_path_factory.mktemp("faithful-names"))


def test_faithful_zeroshot_pipelines_are_the_papers(tiny_root, monkeypatch):
    built: dict = {}
    evaluate = kgqa.evaluate_kgqa

    def recording(retriever, questions, **kw):
        built[retriever.name] = (retriever.mode, retriever.path_ranker, retriever.chain_beam, retriever.classifier)
        return evaluate(retriever, questions, **kw)

    monkeypatch.setattr(kgqa, "evaluate_kgqa", recording)
    names = ["frag-zeroshot-simple", "frag-zeroshot-complex"]
    report = run_bench("metaqa", names, data_dir=tiny_root, per_hop=2, train_per_hop=2, progress=False)
    assert built == {
        "frag-zeroshot-simple": ("simple", None, 0, None),
        "frag-zeroshot-complex": ("complex", None, 0, None),
    }
    assert "path_ranker" not in report and "hop_classifier" not in report  # nothing trained
    for name in names:
        cfg = report["results"][name]["retriever_config"]
        assert cfg["paper_pipeline"] is True and cfg["additions"] == [] and cfg["chain_beam"] == 0, name
        assert cfg["pipeline"] == name.rsplit("-", 1)[1] and cfg["router"] == "forced"
    assert report["results"]["frag-zeroshot-simple"]["routed_complex"] == 0.0
    assert report["results"]["frag-zeroshot-complex"]["routed_complex"] == 1.0


def test_faithful_default_frag_names_its_additions():
    cfg = kgqa.retriever_config("frag")
    assert cfg["paper_pipeline"] is False and cfg["router"] == "trained classifier"
    assert cfg["additions"] == [
        "trained path ranker",
        "chain-guided completion (complex pipeline; whole graph, set semantics)",
        "equal scores: ends with more supporting paths first",
        "route by the ranker's chain length",
    ]
    # a forced pipeline is never re-routed
    assert kgqa.retriever_config("frag-ranked-complex")["additions"] == cfg["additions"][:3]
    assert kgqa.retriever_config("frag-zeroshot")["paper_pipeline"] is True
    assert set(kgqa.KGQA_RETRIEVERS) >= {"frag", "frag-zeroshot-simple", "frag-zeroshot-complex", "frag-zeroshot"}


@pytest.mark.parametrize("old", ["frag-simple", "frag-complex"])
def test_faithful_old_ablation_names_are_refused_with_the_new_ones(tiny_root, old):
    kind = old.split("-")[1]
    with pytest.raises(ValueError, match=f"frag-zeroshot-{kind} .*frag-ranked-{kind}"):
        run_bench("metaqa", [old], data_dir=tiny_root, progress=False)


def test_faithful_chain_beam_docstring_makes_no_exactness_claim():
    doc = " ".join((frag_retriever.__doc__ or "").split())
    assert "paper's pipeline exactly" not in doc
    assert "chain_beam=0" in doc and "frag-zeroshot-simple" in doc
