"""The offline engine (issue 18 item 1a): VLLMEngine over an in-process `vllm.LLM`, run inside
.venv-vllm by engine_script.py (kgrag imported through the stub of `vllm_pythonpath()`): the LLM
protocol (chat, batch, raw logprobs, n samples), a LoRA adapter by name, and the translator logits
processor loaded with `LLM(logits_processors=[FQCN])`. Marker `vllm` (make test-vllm)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from kgrag_plugins.methods.translator.constraints import ConstraintIndex
from kgrag_plugins.methods.translator.decoding import clue_prompt
from kgrag_plugins.methods.translator.vllm_backend import export_constraints
from kgrag_plugins.models.vllm import DEFAULT_ENV, find_vllm, vllm_pythonpath

pytestmark = pytest.mark.vllm


def test_offline_engine_protocol_lora_and_processor(tmp_path, kg_index, tiny_model, lora_adapter, question_templates):
    exe = find_vllm()
    assert exe is not None, "no vllm executable: run `make .venv-vllm`"
    python = Path(exe).with_name("python")
    path, tok = tiny_model
    adapter, _how = lora_adapter
    ci = ConstraintIndex.from_index(kg_index, tok)
    cons = export_constraints(ci, tmp_path / "constraints.json")
    names = list(ci.names_by_entity("forward"))
    rng = random.Random(5)
    prompts = [clue_prompt(rng.choice(question_templates).format(rng.choice(names))) + "\n" for _ in range(10)]
    spec = {"model": str(path), "adapter": str(adapter), "constraints": str(cons), "prompts": prompts}
    (tmp_path / "in.json").write_text(json.dumps(spec))
    shim = vllm_pythonpath()
    env = {**os.environ, **DEFAULT_ENV, "PYTHONPATH": shim}
    script = Path(__file__).with_name("engine_script.py")
    run = subprocess.run(
        [str(python), str(script), str(tmp_path / "in.json"), str(tmp_path / "out.json")],
        cwd=shim,  # not the checkout: its kgrag_plugins/__init__ needs the main venv's deps
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    res = json.loads((tmp_path / "out.json").read_text())
    assert isinstance(res["complete"], str)
    assert len(res["batch"]) == 8 and all(isinstance(r, str) for r in res["batch"])
    assert isinstance(res["lora"][0], str)
    assert res["logprobs"] and all(lp <= 0.0 and tok_ in top for tok_, lp, top in res["logprobs"])
    assert all(len(top) >= 1 for _t, _lp, top in res["logprobs"])
    assert len(res["samples"]) == 4
    assert res["usage"]["completion_tokens"] > 0
    heads = set(names)
    assert len(res["clues"]) == 2 * len(prompts)
    spans = 0
    for clue in res["clues"]:
        assert clue["entity_text"].endswith("@@") and clue["entity"] in heads, clue
        for rel in clue["relations"]:
            assert any(rel in " " + h for h in ci.hyperrelations(clue["entity"])), (clue["entity"], rel)
            if rel.strip():  # a whitespace-only span (" " then EOS) is dropped by the backends
                spans += 1
                assert ci.is_valid(clue["entity"], rel), (clue["entity"], rel)
    assert spans >= len(res["clues"])  # most of the 2 spans per entity are real
    out = Path(os.environ.get("KGRAG_VLLM_OFFLINE_OUT", "docs/benchmarks/vllm-cpu-offline.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "engine": "vllm-cpu 0.32.0 vllm.LLM, enforce_eager, bfloat16, max_model_len 512, kgrag processor + LoRA",
        "init_seconds": res["init_seconds"],
        "batch_8_x_16_tokens_seconds": res["batch_seconds"],
        "constrained_entities": len(res["clues"]),
        "constrained_relation_spans": spans,
        "constrained_valid_share": 1.0,
    }
    out.write_text(json.dumps(body, indent=2) + "\n")
