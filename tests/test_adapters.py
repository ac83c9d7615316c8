"""The adapter registry (kgrag_plugins/adapters.py): the core reaches the framework adapters only
through hooks that integrations/ registers from its entry point, never by importing them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kgrag_plugins import adapters


def test_the_installed_entry_point_registers_every_hook_the_core_uses() -> None:
    from kgrag_plugins.integrations import framework_embedder, framework_llm

    assert adapters.hook("llm") is framework_llm
    assert adapters.hook("embedder") is framework_embedder
    for name in ("build_index", "as_retriever", "as_query_engine"):
        assert callable(adapters.hook(name)), name


def test_core_modules_import_no_adapter_package() -> None:
    """Importing the core and adapting a plain object loads no adapter module and no framework."""
    code = (
        "import sys\n"
        "import kgrag_plugins.index.store, kgrag_plugins.models.llm as m, kgrag_plugins.methods.activation\n"
        "loaded = lambda *p: [n for n in sys.modules if n.startswith(p)]\n"
        "class Plain:\n"
        "    def complete(self, p, **k): return 'x'\n"
        "    async def acomplete(self, p, **k): return 'x'\n"
        "o = Plain(); assert m.as_llm(o) is o\n"
        "# the package face of integrations/ is loaded (the root sets the tiktoken cache through it),\n"
        "# but no adapter module and no framework\n"
        "bad = loaded('kgrag_plugins.integrations.', 'langchain', 'llama_index')\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_hook_is_a_clear_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters, "_hooks", {})
    monkeypatch.setattr(adapters, "_loaded", True)  # as if no package declared the entry point
    assert adapters.hook("as_retriever") is None
    with pytest.raises(ImportError, match=r"KnowledgeIndex.as_retriever needs the framework adapters.*'as_retriever'"):
        adapters.require_hook("as_retriever", "KnowledgeIndex.as_retriever")
    from kgrag_plugins.models.llm import as_llm

    with pytest.raises(TypeError, match="cannot use .* as an LLM"):
        as_llm(object())
    framework_like = type("ChatModel", (), {"__module__": "langchain_core.language_models"})()
    with pytest.raises(TypeError, match="no framework adapter is registered.*reinstall kgrag-plugins"):
        as_llm(framework_like)


def test_register_replaces_and_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters, "_hooks", {})
    monkeypatch.setattr(adapters, "_loaded", True)
    adapters.register("llm", lambda obj: "first")
    adapters.register("llm", lambda obj: "second")
    assert adapters.hook("llm")(None) == "second"
    with pytest.raises(ValueError):
        adapters.register("", lambda: None)
    with pytest.raises(ValueError):
        adapters.register("x", "not callable")  # type: ignore[arg-type]


def test_a_broken_entry_point_is_logged_not_raised(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    class BrokenEP:
        name, value = "broken", "nowhere:register"

        def load(self):
            raise ImportError("no module named nowhere")

    monkeypatch.setattr(adapters, "_hooks", {})
    monkeypatch.setattr(adapters, "_loaded", False)
    monkeypatch.setattr(adapters, "entry_points", lambda group: [BrokenEP()])
    with caplog.at_level("WARNING"):
        assert adapters.hook("llm") is None
    assert "adapter entry point broken (nowhere:register) failed to load" in caplog.text
