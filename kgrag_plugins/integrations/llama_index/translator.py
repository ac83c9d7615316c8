"""KG-Translator (docs/methods.md §3, paper ``kg-translator``) as a LlamaIndex retriever.

:class:`ClueTranslationRetriever` wraps :class:`~kgrag_plugins.methods.translator.TranslatorRetriever`:
passages become text nodes (best first), then each clue ``(entity, relation)`` becomes a fact node
with ``metadata["kind"] == "clue"`` and the clue's ``entity``, ``relation``, ``direction``
(``"forward"`` / ``"reverse"``, App. J), traced ``sentences`` (Eq. 8) and ``passage_ids`` (Eq. 9)
in its metadata (hidden from the LLM and the embedder, like every key but ``title``).

Example::

    from llama_index.core.query_engine import RetrieverQueryEngine
    retriever = ClueTranslationRetriever(index, dataset="musique", similarity_top_k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llama_index_llm)
    nodes = await retriever.aretrieve("Who founded the company that makes the iPhone?")
    retriever.last_clues   # [{"entity", "relation", "direction", ...}, ...]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks.base import CallbackManager

from ...models.llm import as_llm
from .._common import DEFAULT_MAX_FACTS
from .retrievers import KGRetriever

if TYPE_CHECKING:  # pragma: no cover
    from ...index.store import KnowledgeIndex
    from ...methods.base import Retriever

__all__ = ["ClueTranslationRetriever"]


class ClueTranslationRetriever(KGRetriever):
    """KG-Translator clue-translation retrieval as a LlamaIndex ``BaseRetriever`` (sync and async).

    From an index (a ParseKG index: ``KnowledgeIndex.build(..., builder="parsekg")``) builds
    ``TranslatorRetriever(index, llm=llm, backend=backend, alpha=alpha, beta=beta, dataset=dataset,
    max_steps=max_steps, **translator_kwargs)``; ``llm`` (ours, LangChain or LlamaIndex) drives the
    prompt-❸ decomposition, ``backend`` the constrained decoding (both optional: LLM-free by
    default). A ready ``TranslatorRetriever`` (or any kgrag ``Retriever`` named ``translator``) is
    used as is; then none of the method options may be given. ``similarity_top_k`` = k passages
    (paper: 5). ``aretrieve`` awaits the method's ``aretrieve`` (a worker thread).
    ``last_evidence`` / ``last_trace`` / :attr:`last_clues` / :attr:`last_direction` describe the
    most recent retrieval; an empty result carries ``last_trace["reason"]``.
    """

    def __init__(
        self,
        index_or_retriever: KnowledgeIndex | Retriever,
        *,
        llm: Any = None,
        backend: Any = None,
        alpha: int | None = None,
        beta: int | None = None,
        dataset: str | None = None,
        max_steps: int = 2,
        similarity_top_k: int = 5,
        include_facts: bool = True,
        max_facts: int | None = DEFAULT_MAX_FACTS,
        score: str = "cosine",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **translator_kwargs: Any,
    ) -> None:
        from ...index.store import KnowledgeIndex
        from ...methods.base import Retriever

        if isinstance(index_or_retriever, KnowledgeIndex):
            from ...methods.translator import TranslatorRetriever

            method: Retriever = TranslatorRetriever(
                index_or_retriever,
                llm=as_llm(llm) if llm is not None else None,
                backend=backend,
                alpha=alpha,
                beta=beta,
                dataset=dataset,
                max_steps=max_steps,
                **translator_kwargs,
            )
        elif isinstance(index_or_retriever, Retriever):
            given = {"llm": llm, "backend": backend, "alpha": alpha, "beta": beta, "dataset": dataset}
            extra = sorted(k for k, v in given.items() if v is not None) + sorted(translator_kwargs)
            if extra or max_steps != 2:
                raise ValueError(
                    f"ClueTranslationRetriever: with a ready retriever, set {extra or ['max_steps']} on "
                    "TranslatorRetriever(...) itself, or pass an index"
                )
            method = index_or_retriever
        else:
            raise TypeError(
                "ClueTranslationRetriever needs a KnowledgeIndex (built with builder='parsekg') or a "
                f"TranslatorRetriever, got {type(index_or_retriever).__name__}"
            )
        super().__init__(
            method,
            similarity_top_k=similarity_top_k,
            include_facts=include_facts,
            max_facts=max_facts,
            score=score,
            callback_manager=callback_manager,
            verbose=verbose,
        )

    @property
    def last_clues(self) -> list[dict[str, Any]]:
        """The clues of the most recent retrieval (``entity``, ``relation``, ``direction``, ...), best first."""
        return list((self.last_trace or {}).get("clues") or [])

    @property
    def last_direction(self) -> list[str]:
        """Translation directions the most recent retrieval ran (``"forward"``, then ``"reverse"`` if needed)."""
        d = (self.last_trace or {}).get("direction") or []
        return [d] if isinstance(d, str) else list(d)
