"""What every embedding backend shares: the :class:`Embedder` protocol, row normalisation and a
quiet model load (the backends: :mod:`.embed` and :mod:`.embed_onnx`)."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["DEFAULT_EMBEDDER_NAME", "PROGRESS_MIN", "Embedder", "normalize_rows", "offsets_tokenizer", "quiet_load"]

#: The name the default embedder (all-MiniLM-L6-v2, torch or ONNX) reports as ``Embedder.name``.
DEFAULT_EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: With ``progress=None``, inputs of at least this many texts (long work) get a progress bar,
#: unless ``KGRAG_PROGRESS=0``; shorter lazy work on a first query shows none.
PROGRESS_MIN = 1000


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array with unit-norm rows."""
        ...


def normalize_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (x / norms).astype(np.float32, copy=False)


def quiet_load(factory, path: str, device: str):
    """Load a model without transformers' per-weight "Loading weights" progress bar."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a sentence-transformers dependency
        return factory(path, device=device)
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return factory(path, device=device)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def offsets_tokenizer(tok: Any) -> Any:
    """A copy of a ``tokenizers.Tokenizer`` without truncation or padding: it gives the character
    offsets of every token of a long text (:mod:`.embed_windows`)."""
    from tokenizers import Tokenizer

    plain = Tokenizer.from_str(tok.to_str())
    plain.no_truncation()
    plain.no_padding()
    return plain


def span_offsets(tok: Any, text: str) -> list[tuple[int, int]]:
    """Character spans of ``text``'s tokens (no special tokens) under ``tok`` (an offsets tokenizer)."""
    return [tuple(o) for o in tok.encode(text, add_special_tokens=False).offsets]
