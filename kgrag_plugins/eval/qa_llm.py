"""The LLM of ``kgrag bench --qa --llm SPEC``: an endpoint URL, a managed ``vllm serve``, or the
scripted LLM (:mod:`.scripted`). See docs/qa.md.

* ``http(s)://HOST/v1`` -> :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` (model from
  ``--llm-model`` or ``KGRAG_LLM_MODEL``).
* ``vllm:PATH`` -> starts ``vllm serve PATH`` on 127.0.0.1 (a free port) when a ``vllm`` executable
  is found (``PATH``, then ``.venv-vllm/bin/vllm`` in the working directory or the repository),
  waits until ``/v1/models`` answers, and stops it when the bench ends. vLLM is not a dependency of
  this package: it lives in its own virtualenv. The full vLLM backend is a later issue.
* ``scripted`` -> :class:`~kgrag_plugins.eval.scripted.ScriptedQALLM` (plumbing numbers only).
* none -> ``KGRAG_LLM_BASE_URL`` when set, else :class:`ValueError` naming the options.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ..config import env
from ..models.llm import OpenAICompatibleLLM
from .scripted import ScriptedQALLM

__all__ = ["NO_LLM_MESSAGE", "find_vllm", "resolve_llm"]

logger = logging.getLogger(__name__)

NO_LLM_MESSAGE = (
    "--qa needs an LLM: give --llm URL (an OpenAI-compatible endpoint, e.g. http://localhost:8000/v1, "
    "with --llm-model or KGRAG_LLM_MODEL), --llm vllm:PATH (start `vllm serve PATH`; vLLM lives in its "
    "own venv, see docs/qa.md) or --llm scripted (a deterministic offline LLM: plumbing numbers, not "
    "quality); or set KGRAG_LLM_BASE_URL"
)

_REPO = Path(__file__).resolve().parents[2]


def find_vllm() -> str | None:
    """A ``vllm`` executable: on ``PATH``, else ``.venv-vllm/bin/vllm`` (cwd, then the repository)."""
    found = shutil.which("vllm")
    if found:
        return found
    for root in (Path.cwd(), _REPO):
        exe = root / ".venv-vllm" / "bin" / "vllm"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_vllm(path: str, *, timeout: float = 900.0) -> tuple[OpenAICompatibleLLM, Callable[[], None]]:
    """``vllm serve PATH`` on 127.0.0.1; returns the client and a function that stops the server."""
    exe = find_vllm()
    if exe is None:
        raise ValueError(
            f"--llm vllm:{path}: no `vllm` executable on PATH or at .venv-vllm/bin/vllm; the vLLM backend "
            "lives in its own virtualenv (see docs/qa.md), or serve the model yourself and pass --llm URL"
        )
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix="kgrag-vllm-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [exe, "serve", path, "--host", "127.0.0.1", "--port", str(port)]
    logger.info("starting %s (log: %s)", " ".join(cmd), log.name)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()

    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop()
            raise ValueError(f"vllm serve {path} exited with code {proc.returncode}; see {log.name}")
        try:
            if httpx.get(f"{base}/models", timeout=5).status_code == 200:
                return OpenAICompatibleLLM(base_url=base, model=path), stop
        except httpx.HTTPError:
            pass
        time.sleep(2)
    stop()
    raise ValueError(f"vllm serve {path} did not answer within {timeout:.0f} s; see {log.name}")


def resolve_llm(spec: str | None, model: str | None = None) -> tuple[Any, str, Callable[[], None]]:
    """``(llm, description, close)`` for an ``--llm`` value (see the module docstring)."""

    def nothing() -> None:
        return None

    spec = (spec or "").strip()
    if not spec:
        if not env("LLM_BASE_URL"):
            raise ValueError(NO_LLM_MESSAGE)
        llm = OpenAICompatibleLLM.from_env(**({"model": model} if model else {}))
        return llm, f"{llm.base_url} ({llm.model})", llm.close
    if spec == "scripted":
        return ScriptedQALLM(), "scripted", nothing
    if spec.startswith("vllm:"):
        path = spec[len("vllm:") :]
        if not path:
            raise ValueError("--llm vllm:PATH needs a model path or hub id after 'vllm:'")
        llm, stop = start_vllm(path)
        return llm, f"vllm serve {path}", stop
    if spec.startswith(("http://", "https://")):
        llm = OpenAICompatibleLLM(base_url=spec, model=model)
        return llm, f"{spec} ({llm.model})", llm.close
    raise ValueError(f"--llm {spec!r}: " + NO_LLM_MESSAGE.split(": ", 1)[1])
