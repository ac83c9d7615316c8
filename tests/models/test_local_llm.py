"""The real local LLM: model provisioning (``kgrag models``), the in-process transformers backend and
its schema enforcement, with SmolLM2-135M-Instruct (``make test`` prepares it; a missing model fails
with the command to run, it is never skipped)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from kgrag_plugins.cli import main
from kgrag_plugins.models.llm import LLM, LLMTimeoutError
from kgrag_plugins.models.local_models import KNOWN_MODELS, models_dir, prepare_model, resolve_model
from kgrag_plugins.models.replies import check_text, complete_validated
from kgrag_plugins.models.structured import OutputSchema, choice_schema, json_schema, regex_schema


@pytest.fixture(scope="module")
def smollm2_dir() -> str:
    try:
        return resolve_model("smollm2")  # converts on first use (~30 s) when `make models` did not
    except FileNotFoundError as exc:
        pytest.fail(f"SmolLM2 is not installed: {exc} (run `make models` or `kgrag models prepare smollm2`)")


@pytest.fixture(scope="module")
def llm(smollm2_dir: str):
    from kgrag_plugins.models.local_llm import TransformersLLM

    return TransformersLLM("smollm2", deadline=60)


# --------------------------------------------------------------------------- provisioning


def test_prepared_folder_is_a_plain_transformers_model(smollm2_dir: str) -> None:
    from pathlib import Path

    folder = Path(smollm2_dir)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert (folder / "tokenizer.json").is_file()
    meta = json.loads((folder / "kgrag-model.json").read_text())
    assert meta["parameters"] == 134_515_008  # SmolLM2-135M
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())


def test_prepare_again_is_instant_and_concurrent_callers_agree(smollm2_dir: str) -> None:
    t0 = time.perf_counter()
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(str(prepare_model("smollm2")))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.perf_counter() - t0 < 2.0
    assert got == [smollm2_dir] * 3


def test_resolution_rules(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KGRAG_MODELS_DIR", str(tmp_path / "models"))
    assert models_dir() == tmp_path / "models"
    with pytest.raises(FileNotFoundError, match="kgrag models prepare smollm2"):
        resolve_model("smollm2", prepare=False)
    (tmp_path / "folder").mkdir()
    assert resolve_model(str(tmp_path / "folder")) == str(tmp_path / "folder")
    assert resolve_model("org/some-hub-model") == "org/some-hub-model"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ValueError, match="empty model reference"):
        resolve_model("  ")
    with pytest.raises(ValueError, match="cannot prepare"):
        prepare_model(str(tmp_path / "folder"))
    assert "smollm2" in KNOWN_MODELS


def test_cli_models_list_path_and_bad_ref(smollm2_dir: str, capsys) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct" in out and smollm2_dir in out
    assert main(["models", "path", "smollm2"]) == 0
    assert capsys.readouterr().out.strip() == smollm2_dir
    assert main(["models", "prepare", "not-a-model"]) == 2
    assert "cannot prepare" in capsys.readouterr().err


# --------------------------------------------------------------------------- generation


def test_greedy_reply_is_deterministic_and_bounded(llm) -> None:
    assert isinstance(llm, LLM) and llm.supports_schema
    q = "What is the capital of France? Answer in a few words."
    calls0, completion0 = llm.usage["calls"], llm.usage["completion_tokens"]
    a, b = llm.complete(q, max_tokens=12), llm.complete(q, max_tokens=12)
    assert a == b and "Paris" in a
    assert llm.usage["calls"] == calls0 + 2
    assert llm.usage["completion_tokens"] - completion0 <= 24


def test_stop_strings_cut_the_reply(llm) -> None:
    reply = llm.complete("Count from 1 to 10, separated by commas.", stop=["5"], max_tokens=40)
    assert "5" not in reply and "4" in reply


def test_choice_regex_and_json_schemas_are_enforced(llm) -> None:
    yn = choice_schema("yn", ["Yes", "No"])
    assert llm.complete("Is the sky green? Answer Yes or No.", schema=yn, max_tokens=4) in ("Yes", "No")
    year = regex_schema("year", r"[12][0-9]{3}")
    reply = llm.complete("In what year did World War II end?", schema=year, max_tokens=6)
    assert year.matches(reply)
    ans = json_schema(
        "ans", {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 40}}, "required": ["answer"]}
    )
    reply = llm.complete('What is the capital of France? Reply as JSON {"answer": ...}', schema=ans, max_tokens=40)
    assert isinstance(json.loads(reply)["answer"], str)


def test_unconstrained_model_breaks_the_shape_that_the_constraint_keeps() -> None:
    """Off vs on on the same prompt: the constraint is what makes the reply valid."""
    from kgrag_plugins.models.local_llm import TransformersLLM

    free = TransformersLLM("smollm2", structured=False)
    yn = choice_schema("yn", ["Yes", "No"])
    prompt = "Is the sky green? Answer Yes or No."
    assert not free.supports_schema
    assert free.complete(prompt, schema=yn, max_tokens=8) not in ("Yes", "No")  # 135M: "No, the sky ..."


def test_complete_validated_passes_schema_and_reports_replies(llm) -> None:
    seen: list[tuple[str, bool, bool]] = []

    class Recording:
        supports_schema = True

        def complete(self, prompt, **kw):
            return llm.complete(prompt, **kw)

        def record_reply(self, step, valid, constrained):
            seen.append((step, valid, constrained))

    yn = choice_schema("yn", ["Yes", "No"], max_tokens=3)

    def validate(reply: str) -> str:
        return check_text(reply, single_line=True)

    out = complete_validated(Recording(), "Is water wet? Answer Yes or No.", validate, step="judge", schema=yn)
    assert out in ("Yes", "No") and seen == [("judge", True, True)]


def test_deadline_raises_timeout(smollm2_dir: str) -> None:
    from kgrag_plugins.models.local_llm import TransformersLLM

    slow = TransformersLLM("smollm2", deadline=0.05)
    with pytest.raises(LLMTimeoutError, match="deadline"):
        slow.complete("Write a long story about a dragon.", max_tokens=200)


def test_long_prompt_is_cut_with_a_marker(llm, caplog) -> None:
    ctx = llm.context
    try:
        llm.context = 400
        long = "The river Vistula flows through Warsaw. " * 400 + "Question: which river flows through Warsaw?"
        with caplog.at_level("WARNING"):
            reply = llm.complete(long, max_tokens=8)
        assert reply.strip()
        assert "cut by" in caplog.text
    finally:
        llm.context = ctx


def test_logprobs_and_async(llm) -> None:
    comp = llm.complete_logprobs("Is Paris in France? Answer Yes or No.", max_tokens=2, top_logprobs=5)
    assert comp.has_logprobs and len(comp.tokens) <= 2
    first = comp.tokens[0]
    assert first.token in first.top and first.logprob <= 0.0 and len(first.top) >= 5
    assert comp.text.startswith(first.token.strip()) or first.token.strip() in comp.text
    raw = llm.complete_logprobs("The capital of France is", max_tokens=2, raw=True)
    assert raw.tokens and raw.text.strip()
    assert asyncio.run(llm.acomplete("Say hello.", max_tokens=5)).strip()


def test_output_schema_checks() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        OutputSchema("x")
    with pytest.raises(ValueError, match="exactly one"):
        OutputSchema("x", regex="a", choice=("a",))
    with pytest.raises(ValueError, match="name"):
        OutputSchema("bad name", regex="a")
    s = choice_schema("c", ["a.b", "c"])
    assert s.to_regex() == r"a\.b|c" and s.matches("a.b") and not s.matches("ab")
    j = json_schema("j", {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]})
    assert j.matches('{"k": 1}') and not j.matches('{"x": 1}') and not j.matches("nope")
    assert j.response_format()["json_schema"]["strict"] is True and s.response_format() is None


def test_vllm_spec_serves_the_known_name_with_the_client_options(smollm2_dir: str, monkeypatch, tmp_path) -> None:
    """`--llm vllm:smollm2`: the server gets the converted folder, answers to "smollm2", and the
    client gets --llm-deadline / --max-tokens (no server is started: start() is replaced)."""
    from kgrag_plugins.eval.qa_llm import resolve_llm
    from kgrag_plugins.models import vllm as V

    commands: list[list[str]] = []

    def fake_start(self):
        self.port = 1
        commands.append(self.command())
        return self

    monkeypatch.setattr(V.VLLMServer, "start", fake_start)
    monkeypatch.setattr(V, "find_vllm", lambda: str(tmp_path / "vllm"))
    llm, desc, stop = resolve_llm("vllm:smollm2", deadline=7, max_tokens=11)
    cmd = commands[0]
    assert cmd[2] == smollm2_dir and cmd[cmd.index("--served-model-name") + 1] == "smollm2"
    assert "--enforce-eager" in cmd
    assert llm.model == "smollm2" and llm.deadline == 7 and llm.default_max_tokens == 11
    assert llm.timeout == 60.0  # the client's attempt, not start_vllm's start-up timeout
    assert llm.structured == "vllm" and desc == "vllm serve smollm2"
    stop()
