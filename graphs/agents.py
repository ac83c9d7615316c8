"""The agent baselines of :mod:`kgrag_plugins.agents` (docs/methods.md §6) as LangGraph apps, one factory
per registered agent: Self-Ask, CoT iterative retrieval, decomposition, FRAG's front door, Self-RAG,
and the variants with a KG plug-in inserted where the papers insert it (``+kg-infused``: KG-Infused
RAG's activation; ``sa-rag+cot``: SA-RAG's retriever). The retrieve step is the index's dense
retriever (the agents' default); without ``KGRAG_LLM_BASE_URL`` every agent runs its LLM-free path
(retrieval steps only, ``generation`` empty)."""

from __future__ import annotations

from functools import partial
from typing import Any

from graphs._common import cached_graph, served

#: langgraph.json graph id -> kgrag_plugins.agents registry name
AGENT_IDS = {
    "agent_self_ask": "self-ask",
    "agent_self_ask_kg_infused": "self-ask+kg-infused",
    "agent_cot": "cot",
    "agent_cot_rag": "cot-rag",
    "agent_sa_rag_cot": "sa-rag+cot",
    "agent_decomposition": "decomposition",
    "agent_front_door": "front-door",
    "agent_self_rag": "self-rag",
    "agent_self_rag_kg_infused": "self-rag+kg-infused",
}


def _build(name: str, index: Any, llm: Any) -> Any:
    from kgrag_plugins.agents import build_agent

    opts = {"kg_infused": index} if name.endswith("+kg-infused") else {}
    return build_agent(name, index, llm=llm, **opts)


def build_graph(name: str) -> Any:
    """The compiled agent ``name`` (a :data:`kgrag_plugins.agents.AGENTS` key), built once per process."""
    return cached_graph(f"agent:{name}", partial(_build, name))


self_ask = served(partial(build_graph, "self-ask"))
self_ask_kg_infused = served(partial(build_graph, "self-ask+kg-infused"))
cot = served(partial(build_graph, "cot"))
cot_rag = served(partial(build_graph, "cot-rag"))
sa_rag_cot = served(partial(build_graph, "sa-rag+cot"))
decomposition = served(partial(build_graph, "decomposition"))
front_door = served(partial(build_graph, "front-door"))
self_rag = served(partial(build_graph, "self-rag"))
self_rag_kg_infused = served(partial(build_graph, "self-rag+kg-infused"))
