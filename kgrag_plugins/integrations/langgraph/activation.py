"""The LLM-free spreading-activation graph: ``retrieve -> [generate]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph

from ...index.store import KnowledgeIndex
from .nodes import make_generate_node, make_retrieve_node, method_of
from .state import KGRAGState

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph


def activation_graph(
    retriever_or_index: Any, llm: Any = None, *, k: int = 5, checkpointer: Any = None, **kw: Any
) -> CompiledStateGraph:
    """``retrieve`` (``ActivationRetriever``, LLM-free) ``-> [generate]`` (``generate`` only with ``llm``).

    ``kw`` go to ``ActivationRetriever`` when an index is given. Any other kgrag ``Retriever`` works too.
    """

    def build(index: KnowledgeIndex) -> Any:
        from ...methods.activation import ActivationRetriever

        return ActivationRetriever(index, **kw)

    retriever = method_of(retriever_or_index, build)
    g = StateGraph(KGRAGState)
    g.add_node("retrieve", make_retrieve_node(retriever, k))
    g.add_edge(START, "retrieve")
    if llm is not None:
        g.add_node("generate", make_generate_node(llm))
        g.add_edge("retrieve", "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge("retrieve", END)
    return g.compile(checkpointer=checkpointer, name="activation")
