"""Agent baselines with a pluggable retrieve step and the KG plug-ins inserted where the papers
insert them (docs/methods.md §6; docs/agents.md). Each agent is a compiled LangGraph
``StateGraph(AgentState)``; needs the ``langgraph`` extra.

- ``"self-ask"`` / ``"self-ask+kg-infused"``: Self-Ask (KG-Infused RAG App. F.1, D.3) — :mod:`.self_ask`
- ``"cot"`` / ``"cot-rag"`` / ``"sa-rag+cot"``: CoT iterative retrieval (SA-RAG §6.3) — :mod:`.cot`
- ``"decomposition"``: query decomposition (SA-RAG ``hybrid_agent``) — :mod:`.decompose`
- ``"front-door"``: FRAG's hop router in front (simple -> one shot, complex -> an agent) — :mod:`.front_door`
- ``"self-rag"`` / ``"self-rag+kg-infused"``: Self-RAG (KG-Infused RAG §4.2), when :mod:`.self_rag` is present

Names are imported lazily: ``import kgrag_plugins.agents`` loads no framework::

    from kgrag_plugins.agents import build_agent, run_agent
    graph = build_agent("self-ask", my_retriever, llm=my_llm)
    answer = run_agent(graph, "Who directed the film that ...?")
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_dir, lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph


_EXPORTS = {
    "AgentState": "state",
    "run_agent": "state",
    "arun_agent": "state",
    "RetrieveStep": "retrieve",
    "as_retrieve_step": "retrieve",
    "self_ask_graph": "self_ask",
    "self_ask_kg_infused_graph": "self_ask",
    "parse_self_ask": "self_ask",
    "cot_graph": "cot",
    "cot_rag_graph": "cot",
    "sa_rag_cot_graph": "cot",
    "decomposition_graph": "decompose",
    "front_door_graph": "front_door",
    "self_rag_graph": "self_rag",
    "self_rag_kg_infused_graph": "self_rag",
}

__all__ = sorted([*_EXPORTS, "AGENTS", "build_agent"])


__getattr__ = lazy_getattr(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})
__dir__ = lazy_dir(globals())


def _lazy(module: str, attr: str) -> Callable[..., CompiledStateGraph]:
    def build(retrieve: Any, llm: Any = None, **opts: Any) -> CompiledStateGraph:
        fn = getattr(importlib.import_module(f".{module}", __name__), attr)
        return fn(retrieve, llm=llm, **opts)

    build.__name__ = attr
    build.__qualname__ = attr
    build.__doc__ = f"Lazy alias of :func:`kgrag_plugins.agents.{module}.{attr}`."
    return build


def _has_module(module: str) -> bool:
    try:
        return importlib.util.find_spec(f"{__name__}.{module}") is not None
    except ImportError:
        return False


#: Agent name -> builder ``(retrieve, llm=None, **opts) -> CompiledStateGraph``.
AGENTS: dict[str, Callable[..., CompiledStateGraph]] = {
    "self-ask": _lazy("self_ask", "self_ask_graph"),
    "self-ask+kg-infused": _lazy("self_ask", "self_ask_kg_infused_graph"),
    "cot": _lazy("cot", "cot_graph"),
    "cot-rag": _lazy("cot", "cot_rag_graph"),
    "sa-rag+cot": _lazy("cot", "sa_rag_cot_graph"),
    "decomposition": _lazy("decompose", "decomposition_graph"),
    "front-door": _lazy("front_door", "front_door_graph"),
}
if _has_module("self_rag"):  # written separately; absent -> not registered
    AGENTS["self-rag"] = _lazy("self_rag", "self_rag_graph")
    AGENTS["self-rag+kg-infused"] = _lazy("self_rag", "self_rag_kg_infused_graph")


def build_agent(name: str, retrieve: Any, llm: Any = None, **opts: Any) -> CompiledStateGraph:
    """The compiled agent graph ``name`` (a key of :data:`AGENTS`) over ``retrieve`` (anything
    :func:`~kgrag_plugins.agents.retrieve.as_retrieve_step` accepts, or a ``KnowledgeIndex``:
    dense top-k, or SA-RAG's retriever for ``"sa-rag+cot"``) with ``llm`` (anything
    :func:`~kgrag_plugins.models.llm.as_llm` accepts; ``None``: the LLM-free path). ``opts`` go to
    the builder (``"...+kg-infused"``: ``kg_infused=`` a ``KGInfusedRetriever`` or a ``KnowledgeIndex``)."""
    from ..names import resolve_name

    try:
        builder = AGENTS[resolve_name(name, AGENTS)]  # self_ask+kg_infused -> self-ask+kg-infused
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; choose one of {sorted(AGENTS)}") from None
    return builder(retrieve, llm=llm, **opts)
