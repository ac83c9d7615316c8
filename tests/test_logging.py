"""Issue 17 item 6: the package logs like a library.

- no ``print`` in ``kgrag_plugins/`` outside the CLI and the demo (AST scan);
- every logger is a child of ``logging.getLogger("kgrag_plugins")``;
- LLM failures and fallbacks are logged at WARNING (not only put in a trace);
- progress bars are silenced by ``KGRAG_PROGRESS=0`` and none shows on a user's first query.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

import kgrag_plugins
from kgrag_plugins.config import progress_enabled
from kgrag_plugins.models.llm import LLMError, ScriptedLLM

PACKAGE = Path(kgrag_plugins.__file__).parent
#: Modules whose job is writing to the terminal.
PRINT_ALLOWED = {"cli.py", "cli_mcp.py", "cli_models.py", "cli_train.py", "demo.py", "demo_llm.py"}


def _modules() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50  # the scan really walks the package
    return files


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                out.append(node)
    return out


def test_no_print_in_library_code():
    offenders = []
    for path in _modules():
        if path.relative_to(PACKAGE).as_posix() in PRINT_ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [
            f"{path.relative_to(PACKAGE)}:{c.lineno}" for c in _calls(tree, "print") if isinstance(c.func, ast.Name)
        ]
    assert offenders == []


def test_the_print_scan_can_fail():
    tree = ast.parse("def f():\n    print('x')\n    logger.info('y')\n")
    assert [c.lineno for c in _calls(tree, "print")] == [2]


def test_every_logger_is_a_child_of_kgrag_plugins():
    names = []
    for path in _modules():
        module = "kgrag_plugins." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for call in _calls(ast.parse(path.read_text(encoding="utf-8")), "getLogger"):
            arg = call.args[0] if call.args else None
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                name = module.removesuffix(".__init__")
            elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name = arg.value
            else:
                name = ast.unparse(arg) if arg is not None else "<root>"
            names.append((f"{path.relative_to(PACKAGE)}:{call.lineno}", name))
    assert names  # the package does log
    bad = [
        (where, n)
        for where, n in names
        if n != "kgrag_plugins" and not n.startswith("kgrag_plugins.") and (where.split(":")[0], n) not in OTHERS
    ]
    assert bad == []


#: The only places that touch loggers outside ours: the ``kgrag`` command (an application: it
#: configures the root and quiets chatty libraries unless ``-v``) and bm25s's logger, which bm25s
#: sets to DEBUG on import (handed back to the application's config).
OTHERS = {("cli.py", "<root>"), ("cli.py", "name"), ("index/passages.py", "bm25s")}


# --------------------------------------------------------------------------- WARNING on LLM fallbacks


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("kgrag_plugins.")]


def test_answer_fallback_logs_a_warning(caplog):
    from kgrag_plugins.methods.answer import generate_answer
    from kgrag_plugins.types import Evidence

    ev = Evidence("q", [], trace={"answers": ["Vistula"]})
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins"):
        ans = generate_answer(ScriptedLLM([LLMError("endpoint down")]), "Which river?", ev)
    assert ans.text == "Vistula" and ans.metadata["fallback"] is True
    (record,) = _warnings(caplog)
    assert "endpoint down" in record.getMessage() and "'answer'" in record.getMessage()


def test_langgraph_note_node_fallback_logs_a_warning(caplog):
    from kgrag_plugins.integrations.langgraph import make_note_node

    class FailingNote:
        def write_note(self, question, passages):
            raise LLMError("note model down")

    with caplog.at_level(logging.WARNING, logger="kgrag_plugins"):
        out = make_note_node(FailingNote()).invoke({"question": "q", "documents": ["Warsaw lies on the Vistula."]})
    assert out["note"] is None and out["trace"]["llm_error"] == [{"step": "write_note", "error": "note model down"}]
    (record,) = _warnings(caplog)
    assert record.name == "kgrag_plugins.integrations.langgraph.state" and "note model down" in record.getMessage()


def test_sa_rag_reasoning_adapter_error_logs_a_warning(caplog):
    from kgrag_plugins.methods.sa_rag import SARAGCoT

    cot = SARAGCoT(None, ScriptedLLM([ValueError("adapter broke")]))  # not an LLMError: an adapter's own type
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins"):
        parsed, error = cot.reason_with_error("q", "context")
    assert parsed is None and "adapter broke" in error
    (record,) = _warnings(caplog)
    assert record.name == "kgrag_plugins.methods.sa_rag.cot" and "adapter broke" in record.getMessage()


# --------------------------------------------------------------------------- progress bars


@pytest.mark.parametrize(
    ("value", "default", "expected"),
    [
        (None, True, True),  # stderr a terminal (monkeypatched below)
        (None, False, False),
        ("1", True, True),
        ("on", True, True),
        ("0", True, False),
        ("false", True, False),
        ("OFF", True, False),
        ("no", True, False),
        ("1", False, False),  # the env var only silences; it never forces a bar
    ],
)
def test_progress_enabled(monkeypatch, value, default, expected):
    import kgrag_plugins.config as config

    monkeypatch.setattr(config, "_stderr_is_tty", lambda: True)
    if value is None:
        monkeypatch.delenv("KGRAG_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("KGRAG_PROGRESS", value)
    assert progress_enabled(default) is expected


def test_no_bar_without_a_terminal_unless_asked(monkeypatch):
    """Unset KGRAG_PROGRESS and stderr not a terminal (a pipe, a log file): no bar debris."""
    import kgrag_plugins.config as config

    monkeypatch.delenv("KGRAG_PROGRESS", raising=False)
    monkeypatch.setattr(config, "_stderr_is_tty", lambda: False)
    assert progress_enabled(True) is False
    monkeypatch.setenv("KGRAG_PROGRESS", "1")
    assert progress_enabled(True) is True and progress_enabled(False) is False


def _bar(err: str) -> bool:
    return "it/s" in err or "s/it" in err or "%|" in err


@pytest.fixture(scope="module")
def minilm():
    from kgrag_plugins.models.embed import default_embedder

    return default_embedder()


def test_kgrag_progress_0_silences_bars(minilm, monkeypatch, capfd):
    texts = [f"sentence number {i}" for i in range(12)]  # more than the 8-text fast path
    monkeypatch.setenv("KGRAG_PROGRESS", "1")  # pytest's stderr is no terminal
    capfd.readouterr()
    minilm.embed(texts, progress=True)
    assert _bar(capfd.readouterr().err)  # the bar shows when asked ...
    monkeypatch.setenv("KGRAG_PROGRESS", "0")
    minilm.embed(texts, progress=True)
    assert not _bar(capfd.readouterr().err)  # ... and KGRAG_PROGRESS=0 silences it


class _Recording:
    """The real embedder, recording the ``progress`` each call asked for."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.progress = inner, inner.name, inner.dim, []

    def embed(self, texts, *, progress=None):
        self.progress.append((len(texts), progress))
        return self.inner.embed(texts, progress=progress)


def _small_graph(passages):
    from kgrag_plugins.index.graph import KnowledgeGraph
    from kgrag_plugins.types import Entity

    g = KnowledgeGraph()
    for p in passages:
        g.add_entity(Entity(p.title, p.title, description=p.text.split(". ")[0]))
        g.link(p.title, p.id)
    for p in passages:
        for q in passages:
            if q.title != p.title and q.title in p.text:
                g.add_triple(p.title, "mentions", q.title, [p.id])
    return g


def test_no_bar_on_a_first_query(minilm, sample_corpus, tmp_path, monkeypatch, capfd):
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.sa_rag import SARAGRetriever

    monkeypatch.setenv("KGRAG_PROGRESS", "1")  # bars allowed without a terminal: none may show anyway
    rec = _Recording(minilm)
    corpus = list(sample_corpus[:16])
    graph = _small_graph(corpus)
    assert graph.num_entities > 8 and graph.num_triples > 8  # more than the embedder's no-bar fast path
    index = KnowledgeIndex.build(corpus, tmp_path / "idx", graph=graph, embedder=rec, progress=False)
    assert not index.has_entity_vectors  # computed lazily, on the first query
    rec.progress.clear()
    capfd.readouterr()
    ev = SARAGRetriever(index).retrieve("Which river flows through Warsaw?", 3)  # entity + triple vectors
    assert ev.passages and index.has_entity_vectors
    err = capfd.readouterr().err
    assert not _bar(err), err
    lazy = [(n, p) for n, p in rec.progress if n > 1]
    # the lazy vectors leave the bar to the embedder (none under 1,000 texts), never force one
    assert len(lazy) >= 2 and all(p in (None, False) for _, p in lazy)
