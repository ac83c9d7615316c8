"""Fast checks of the vLLM lane without vLLM (default suite; issue 18): the constraint file read by
the logits processor gives exactly ``allowed_tokens_fn``'s masks (hypothesis), request-argument
validation, the server command line and environment, the stub package for the vLLM venv, the
backend's candidate parsing/ranking over a scripted engine, ``choose_backend`` and the CLI flags."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_llm import tiny_llama

from kgrag_plugins.index.parsekg import ParseKG
from kgrag_plugins.methods.translator.constraints import SEPARATOR, ConstraintIndex, format_clue
from kgrag_plugins.methods.translator.decoding import (
    HFConstrainedBackend,
    ProjectionBackend,
    allowed_tokens_fn,
)
from kgrag_plugins.methods.translator.vllm_backend import (
    VLLMConstrainedBackend,
    choose_backend,
    export_constraints,
    processor_loaded,
)
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.models.vllm import VLLMServer, vllm_pythonpath
from kgrag_plugins.models.vllm_logits import FQCN, TranslatorConstraints, load_constraints, request_args

HEADS = ["Hank Snow", "Johnny Cash", "Marie Curie", "Ada Lovelace", "Alan Turing", "Nikola Tesla"]
TAILS = ["Liverpool", "Kingsland", "Warsaw", "London", "Smiljan", "1914"]
TEMPLATES = ["## was born in ##.", "## recorded more than ## albums.", "## moved to ## in ##.", "## won the ## prize."]


def _parsekg() -> ParseKG:
    rng = random.Random(0)
    kg = ParseKG()
    for i, head in enumerate(HEADS):
        for t in rng.sample(TEMPLATES, 2):
            tail = rng.choice(TAILS)
            kg.add_sentence(f"p{i}", t.replace("##", head, 1).replace("##", tail), t, [head], [tail])
    return kg


@pytest.fixture
def shim_in_tmp(tmp_path, monkeypatch):
    """vllm_pythonpath() writes its stub package in the temp dir: this test's, not the system's."""
    import tempfile

    from kgrag_plugins.models import vllm as vllm_mod

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(vllm_mod, "_shim_dir", None)
    yield tmp_path
    assert str(vllm_mod._shim_dir).startswith(str(tmp_path))


@pytest.fixture(scope="module")
def lane(tmp_path_factory):
    kg = _parsekg()
    texts = [kg.sentence(s) for s in range(kg.num_sentences)] + HEADS + TAILS
    model, tok = tiny_llama(texts, vocab_size=300, hidden_size=64, num_heads=1, head_dim=64, max_positions=64)
    ci = ConstraintIndex(kg, tok)
    path = export_constraints(ci, tmp_path_factory.mktemp("cons") / "c.json")
    return kg, model, tok, ci, path


def test_constraint_file_round_trip(lane):
    _kg, _m, _tok, ci, path = lane
    cons = load_constraints(path)
    assert load_constraints(path) is cons  # cached per path + mtime
    assert cons.names("forward") == list(ci.names_by_entity("forward"))
    assert cons.names("reverse") == list(ci.names_by_entity("reverse"))
    assert cons.sep == ci.encode(SEPARATOR) and cons.eos == ci.end_id
    with pytest.raises(ValueError, match="kgrag-translator-constraints"):
        TranslatorConstraints({"format": "other", "version": 1})


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_processor_masks_equal_allowed_tokens_fn(lane, data):
    """The vLLM-side masks are the HF backend's, for entity and relation prefixes on and off the
    constraint (a valid prefix, optionally followed by an arbitrary token)."""
    _kg, _m, _tok, ci, path = lane
    cons = load_constraints(path)
    direction = data.draw(st.sampled_from(["forward", "reverse"]))
    names = list(ci.names_by_entity(direction))
    name = data.draw(st.sampled_from(names))
    sep = ci.encode(SEPARATOR)
    noise = data.draw(st.lists(st.integers(0, 320), max_size=2))
    if data.draw(st.booleans()):
        seq = ci.encode(name) + sep + [ci.end_id]
        prefix = seq[: data.draw(st.integers(0, len(seq)))] + noise
        want = allowed_tokens_fn(ci, "entity", direction=direction, separator_ids=sep)(prefix)
        assert cons.entity_allowed(prefix, direction) == want
    else:
        seqs = ci.relation_index(name, direction).sequences
        s = data.draw(st.sampled_from(seqs)) if seqs else ()
        i = data.draw(st.integers(0, len(s)))
        j = data.draw(st.integers(i, len(s)))
        prefix = list(s[i:j]) + noise
        want = allowed_tokens_fn(ci, "relation", entity=name, direction=direction)(prefix)
        assert cons.relation_allowed(name, prefix, direction) == want


def test_request_args_validation(tmp_path):
    assert request_args(None) is None and request_args({"other": 1}) is None
    a = request_args({"kgrag_index": "/x.json", "kgrag_stage": "relation", "kgrag_entity": " Hank Snow "})
    assert (a.stage, a.entity, a.direction) == ("relation", "Hank Snow", "forward")
    assert request_args({"kgrag_probe_token": 3}).probe_token == 3
    for bad, msg in [
        ({"kgrag_stage": "entity"}, "kgrag_index"),
        ({"kgrag_index": "/x", "kgrag_stage": "bogus"}, "kgrag_stage"),
        ({"kgrag_index": "/x", "kgrag_stage": "relation"}, "kgrag_entity"),
        ({"kgrag_index": "/x", "kgrag_stage": "entity", "kgrag_direction": "up"}, "kgrag_direction"),
        ({"kgrag_probe_token": True}, "kgrag_probe_token"),
    ]:
        with pytest.raises(ValueError, match=msg):
            request_args(bad)


def test_server_command_and_env(tmp_path, monkeypatch, shim_in_tmp):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    srv = VLLMServer(
        "some/hub-model",
        port=8123,
        executable=str(tmp_path / "bin" / "vllm"),
        lora_modules={"sft": str(adapter)},
        max_lora_rank=32,
        logits_processors=[FQCN],
    )
    cmd = srv.command()
    assert cmd[:3] == [str(tmp_path / "bin" / "vllm"), "serve", "some/hub-model"]
    i = cmd.index("--lora-modules")
    assert "--enable-lora" in cmd and cmd[i + 1] == f"sft={adapter.resolve()}"
    assert cmd[cmd.index("--max-lora-rank") + 1] == "32"
    assert cmd[cmd.index("--logits-processors") + 1] == FQCN
    assert srv.has_logits_processor(FQCN) and processor_loaded(srv)
    assert srv._env()["PYTHONPATH"].split(os.pathsep)[0] == vllm_pythonpath()
    plain = VLLMServer("m", port=1, executable=str(tmp_path / "vllm"))
    assert "--logits-processors" not in plain.command() and "--enable-lora" not in plain.command()
    assert not processor_loaded(plain)
    # a local model directory is passed absolute, under its given name
    local = tmp_path / "model"
    local.mkdir()
    monkeypatch.chdir(tmp_path)
    cmd = VLLMServer("model", port=1, executable=str(tmp_path / "vllm")).command()
    assert cmd[2] == str(local.resolve()) and cmd[cmd.index("--served-model-name") + 1] == "model"


def test_stub_package_imports_processor_without_core_deps(shim_in_tmp):
    """In the vLLM venv kgrag's __init__ cannot run (no scipy/spaCy); the stub skips it."""
    code = (
        "import sys, kgrag_plugins.models.vllm_logits as m, kgrag_plugins.models.vllm as v;"
        "assert 'kgrag_plugins.index' not in sys.modules, sorted(sys.modules);"
        "assert 'kgrag_plugins.models.embed' not in sys.modules;"
        "print(m.FQCN, v.VLLMEngine.__name__)"
    )
    shim = vllm_pythonpath()
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=shim, env={**os.environ, "PYTHONPATH": shim}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [FQCN, "VLLMEngine"]


class ScriptedEngine:
    """A stand-in for VLLMEngine: scripted ``generate`` rows, the requests recorded."""

    def __init__(self, rows):
        self.engine, self.rows, self.calls = object(), list(rows), []
        self.logits_processors = [FQCN]

    def generate(self, prompts, **kw):
        self.calls.append((prompts, kw))
        return [self.rows.pop(0)]


def _row(text, ids, lp):
    return {"text": text, "token_ids": ids, "cumulative_logprob": lp, "logprobs": []}


def test_backend_parses_ranks_and_filters(lane):
    _kg, _m, _tok, ci, path = lane
    sep, eos = ci.encode(SEPARATOR), ci.end_id
    snow, curie = ci.encode("Hank Snow"), ci.encode("Marie Curie")
    engine = ScriptedEngine(
        [
            [
                _row("Hank Snow@@", snow + sep + [eos], -3.0),
                _row("Marie Curie@@", curie + sep + [eos], -1.0),
                _row("Hank Snow@@", snow + sep + [eos], -2.0),
                _row("Hank Sn", snow[:1], -0.5),  # cut by max_tokens: not a name
            ],
            [_row(" was born in", [1], -1.0), _row(" flew to the moon", [2], -0.1)],
        ]
    )
    backend = VLLMConstrainedBackend(engine, path, mode="processor")
    assert backend.entity_candidates("Where was Hank Snow born?", 3)[:2] == ["Marie Curie", "Hank Snow"]
    prompts, kw = engine.calls[0]
    assert kw["n"] == 6 and kw["extra_args"] == {
        "kgrag_index": str(path.resolve()),
        "kgrag_stage": "entity",
        "kgrag_direction": "forward",
    }
    assert "Where was Hank Snow born?" in prompts[0] and "<query>" in prompts[0]  # data-delimited prompt ❶
    rels = backend.relations("Where was Hank Snow born?", "Hank Snow", 2)
    prompts, kw = engine.calls[1]
    assert prompts[0].endswith("Hank Snow" + SEPARATOR) and kw["extra_args"]["kgrag_entity"] == "Hank Snow"
    hyper = ci.hyperrelations("Hank Snow")
    assert rels == (["was born in"] if any("was born in" in h for h in hyper) else [])
    assert backend.is_valid("Hank Snow", hyper[0]) and not backend.is_valid("Hank Snow", "flew to the moon")


def test_backend_structured_requests(lane):
    _kg, _m, _tok, ci, path = lane
    hyper = ci.hyperrelations("Hank Snow")[0]
    words = hyper.split()
    engine = ScriptedEngine([[_row("Hank Snow", [], -1.0)], [_row(" " + " ".join(words[:2]), [], -1.0)]])
    backend = VLLMConstrainedBackend(engine, path, mode="structured")
    assert backend.entities("q?", 1) == ["Hank Snow"]
    assert engine.calls[0][1]["structured"] == {"choice": list(ci.names_by_entity("forward"))}
    assert engine.calls[0][1]["extra_args"] is None
    assert backend.relations("q?", "Hank Snow", 1) == [" ".join(words[:2])]
    import re

    rx = engine.calls[1][1]["structured"]["regex"]
    assert re.fullmatch(rx, " " + hyper) and re.fullmatch(rx, words[-1]) and not re.fullmatch(rx, "zzz")


def test_choose_backend_fallback_order(lane):
    kg, model, tok, _ci, _path = lane
    index = SimpleNamespace(parsekg=kg, graph=SimpleNamespace(name_of=lambda e: e), embedder=None)
    assert isinstance(choose_backend(index, (model, tok)), HFConstrainedBackend)
    assert isinstance(choose_backend(index, ScriptedLLM(["x"])), ProjectionBackend)
    engine = ScriptedEngine([])
    backend = choose_backend(index, engine, tokenizer=tok)
    assert isinstance(backend, VLLMConstrainedBackend) and backend.mode == "processor"
    engine.logits_processors = []
    assert choose_backend(index, engine).mode == "structured"


def test_cli_serve_llm_flags():
    from kgrag_plugins.cli import build_parser

    args = build_parser().parse_args(
        ["serve-llm", "m", "--lora", "a=/p", "--logits-processor", FQCN, "--max-lora-rank", "32"]
    )
    assert (args.lora, args.logits_processor, args.max_lora_rank) == (["a=/p"], [FQCN], 32)


def test_format_clue_is_what_the_relation_stage_continues():
    """The relation prompt ends with ``ENTITY@@``; the decoded span starts with the prefix space."""
    assert format_clue("Hank Snow", "was born in").startswith("Hank Snow" + SEPARATOR + " ")
