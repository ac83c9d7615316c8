"""Embedders across the LangChain boundary, both ways.

- :class:`KGRAGEmbeddings`: our embedder (default: the bundled MiniLM, offline) as a LangChain
  ``Embeddings`` (for a LangChain vector store beside our retrievers).
- :class:`LangChainEmbedder`: a user's LangChain ``Embeddings`` as our
  :class:`~kgrag_plugins.models.embed.Embedder`; ``KnowledgeIndex.build(..., embedder=embeddings)``
  goes through :func:`~kgrag_plugins.models.embed.as_embedder`, which also unwraps a
  :class:`KGRAGEmbeddings` back to our embedder.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from ...models.embed import default_embedder
from ...models.embed_base import Embedder, normalize_rows

__all__ = ["KGRAGEmbeddings", "LangChainEmbedder"]


class KGRAGEmbeddings(Embeddings):
    """Our embedder as a LangChain ``Embeddings`` (unit-norm vectors as lists of floats)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder or default_embedder()

    @property
    def kgrag_embedder(self) -> Embedder:
        """The wrapped kgrag embedder (:func:`~kgrag_plugins.models.embed.as_embedder` unwraps to it)."""
        return self._embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(list(texts), progress=False).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed([text], progress=False)[0].tolist()

    def __repr__(self) -> str:
        return f"KGRAGEmbeddings({self._embedder!r})"


class LangChainEmbedder:
    """A LangChain ``Embeddings`` behind our ``Embedder`` protocol (rows L2-normalised).

    ``name`` is ``"langchain/<model>"`` (the ``model`` / ``model_name`` attribute, else the class
    name; recorded in an index manifest: reopen the index with the same model). ``dim`` is probed
    with one ``embed_query`` unless given. Passages and queries both go through
    ``embed_documents`` (our protocol has one ``embed``).
    """

    def __init__(self, embeddings: Any, *, dim: int | None = None, name: str | None = None) -> None:
        if not callable(getattr(embeddings, "embed_documents", None)):
            raise TypeError(f"expected a LangChain Embeddings, got {type(embeddings).__name__}")
        self.embeddings = embeddings
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        self.name = name or f"langchain/{model if isinstance(model, str) and model else type(embeddings).__name__}"
        self.dim = int(dim) if dim is not None else len(embeddings.embed_query("dimension probe"))

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize_rows(np.asarray(self.embeddings.embed_documents(texts), dtype=np.float32))

    def __repr__(self) -> str:
        return f"LangChainEmbedder(name={self.name!r}, dim={self.dim})"
