"""KG-Translator (docs/methods.md §3, paper ``kg-translator``) as a node and a graph: ``translate -> [generate]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda

from ...index.store import KnowledgeIndex
from ...models.llm import as_llm
from .common import method_of
from .nodes import make_retrieve_node, retrieve_then_generate
from .retry import DEFAULT

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

    from ...methods.base import Retriever

__all__ = ["make_translator_node", "translator_graph"]


def make_translator_node(retriever: Retriever, k: int = 5) -> RunnableLambda:
    """Clue translation + tracing + ranking (``TranslatorRetriever.retrieve``) as a node.

    Query = ``state["query"]`` or ``state["question"]``. Writes ``documents`` (top ``k`` passages),
    ``facts`` (the clues as ``"ENTITY @@ RELATION"``, best first) and ``trace["translator"]`` (the
    method's trace: ``clues``, ``direction``, ``traced`` sentences, ``timings``; ``reason`` when
    empty). ``ainvoke`` awaits the retriever's ``aretrieve``.
    """
    if not callable(getattr(retriever, "retrieve", None)):
        raise TypeError(f"make_translator_node needs a kgrag Retriever, got {type(retriever).__name__}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return make_retrieve_node(retriever, k, node_name="translate", trace_key="translator")


def translator_graph(
    index_or_retriever: Any,
    llm: Any = None,
    *,
    k: int = 5,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **opts: Any,
) -> CompiledStateGraph:
    """KG-Translator: ``translate`` (:func:`make_translator_node`) ``-> [generate]``.

    From an index (built with ``builder="parsekg"``), builds ``TranslatorRetriever(index, llm=llm,
    **opts)`` (``opts``: ``backend``, ``alpha``, ``beta``, ``dataset``, ``max_steps``, ...); the LLM
    then also drives the prompt-❸ decomposition. With a ready ``TranslatorRetriever`` ``opts`` are
    not allowed and ``llm`` only answers. ``generate`` (the house answer prompt over ``documents``
    + ``facts``) runs only with ``llm``. Add the compiled graph as a subgraph node, or as a branch
    of :func:`~kgrag_plugins.integrations.langgraph.make_hop_router`. ``k`` is the default of the
    context setting ``k``; both nodes are added with ``retry_policy`` (default
    :func:`~.retry.default_retry_policy`, ``None``: no retries).
    """
    llm = as_llm(llm) if llm is not None else None

    def build(index: KnowledgeIndex) -> Any:
        from ...methods.translator import TranslatorRetriever

        return TranslatorRetriever(index, llm=llm, **opts)

    if not isinstance(index_or_retriever, KnowledgeIndex) and opts:
        raise ValueError(f"translator_graph: pass {sorted(opts)} to TranslatorRetriever(...) or build from an index")
    retriever = method_of(index_or_retriever, build)
    node = make_translator_node(retriever, k)
    return retrieve_then_generate(
        node, llm, node="translate", name="translator", checkpointer=checkpointer, retry_policy=retry_policy
    )
