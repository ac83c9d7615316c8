"""The retriever contract every method implements (framework-free)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod

from ..types import Evidence


class Retriever(ABC):
    """``retrieve(query, k) -> Evidence``; ``aretrieve`` runs it off the event loop by default.

    Subclasses implement :meth:`_retrieve`. Adapters (LlamaIndex, LangGraph) wrap this.
    """

    #: Short name used by ``kgrag bench --retrievers``.
    name: str = "retriever"

    def retrieve(self, query: str, k: int = 5) -> Evidence:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        return self._retrieve(query, k)

    async def aretrieve(self, query: str, k: int = 5) -> Evidence:
        return await asyncio.to_thread(self.retrieve, query, k)

    @abstractmethod
    def _retrieve(self, query: str, k: int) -> Evidence: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
