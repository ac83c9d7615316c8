"""The command line's grammar: help texts (no issue numbers, every option explained, defaults
shown), ``--index DIR`` wherever an index is read (the old positional ``show-graph INDEX`` still
works, with a deprecation warning), method names with ``-`` or ``_`` alike at every entry point,
and the public names a README snippet imports exist where it imports them."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pytest
from conftest import HashEmbedder

from kgrag_plugins.cli import build_parser, main
from kgrag_plugins.cli_common import HelpFormatter, deprecated_index


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield path + (choice.dest,), choice  # the one-line help in the parent's list
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_no_help_text_mentions_an_issue():
    seen, offenders = 0, []
    for path, obj in _parsers(build_parser()):
        texts = [getattr(obj, "help", None), getattr(obj, "description", None)]
        if isinstance(obj, argparse.ArgumentParser):
            texts += [a.help for a in obj._actions]
        for text in filter(None, texts):
            seen += 1
            if "issue" in text.lower():
                offenders.append((" ".join(path), text))
    assert seen > 100 and offenders == []


def test_as_embedder_is_importable_from_models():
    from kgrag_plugins.models import as_embedder
    from kgrag_plugins.models.embed import as_embedder as direct

    assert as_embedder is direct


# --------------------------------------------------------------------------- help: texts, defaults


def _all_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every parser of the tree (the top level, each command, each sub-command), once."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _all_parsers(sub, path + (name,))


def test_every_option_has_help_and_every_help_shows_its_default():
    commands, checked, missing, no_default = set(), 0, [], []
    for path, parser in _all_parsers(build_parser()):
        commands.add(" ".join(path))
        assert issubclass(parser.formatter_class, HelpFormatter), path
        assert parser.format_help()  # renders (no stray % in a help text)
        formatter = parser._get_formatter()
        for a in parser._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
                continue
            checked += 1
            name = f"kgrag {' '.join(path)} {a.option_strings or a.dest}"
            if not (a.help or "").strip():
                missing.append(name)
            elif a.default not in (None, False) and "(default:" not in formatter._expand_help(a):
                no_default.append(name)
    assert {"demo", "bench", "index", "show-graph", "linking", "ask", "serve-llm", "models", "bench-scale"} <= commands
    assert {"train kge", "train translator", "train export-merged"} <= commands
    assert checked > 100 and missing == [] and no_default == []


def test_help_output_shows_defaults_and_hides_deprecated_spellings():
    show = build_parser()._subparsers._group_actions[0].choices["show-graph"].format_help()
    assert "--index DIR" in show and "(default: 2)" in show and "legacy_index" not in show
    demo = build_parser()._subparsers._group_actions[0].choices["demo"].format_help()
    assert "--index DIR" in demo and "--index-dir" not in demo and "(default: 3)" in demo


# --------------------------------------------------------------------------- --index everywhere


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory, sample_corpus, sample_graph):
    """The sample corpus and title graph with the hashing test embedder (builds in well under a second)."""
    from kgrag_plugins.index.store import KnowledgeIndex

    path = tmp_path_factory.mktemp("cli-grammar") / "idx"
    return KnowledgeIndex.build(sample_corpus, path, graph=sample_graph, embedder=HashEmbedder(), progress=False)


@pytest.fixture
def hash_default(monkeypatch):
    """The CLI opens indexes with the default embedder: make it the test one."""
    from kgrag_plugins.index import store

    monkeypatch.setattr(store, "default_embedder", lambda: HashEmbedder())


def test_show_graph_takes_index_and_still_the_positional_form(tiny_index, hash_default, tmp_path, capsys, caplog):
    html = tmp_path / "g.html"
    argv = ["--entity", "Marie Curie", "--out", str(html)]
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins"):
        assert main(["show-graph", "--index", str(tiny_index.path), *argv]) == 0
        assert not [r for r in caplog.records if "deprecated" in r.getMessage()]
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "Marie Curie" and info["nodes"] > 1 and "<svg" in html.read_text()

    html.unlink()
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins"):
        assert main(["show-graph", str(tiny_index.path), *argv]) == 0  # the old form
    assert json.loads(capsys.readouterr().out)["name"] == "Marie Curie" and html.exists()
    warned = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(warned) == 1 and "--index" in warned[0] and "\n" not in warned[0]

    # both spellings: fine when they agree, exit 2 with a clear message when they differ
    assert main(["show-graph", str(tiny_index.path), "--index", str(tiny_index.path) + "/", *argv]) == 0
    capsys.readouterr()
    assert main(["show-graph", str(tmp_path / "other"), "--index", str(tiny_index.path), *argv]) == 2
    err = capsys.readouterr().err
    assert "kgrag show-graph: error:" in err and "different indexes" in err and "other" in err
    assert main(["show-graph", *argv]) == 2
    assert "--index DIR" in capsys.readouterr().err


def test_deprecated_index_spellings(caplog):
    assert deprecated_index(Path("a"), None, command="demo", old_form="--index-dir", required=False) == Path("a")
    assert deprecated_index(None, None, command="demo", old_form="--index-dir", required=False) is None
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins"):
        assert deprecated_index(None, Path("b"), command="demo", old_form="--index-dir") == Path("b")
    assert "kgrag demo: --index-dir is deprecated; use --index b" in caplog.text
    args = build_parser().parse_args(["demo", "--index-dir", "d"])
    assert args.index is None and args.index_dir == Path("d")
    assert build_parser().parse_args(["index", "--corpus", "c", "--index", "i"]).out == Path("i")  # = --out


# --------------------------------------------------------------------------- method names: - and _


def test_method_name_spellings_resolve_to_the_registered_name():
    from kgrag_plugins.eval.bench import RETRIEVERS, parse_retriever_opts
    from kgrag_plugins.eval.qa import resolve_systems
    from kgrag_plugins.names import resolve_name

    for typed, registered in [("kg_infused", "kg-infused"), ("SA_RAG", "sa-rag"), ("sa_rag_cap2000", "sa-rag-cap2000"),
                              ("know3:sa_rag", "know3:sa-rag"), ("translator_llm_untuned", "translator-llm-untuned"),
                              ("kg-infused", "kg-infused"), ("telepathy", "telepathy")]:  # fmt: skip
        assert resolve_name(typed, RETRIEVERS) == registered
    assert resolve_name("kg-infused", ["kg_infused"]) == "kg_infused"  # the registry's spelling wins, either way
    for typed in ("kg_infused", "kg-infused"):
        args = build_parser().parse_args(["ask", "--index", "i", "--retriever", typed, "q"])
        assert args.retriever == "kg-infused"
    assert parse_retriever_opts(["kg_infused.rounds=1,2"], ["kg-infused"]) == {"kg-infused": {"rounds": [1, 2]}}
    assert resolve_systems(["self_ask+kg_infused", "vanilla_rag:sa_rag", "no_retrieval", "sa-rag+cot"]) == [
        "self-ask+kg-infused",
        "vanilla-rag:sa-rag",
        "no-retrieval",
        "sa-rag+cot",
    ]


def test_ask_rejects_an_unknown_retriever_listing_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["ask", "--index", "i", "--retriever", "kg_infusd", "q"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'kg_infusd'" in err and "kg-infused" in err


def test_bench_takes_either_spelling(tiny_index, monkeypatch):
    from kgrag_plugins.eval import bench

    monkeypatch.setattr(bench, "dataset_index", lambda ds, **kw: (tiny_index, True))
    report = bench.run_bench(
        "sample", ["bm25", "kg_infused"], limit=3, progress=False, retriever_opts=["kg_infused.rounds=1"]
    )
    assert set(report["results"]) == {"bm25", "kg-infused[rounds=1]"}
    with pytest.raises(ValueError, match=r"unknown retriever\(s\) \['kg_infusd'\]; available: dense, bm25"):
        bench.run_bench("sample", ["kg_infusd"], limit=3, progress=False)


def test_kgqa_bench_takes_either_spelling():
    from kgrag_plugins.datasets.loaders import Dataset
    from kgrag_plugins.eval.kgqa import run_kgqa_bench

    kgqa = Dataset("metaqa", [], None)  # the names are checked before the KG is read
    with pytest.raises(ValueError, match=r"unknown KGQA retriever\(s\) \['nope'\]; available: frag, "):
        run_kgqa_bench(kgqa, ["frag_zeroshot_simple", "know3:frag", "nope"])
    with pytest.raises(ValueError, match="'frag-simple' is now frag-zeroshot-simple"):
        run_kgqa_bench(kgqa, ["frag_simple"])


def test_python_api_takes_either_spelling(tiny_index):
    pytest.importorskip("llama_index.core")
    pytest.importorskip("langchain_core")
    from kgrag_plugins.integrations.langchain import KGRAGLangChainRetriever
    from kgrag_plugins.integrations.llama_index import SpreadingActivationRetriever
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever
    from kgrag_plugins.methods.sa_rag import SARAGRetriever

    for name in ("kg-infused", "kg_infused"):
        assert type(tiny_index.as_retriever(name).retriever) is KGInfusedRetriever
        assert type(KGRAGLangChainRetriever.from_index(tiny_index, method=name).retriever) is KGInfusedRetriever
    for variant in ("sa-rag", "sa_rag"):
        assert type(SpreadingActivationRetriever(tiny_index, variant=variant).retriever) is SARAGRetriever
    with pytest.raises(ValueError, match="unknown method 'kg_infusd'; choose one of"):
        tiny_index.as_retriever("kg_infusd")


def test_libraries_log_warnings_only_unless_verbose():
    import logging

    from kgrag_plugins.cli import _CHATTY, _configure_logging

    saved = {n: logging.getLogger(n).level for n in _CHATTY}
    root_level = logging.getLogger().level
    try:
        _configure_logging(0)
        assert all(logging.getLogger(n).getEffectiveLevel() == logging.WARNING for n in _CHATTY)
        _configure_logging(1)
        assert logging.getLogger("ray.data").getEffectiveLevel() == logging.INFO
        assert logging.getLogger().level == logging.INFO
        _configure_logging(2)
        assert logging.getLogger("chromadb").getEffectiveLevel() == logging.DEBUG
    finally:
        for n, lvl in saved.items():
            logging.getLogger(n).setLevel(lvl)
        logging.getLogger().setLevel(root_level)
