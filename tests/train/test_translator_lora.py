"""LoRA / QLoRA options of the translator SFT recipe, checkpoints, and the merged vLLM-ready
export (issue 18 item 4), on a tiny random Llama on CPU."""

from __future__ import annotations

import json
import math

import pytest
from tiny_llm import tiny_llama

from kgrag_plugins.train.lora import LORA_TARGETS, QLoRAUnavailableError, export_merged, qlora_quantization
from kgrag_plugins.train.translator import SFTExample, train_translator


def _examples() -> list[SFTExample]:
    rows = [
        ("Who directed Big?", "Big", "directed by"),
        ("Where was Penny Marshall born?", "Penny Marshall", "was born in"),
        ("Which country is Warsaw the capital of?", "Warsaw", "is the capital of"),
        ("Who founded the Red Cross?", "Red Cross", "was founded by"),
    ]
    return [
        SFTExample(
            prompt=f"Translate the question into a clue ENTITY@@RELATION.\n<query>{q}</query>",
            completion=f"{h}@@ {r}",
            question=q,
            head=h,
            relation=r,
            tail="",
            window="",
            passage_id=f"p{i}",
        )
        for i, (q, h, r) in enumerate(rows)
    ]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    import trl  # noqa: F401  (the `train` extra: fails, not skips, without it)

    path = tmp_path_factory.mktemp("tiny") / "base"
    model, tok = tiny_llama(
        [e.prompt + "\n" + e.completion for e in _examples()],
        vocab_size=300,
        hidden_size=64,
        num_heads=1,
        max_positions=256,
        head_dim=64,
    )
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _train(base, out, **kw):
    opts = dict(batch_size=2, per_device_batch_size=2, max_steps=2, max_length=256, use_cpu=True, progress=False)
    opts.update(kw)
    return train_translator(_examples(), base, out, **opts)


@pytest.fixture(scope="module")
def adapter(base, tmp_path_factory):
    """A LoRA adapter trained for 3 steps with a large learning rate, merged export included."""
    out = tmp_path_factory.mktemp("lora") / "adapter"
    assert _train(base, out, lora=True, merge=True, max_steps=3, learning_rate=5e-2) == out
    return out


def test_lora_adapter_files_and_report(adapter):
    report = json.loads((adapter / "train_report.json").read_text())
    assert report["adapter"] == "lora" and report["global_steps"] == 3 and math.isfinite(report["train_loss"])
    assert report["learning_rate"] == 5e-2 and report["merged"] == str(adapter / "merged")
    # what vllm serve --lora-modules reads
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    assert (adapter / "adapter_model.safetensors").is_file()
    assert sorted(cfg["target_modules"]) == sorted(LORA_TARGETS)
    assert cfg["r"] == 16 and cfg["lora_alpha"] == 32 and cfg["lora_dropout"] == 0.05
    assert cfg["base_model_name_or_path"] == str(report["base_model"])
    assert not (adapter / "model.safetensors").exists(), "a LoRA run saves the adapter, not a full model"


def test_adapter_reloads_with_peft_and_changes_outputs(adapter, base):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(adapter)
    ids = tok("Who directed Big?", return_tensors="pt").input_ids
    plain = AutoModelForCausalLM.from_pretrained(base)
    with torch.no_grad():
        before = plain(ids).logits
    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter)
    with torch.no_grad():
        after = peft_model(ids).logits
    assert not torch.allclose(before, after, atol=1e-4), "the trained adapter must change the logits"


def test_merged_export_loads_generates_and_differs_from_base(adapter, base):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    merged_dir = adapter / "merged"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (merged_dir / name).is_file(), name
    assert not (merged_dir / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(merged_dir)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    plain = AutoModelForCausalLM.from_pretrained(base)
    names = {n: p for n, p in plain.named_parameters()}
    changed = [n for n, p in merged.named_parameters() if not torch.equal(p, names[n])]
    assert changed and all(any(t in n for t in LORA_TARGETS) for n in changed), changed[:5]
    tok = AutoTokenizer.from_pretrained(merged_dir)
    ids = tok("Who directed Big?", return_tensors="pt").input_ids
    out = merged.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] > ids.shape[1]
    # the merged weights equal base + adapter: same logits as the PEFT model
    from peft import PeftModel

    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter)
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, peft_model(ids).logits, atol=1e-4)


def test_export_merged_needs_an_adapter_folder(tmp_path, base):
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        export_merged(base, tmp_path / "x")


def test_merge_without_lora_is_an_error(base, tmp_path):
    with pytest.raises(ValueError, match="lora"):
        _train(base, tmp_path / "x", merge=True)


def test_qlora_names_what_is_missing(base, tmp_path):
    """Here (no bitsandbytes, no GPU) QLoRA is a clear error naming what is missing, raised before
    any data is built; where both exist it yields the 4-bit NF4 config."""
    import importlib.util

    import torch

    missing = {
        "bitsandbytes": importlib.util.find_spec("bitsandbytes") is None,
        "CUDA GPU": not torch.cuda.is_available(),
    }
    if not any(missing.values()):
        cfg = qlora_quantization()
        assert cfg.load_in_4bit and cfg.bnb_4bit_quant_type == "nf4"
        return
    with pytest.raises(QLoRAUnavailableError) as err:
        qlora_quantization()
    for name, absent in missing.items():
        assert (name in str(err.value)) == absent, str(err.value)
    assert "--lora" in str(err.value)
    with pytest.raises(QLoRAUnavailableError):
        _train(base, tmp_path / "q", qlora=True)
    assert not (tmp_path / "q" / "sft_data.jsonl").exists()


def test_checkpoint_and_resume(base, tmp_path):
    out = tmp_path / "ckpt"
    _train(base, out, lora=True, max_steps=2, save_steps=1)
    assert (out / "checkpoint-2" / "adapter_model.safetensors").is_file()
    _train(base, out, lora=True, max_steps=3, save_steps=1, resume=True)
    report = json.loads((out / "train_report.json").read_text())
    assert report["resumed_from"] == str(out / "checkpoint-2") and report["global_steps"] == 3
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]


def test_cli_export_merged(adapter, tmp_path, capsys):
    from kgrag_plugins.cli import main

    out = tmp_path / "cli-merged"
    assert main(["train", "export-merged", str(adapter), str(out)]) == 0
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert str(out) in capsys.readouterr().out
    assert main(["train", "export-merged", str(adapter)]) == 2  # needs both folders
