"""LlamaIndex adapters: any kgrag :class:`~kgrag_plugins.methods.base.Retriever` as a ``BaseRetriever``.

Shape translation only (DESIGN.md, "Conventions for the integrations")::

    Evidence.passages -> NodeWithScore(TextNode(id_=passage.id, text, metadata={"title", "kind": "passage"}), score)
    Evidence.facts    -> NodeWithScore(TextNode(text=fact.display, metadata={"kind": "fact"|"path"|"clue"}), fact.score)

Passages come first (in the method's order), then at most ``max_facts`` facts (default 5;
``include_facts=False`` for none). Scores are cosine-like in [0, 1] (``max(0, cos(query, item))``
from the index's vectors; ``score="method"`` keeps the method's own scale), so LlamaIndex's
``SimilarityPostprocessor(similarity_cutoff=...)`` reads them; the method's score is in
``metadata["method_score"]``. Only ``title`` is shown to the LLM / embedder; the other metadata
keys are excluded from both. Each retrieval runs in a ``<Class>._retrieve`` span (inside LlamaIndex's
``retrieve`` span) with one child span and ``KGRAGStepEvent`` per method step (:mod:`.instrumentation`).
The last ``Evidence`` (with its trace: seeds, activation rounds, ...)
is kept on the retriever as ``last_evidence`` / ``last_trace`` instead of being copied into every
node. ``get_prompts()`` / ``update_prompts()`` expose the LLM prompts of the wrapped method
(:mod:`.prompt_mixin`).

Example::

    from llama_index.core.query_engine import RetrieverQueryEngine
    retriever = SpreadingActivationRetriever(index, variant="activation", similarity_top_k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llama_index_llm)

    # FRAG: hop-aware path retrieval; paths become nodes with metadata["kind"] == "path"
    retriever = HopAwareRetriever(index, classifier="hop_classifier.npz", k=5)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle

from ...models.llm import as_llm
from ...names import resolve_name
from ...types import Evidence
from .._common import DEFAULT_MAX_FACTS, scored_items
from .instrumentation import dispatcher, emit_evidence
from .nodes import item_to_node
from .prompt_mixin import method_prompts, update_method_prompts

if TYPE_CHECKING:  # pragma: no cover
    from ...index.store import KnowledgeIndex
    from ...methods.base import Retriever
    from ...methods.frag import FRAGRetriever

__all__ = [
    "HopAwareRetriever",
    "KGRetriever",
    "SpreadingActivationRetriever",
    "VARIANTS",
]


class KGRetriever(BaseRetriever):
    """Wrap any kgrag ``Retriever`` (``retrieve(query, k) -> Evidence``) as a LlamaIndex retriever.

    ``similarity_top_k`` is the ``k`` passed to the method (number of passages). Facts follow the
    passages when ``include_facts`` (at most ``max_facts``, default 5; ``None``: all). ``score``:
    ``"cosine"`` (default; needs the method's ``index``, else the method's scores are kept) or
    ``"method"``. ``aretrieve`` awaits the wrapped retriever's ``aretrieve``. ``last_evidence`` /
    ``last_trace`` hold the most recent result.
    """

    def __init__(
        self,
        retriever: Retriever,
        *,
        similarity_top_k: int = 5,
        include_facts: bool = True,
        max_facts: int | None = DEFAULT_MAX_FACTS,
        score: str = "cosine",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if score not in ("cosine", "method"):
            raise ValueError(f"score must be 'cosine' or 'method', got {score!r}")
        if not callable(getattr(retriever, "retrieve", None)):
            raise TypeError(f"expected a kgrag Retriever with retrieve(query, k), got {type(retriever).__name__}")
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be >= 1, got {similarity_top_k}")
        self.retriever = retriever
        self.similarity_top_k = similarity_top_k
        self.include_facts = include_facts
        self.max_facts = max_facts
        self.score = score
        self.last_evidence: Evidence | None = None
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def last_trace(self) -> dict[str, Any] | None:
        """The trace of the most recent retrieval (seeds, rounds, route, ...), or ``None``."""
        return self.last_evidence.trace if self.last_evidence is not None else None

    def _to_nodes(self, evidence: Evidence) -> list[NodeWithScore]:
        self.last_evidence = evidence
        emit_evidence(evidence, getattr(self.retriever, "name", ""))  # step spans + events (.instrumentation)
        items = scored_items(
            evidence,
            index=getattr(self.retriever, "index", None),
            include_facts=self.include_facts,
            max_facts=self.max_facts,
            retriever=getattr(self.retriever, "name", ""),
            score=self.score,
        )
        return [item_to_node(it) for it in items]

    # PromptMixin: the wrapped method's LLM prompts (empty for LLM-free methods)
    def _get_prompts(self) -> PromptDictType:
        return method_prompts(self.retriever)

    def _update_prompts(self, prompts: PromptDictType) -> None:
        update_method_prompts(self.retriever, prompts)

    @dispatcher.span
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._to_nodes(self.retriever.retrieve(query_bundle.query_str, self.similarity_top_k))

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._to_nodes(await self.retriever.aretrieve(query_bundle.query_str, self.similarity_top_k))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.retriever!r}, similarity_top_k={self.similarity_top_k})"


def _build_activation(index: KnowledgeIndex, **kw: Any) -> Retriever:
    from ...methods.activation import ActivationRetriever

    if kw.get("llm") is not None:
        raise ValueError("variant 'activation' is LLM-free; use variant='kg_infused' to retrieve with an LLM")

    return ActivationRetriever(index, **kw)


def _build_sa_rag(index: KnowledgeIndex, **kw: Any) -> Retriever:
    from ...methods.sa_rag import SARAGRetriever

    if kw.get("llm") is not None:
        raise ValueError(
            "SA-RAG retrieval is LLM-free; its LLM runs the CoT loop: use sa_rag_graph(index, llm) "
            "or SARAGCoT(SARAGRetriever(index), llm).run(question)"
        )
    kw.pop("llm", None)
    return SARAGRetriever(index, **kw)


def _build_kg_infused(index: KnowledgeIndex, **kw: Any) -> Retriever:
    from ...methods.kg_infused import KGInfusedRetriever

    return KGInfusedRetriever(index, **kw)


#: ``variant`` -> builder of the framework-free method (imported lazily).
VARIANTS = {"activation": _build_activation, "sa_rag": _build_sa_rag, "kg_infused": _build_kg_infused}


class SpreadingActivationRetriever(KGRetriever):
    """Spreading-activation retrieval over a :class:`~kgrag_plugins.index.store.KnowledgeIndex`.

    ``variant``:

    - ``"activation"`` (default, LLM-free): :class:`~kgrag_plugins.methods.activation.ActivationRetriever`
    - ``"sa_rag"``: :class:`~kgrag_plugins.methods.sa_rag.SARAGRetriever` (SA-RAG retrieval step)
    - ``"kg_infused"``: :class:`~kgrag_plugins.methods.kg_infused.KGInfusedRetriever` (KG-Infused
      RAG activation + query expansion + dual retrieval; uses ``llm`` when given)

    ``llm`` may be one of our LLMs, a LangChain chat model or a LlamaIndex LLM (``as_llm``); it is
    passed to the method as ``llm=`` (only when given; ``"activation"`` takes none).
    ``method_kwargs`` go to the method's constructor. The method object is ``self.retriever``.
    """

    def __init__(
        self,
        index: KnowledgeIndex,
        variant: str = "activation",
        llm: Any = None,
        similarity_top_k: int = 5,
        include_facts: bool = True,
        *,
        max_facts: int | None = DEFAULT_MAX_FACTS,
        score: str = "cosine",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **method_kwargs: Any,
    ) -> None:
        variant = resolve_name(variant, VARIANTS)  # sa-rag -> sa_rag
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(map(repr, VARIANTS))}")
        if llm is not None:
            method_kwargs["llm"] = as_llm(llm)
        self.variant = variant
        super().__init__(
            VARIANTS[variant](index, **method_kwargs),
            similarity_top_k=similarity_top_k,
            include_facts=include_facts,
            max_facts=max_facts,
            score=score,
            callback_manager=callback_manager,
            verbose=verbose,
        )


class HopAwareRetriever(KGRetriever):
    """FRAG's hop-aware path retrieval (docs/methods.md §2, paper ``frag``) as a LlamaIndex retriever.

    Each question is routed to FRAG's simple (≤ 2 hops) or complex pipeline by ``classifier`` (a
    trained :class:`~kgrag_plugins.methods.frag.hop_classifier.HopClassifier` or its saved path; ``None``:
    the LLM-free heuristic) unless ``mode`` forces one. The top paths become fact nodes
    (``metadata["kind"] == "path"``, with ``nodes`` / ``relations`` / ``inverse`` / ``answer`` /
    ``hops``; score = FRAG's path score, best first) after the passages linked to path entities (text
    nodes; none for a KG without passages; at most ``k``). ``last_trace`` holds FRAG's trace (``route``,
    ``p_complex``, ``topic_entities``, ``answers``; ``error`` when no topic entity was found: the result
    is then empty). ``llm`` is only used by ``self.retriever.answer(question)`` (FRAG's reasoning
    prompt). Pass a ready :class:`~kgrag_plugins.methods.frag.FRAGRetriever` instead of an index to
    reuse it; ``frag_kwargs`` go to its constructor otherwise.
    """

    def __init__(
        self,
        index_or_retriever: KnowledgeIndex | FRAGRetriever,
        *,
        classifier: Any = None,
        mode: str = "auto",
        llm: Any = None,
        k: int = 5,
        max_facts: int | None = DEFAULT_MAX_FACTS,
        score: str = "cosine",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **frag_kwargs: Any,
    ) -> None:
        from ...index.store import KnowledgeIndex
        from ...methods.frag import FRAGRetriever

        if isinstance(index_or_retriever, FRAGRetriever):
            if classifier is not None or mode != "auto" or llm is not None or frag_kwargs:
                raise ValueError(
                    "HopAwareRetriever: with a ready FRAGRetriever, configure classifier/mode/llm/options "
                    "on FRAGRetriever(...) itself, or pass an index"
                )
            frag = index_or_retriever
        elif isinstance(index_or_retriever, KnowledgeIndex):
            frag = FRAGRetriever(index_or_retriever, classifier=classifier, mode=mode, llm=llm, **frag_kwargs)
        else:
            raise TypeError(
                f"HopAwareRetriever needs a KnowledgeIndex or a FRAGRetriever, got {type(index_or_retriever).__name__}"
            )
        super().__init__(
            frag,
            similarity_top_k=k,
            include_facts=True,
            max_facts=max_facts,
            score=score,
            callback_manager=callback_manager,
            verbose=verbose,
        )

    @property
    def last_route(self) -> str | None:
        """``"simple"`` / ``"complex"``: the pipeline of the most recent retrieval."""
        return (self.last_trace or {}).get("route")

    @property
    def last_answers(self) -> list[str]:
        """LLM-free answers of the most recent retrieval: end entities of the top paths, best first."""
        return list((self.last_trace or {}).get("answers") or [])
