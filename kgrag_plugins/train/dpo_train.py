"""DPO of KG-Infused RAG's generator on KA-stage pairs (Wu et al., arXiv 2506.09542, App. E,
Table 20): :func:`train_generator_dpo`. The pairs come from :mod:`.dpo` (module doc there)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import progress_enabled
from .dpo import DPOPair, load_dpo_data

logger = logging.getLogger(__name__)

__all__ = ["train_generator_dpo"]


def _records(pairs: Sequence[DPOPair | dict[str, Any]], tokenizer: Any) -> list[dict[str, Any]]:
    """TRL preference records: conversational with a chat template, else ``prompt + "\\n"`` (TRL adds EOS)."""
    rows = [p.to_record() if isinstance(p, DPOPair) else dict(p) for p in pairs]
    if getattr(tokenizer, "chat_template", None):
        return [
            {
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "chosen": [{"role": "assistant", "content": r["chosen"]}],
                "rejected": [{"role": "assistant", "content": r["rejected"]}],
            }
            for r in rows
        ]
    return [{"prompt": r["prompt"] + "\n", "chosen": r["chosen"], "rejected": r["rejected"]} for r in rows]


def _reward_curve(trainer: Any) -> list[dict[str, float]]:
    """``[{"step", "accuracy", "margin"}, ...]``: TRL's logged ``rewards/accuracies`` (the share of
    pairs whose implicit reward ranks chosen over rejected) and ``rewards/margins`` per logged step."""
    return [
        {"step": int(h["step"]), "accuracy": round(float(h["rewards/accuracies"]), 4),
         "margin": round(float(h["rewards/margins"]), 4)}
        for h in getattr(trainer.state, "log_history", [])
        if "rewards/accuracies" in h and "rewards/margins" in h and "step" in h
    ]  # fmt: skip


def train_generator_dpo(
    pairs: Sequence[DPOPair | dict[str, Any]] | str | Path,
    base_model: str | Path,
    out_dir: str | Path,
    *,
    lora: bool = False,
    lora_r: int = 16,
    lora_alpha: int = 32,
    qlora: bool = False,
    merge: bool = False,
    max_steps: int | None = None,
    learning_rate: float | None = None,
    beta: float = 0.1,
    epochs: float = 1.0,
    batch_size: int = 4,
    per_device_batch_size: int = 1,
    max_length: int = 8000,
    ref_mixup_alpha: float = 0.6,
    ref_sync_steps: int = 512,
    seed: int = 42,
    resume: bool | str | Path = False,
    save_steps: int = 500,
    progress: bool | None = None,
    **trainer_args: Any,
) -> Path:
    """DPO of ``base_model`` on ``pairs`` (or a JSONL path) with the App. E defaults (module doc);
    saves the model (or the LoRA adapter, plus ``out_dir/merged`` with ``merge``) and the tokenizer
    to ``out_dir`` and a report to ``out_dir/train_report.json``; returns ``out_dir``.
    ``trainer_args`` go to ``DPOConfig`` (e.g. ``use_cpu=True``)."""
    from .lora import (
        device_args,
        export_merged,
        load_causal_lm,
        lora_config,
        loss_curve,
        peak_rss_mb,
        qlora_quantization,
        resume_checkpoint,
        save_adapter,
    )

    lora = lora or qlora
    if merge and not lora:
        raise ValueError("merge=True needs lora=True or qlora=True (a full fine-tune is already a plain model)")
    if qlora:
        qlora_quantization()
    rows = load_dpo_data(pairs) if isinstance(pairs, (str, Path)) else list(pairs)
    if not rows:
        raise ValueError("no DPO pairs to train on")
    try:
        from datasets import Dataset
        from trl import DPOConfig, DPOTrainer
    except ImportError as e:  # pragma: no cover - environment
        raise ImportError(f"DPO training needs the train extra: pip install 'kgrag-plugins[train]' ({e})") from e
    out = Path(out_dir)
    model, tokenizer = load_causal_lm(base_model, qlora=qlora)
    lr = learning_rate if learning_rate is not None else (5e-6 if lora else 5e-7)
    accumulation = max(1, batch_size // max(1, per_device_batch_size))
    config = DPOConfig(
        output_dir=str(out),
        learning_rate=lr,
        beta=beta,
        num_train_epochs=epochs,
        max_steps=-1 if max_steps is None else max_steps,
        per_device_train_batch_size=min(per_device_batch_size, batch_size),
        gradient_accumulation_steps=accumulation,
        max_length=max_length,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        weight_decay=0.0,
        warmup_steps=0,
        sync_ref_model=not lora,
        ref_model_mixup_alpha=ref_mixup_alpha,
        ref_model_sync_steps=ref_sync_steps,
        seed=seed,
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=2,
        disable_tqdm=not progress_enabled(True if progress is None else progress),
        report_to=[],
        **device_args(trainer_args),
    )
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(_records(rows, tokenizer)),
        processing_class=tokenizer,
        peft_config=lora_config(model, r=lora_r, alpha=lora_alpha) if lora else None,
    )
    resume_from = resume_checkpoint(resume, out)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume_from)
    train_s = time.perf_counter() - t0
    save_adapter(trainer, tokenizer, out, base_model)
    report: dict[str, Any] = {
        "pairs": len(rows),
        "train_seconds": round(train_s, 1),
        "peak_rss_mb": peak_rss_mb(),
        "loss_curve": loss_curve(trainer),
        "reward_curve": _reward_curve(trainer),
        "model": str(out),
        "base_model": str(base_model),
        "adapter": "qlora" if qlora else "lora" if lora else None,
        "learning_rate": lr,
        "beta": beta,
        "effective_batch": min(per_device_batch_size, batch_size) * accumulation,
        "sync_ref_model": not lora,
        "train_loss": float(result.training_loss),
        "global_steps": int(result.global_step),
        "resumed_from": resume_from,
    }
    if merge:
        report["merged"] = str(export_merged(out, out / "merged", base_model=base_model))
    (out / "train_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    logger.info("generator DPO: %d steps, loss %.4f -> %s", result.global_step, result.training_loss, out)
    return out
