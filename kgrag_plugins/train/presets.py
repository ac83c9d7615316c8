"""Training presets: settings that make one run of a recipe fit a machine (``--preset``).

A preset fills the options the caller left unset; anything given explicitly wins. The ``cpu``
presets are sized for a 135M-parameter base (SmolLM2-135M-Instruct, ``--base-model smollm2``) on 2
CPU cores, so that one run on the shared halves finishes in at most an hour (the wall time and
peak RSS are recorded in ``train_report.json``). They are our settings, not the papers': the
papers fine-tune 1B-8B models on GPUs with full fine-tuning (KG-Translator App. F.2: lr 1e-5, batch
64, max length 2048) or DPO (KG-Infused RAG App. E); docs/training.md gives the GPU commands.

* ``translator`` / ``cpu``: a LoRA adapter (r 16, alpha 32, lr 2e-4: low-rank updates need a larger
  step than the paper's full fine-tune), one epoch over the App. F.1 pairs, effective batch 16
  (8 x 2 accumulation), max length 384 tokens (prompt ❶ with the question and the clue fit in
  about 200), a checkpoint every 20 steps (``--resume``), the merged export for vLLM.
* ``generator-dpo`` / ``cpu``: LoRA as above at lr 5e-5 (DPO moves a policy slowly; the paper's
  5e-7 is for a full fine-tune of 8B), effective batch 8, max length 1024 (the KA prompt with six
  passages' triples), a checkpoint every 10 steps, the merged export.
* ``kge`` / ``cpu``: ComplEx 256 with N3 0.1 and early stopping (patience 3, at most 200 epochs), the
  best CPU setting of MetaQA's half-KB sweep (validation MRR 0.178 in about 150 s on 2 cores;
  docs/kge.md). ``kge`` / ``gpu``: ComplEx 1000, N3 0.1, 1-N scoring over every entity at batch 100
  (Lacroix et al. 2018's ComplEx-N3 recipe) on ``cuda``; on an H200 it reached validation MRR 0.193
  in 43 s on the same half KB (docs/kge.md). Both stop on validation MRR, so ``--epochs`` is a cap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS", "apply_preset"]

#: recipe -> preset name -> options of the recipe's train function (``train_translator`` /
#: ``train_generator_dpo``; keys that are not its parameters go to the trainer config).
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "translator": {
        "cpu": {
            "lora": True,
            "lora_r": 16,
            "lora_alpha": 32,
            "learning_rate": 2e-4,
            "epochs": 1.0,
            "batch_size": 16,
            "per_device_batch_size": 8,
            "max_length": 384,
            "save_steps": 20,
            "merge": True,
            "logging_steps": 1,
        },
    },
    "kge": {
        "cpu": {"dim": 256, "reg": 0.1, "epochs": 200, "patience": 3},
        "gpu": {
            "dim": 1000,
            "reg": 0.1,
            "full_softmax": True,
            "batch_size": 100,
            "epochs": 200,
            "patience": 3,
            "device": "cuda",
        },
    },
    "generator-dpo": {
        "cpu": {
            "lora": True,
            "lora_r": 16,
            "lora_alpha": 32,
            "learning_rate": 5e-5,
            "epochs": 1.0,
            "batch_size": 8,
            "per_device_batch_size": 2,
            "max_length": 1024,
            "save_steps": 10,
            "merge": True,
            "logging_steps": 1,
        },
    },
}


def apply_preset(recipe: str, preset: str | None, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` options completed by ``PRESETS[recipe][preset]``: an option whose given value is
    ``None`` (unset) takes the preset's value; ``False`` flags are unset too (a preset may turn on
    ``lora`` / ``merge``). Without a preset, ``given`` minus its ``None`` values."""
    chosen = {k: v for k, v in given.items() if v is not None}
    if preset is None:
        return chosen
    table = PRESETS.get(recipe, {})
    if preset not in table:
        raise ValueError(f"unknown preset {preset!r} for {recipe}; available: {', '.join(table) or 'none'}")
    out = dict(chosen)
    for key, value in table[preset].items():
        if key not in chosen or chosen[key] is False:
            out[key] = value
    return out
