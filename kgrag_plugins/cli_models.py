"""``kgrag models`` and ``kgrag serve-llm``: local models (provisioning) and a managed vLLM server."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _cmd_models(args: argparse.Namespace) -> int:
    """``kgrag models list | prepare REF | path REF`` (models/local_models.py)."""
    from .models.local_models import KNOWN_MODELS, models_dir, prepare_model, resolve_model

    if args.action == "list":
        for name, known in KNOWN_MODELS.items():
            try:
                where = resolve_model(name, prepare=False)
            except FileNotFoundError:
                where = f"not prepared (install: {known.install}; then: kgrag models prepare {name})"
            print(f"{name}\t{known.name} ({known.license})\t{where}")
        print(f"models directory: {models_dir()} (KGRAG_MODELS_DIR)")
        return 0
    if not args.ref:
        raise ValueError(f"kgrag models {args.action} needs a model: {', '.join(KNOWN_MODELS)} or a .gguf file")
    if args.action == "prepare":
        print(prepare_model(args.ref, force=args.force))
    else:
        print(resolve_model(args.ref, prepare=False))
    return 0


def _cmd_serve_llm(args: argparse.Namespace) -> int:
    """``vllm serve MODEL`` until Ctrl-C (docs/vllm.md)."""
    import time

    from .models.vllm import VLLMServer, VLLMStartupError

    loras: dict[str, str] = {}
    for item in args.lora or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--lora {item!r}: expected NAME=PATH")
        loras[name] = path
    server = VLLMServer(
        args.model,
        host=args.host,
        port=args.port,
        max_model_len=args.max_model_len,
        lora_modules=loras,
        max_lora_rank=args.max_lora_rank,
        logits_processors=args.logits_processor or [],
    )
    try:
        server.start()
    except VLLMStartupError as e:
        print(f"kgrag serve-llm: error: {e}", file=sys.stderr)
        return 1
    print(f"vllm serve {args.model}: {server.base_url} (pid {server.pid}, log {server.log_file})")
    print(f"export KGRAG_LLM_BASE_URL={server.base_url} KGRAG_LLM_MODEL={server.name}", flush=True)
    try:
        while server.running():
            time.sleep(1.0)
        print(f"kgrag serve-llm: server exited; see {server.log_file}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


def add_model_parsers(sub: Any) -> None:
    """Register ``models`` and ``serve-llm`` on the ``kgrag`` sub-command parser."""
    m = sub.add_parser("models", help="local models: list the known ones, convert one (prepare), print its folder")
    m.add_argument(
        "action",
        choices=["list", "prepare", "path"],
        help="list: the known models and where they are; prepare: convert one for local use; path: print its folder",
    )
    m.add_argument("ref", nargs="?", default=None, help="a known name (smollm2) or a .gguf file")
    m.add_argument("--force", action="store_true", help="prepare: convert again even when already prepared")
    m.set_defaults(func=_cmd_models)

    v = sub.add_parser("serve-llm", help="serve a local model with vLLM (needs `make .venv-vllm`) until Ctrl-C")
    v.add_argument(
        "model", help="a known name (smollm2), a model directory, a .gguf file or a hub id (offline: not a hub id)"
    )
    v.add_argument("--host", default="127.0.0.1", help="address the server listens on")
    v.add_argument("--port", type=int, default=None, help="default: a free port")
    v.add_argument("--lora", action="append", metavar="NAME=PATH", help="LoRA adapter to serve (repeatable)")
    v.add_argument("--max-lora-rank", type=int, default=None, help="vLLM's --max-lora-rank (default: 16)")
    v.add_argument(
        "--logits-processor",
        action="append",
        metavar="FQCN",
        help="vLLM V1 logits processor MODULE:CLASS (repeatable); the translator's is "
        "kgrag_plugins.models.vllm_logits:KGTranslatorLogitsProcessor",
    )
    v.add_argument(
        "--max-model-len", type=int, default=None, help="vLLM's --max-model-len, context tokens (default: the model's)"
    )
    v.set_defaults(func=_cmd_serve_llm)
