"""Shared pieces of the LLM training recipes (``kgrag train translator`` / ``generator-dpo``):
LoRA / QLoRA set-up, checkpoint resumption, and the merged, vLLM-ready export.

* **LoRA** (Hu et al. 2021; not in the KG-Translator or KG-Infused papers, which fine-tune all
  parameters): :func:`lora_config` — ``r`` 16, ``alpha`` 32, dropout 0.05 on every linear
  projection of the decoder blocks. For Llama / Qwen / Mistral style models these are
  :data:`LORA_TARGETS` (what ``vllm serve --enable-lora --lora-modules`` accepts); a model without
  those names gets PEFT's ``"all-linear"`` (every linear layer but the output head).
* **QLoRA** (Dettmers et al. 2023): 4-bit NF4 base weights with double quantisation and bf16
  compute, LoRA on top. It needs ``bitsandbytes`` and a CUDA GPU; :func:`qlora_quantization`
  raises :class:`QLoRAUnavailableError` naming whichever is missing.
* **Checkpoints**: :func:`resume_checkpoint` turns ``resume=True`` into the newest
  ``checkpoint-N`` folder under the output directory (``None`` when there is none yet).
* **Export**: :func:`export_merged` folds an adapter into its base model and writes a plain HF
  folder (``config.json``, ``*.safetensors``, tokenizer files) that ``vllm serve DIR`` or
  ``AutoModelForCausalLM.from_pretrained(DIR)`` load without PEFT.

``torch`` / ``transformers`` / ``peft`` are imported inside the functions (extra ``train``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "LORA_TARGETS",
    "QLoRAUnavailableError",
    "device_args",
    "export_merged",
    "load_causal_lm",
    "lora_config",
    "qlora_quantization",
    "resume_checkpoint",
    "save_adapter",
]

#: The linear projections of a Llama / Qwen2 / Mistral decoder block (vLLM's LoRA modules).
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class QLoRAUnavailableError(RuntimeError):
    """QLoRA was asked for but ``bitsandbytes`` or a CUDA GPU is missing (the message says which)."""


def _need(what: str) -> None:
    raise ImportError(f"{what} needs the train extra: pip install 'kgrag-plugins[train]'")


def lora_config(
    model: Any,
    *,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.05,
    targets: list[str] | str | None = None,
) -> Any:
    """A PEFT ``LoraConfig`` for a causal LM: ``targets`` default = the :data:`LORA_TARGETS`
    present in ``model`` (all of them for Llama / Qwen), else ``"all-linear"``."""
    try:
        from peft import LoraConfig
    except ImportError:  # pragma: no cover - environment
        _need("LoRA")
    if r < 1 or alpha < 1:
        raise ValueError(f"LoRA rank and alpha must be >= 1, got r={r}, alpha={alpha}")
    if targets is None:
        names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        present = [t for t in LORA_TARGETS if t in names]
        targets = present if present else "all-linear"
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, task_type="CAUSAL_LM")


def qlora_quantization() -> Any:
    """The 4-bit NF4 ``BitsAndBytesConfig`` of QLoRA, or :class:`QLoRAUnavailableError` when
    ``bitsandbytes`` is not installed or no CUDA GPU is visible (bitsandbytes' 4-bit kernels need one)."""
    import importlib.util

    import torch

    missing = []
    if importlib.util.find_spec("bitsandbytes") is None:
        missing.append("the bitsandbytes package (pip install bitsandbytes)")
    if not torch.cuda.is_available():
        missing.append("a CUDA GPU (torch.cuda.is_available() is False)")
    if missing:
        raise QLoRAUnavailableError(
            "--qlora (4-bit QLoRA) needs " + " and ".join(missing) + "; use --lora (16-bit LoRA, runs on CPU) instead"
        )
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def load_causal_lm(base_model: str | Path, *, qlora: bool = False) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of ``base_model`` (a local path or hub id); with ``qlora`` the base is
    loaded in 4 bit and prepared for k-bit training. The tokenizer gets ``pad = eos`` when it has
    no pad token."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:  # pragma: no cover - environment
        _need("training")
    from ..models.local_models import resolve_model

    base_model = resolve_model(base_model)  # "smollm2" or a .gguf -> its converted folder
    kwargs: dict[str, Any] = {}
    if qlora:
        kwargs.update(quantization_config=qlora_quantization(), device_map={"": 0})
    tokenizer = AutoTokenizer.from_pretrained(str(base_model))
    model = AutoModelForCausalLM.from_pretrained(str(base_model), **kwargs)
    if qlora:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def device_args(trainer_args: dict[str, Any]) -> dict[str, Any]:
    """``trainer_args`` with ``use_cpu=True`` added when no CUDA GPU is visible and the caller did not
    choose (TRL's configs default to bf16, which the trainer refuses on a CPU unless told ``use_cpu``)."""
    import torch

    if "use_cpu" not in trainer_args and not torch.cuda.is_available():
        return {**trainer_args, "use_cpu": True}
    return dict(trainer_args)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (``ru_maxrss``; Linux reports KiB)."""
    import resource
    import sys

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1 << 20) if sys.platform == "darwin" else rss / 1024, 1)


def loss_curve(trainer: Any) -> list[dict[str, float]]:
    """``[{"step", "loss"}, ...]`` from a trainer's log history (one entry per ``logging_steps``)."""
    return [
        {"step": int(h["step"]), "loss": round(float(h["loss"]), 4)}
        for h in getattr(trainer.state, "log_history", [])
        if "loss" in h and "step" in h
    ]


def resume_checkpoint(resume: bool | str | Path | None, out_dir: str | Path) -> str | None:
    """What to pass to ``Trainer.train(resume_from_checkpoint=...)``: a given path as is; ``True``:
    the newest ``checkpoint-N`` under ``out_dir`` (``None``, logged, when there is none yet)."""
    if not resume:
        return None
    if not isinstance(resume, bool):
        path = Path(resume)
        if not path.is_dir():
            raise FileNotFoundError(f"checkpoint {path} not found")
        return str(path)
    from transformers.trainer_utils import get_last_checkpoint

    out_dir = Path(out_dir)
    last = get_last_checkpoint(str(out_dir)) if out_dir.is_dir() else None
    if last is None:
        logger.info("--resume: no checkpoint under %s yet, starting from step 0", out_dir)
    else:
        logger.info("resuming from %s", last)
    return last


def save_adapter(trainer: Any, tokenizer: Any, out_dir: str | Path, base_model: str | Path) -> Path:
    """Save the trained model (a LoRA adapter: ``adapter_config.json`` + ``adapter_model.safetensors``;
    else the full model) and the tokenizer to ``out_dir``. The adapter's ``base_model_name_or_path``
    is set to ``base_model`` as given, so :func:`export_merged` and vLLM find the base again."""
    out_dir = Path(out_dir)
    model = trainer.model
    peft_config = getattr(model, "peft_config", None)
    if peft_config:
        for cfg in peft_config.values():
            cfg.base_model_name_or_path = str(base_model)
        model.save_pretrained(str(out_dir), safe_serialization=True)
    else:
        trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return out_dir


def export_merged(adapter_dir: str | Path, out_dir: str | Path, *, base_model: str | Path | None = None) -> Path:
    """Merge the LoRA adapter in ``adapter_dir`` into its base model (``base_model``, default the
    adapter's ``base_model_name_or_path``) and save a vLLM-ready HF folder to ``out_dir``:
    ``config.json``, ``model.safetensors`` (sharded when large), the tokenizer (the adapter's copy
    when it has one, else the base's) and ``generation_config.json``. The base is loaded in its
    stored dtype, never quantised (merging into 4-bit weights loses the adapter's precision)."""
    try:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:  # pragma: no cover - environment
        _need("the merged export")
    adapter_dir, out_dir = Path(adapter_dir), Path(out_dir)
    cfg_path = adapter_dir / "adapter_config.json"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path} not found: {adapter_dir} is not a LoRA adapter folder")
    if base_model is None:
        base_model = json.loads(cfg_path.read_text(encoding="utf-8")).get("base_model_name_or_path")
        if not base_model:
            raise ValueError(f"{cfg_path} names no base_model_name_or_path; pass base_model=...")
    from ..models.local_models import resolve_model

    base_model = resolve_model(base_model)
    base = AutoModelForCausalLM.from_pretrained(str(base_model), dtype="auto")
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out_dir), safe_serialization=True)
    tok_src = adapter_dir if (adapter_dir / "tokenizer_config.json").is_file() else Path(str(base_model))
    AutoTokenizer.from_pretrained(str(tok_src)).save_pretrained(str(out_dir))
    logger.info("merged %s into %s -> %s", adapter_dir, base_model, out_dir)
    return out_dir
