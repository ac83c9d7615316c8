"""FRAG (docs/methods.md §2) as a graph: ``router -> frag_simple | frag_complex -> [generate]`` (the
nodes: :mod:`.frag_nodes`; re-exported here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph

from ...index.store import KnowledgeIndex
from ...models.llm import as_llm
from .common import method_of, same_llm
from .frag_nodes import frag_generate_node, make_frag_node
from .nodes import make_generate_node
from .retry import DEFAULT, resolve_policy
from .router import make_route_node, route_by_hops
from .state import KGRAGContext, KGRAGState

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph


__all__ = ["frag_generate_node", "frag_graph", "make_frag_node"]


def frag_graph(
    index_or_retriever: Any,
    *,
    classifier: Any = None,
    llm: Any = None,
    k: int = 5,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **frag_kwargs: Any,
) -> CompiledStateGraph:
    """FRAG (docs/methods.md §2, paper ``frag``): ``router -> frag_simple | frag_complex -> [generate]``.

    From an index, builds ``FRAGRetriever(index, classifier=classifier, llm=llm, **frag_kwargs)``;
    the router uses its ``route`` (the trained classifier, else the heuristic; ``mode="simple"`` /
    ``"complex"`` forces a branch). Both branches are :func:`make_frag_node` on that one retriever
    with the pipeline forced. With a ready ``FRAGRetriever``, ``classifier`` (if given) overrides only
    the router, ``frag_kwargs`` are not allowed and ``llm`` must be its own. ``generate`` (FRAG's
    reasoning prompt over the top paths, first line of the reply) runs only when the retriever has an
    LLM; otherwise ``generation`` stays unset and ``answers`` holds the LLM-free answers.
    Context settings (:class:`KGRAGContext`): ``k``, ``route`` (forces the branch's pipeline).
    The FRAG and generate nodes are added with ``retry_policy`` (default
    :func:`~.retry.default_retry_policy`, ``None``: no retries); the router is LLM-free.
    """
    from ...methods.frag import FRAGRetriever

    built = isinstance(index_or_retriever, KnowledgeIndex)
    llm = as_llm(llm)
    frag = method_of(
        index_or_retriever, lambda index: FRAGRetriever(index, classifier=classifier, llm=llm, **frag_kwargs)
    )
    if not isinstance(frag, FRAGRetriever):
        raise TypeError(f"frag_graph needs a KnowledgeIndex or a FRAGRetriever, got {type(frag).__name__}")
    if not built:
        if frag_kwargs:
            raise ValueError(f"frag_graph: pass {sorted(frag_kwargs)} to FRAGRetriever(...) or build from an index")
        if llm is not None and not same_llm(frag.llm, llm):
            raise ValueError("frag_graph: pass the LLM to FRAGRetriever(..., llm=...) or build from an index")
    router = frag if built or classifier is None else classifier
    policy = resolve_policy(retry_policy)
    g = StateGraph(KGRAGState, context_schema=KGRAGContext)
    g.add_node("router", make_route_node(router, embedder=frag.index.embedder))
    g.add_node("frag_simple", make_frag_node(frag, "simple", k), retry_policy=policy)
    g.add_node("frag_complex", make_frag_node(frag, "complex", k), retry_policy=policy)
    g.add_edge(START, "router")
    g.add_conditional_edges("router", route_by_hops, {"simple": "frag_simple", "complex": "frag_complex"})
    if frag.llm is not None:
        g.add_node("generate", make_generate_node(method=frag), retry_policy=policy)
        g.add_edge("frag_simple", "generate")
        g.add_edge("frag_complex", "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge("frag_simple", END)
        g.add_edge("frag_complex", END)
    return g.compile(checkpointer=checkpointer, name="frag")
