"""The translator SFT runs made on a lent GPU (docs/training.md, "On one GPU").

Trains SmolLM2-135M-Instruct on pairs built elsewhere (a CPU run's ``OUT/sft_data.jsonl``: the GPU
box has no benchmark data) with :func:`kgrag_plugins.train.translator.train_translator`, one run
per configuration, and writes each run's report (loss curve, wall time, peak GPU memory, package
versions) and its LoRA adapter in float16 (small enough to copy back) under ``--out``::

    python benchmarks/train_translator_gpu.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf \
        --sft-data runs/translator-smollm2-cpu/sft_data.jsonl --out gpu-out --runs A

The same training from the command line: ``kgrag train translator --base-model smollm2 --sft-data
FILE --lora --learning-rate 2e-4 --epochs 3 --merge --out DIR`` (the CLI keeps the recipe's batch:
8 per device x 2).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from pathlib import Path

logger = logging.getLogger("train_translator_gpu")

#: run name -> train_translator options (on top of batch 16, max length 384)
RUNS = {
    "A": dict(lora=True, lora_r=16, lora_alpha=32, learning_rate=2e-4, epochs=3.0),
    "B": dict(lora=True, lora_r=16, lora_alpha=32, learning_rate=4e-4, epochs=6.0),
    "C": dict(lora=False, learning_rate=1e-5, epochs=3.0, batch_size=64, per_device_batch_size=64),
}


def main() -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from kgrag_plugins.models.local_models import prepare_model
    from kgrag_plugins.train.sft_pairs import load_sft_data
    from kgrag_plugins.train.translator import train_translator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, help="SmolLM2's GGUF file (or a known name: smollm2)")
    ap.add_argument("--sft-data", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/translator-gpu-runs"))
    ap.add_argument("--runs", default="A", help=f"comma list of {', '.join(RUNS)}")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import peft
    import transformers
    import trl

    cuda = torch.cuda.is_available()
    versions = {
        "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
        "trl": trl.__version__, "gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
        "python": platform.python_version(),
    }  # fmt: skip
    t0 = time.perf_counter()
    folder = prepare_model(args.gguf)
    prepare_s = time.perf_counter() - t0
    examples = load_sft_data(args.sft_data)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in [r.strip() for r in args.runs.split(",") if r.strip()]:
        kw = dict(batch_size=16, per_device_batch_size=16, max_length=384, save_steps=100_000, logging_steps=5,
                  progress=False)  # fmt: skip
        kw.update(RUNS[name])
        work = args.work / name
        t1 = time.perf_counter()
        train_translator(examples, str(folder), work, **kw)
        report = json.loads((work / "train_report.json").read_text())
        report.pop("sample", None)
        report.update(
            run=name, wall_seconds=round(time.perf_counter() - t1, 1), opts=kw, versions=versions,
            prepare_seconds=round(prepare_s, 1),
            peak_gpu_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
        )  # fmt: skip
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        if kw.get("lora"):
            report["adapter_config"] = json.loads((work / "adapter_config.json").read_text())
            weights = load_file(str(work / "adapter_model.safetensors"))
            save_file(
                {k: v.to(torch.float16).contiguous() for k, v in weights.items()}, str(args.out / f"{name}.safetensors")
            )
        (args.out / f"{name}.json").write_text(json.dumps(report, indent=1))
        logger.info("run %s: %.1fs, train loss %.4f", name, report["wall_seconds"], report["train_loss"])


if __name__ == "__main__":
    main()
