"""The house rules the package layout promises (issue 12): a framework-free core, adapters behind
extras with a helpful ImportError, small modules, no ``build`` folder, typed, one version."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import kgrag_plugins

PKG = Path(kgrag_plugins.__file__).resolve().parent
FRAMEWORKS = ("langchain", "langchain_core", "llama_index", "langgraph")
ADAPTER_DIRS = ("integrations", "agents", "graphs")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_importing_the_core_loads_no_framework():
    code = (
        "import sys, kgrag_plugins, kgrag_plugins.methods.activation, kgrag_plugins.index.store, "
        "kgrag_plugins.models.llm, kgrag_plugins.methods.frag, kgrag_plugins.methods.sa_rag, "
        "kgrag_plugins.methods.kg_infused, kgrag_plugins.integrations, kgrag_plugins.explain, kgrag_plugins.cli\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(FRAMEWORKS)!r}))"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_no_core_module_mentions_a_framework():
    pattern = re.compile(r"langchain|llama_index|langgraph")
    offenders = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ADAPTER_DIRS:
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
    assert offenders == []


def test_no_build_folder_and_no_module_over_700_lines():
    assert not [p for p in PKG.rglob("build") if p.is_dir()]
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}


@pytest.mark.parametrize(
    "module, missing, extra",
    [
        ("kgrag_plugins.integrations.langgraph", "langgraph", "langgraph"),
        ("kgrag_plugins.integrations.llama_index", "llama_index", "llama-index"),
        ("kgrag_plugins.integrations.langchain", "langchain_core", "langchain"),
        ("kgrag_plugins.integrations.mcp", "mcp", "mcp"),
    ],
)
def test_an_adapter_without_its_extra_names_the_extra(module, missing, extra):
    # ``sys.modules[name] = None`` makes ``import name`` raise ImportError, as if it were not installed.
    code = (
        f"import sys\nfor m in [m for m in sys.modules if m.split('.')[0] == {missing!r}]: del sys.modules[m]\n"
        f"sys.modules[{missing!r}] = None\n"
        f"try:\n    import {module}\nexcept ImportError as e:\n    print('ImportError:', e)\n"
        "else:\n    print('imported')"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ImportError:"), out.stdout
    assert f"pip install 'kgrag-plugins[{extra}]'" in out.stdout


def test_top_level_adapter_names_fail_the_same_way():
    code = (
        "import sys\nsys.modules['langgraph'] = None\nimport kgrag_plugins\n"
        "try:\n    kgrag_plugins.frag_graph\nexcept ImportError as e:\n    print('ImportError:', e)\n"
    )
    out = _run(code)
    assert "kgrag-plugins[langgraph]" in out.stdout, out.stdout + out.stderr


def test_typed_and_one_version():
    from importlib.metadata import version

    from kgrag_plugins._version import __version__

    assert (PKG / "py.typed").is_file()
    assert kgrag_plugins.__version__ == __version__ == version("kgrag-plugins")
