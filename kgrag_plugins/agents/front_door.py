"""A hop-aware front door (our addition): FRAG's hop router (frag.md §3.1; docs/methods.md §2(a) step 2)
in front of the agents, so one graph serves simple and multi-hop questions.

``START -> router -> simple | complex -> END``. ``router`` is
:func:`~kgrag_plugins.integrations.langgraph.router.make_route_node` (a trained hop classifier, a
``FRAGRetriever``, any classifier it accepts, or ``None``: the LLM-free heuristic). ``simple``:
one retrieval (``k`` passages) and, with an LLM, one validated answer call
(:func:`~kgrag_plugins.methods.answer.generate_answer`). ``complex``: a Self-Ask graph
(``complex="self-ask"``, default), a decomposition graph (``"decomposition"``), any other name of
:data:`~kgrag_plugins.agents.AGENTS`, or a compiled graph of the user's, added as a subgraph
(shared state keys flow both ways). LLM-free: the simple branch retrieves, the complex agents
take their own LLM-free paths; ``generation`` is ``""``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..integrations._extras import require

require("langgraph", "langgraph", "langchain_core", feature="kgrag_plugins.agents")

from langgraph.graph import END, START, StateGraph  # noqa: E402

from ..integrations.langgraph.router import make_route_node, route_by_hops  # noqa: E402
from ..methods.answer import generate_answer  # noqa: E402
from .common import evidence_record, llm_of, resolve_step  # noqa: E402
from .state import AgentState, add_evidence, add_llm_errors, agent_question, final_update  # noqa: E402

__all__ = ["front_door_graph"]

logger = logging.getLogger("kgrag_plugins.agents.front_door")


def front_door_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    classifier: Any = None,
    complex: Any = "self-ask",
    k: int = 6,
    complex_options: dict[str, Any] | None = None,
    checkpointer: Any = None,
) -> Any:
    """Hop-aware routing in front of the agents (see the module docstring). ``complex_options``
    go to the complex agent's builder (e.g. ``{"max_steps": 3}``)."""
    step = resolve_step(retrieve, k)
    llm = llm_of(llm)
    if isinstance(complex, str):
        from ..names import resolve_name
        from . import AGENTS

        complex = resolve_name(complex, AGENTS)  # self_ask -> self-ask
        if complex == "front-door" or complex not in AGENTS:
            raise ValueError(
                f"complex must be an agent name other than 'front-door' ({sorted(AGENTS)}), got {complex!r}"
            )
        complex_graph = AGENTS[complex](
            step.source if step.kind == "kgrag" else step, llm=llm, **(complex_options or {})
        )
        complex_name = complex
    elif callable(getattr(complex, "invoke", None)) or callable(complex):
        complex_graph, complex_name = complex, type(complex).__name__
    else:
        raise TypeError(f"complex must be an agent name or a compiled graph / node, got {type(complex).__name__}")

    def simple(state: dict[str, Any]) -> dict[str, Any]:
        q = agent_question(state)
        ev = step(q)
        new = {**state, **add_evidence(state, ev, retriever=step.name)}
        steps = [*(state.get("steps") or []), {"kind": "retrieve", **evidence_record(ev)}]
        gen, errors = "", []
        if llm is not None:
            ans = generate_answer(llm, q, ev, max_passages=k)
            errors = ans.metadata.get("llm_error", [])
            gen = ans.text
        out = final_update(new, gen, agent="front_door", branch="simple", mode="llm" if llm else "llm-free")
        out["trace"] = add_llm_errors({"trace": out["trace"]}, errors)
        return {**out, "steps": steps}

    g = StateGraph(AgentState)
    g.add_node("router", make_route_node(classifier))
    g.add_node("simple", simple)
    g.add_node("complex", complex_graph)
    g.add_edge(START, "router")
    g.add_conditional_edges("router", route_by_hops, {"simple": "simple", "complex": "complex"})
    g.add_edge("simple", END)
    g.add_edge("complex", END)
    graph = g.compile(checkpointer=checkpointer, name="front_door")
    logger.debug("front door: complex branch = %s", complex_name)
    return graph
