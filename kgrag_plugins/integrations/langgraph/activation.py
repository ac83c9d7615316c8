"""The LLM-free spreading-activation graph: ``retrieve -> [generate]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...index.store import KnowledgeIndex
from .common import method_of
from .nodes import make_retrieve_node, retrieve_then_generate
from .retry import DEFAULT

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph


def activation_graph(
    retriever_or_index: Any,
    llm: Any = None,
    *,
    k: int = 5,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **kw: Any,
) -> CompiledStateGraph:
    """``retrieve`` (``ActivationRetriever``, LLM-free) ``-> [generate]`` (``generate`` only with ``llm``).

    ``kw`` go to ``ActivationRetriever`` when an index is given. Any other kgrag ``Retriever`` works too.
    ``k`` is the default of the context setting ``k``; both nodes are added with ``retry_policy``
    (default :func:`~.retry.default_retry_policy`, ``None``: no retries).
    """

    def build(index: KnowledgeIndex) -> Any:
        from ...methods.activation import ActivationRetriever

        return ActivationRetriever(index, **kw)

    retriever = method_of(retriever_or_index, build)
    node = make_retrieve_node(retriever, k)
    return retrieve_then_generate(
        node, llm, node="retrieve", name="activation", checkpointer=checkpointer, retry_policy=retry_policy
    )
