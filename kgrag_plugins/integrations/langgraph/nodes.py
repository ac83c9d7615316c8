"""Generic nodes: any kgrag ``Retriever`` as a retrieve node, answer generation, and the helpers
the per-method modules build their nodes and graphs with."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from ...index.store import KnowledgeIndex
from ...models.llm import as_llm
from ...types import Evidence
from .state import KGRAGState, evidence_to_documents, question_of, state_to_evidence, with_trace

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

    from ...methods.base import Retriever


def runnable_node(
    name: str, func: Callable[[dict], dict], afunc: Callable[[dict], Any] | None = None
) -> RunnableLambda:
    return RunnableLambda(func, afunc=afunc, name=name)


def make_retrieve_node(
    retriever: Retriever, k: int = 5, *, node_name: str = "retrieve", trace_key: str = "retrieve"
) -> RunnableLambda:
    """Any kgrag ``Retriever`` as a node: query = ``state["query"]`` or ``state["question"]``;
    writes ``documents``, ``facts`` and ``trace[trace_key]``. ``ainvoke`` awaits ``aretrieve``."""
    name = getattr(retriever, "name", "retriever")

    def update(state: dict[str, Any], ev: Evidence) -> dict[str, Any]:
        return {
            "documents": evidence_to_documents(ev, retriever=name),
            "facts": [f.text for f in ev.facts],
            "trace": with_trace(state, **{trace_key: ev.trace}),
        }

    def retrieve(state: dict[str, Any]) -> dict[str, Any]:
        return update(state, retriever.retrieve(state.get("query") or question_of(state), k))

    async def aretrieve(state: dict[str, Any]) -> dict[str, Any]:
        return update(state, await retriever.aretrieve(state.get("query") or question_of(state), k))

    return runnable_node(node_name, retrieve, aretrieve)


def make_generate_node(llm: Any = None, *, method: Any = None, max_passages: int = 5) -> RunnableLambda:
    """Answer generation, written to ``generation``.

    With ``llm`` (ours, LangChain or LlamaIndex): :func:`~kgrag_plugins.methods.answer.generate_answer`
    over ``documents`` + ``facts``. With ``method``: its own answer step, i.e. a
    ``KGInfusedRetriever`` (``answer(question, evidence, note=state["note"])``), an ``SARAGCoT``
    (``final_answer(question, state["context"])``) or a ``FRAGRetriever`` (FRAG's reasoning prompt
    over the paths in ``facts``, first line of the reply; LLM-free or after an LLM error, which goes
    to ``trace["llm_error"]``: the first of ``answers``).
    """
    if (llm is None) == (method is None):
        raise ValueError("make_generate_node needs exactly one of llm= or method=")
    if method is not None:
        if is_frag(method):
            from .frag import frag_generate_node

            return frag_generate_node(method)
        if callable(getattr(method, "final_answer", None)):  # SA-RAG CoT

            def generate(state: dict[str, Any]) -> dict[str, Any]:
                q = question_of(state)
                context = state.get("context") or method.retriever.context(state_to_evidence(state))
                return {"generation": method.final_answer(q, context)}

        elif callable(getattr(method, "answer", None)):  # KG-Infused RAG

            def generate(state: dict[str, Any]) -> dict[str, Any]:
                ans = method.answer(question_of(state), state_to_evidence(state), note=state.get("note"))
                return {"generation": ans.text}

        else:
            raise TypeError(f"{type(method).__name__} has no answer()/final_answer() step")
        return runnable_node("generate", generate)

    from ...methods.answer import generate_answer

    model = as_llm(llm)

    def generate(state: dict[str, Any]) -> dict[str, Any]:
        ans = generate_answer(model, question_of(state), state_to_evidence(state), max_passages=max_passages)
        return {"generation": ans.text}

    return runnable_node("generate", generate)


def method_of(retriever_or_index: Any, build: Callable[[KnowledgeIndex], Any]) -> Any:
    return build(retriever_or_index) if isinstance(retriever_or_index, KnowledgeIndex) else retriever_or_index


def same_llm(a: Any, b: Any) -> bool:
    inner = lambda x: getattr(x, "chat_model", None) or getattr(x, "llm", None) or x  # noqa: E731
    return a is b or (a is not None and inner(a) is inner(b))


ROUTES = ("simple", "complex")


def is_frag(obj: Any) -> bool:
    from ...methods.frag import FRAGRetriever

    return isinstance(obj, FRAGRetriever)


def check_route(route: Any, source: str) -> str:
    if route not in ROUTES:
        raise ValueError(f"{source} returned route {route!r}; expected 'simple' or 'complex'")
    return route


def retrieve_then_generate(
    retrieve_node: Any, llm: Any, *, node: str, name: str, checkpointer: Any = None
) -> CompiledStateGraph:
    """``node -> [generate]``: a retrieval node, then the house answer prompt when ``llm`` is given."""
    g = StateGraph(KGRAGState)
    g.add_node(node, retrieve_node)
    g.add_edge(START, node)
    if llm is not None:
        g.add_node("generate", make_generate_node(llm))
        g.add_edge(node, "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge(node, END)
    return g.compile(checkpointer=checkpointer, name=name)
