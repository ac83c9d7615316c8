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
from kgrag_plugins.models.vllm_logits import FQCN

pytestmark = pytest.mark.vllm


#: what engine_script.py passes to VLLMEngine (besides the processor and the adapter)
ENGINE = {"dtype": "bfloat16", "max_model_len": 512, "enforce_eager": True, "default_max_tokens": 8}
BATCH_PROMPTS, BATCH_MAX_TOKENS = 8, 16


def test_offline_engine_protocol_lora_and_processor(
    tmp_path, kg_index, tiny_model, lora_adapter, question_templates, vllm_report_dir
):
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
    spec |= {"engine": ENGINE, "batch_prompts": BATCH_PROMPTS, "batch_max_tokens": BATCH_MAX_TOKENS}
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
    assert len(res["batch"]) == BATCH_PROMPTS and all(isinstance(r, str) for r in res["batch"])
    assert 0 < res["batch_completion_tokens"] <= BATCH_PROMPTS * BATCH_MAX_TOKENS
    assert isinstance(res["lora"][0], str)
    assert res["logprobs"] and all(lp <= 0.0 and tok_ in top for tok_, lp, top in res["logprobs"])
    assert all(len(top) >= 1 for _t, _lp, top in res["logprobs"])
    assert len(res["samples"]) == 4
    assert res["usage"]["completion_tokens"] > 0
    heads = set(names)
    clues = res["clues"]
    assert len(clues) == 2 * len(prompts)
    entity_ok = [c["entity_text"].endswith("@@") and c["entity"] in heads for c in clues]
    # a whitespace-only span (" " then EOS) is dropped by the backends: only real spans count
    spans = [(c["entity"], rel) for c, ok in zip(clues, entity_ok) if ok for rel in c["relations"] if rel.strip()]
    valid = [s for s in spans if ci.is_valid(*s)]
    # the report holds only what this run measured and counted (pytest's temp dir, not docs/)
    body = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "vllm_version": res["vllm_version"],
        "engine": res["engine"],
        "init_seconds": res["init_seconds"],
        "batch_prompts": len(res["batch"]),
        "batch_max_tokens": BATCH_MAX_TOKENS,
        "batch_completion_tokens": res["batch_completion_tokens"],
        "batch_seconds": res["batch_seconds"],
        "constrained_entities": len(clues),
        "constrained_entities_valid": sum(entity_ok),
        "constrained_relation_spans": len(spans),
        "constrained_relation_spans_valid": len(valid),
        "constrained_valid_share": round(len(valid) / len(spans), 3) if spans else None,
    }
    (vllm_report_dir / "vllm-cpu-offline.json").write_text(json.dumps(body, indent=2) + "\n")
    assert res["vllm_version"] and res["engine"]["logits_processors"] == [FQCN]
    assert res["engine"]["lora_modules"] == ["tiny-lora"]
    assert all(entity_ok), [c for c, ok in zip(clues, entity_ok) if not ok][:5]
    for clue in clues:
        for rel in clue["relations"]:
            assert any(rel in " " + h for h in ci.hyperrelations(clue["entity"])), (clue["entity"], rel)
    assert valid == spans, [s for s in spans if s not in valid][:5]
    assert len(spans) >= len(clues)  # most of the 2 spans per entity are real
