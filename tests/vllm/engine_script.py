"""Run by .venv-vllm/bin/python from test_vllm_engine.py (vLLM is not importable in .venv): drives
kgrag's VLLMEngine (offline `vllm.LLM`) with the translator logits processor and a LoRA adapter,
and writes what it got to a JSON file for the test to check. Usage: engine_script.py IN.json OUT.json"""

from __future__ import annotations

import json
import sys
import time


def main(inp: str, out: str) -> None:
    import vllm

    from kgrag_plugins.models.vllm import VLLMEngine
    from kgrag_plugins.models.vllm_logits import FQCN

    spec = json.loads(open(inp).read())
    t0 = time.perf_counter()
    lora = {"tiny-lora": spec["adapter"]}
    eng = VLLMEngine(spec["model"], logits_processors=[FQCN], lora_modules=lora, **spec["engine"])
    # what this run used, read back from the process: the installed vLLM and the engine's settings
    res: dict = {"init_seconds": round(time.perf_counter() - t0, 1), "vllm_version": vllm.__version__}
    res["engine"] = {
        **spec["engine"],
        "logits_processors": list(eng.logits_processors),
        "lora_modules": sorted(eng.lora_modules),
    }
    res["complete"] = eng.complete([{"role": "user", "content": "What is the capital of France?"}])
    n, max_tokens = spec["batch_prompts"], spec["batch_max_tokens"]
    before = dict(eng.usage)
    t0 = time.perf_counter()
    res["batch"] = eng.complete_batch([f"Question {i}: capital of France?" for i in range(n)], max_tokens=max_tokens)
    res["batch_seconds"] = round(time.perf_counter() - t0, 3)
    res["batch_completion_tokens"] = eng.usage["completion_tokens"] - before["completion_tokens"]
    res["lora"] = eng.complete_batch(["Where was Hank Snow born?"], lora="tiny-lora")
    comp = eng.complete_logprobs("Paris is the", max_tokens=5, top_logprobs=3, raw=True)
    res["logprobs"] = [[t.token, t.logprob, t.top] for t in comp.tokens]
    res["samples"] = [r["text"] for r in eng.generate(["Berlin is"], n=4, max_tokens=6, temperature=1.0)[0]]
    clues = []
    for prompt in spec["prompts"]:
        xargs = {"kgrag_index": spec["constraints"], "kgrag_stage": "entity"}
        rows = eng.generate([prompt], n=2, max_tokens=40, temperature=1.0, extra_args=xargs)[0]
        for row in rows:
            entity = row["text"].split("@@")[0].strip()
            rx = {"kgrag_index": spec["constraints"], "kgrag_stage": "relation", "kgrag_entity": entity}
            rel = eng.generate([prompt + entity + "@@"], n=2, max_tokens=17, temperature=1.0, extra_args=rx)[0]
            clues.append({"entity_text": row["text"], "entity": entity, "relations": [r["text"] for r in rel]})
    res["clues"] = clues
    res["usage"] = eng.usage
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    main(sys.argv[1], sys.argv[2])
