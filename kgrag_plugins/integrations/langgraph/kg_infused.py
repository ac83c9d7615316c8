"""KG-Infused RAG (docs/methods.md §1) as nodes and a graph: ``activate -> expand_query -> retrieve ->
[write_note -> augment -> generate]``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from ...index.store import KnowledgeIndex
from ...models.llm import as_llm
from .common import fact_texts, method_of, runnable_node, same_llm
from .events import emit_trace
from .nodes import make_generate_node
from .retry import DEFAULT, resolve_policy, retry_or_fallback
from .state import (
    KGRAGContext,
    KGRAGState,
    context_setting,
    documents_to_passages,
    evidence_to_documents,
    llm_error_trace,
    question_of,
    with_trace,
)

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

    from ...methods.activation import ActivationMemory


def _memory_to_state(memory: ActivationMemory) -> dict[str, Any]:
    """A JSON-able snapshot of an activation memory (what the later KG-Infused nodes rebuild)."""
    return {
        "question": getattr(memory, "question", ""),
        "seeds": [[e, s] for e, s in memory.seeds],
        "activation": dict(memory.activation),
        "triples": list(memory.triples),
        "scores": [[ti, s] for ti, s in getattr(memory, "scores", {}).items()],
        "explored": sorted(memory.explored),
        "rounds": [r.to_dict() for r in memory.rounds],
        "llm_errors": list(getattr(memory, "llm_errors", [])),
    }


def _memory_from_state(graph: Any, data: dict[str, Any] | None) -> ActivationMemory:
    from ...methods.activation import RoundTrace
    from ...methods.kg_infused import KGInfusedMemory

    data = data or {}
    memory = KGInfusedMemory(graph, [(e, s) for e, s in data.get("seeds", ())], data.get("question", ""))
    memory.add_triples(data.get("triples", ()), value=None)
    memory.activation.clear()
    memory.activation.update(data.get("activation", {}))
    memory.scores.update({int(ti): float(s) for ti, s in data.get("scores", ())})
    memory.explored.update(data.get("explored", ()))
    memory.rounds = [RoundTrace(**r) for r in data.get("rounds", ())]
    memory.llm_errors = list(data.get("llm_errors", ()))
    return memory


def make_activation_node(retriever: Any) -> RunnableLambda:
    """KG-Infused RAG seed + spreading activation (``KGInfusedRetriever.seed`` / ``activate``):
    writes ``facts``, ``activation`` (a JSON-able memory snapshot) and ``trace["activation"]``."""

    def activate(state: dict[str, Any]) -> dict[str, Any]:
        q = question_of(state)
        memory = retriever.activate(q, retriever.seed(q))
        trace = memory.trace()
        emit_trace("activate", trace)
        return {
            "facts": fact_texts(memory.facts(getattr(memory, "scores", None)), retriever),
            "activation": _memory_to_state(memory),
            "trace": with_trace(state, activation=trace),
        }

    return runnable_node("activate", activate)


def make_query_expansion_node(retriever: Any) -> RunnableLambda:
    """KG-Infused RAG subgraph summary + KG-based query expansion (``summarize`` / ``expand_query``
    over the ``activation`` snapshot): writes ``summary``, ``expanded_query``."""

    def expand(state: dict[str, Any]) -> dict[str, Any]:
        q = question_of(state)
        memory = _memory_from_state(retriever.index.graph, state.get("activation"))
        n_errors = len(memory.llm_errors)
        summary = retriever.summarize(q, memory)
        update: dict[str, Any] = {"summary": summary, "expanded_query": retriever.expand_query(q, summary, memory)}
        if len(memory.llm_errors) > n_errors:  # the method fell back to its LLM-free step
            errors = [*(state.get("trace") or {}).get("llm_error", []), *memory.llm_errors[n_errors:]]
            update["trace"] = with_trace(state, llm_error=errors)
        return update

    return runnable_node("expand_query", expand)


def make_dual_retrieve_node(retriever: Any, k_each: int | None = None) -> RunnableLambda:
    """KG-Infused RAG dual retrieval: ``k_each`` (the context setting ``k_each``, else this argument,
    else ``retriever.k_passages``, 3) passages for the question + ``k_each`` new ones for
    ``expanded_query``; writes ``documents``."""

    def dual(state: dict[str, Any]) -> dict[str, Any]:
        q, t0 = question_of(state), time.perf_counter()
        n = context_setting("k_each", k_each if k_each is not None else getattr(retriever, "k_passages", 3))
        passages = retriever.dual_retrieve(q, state.get("expanded_query") or q, k_each=n)
        emit_trace(
            "retrieve",
            None,
            event="retrieve",
            method=getattr(retriever, "name", "kg_infused"),
            passages=len(passages),
            ms=round((time.perf_counter() - t0) * 1000, 1),
            query=q,
            expanded_query=state.get("expanded_query") or q,
            documents=[sp.passage.id for sp in passages],
            scores=[round(float(sp.score), 6) for sp in passages],
        )
        return {"documents": evidence_to_documents(passages, retriever=getattr(retriever, "name", ""))}

    return runnable_node("retrieve", dual)


def make_note_node(retriever: Any, *, retry_policy: Any = None) -> RunnableLambda:
    """KG-Infused RAG passage note over ``documents`` (``write_note``): writes ``note`` (``None``
    without an LLM, or after an LLM error, which goes to ``trace["llm_error"]``). ``retry_policy``:
    the policy the node is added with; a retryable error is raised while it has attempts left
    (see :func:`~.nodes.make_generate_node`)."""
    from ...models.llm import LLMError

    policy = resolve_policy(retry_policy)

    def note(state: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"note": retriever.write_note(question_of(state), documents_to_passages(state.get("documents")))}
        except LLMError as exc:
            retry_or_fallback(policy, exc)
            return {"note": None, "trace": llm_error_trace(state, "write_note", exc)}

    return runnable_node("write_note", note)


def make_augment_node(retriever: Any, *, retry_policy: Any = None) -> RunnableLambda:
    """KG-guided knowledge augmentation (``augment``): rewrites ``note`` with ``summary``. The plain
    note goes to ``trace["passage_note"]`` and is kept when augmentation returns ``None`` or fails
    (after the attempts of ``retry_policy``, as :func:`make_note_node`)."""
    from ...models.llm import LLMError

    policy = resolve_policy(retry_policy)

    def augment(state: dict[str, Any]) -> dict[str, Any]:
        note = state.get("note")
        if note is None:
            return {}
        try:
            augmented = retriever.augment(question_of(state), note, state.get("summary") or "")
        except LLMError as exc:
            retry_or_fallback(policy, exc)
            return {"trace": llm_error_trace(state, "augment", exc)}
        return {"note": augmented if augmented is not None else note, "trace": with_trace(state, passage_note=note)}

    return runnable_node("augment", augment)


def kg_infused_graph(
    retriever_or_index: Any,
    llm: Any = None,
    *,
    k_each: int | None = None,
    checkpointer: Any = None,
    retry_policy: Any = DEFAULT,
    **kw: Any,
) -> CompiledStateGraph:
    """KG-Infused RAG: ``activate -> expand_query -> retrieve -> [write_note -> augment -> generate]``.

    From an index, builds ``KGInfusedRetriever(index, llm=llm, **kw)``. With a retriever, its own
    ``llm`` is used (passing a different ``llm`` is an error). The note/augment/generate steps
    run only when there is an LLM; otherwise the graph ends after dual retrieval. ``k_each`` is the
    default of the context setting ``k_each``; every node is added with ``retry_policy`` (default
    :func:`~.retry.default_retry_policy`, ``None``: no retries).
    """
    llm = as_llm(llm)
    policy = resolve_policy(retry_policy)

    def build(index: KnowledgeIndex) -> Any:
        from ...methods.kg_infused import KGInfusedRetriever

        return KGInfusedRetriever(index, llm=llm, **kw)

    kgi = method_of(retriever_or_index, build)
    if llm is not None and not same_llm(getattr(kgi, "llm", None), llm):
        raise ValueError("kg_infused_graph: pass the LLM to KGInfusedRetriever(..., llm=...) or build from an index")
    g = StateGraph(KGRAGState, context_schema=KGRAGContext)
    steps = [
        ("activate", make_activation_node(kgi)),
        ("expand_query", make_query_expansion_node(kgi)),
        ("retrieve", make_dual_retrieve_node(kgi, k_each)),
    ]
    if getattr(kgi, "llm", None) is not None:
        steps += [
            ("write_note", make_note_node(kgi, retry_policy=policy)),
            ("augment", make_augment_node(kgi, retry_policy=policy)),
            ("generate", make_generate_node(method=kgi)),
        ]
    prev = START
    for name, node in steps:
        g.add_node(name, node, retry_policy=policy)
        g.add_edge(prev, name)
        prev = name
    g.add_edge(prev, END)
    return g.compile(checkpointer=checkpointer, name="kg_infused")
