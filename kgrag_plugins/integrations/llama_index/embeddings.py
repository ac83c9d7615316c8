"""Embedders across the LlamaIndex boundary, both ways.

- :class:`LlamaIndexEmbedder`: a LlamaIndex ``BaseEmbedding`` as our
  :class:`~kgrag_plugins.models.embed.Embedder` (``KnowledgeIndex.build(..., embedder=embed_model)``
  goes through :func:`~kgrag_plugins.models.embed.as_embedder`).
- :class:`KGRAGEmbedding`: our embedder (default MiniLM) as a LlamaIndex ``BaseEmbedding``, e.g.
  ``Settings.embed_model = KGRAGEmbedding()`` so a ``VectorStoreIndex`` beside our retrievers
  embeds with the same model, offline. ``as_embedder`` unwraps it back to our embedder (so an index
  built through it keeps our embedder's name in its manifest).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

from ...models.embed import default_embedder
from ...models.embed_base import Embedder, normalize_rows

__all__ = ["KGRAGEmbedding", "LlamaIndexEmbedder"]


class LlamaIndexEmbedder:
    """A LlamaIndex ``BaseEmbedding`` behind our ``Embedder`` protocol (rows L2-normalised).

    ``name`` is ``"llama-index/<model_name>"`` (recorded in an index manifest: reopen the index
    with the same model); ``dim`` is probed with one embedding unless given. Passages and queries
    both use ``get_text_embedding_batch`` (our protocol has one ``embed``).
    """

    def __init__(self, embed_model: Any, *, dim: int | None = None, name: str | None = None) -> None:
        if not callable(getattr(embed_model, "get_text_embedding_batch", None)):
            raise TypeError(f"expected a LlamaIndex BaseEmbedding, got {type(embed_model).__name__}")
        self.embed_model = embed_model
        self.name = name or f"llama-index/{getattr(embed_model, 'model_name', None) or type(embed_model).__name__}"
        self.dim = int(dim) if dim is not None else len(embed_model.get_text_embedding("dimension probe"))

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.embed_model.get_text_embedding_batch(texts, show_progress=bool(progress))
        return normalize_rows(np.asarray(vecs, dtype=np.float32))

    def __repr__(self) -> str:
        return f"LlamaIndexEmbedder(name={self.name!r}, dim={self.dim})"


class KGRAGEmbedding(BaseEmbedding):
    """Our embedder as a LlamaIndex ``BaseEmbedding`` (default: the bundled MiniLM, offline)."""

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder | None = None, **kwargs: Any) -> None:
        inner = embedder or default_embedder()
        kwargs.setdefault("model_name", inner.name)
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(**kwargs)
        self._embedder = inner

    @classmethod
    def class_name(cls) -> str:
        return "KGRAGEmbedding"

    @property
    def kgrag_embedder(self) -> Embedder:
        """The wrapped kgrag embedder (:func:`~kgrag_plugins.models.embed.as_embedder` unwraps to it)."""
        return self._embedder

    def _one(self, text: str) -> list[float]:
        return self._embedder.embed([text], progress=False)[0].tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._one(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._one(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._one(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts, progress=False).tolist()
