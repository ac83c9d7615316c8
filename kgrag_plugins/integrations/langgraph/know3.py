"""Know³-RAG (docs/methods.md §5, paper ``know3-rag``) for LangGraph: a KGE verifier node, a verify ->
retrieve-again wrapper around any agent, and a compiled graph.

- :func:`make_kge_verifier_node`: reads ``generation`` (else the top ``documents``), writes
  ``verification`` = ``{"score", "threshold", "turn", "decision", "source", "triples", "reason"}``
  (paper §4.1, Eq. 1-2; lower score = more consistent with the KG).
- :func:`know3_wrap`: ``agent -> verify -> (accept: END | enhance -> agent)``; ``enhance`` writes
  the knowledge-enhanced query q^KG (App. A) to ``query`` (what our retrieve nodes read) and
  counts ``turn``; at turn T the answer is accepted (the paper's forced answer).
- :func:`know3_graph`: :func:`know3_wrap` around ``retrieve -> [generate]`` with any kgrag
  retriever (default: activation) or a user's retrieve node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from ...index.store import KnowledgeIndex
from ...methods.know3.verify import KGVerifier
from .common import runnable_node
from .events import emit_trace
from .nodes import make_retrieve_node, retrieve_then_generate
from .retry import DEFAULT, resolve_policy
from .state import KGRAGContext, KGRAGState, documents_to_passages, query_of, question_of, with_trace

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

__all__ = ["Know3State", "know3_graph", "know3_wrap", "make_kge_verifier_node"]


class Know3State(KGRAGState, total=False):
    """:class:`KGRAGState` plus the verifier's output and the loop's turn counter."""

    verification: dict[str, Any]
    turn: int


def _verifier(verifier_or_index: Any, opts: dict[str, Any]) -> KGVerifier:
    if isinstance(verifier_or_index, KGVerifier):
        if opts:
            raise ValueError(f"pass {sorted(opts)} to KGVerifier(...) or give an index")
        return verifier_or_index
    if isinstance(verifier_or_index, KnowledgeIndex):
        return KGVerifier(verifier_or_index, **opts)
    raise TypeError(f"expected a KnowledgeIndex or a KGVerifier, got {type(verifier_or_index).__name__}")


def make_kge_verifier_node(
    verifier_or_index: Any,
    *,
    generation_key: str = "generation",
    documents_key: str = "documents",
    output_key: str = "verification",
    **opts: Any,
) -> RunnableLambda:
    """Know³'s knowledge-aware check as a node for any graph (yours included).

    Verifies ``state[generation_key]`` (an answer; Fig. 9 extraction with the verifier's LLM, else
    spaCy SVO) or, when there is none, the top ``documents`` (LLM-free KG-verified retrieval), at
    turn ``state["turn"]`` (default 0). Writes ``state[output_key]`` (see the module docstring) and
    ``trace["verify"]``. Unknown entities or an empty extraction give ``score=None`` and a
    ``reason``, never an exception. ``opts`` build a :class:`KGVerifier` from an index.
    """
    verifier = _verifier(verifier_or_index, opts)

    def verify(state: dict[str, Any]) -> dict[str, Any]:
        gen = state.get(generation_key)
        res = verifier.check(
            gen if isinstance(gen, str) else None,
            passages=[sp.passage for sp in documents_to_passages(state.get(documents_key))],
            turn=int(state.get("turn") or 0),
        )
        slim = {k: v for k, v in res.items() if k != "extraction"}
        emit_trace("verify", slim)
        return {output_key: slim, "trace": with_trace(state, verify=res)}

    return runnable_node("verify", verify)


def _agent_node(agent: Any, k: int) -> Any:
    if callable(getattr(agent, "retrieve", None)) and not hasattr(agent, "invoke"):
        return make_retrieve_node(agent, k)  # a kgrag Retriever
    if hasattr(agent, "invoke"):
        return agent  # a compiled graph or any Runnable over the state
    if callable(agent):
        return RunnableLambda(agent, name="agent")
    raise TypeError(f"know3_wrap needs a compiled graph, a Runnable, a callable or a kgrag Retriever, got {agent!r}")


def know3_wrap(
    agent: Any,
    verifier_or_index: Any,
    *,
    k: int = 5,
    max_turns: int | None = None,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **opts: Any,
) -> CompiledStateGraph:
    """Add Know³'s verify -> retrieve-again loop around ``agent`` (paper §4, Fig. 2).

    ``agent``: a compiled LangGraph (used as a subgraph; it reads ``question`` / ``query`` and
    writes ``generation`` and/or ``documents``), any Runnable or callable over the state, or a
    kgrag Retriever (wrapped as a retrieve node with ``k``). After each run the verifier node
    decides; on ``"retrieve"`` the ``enhance`` node sets ``query`` = q^KG, ``turn`` += 1 and the
    agent runs again. ``max_turns`` defaults to the verifier's T (2). Input ``{"question": ...}``;
    the output keeps the agent's keys plus ``verification`` and ``turn``. ``verify``, ``enhance``
    and a Retriever agent are added with ``retry_policy`` (default :func:`~.retry.default_retry_policy`,
    ``None``: no retries; a compiled-graph or Runnable agent keeps its own).
    """
    verifier = _verifier(verifier_or_index, opts)
    policy = resolve_policy(retry_policy)
    cap = verifier.max_turns if max_turns is None else int(max_turns)
    if cap < 0:
        raise ValueError(f"max_turns must be >= 0, got {max_turns}")

    def start(state: dict[str, Any]) -> dict[str, Any]:
        return {"turn": 0, "query": query_of(state)}

    def enhance(state: dict[str, Any]) -> dict[str, Any]:
        q = verifier.enhance(question_of(state))
        turn = int(state.get("turn") or 0) + 1
        return {"query": q, "turn": turn, "trace": with_trace(state, enhance={"turn": turn, "query": q})}

    def route(state: dict[str, Any]) -> str:
        v = state.get("verification") or {}
        done = v.get("decision") == "accept" or int(state.get("turn") or 0) >= cap
        return "end" if done else "enhance"

    agent_node = _agent_node(agent, k)
    g = StateGraph(Know3State, context_schema=KGRAGContext)
    g.add_node("start", runnable_node("start", start))
    is_retriever = callable(getattr(agent, "retrieve", None)) and not hasattr(agent, "invoke")
    g.add_node("agent", agent_node, retry_policy=policy if is_retriever else None)
    g.add_node("verify", make_kge_verifier_node(verifier), retry_policy=policy)
    g.add_node("enhance", runnable_node("enhance", enhance), retry_policy=policy)
    g.add_edge(START, "start")
    g.add_edge("start", "agent")
    g.add_edge("agent", "verify")
    g.add_conditional_edges("verify", route, {"end": END, "enhance": "enhance"})
    g.add_edge("enhance", "agent")
    return g.compile(checkpointer=checkpointer, name="know3")


def know3_graph(
    index: KnowledgeIndex,
    retriever: Any = None,
    llm: Any = None,
    *,
    k: int = 5,
    max_turns: int | None = None,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **opts: Any,
) -> CompiledStateGraph:
    """Know³-RAG as a compiled graph: :func:`know3_wrap` around ``retrieve -> [generate]``.

    ``retriever``: any kgrag Retriever (default :class:`~kgrag_plugins.methods.activation.ActivationRetriever`)
    or a user's retrieve node (a Runnable writing ``documents``); ``llm`` answers (the house
    prompt) and, passed to the verifier, extracts triples with Fig. 9; without it the verifier
    checks the retrieved documents (LLM-free). ``opts`` go to :class:`KGVerifier`. ``retry_policy``
    as in :func:`know3_wrap` (and for the inner ``retrieve`` / ``generate`` nodes).
    """
    if not isinstance(index, KnowledgeIndex):
        raise TypeError(f"know3_graph needs a KnowledgeIndex, got {type(index).__name__}")
    if retriever is None:
        from ...methods.activation import ActivationRetriever

        retriever = ActivationRetriever(index)
    node = make_retrieve_node(retriever, k) if callable(getattr(retriever, "retrieve", None)) else retriever
    agent = retrieve_then_generate(node, llm, node="retrieve", name="know3_agent", retry_policy=retry_policy)
    verifier = KGVerifier(index, llm=llm, **opts)
    return know3_wrap(agent, verifier, k=k, max_turns=max_turns, checkpointer=checkpointer, retry_policy=retry_policy)
