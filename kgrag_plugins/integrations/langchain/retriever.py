"""Any kgrag retriever as a LangChain ``BaseRetriever`` (``invoke`` / ``ainvoke`` / ``batch``).

Shape translation (DESIGN.md, "Conventions for the integrations"; the same items as the
LlamaIndex nodes, :func:`~kgrag_plugins.integrations._common.scored_items`)::

    Evidence.passages -> Document(id=passage.id, page_content=text,
                                  metadata={"score", "kind": "passage", "passage_id", "title", "rank", ...})
    Evidence.facts    -> Document(id="<kind>:<hash>", page_content=fact.display,
                                  metadata={"score", "kind": "fact"|"path"|"clue", ...})

Passages first (the method's order), then at most ``max_facts`` facts (default 5;
``include_facts=False`` for none). ``metadata["score"]`` is cosine-like in [0, 1] (the method's own
score in ``metadata["method_score"]``; ``score="method"`` keeps the method's scale).

Example::

    from langchain_core.tools import create_retriever_tool
    from kgrag_plugins.integrations.langchain import KGRAGLangChainRetriever

    retriever = KGRAGLangChainRetriever.from_index(index, method="activation", k=5)
    docs = retriever.invoke("Which river flows through Warsaw?")
    tool = create_retriever_tool(retriever, "search_kg", "Search the knowledge graph corpus.")
"""

from __future__ import annotations

import contextvars
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from ...types import Evidence
from .._common import DEFAULT_MAX_FACTS, make_method, scored_items

__all__ = ["KGRAGLangChainRetriever", "evidence_to_documents"]

#: The ``Evidence`` of the latest retrieval in this context (thread / asyncio task), so concurrent
#: calls never overwrite each other's trace.
_LAST: contextvars.ContextVar[Evidence | None] = contextvars.ContextVar("kgrag_langchain_last_evidence", default=None)


def evidence_to_documents(
    evidence: Evidence,
    *,
    index: Any = None,
    include_facts: bool = True,
    max_facts: int | None = DEFAULT_MAX_FACTS,
    retriever: str = "",
    score: str = "cosine",
) -> list[Document]:
    """Passages then facts as LangChain ``Document`` s (``metadata["score"]``, ``["kind"]``, ...)."""
    items = scored_items(
        evidence, index=index, include_facts=include_facts, max_facts=max_facts, retriever=retriever, score=score
    )
    return [Document(id=it.id, page_content=it.text, metadata={**it.metadata, "score": it.score}) for it in items]


class KGRAGLangChainRetriever(BaseRetriever):
    """A kgrag ``Retriever`` (``retrieve(query, k) -> Evidence``) as a LangChain retriever.

    ``k``: passages per query; ``invoke(query, k=3)`` overrides it for one call (LangChain's
    standard-test contract; with ``include_facts=False`` a call returns exactly ``k`` documents when
    the method finds that many). ``ainvoke`` awaits the method's ``aretrieve``; ``batch`` /
    ``abatch`` come from LangChain's ``Runnable``. :meth:`last_evidence` returns the latest
    ``Evidence`` (with its trace) of the *calling* context (a ``contextvars`` value, never
    shared instance state).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Any
    k: int = Field(default=5, ge=1)
    include_facts: bool = True
    max_facts: int | None = DEFAULT_MAX_FACTS
    score: str = "cosine"

    @field_validator("retriever")
    @classmethod
    def _check_retriever(cls, value: Any) -> Any:
        if not callable(getattr(value, "retrieve", None)):
            raise TypeError(f"expected a kgrag Retriever with retrieve(query, k), got {type(value).__name__}")
        return value

    @field_validator("score")
    @classmethod
    def _check_score(cls, value: str) -> str:
        if value not in ("cosine", "method"):
            raise ValueError(f"score must be 'cosine' or 'method', got {value!r}")
        return value

    @classmethod
    def from_index(
        cls, index: Any, method: str = "activation", *, llm: Any = None, k: int = 5, **options: Any
    ) -> KGRAGLangChainRetriever:
        """Run ``method`` (``"activation"``, ``"sa_rag"``, ``"kg_infused"``, ``"frag"``,
        ``"translator"``, ``"know3"``, ``"dense"`` ...) over ``index``. ``include_facts`` /
        ``max_facts`` / ``score`` / ``tags`` / ``metadata`` configure the adapter; other ``options``
        go to the method (``llm``: ours, LangChain or LlamaIndex, for the methods that use one)."""
        own = {
            key: options.pop(key)
            for key in ("include_facts", "max_facts", "score", "tags", "metadata")
            if key in options
        }
        return cls(retriever=make_method(index, method, llm=llm, **options), k=k, **own)

    @staticmethod
    def last_evidence() -> Evidence | None:
        """The ``Evidence`` of the latest retrieval in the calling context (thread / task)."""
        return _LAST.get()

    def _documents(self, evidence: Evidence) -> list[Document]:
        _LAST.set(evidence)
        return evidence_to_documents(
            evidence,
            index=getattr(self.retriever, "index", None),
            include_facts=self.include_facts,
            max_facts=self.max_facts,
            retriever=getattr(self.retriever, "name", ""),
            score=self.score,
        )

    def _k(self, k: int | None, kwargs: dict[str, Any]) -> int:
        """``k`` given to ``invoke`` / ``ainvoke`` (``retriever.invoke(q, k=3)``), else ``self.k``.
        LangChain forwards every invoke keyword here; ``verbose`` is its own, anything else raises."""
        unknown = sorted(set(kwargs) - {"verbose"})
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {unknown} for {type(self).__name__}; invoke takes k=")
        return self.k if k is None else k

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        return self._documents(self.retriever.retrieve(query, self._k(k, kwargs)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        return self._documents(await self.retriever.aretrieve(query, self._k(k, kwargs)))
