"""Generic nodes: any kgrag ``Retriever`` as a retrieve node, answer generation (handles from
closures or the graph's run-time context), and the helpers the per-method modules build their
nodes and graphs with."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from ...models.llm import as_llm
from ...models.replies import step_error
from ...types import Evidence
from .common import is_frag, runnable_node
from .events import emit, emit_trace
from .frag_nodes import frag_generate_node
from .prompt import prompt_builder
from .retry import DEFAULT, resolve_policy, retry_or_fallback
from .state import (
    KGRAGContext,
    KGRAGState,
    add_llm_errors,
    answer_update,
    context_setting,
    context_value,
    evidence_to_documents,
    query_of,
    question_of,
    state_to_evidence,
    with_trace,
)

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

    from ...methods.base import Retriever


def _context_retriever(cache: dict[int, Any]) -> Any:
    """The retriever of the running graph's context: ``retriever``, else an ``ActivationRetriever``
    over ``index`` (built once per index and node)."""
    found = context_value("retriever")
    if found is not None:
        return found
    index = context_value("index")
    if index is None:
        raise ValueError(
            "this retrieve node was made without a retriever: give one, or run the graph with "
            "context={'retriever': ...} or context={'index': ...} (StateGraph(..., context_schema=KGRAGContext))"
        )
    entry = cache.get(id(index))
    if entry is None or entry[0] is not index:
        from ...methods.activation import ActivationRetriever

        entry = cache[id(index)] = (index, ActivationRetriever(index))
    return entry[1]


def make_retrieve_node(
    retriever: Retriever | None = None,
    k: int = 5,
    *,
    node_name: str = "retrieve",
    trace_key: str = "retrieve",
    as_text: bool = False,
) -> RunnableLambda:
    """Any kgrag ``Retriever`` as a node: query = ``state["query"]``, else ``state["question"]``,
    else the last human message of ``state["messages"]``; writes ``documents``, ``facts`` and
    ``trace[trace_key]`` (this call's trace: each run writes its own, nothing is kept on the node).

    ``retriever=None``: taken at run time from the graph's context (``context={"retriever": r}``,
    or ``{"index": index}`` for an ``ActivationRetriever``; see :class:`KGRAGContext`).
    ``as_text=True`` writes ``documents`` as ``list[str]`` (the tutorials' state) instead of
    ``Document`` s. ``k`` is the default of the graph's context setting ``k`` (:class:`KGRAGContext`:
    ``invoke(..., context={"k": 2})``). Emits ``stream_mode="custom"`` events (``retrieve`` with
    ``method``, ``passages``, ``ms``, then the trace's ``seeds`` / ``activation_round`` / ``clues``
    ...; :mod:`.events`). ``ainvoke`` awaits ``aretrieve``. Add it with a retry policy
    (:func:`~.retry.default_retry_policy`): an index or graph-database outage is retryable.
    """
    cache: dict[int, Any] = {}

    def resolve() -> Any:
        return retriever if retriever is not None else _context_retriever(cache)

    def update(state: dict[str, Any], ev: Evidence, r: Any, query: str, t0: float) -> dict[str, Any]:
        name = getattr(r, "name", "retriever")
        docs = evidence_to_documents(ev, retriever=name)
        emit_trace(
            node_name,
            ev.trace,
            event="retrieve",
            query=query,
            retriever=name,
            method=name,
            passages=len(docs),
            ms=round((time.perf_counter() - t0) * 1000, 1),
            documents=[d.id for d in docs],
            scores=[round(float(sp.score), 6) for sp in ev.passages],
            facts=len(ev.facts),
        )
        return {
            "documents": [d.page_content for d in docs] if as_text else docs,
            "facts": [f.display for f in ev.facts],
            "trace": with_trace(state, **{trace_key: ev.trace}),
        }

    def retrieve(state: dict[str, Any]) -> dict[str, Any]:
        r, q, n, t0 = resolve(), query_of(state), context_setting("k", k), time.perf_counter()
        return update(state, r.retrieve(q, n), r, q, t0)

    async def aretrieve(state: dict[str, Any]) -> dict[str, Any]:
        r, q, n, t0 = resolve(), query_of(state), context_setting("k", k), time.perf_counter()
        return update(state, await r.aretrieve(q, n), r, q, t0)

    return runnable_node(node_name, retrieve, aretrieve)


def make_generate_node(
    llm: Any = None,
    *,
    method: Any = None,
    max_passages: int = 5,
    prompt: Any = None,
    whole: bool = True,
    max_tokens: int | None = None,
    retry_policy: Any = None,
) -> RunnableLambda:
    """Answer generation, written to ``generation`` (and, when the state has ``messages``,
    appended to them as an ``AIMessage``).

    With ``llm`` (ours, LangChain or LlamaIndex), or without one: the ``llm`` of the graph's
    context (:class:`KGRAGContext`): :func:`~kgrag_plugins.methods.answer.generate_answer` over
    ``documents`` (``Document`` s, strings or dicts) + ``facts``. ``prompt``: a ``str`` with
    ``{question}`` / ``{context}`` or a ``ChatPromptTemplate`` (``context`` gets the evidence in
    data blocks; :mod:`.prompt`); default the house answer prompt. The whole reply is the answer
    (``whole=False``: its first line), with no token cap unless ``max_tokens`` is given. An LLM
    failure or a reply that stays invalid logs a WARNING, goes to ``trace["llm_error"]`` and
    gives the LLM-free answer (the first of ``answers``, else ``""``). With no LLM at all
    (offline): the first of ``answers``, else ``None``.

    With ``method``: its own answer step, i.e. a ``KGInfusedRetriever`` (``answer(question,
    evidence, note=state["note"])``), an ``SARAGCoT`` (``final_answer(question, state["context"])``)
    or a ``FRAGRetriever`` (FRAG's reasoning prompt over the paths in ``facts``, first line of the
    reply; LLM-free or after an LLM error, which goes to ``trace["llm_error"]``: the first of ``answers``).

    ``retry_policy`` (``llm=`` generation): the ``RetryPolicy`` this node is added with. While the
    running attempt is not its last, a retryable failure (timeout, open breaker, a reply that
    stayed invalid after the step's own retry: :class:`~kgrag_plugins.models.replies.RepliesStayedInvalid`)
    is raised so LangGraph runs the node again; the fallback above comes on the last attempt.
    ``None`` (default for a node made on its own): fall back at once. Emits a ``generate`` event
    (``ms``, ``fallback``) for ``stream_mode="custom"``.
    """
    if llm is not None and method is not None:
        raise ValueError("make_generate_node takes at most one of llm= or method=")
    if method is not None:
        if prompt is not None:
            raise ValueError("prompt= is for llm= generation; a method= answers with its own prompt")
        return _method_generate_node(method)

    from ...methods.answer import generate_answer

    build = prompt_builder(prompt)
    model = as_llm(llm)
    policy = resolve_policy(retry_policy)

    def generate(state: dict[str, Any]) -> dict[str, Any]:
        q = question_of(state)
        m = model if model is not None else as_llm(context_value("llm"))
        if m is None:
            answers = state.get("answers") or []
            return answer_update(state, str(answers[0]) if answers else None)
        ev, t0 = state_to_evidence(state), time.perf_counter()
        messages = build(q, ev, max_passages, state.get("messages")) if build is not None else None
        ans = generate_answer(
            m, q, ev, max_passages=max_passages, whole=whole, max_tokens=max_tokens, messages=messages
        )
        errors = ans.metadata.get("llm_error") or []
        if ans.metadata.get("fallback") and errors:
            retry_or_fallback(policy, step_error(errors[-1]))
        ms = round((time.perf_counter() - t0) * 1000, 1)
        emit({"event": "generate", "node": "generate", "ms": ms, "fallback": bool(ans.metadata.get("fallback"))})
        if ans.metadata.get("fallback"):  # logged at WARNING; the LLM-free answer, never the reply
            answers = state.get("answers") or []
            text = ans.text or (str(answers[0]) if answers else "")
            return answer_update(state, text, trace=add_llm_errors(state, errors))
        return answer_update(state, ans.text)

    return runnable_node("generate", generate)


def _method_generate_node(method: Any) -> RunnableLambda:
    if is_frag(method):
        return frag_generate_node(method)
    if callable(getattr(method, "final_answer", None)):  # SA-RAG CoT

        def generate(state: dict[str, Any]) -> dict[str, Any]:
            q = question_of(state)
            context = state.get("context") or method.retriever.context(state_to_evidence(state))
            return answer_update(state, method.final_answer(q, context))

    elif callable(getattr(method, "answer", None)):  # KG-Infused RAG

        def generate(state: dict[str, Any]) -> dict[str, Any]:
            ans = method.answer(question_of(state), state_to_evidence(state), note=state.get("note"))
            return answer_update(state, ans.text)

    else:
        raise TypeError(f"{type(method).__name__} has no answer()/final_answer() step")
    return runnable_node("generate", generate)


def retrieve_then_generate(
    retrieve_node: Any, llm: Any, *, node: str, name: str, checkpointer: Any = None, retry_policy: Any = DEFAULT
) -> CompiledStateGraph:
    """``node -> [generate]``: a retrieval node, then the house answer prompt when ``llm`` is given
    (the reply's first line, at most 64 tokens: the method graphs answer like the benchmarks).
    Both nodes are added with ``retry_policy`` (default :func:`~.retry.default_retry_policy`);
    the context schema is :class:`KGRAGContext`."""
    policy = resolve_policy(retry_policy)
    g = StateGraph(KGRAGState, context_schema=KGRAGContext)
    g.add_node(node, retrieve_node, retry_policy=policy)
    g.add_edge(START, node)
    if llm is not None:
        gen = make_generate_node(llm, whole=False, max_tokens=64, retry_policy=policy)
        g.add_node("generate", gen, retry_policy=policy)
        g.add_edge(node, "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge(node, END)
    return g.compile(checkpointer=checkpointer, name=name)
