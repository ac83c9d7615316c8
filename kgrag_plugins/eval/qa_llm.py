"""The LLM of ``kgrag bench --qa --llm SPEC``: an endpoint URL, a managed ``vllm serve``, or the
scripted LLM (:mod:`.scripted`). See docs/qa.md.

* ``http(s)://HOST/v1`` -> :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` (model from
  ``--llm-model`` or ``KGRAG_LLM_MODEL``).
* ``vllm:PATH`` -> starts ``vllm serve PATH`` on 127.0.0.1 (a free port) when a ``vllm`` executable
  is found (``PATH``, then ``.venv-vllm/bin/vllm`` in the working directory or the repository),
  waits until ``/v1/models`` answers, and stops it when the bench ends. vLLM is not a dependency of
  this package: it lives in its own virtualenv. The full vLLM backend is a later issue.
* ``local:MODEL`` -> :class:`~kgrag_plugins.models.local_llm.TransformersLLM`, the model in-process
  (``local:smollm2``, a model folder or a ``.gguf`` file; no server).
* ``ollama:MODEL[@URL]`` -> :class:`~kgrag_plugins.models.ollama.OllamaLLM` on Ollama's native
  ``/api/chat`` (``ollama:smollm2:135m``; default URL ``OLLAMA_HOST`` or http://127.0.0.1:11434).
* ``litellm:MODEL`` -> :class:`~kgrag_plugins.models.litellm_llm.LiteLLMLLM` (``litellm`` installed
  by the user; ``litellm:ollama_chat/smollm2:135m``, ``litellm:openai/gpt-4o-mini``).
* ``scripted`` -> :class:`~kgrag_plugins.eval.scripted.ScriptedQALLM` (plumbing numbers only).

``vllm:`` and ``local:`` take a known model name (``smollm2``), converted once by
:func:`~kgrag_plugins.models.local_models.prepare_model`, as well as a path.
* none -> ``KGRAG_LLM_BASE_URL`` when set, else :class:`ValueError` naming the options.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .._secrets import mask_url
from ..config import env
from ..models.llm import OpenAICompatibleLLM
from .scripted import ScriptedQALLM

__all__ = ["NO_LLM_MESSAGE", "resolve_llm", "start_vllm"]

logger = logging.getLogger(__name__)

NO_LLM_MESSAGE = (
    "--qa needs an LLM: give --llm URL (an OpenAI-compatible endpoint, e.g. http://localhost:8000/v1, "
    "with --llm-model or KGRAG_LLM_MODEL), --llm vllm:PATH (start `vllm serve PATH`; vLLM lives in its "
    "own venv, see docs/qa.md), --llm local:MODEL (in-process transformers, e.g. local:smollm2), "
    "--llm ollama:MODEL[@URL] (an Ollama server, e.g. ollama:smollm2:135m), --llm litellm:MODEL (via LiteLLM) or "
    "--llm scripted (a deterministic offline LLM: plumbing numbers, not quality); or set KGRAG_LLM_BASE_URL"
)


def start_vllm(
    path: str, *, timeout: float = 900.0, **client_opts: Any
) -> tuple[OpenAICompatibleLLM, Callable[[], None]]:
    """A managed vLLM server for ``PATH`` (a folder or a known name such as ``smollm2``, which
    :class:`~kgrag_plugins.models.vllm.VLLMServer` resolves and serves under that name) on 127.0.0.1;
    returns the client (``client_opts`` go to it) and a function that stops the server."""
    from ..models.vllm import VLLMNotFoundError, VLLMServer, VLLMStartupError

    try:
        srv = VLLMServer(path, startup_timeout=timeout).start()
    except VLLMNotFoundError as e:
        raise ValueError(
            f"--llm vllm:{path}: no `vllm` executable on PATH or at .venv-vllm/bin/vllm; the vLLM backend "
            "lives in its own virtualenv (`make .venv-vllm`, docs/vllm.md), or serve the model yourself and "
            f"pass --llm URL ({e})"
        ) from e
    except VLLMStartupError as e:
        raise ValueError(f"--llm vllm:{path}: {e}") from e
    return srv.client(**client_opts), srv.stop


def resolve_llm(
    spec: str | None, model: str | None = None, *, deadline: float | None = None, max_tokens: int | None = None
) -> tuple[Any, str, Callable[[], None]]:
    """``(llm, description, close)`` for an ``--llm`` value (see the module docstring). ``deadline``:
    seconds per call (``--llm-deadline``); ``max_tokens``: the default reply budget (``--max-tokens``).

    For the HTTP clients (plain URL, ``vllm:``, ``ollama:``) a ``deadline`` above the per-attempt
    timeout (:data:`~kgrag_plugins.config.DEFAULT_LLM_ATTEMPT_TIMEOUT`, 60 s) also raises that
    timeout to it, by :class:`OpenAICompatibleLLM`'s own default: on a slow CPU server a long note
    legitimately takes minutes, and a 60 s attempt would be abandoned and sent again until the
    deadline ran out (a hung server is still bounded by the deadline)."""
    opts: dict[str, Any] = {}
    if deadline is not None:
        opts["deadline"] = deadline
    if max_tokens is not None:
        opts["default_max_tokens"] = max_tokens

    def nothing() -> None:
        return None

    spec = (spec or "").strip()
    if not spec:
        if not env("LLM_BASE_URL"):
            raise ValueError(NO_LLM_MESSAGE)
        llm = OpenAICompatibleLLM.from_env(**({"model": model} if model else {}), **opts)
        return llm, f"{llm.base_url} ({llm.model})", llm.close
    if spec == "scripted":
        return ScriptedQALLM(), "scripted", nothing
    if spec.startswith("vllm:"):
        path = spec[len("vllm:") :]
        if not path:
            raise ValueError("--llm vllm:PATH needs a model path or hub id after 'vllm:'")
        llm, stop = start_vllm(path, **opts)  # its own ``timeout`` is the server's start-up
        return llm, f"vllm serve {path}", stop
    if spec.startswith("local:"):
        from ..models.local_llm import TransformersLLM

        ref = spec[len("local:") :]
        if not ref:
            raise ValueError("--llm local:MODEL needs a model name (smollm2), folder or .gguf file after 'local:'")
        return TransformersLLM(ref, **opts), f"local:{ref} (transformers, in-process)", nothing
    if spec.startswith("ollama:"):
        from ..models.ollama import OllamaLLM, parse_ollama_spec

        name, url = parse_ollama_spec(spec)
        llm = OllamaLLM(name, url, **opts)
        return llm, f"ollama:{name} at {mask_url(llm.base_url)}", llm.close
    if spec.startswith("litellm:"):
        from ..models.litellm_llm import LiteLLMLLM

        name = spec[len("litellm:") :].strip()
        if not name:
            raise ValueError("--llm litellm:MODEL needs a LiteLLM model string, e.g. litellm:ollama_chat/smollm2:135m")
        try:
            lite = LiteLLMLLM(name, **opts)
        except ImportError as e:
            raise ValueError(str(e)) from None
        return lite, f"litellm:{name}", lite.close
    if spec.startswith(("http://", "https://")):
        llm = OpenAICompatibleLLM(base_url=spec, model=model, **opts)
        return llm, f"{mask_url(spec)} ({llm.model})", llm.close  # the report names no password
    raise ValueError(f"--llm {spec!r}: " + NO_LLM_MESSAGE.split(": ", 1)[1])
