"""KG-Translator (METHODS.md §3, paper ``kg-translator``) as a node and a graph: ``translate -> [generate]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from ...index.store import KnowledgeIndex
from ...models.llm import as_llm
from ...types import Evidence
from .nodes import make_generate_node, method_of, runnable_node
from .state import KGRAGState, evidence_to_documents, question_of, with_trace

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
    name = getattr(retriever, "name", "translator")

    def update(state: dict[str, Any], ev: Evidence) -> dict[str, Any]:
        return {
            "documents": evidence_to_documents(ev, retriever=name),
            "facts": [f.text for f in ev.facts],
            "trace": with_trace(state, translator=ev.trace),
        }

    def translate(state: dict[str, Any]) -> dict[str, Any]:
        return update(state, retriever.retrieve(state.get("query") or question_of(state), k))

    async def atranslate(state: dict[str, Any]) -> dict[str, Any]:
        return update(state, await retriever.aretrieve(state.get("query") or question_of(state), k))

    return runnable_node("translate", translate, atranslate)


def translator_graph(
    index_or_retriever: Any, llm: Any = None, *, k: int = 5, checkpointer: Any = None, **opts: Any
) -> CompiledStateGraph:
    """KG-Translator: ``translate`` (:func:`make_translator_node`) ``-> [generate]``.

    From an index (built with ``builder="parsekg"``), builds ``TranslatorRetriever(index, llm=llm,
    **opts)`` (``opts``: ``backend``, ``alpha``, ``beta``, ``dataset``, ``max_steps``, ...); the LLM
    then also drives the prompt-❸ decomposition. With a ready ``TranslatorRetriever`` ``opts`` are
    not allowed and ``llm`` only answers. ``generate`` (the house answer prompt over ``documents``
    + ``facts``) runs only with ``llm``. Add the compiled graph as a subgraph node, or as a branch
    of :func:`~kgrag_plugins.integrations.langgraph.make_hop_router`.
    """
    llm = as_llm(llm) if llm is not None else None

    def build(index: KnowledgeIndex) -> Any:
        from ...methods.translator import TranslatorRetriever

        return TranslatorRetriever(index, llm=llm, **opts)

    if not isinstance(index_or_retriever, KnowledgeIndex) and opts:
        raise ValueError(f"translator_graph: pass {sorted(opts)} to TranslatorRetriever(...) or build from an index")
    retriever = method_of(index_or_retriever, build)
    g = StateGraph(KGRAGState)
    g.add_node("translate", make_translator_node(retriever, k))
    g.add_edge(START, "translate")
    if llm is not None:
        g.add_node("generate", make_generate_node(llm))
        g.add_edge("translate", "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge("translate", END)
    return g.compile(checkpointer=checkpointer, name="translator")
