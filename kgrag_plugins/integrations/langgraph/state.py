"""The state schema every kgrag graph shares (:class:`KGRAGState`), the run-time context schema
(:class:`KGRAGContext`) and the translation between state keys and kgrag shapes (``Document`` /
``str`` / ``dict`` <-> ``ScoredPassage``, state -> ``Evidence``, ``messages`` -> question)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from ...types import Evidence, Fact, Passage, ScoredPassage

logger = logging.getLogger(__name__)

#: What ``documents`` may hold: LangChain ``Document`` s (what our nodes write), plain strings (the
#: LangGraph RAG tutorials' ``list[str]``) or dicts ``{"id", "text" | "page_content", "title", "score"}``.
DocumentLike = Document | str | dict[str, Any]


def add_checked_messages(left: Any, right: Any) -> Any:
    """LangGraph's ``add_messages`` reducer; what it cannot read as messages (``5``, ``[None]``, a
    dict without ``content``) is a one-line ``ValueError`` naming the key, not LangChain's
    multi-line ``NotImplementedError``."""
    try:
        return add_messages(left, right)
    except (NotImplementedError, ValueError, TypeError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            "graph state key 'messages' must hold LangChain messages, {'role', 'content'} dicts, "
            f"(role, content) pairs or strings: {reason}"
        ) from None


class KGRAGState(TypedDict, total=False):
    """Graph state shared by every kgrag graph (all keys optional; start with ``{"question": ...}``
    or ``{"messages": [HumanMessage(...)]}``)."""

    question: str
    messages: Annotated[list[AnyMessage], add_checked_messages]
    documents: list[DocumentLike]
    facts: list[str]
    generation: str | None
    trace: dict[str, Any]
    # KG-Infused RAG
    activation: dict[str, Any]
    summary: str
    expanded_query: str
    note: str | None
    # SA-RAG (CoT loop)
    query: str
    context: str
    reasoning: dict[str, Any] | None
    steps: int
    # FRAG / hop routing
    route: str
    answers: list[str]
    topic_entities: list[str]


class KGRAGContext(TypedDict, total=False):
    """Run-time handles and settings for ``StateGraph(State, context_schema=KGRAGContext)`` (every
    prebuilt graph of this package uses it) and ``graph.invoke(state, context={...})``.

    Handles: a node made without one (``make_retrieve_node()``, ``make_generate_node()``) reads it
    from ``Runtime.context``; a closure-given handle wins. Settings: per-run values that override
    what the graph was built with (absent or ``None``: the builder's argument)."""

    index: Any  # a KnowledgeIndex: the retrieve node builds an ActivationRetriever over it
    retriever: Any  # any kgrag Retriever
    llm: Any  # ours, a LangChain chat model or a LlamaIndex LLM
    k: int  # passages per retrieve / translate / FRAG node (and SA-RAG's cap when it has one)
    k_each: int  # KG-Infused RAG: passages per query of the dual retrieval
    max_steps: int  # SA-RAG: most CoT reasoning steps (the loop's cap; the CoT's own max_steps when absent)
    route: str  # FRAG: "simple" | "complex" forces that pipeline (the router's choice is overridden)


def _small_metadata(data: dict[str, Any]) -> dict[str, Any]:
    scalar = (str, int, float, bool, type(None))
    return {
        k: (list(v) if isinstance(v, (list, tuple)) else v)
        for k, v in data.items()
        if isinstance(v, scalar) or (isinstance(v, (list, tuple)) and all(isinstance(x, scalar) for x in v))
    }


def passage_to_document(sp: ScoredPassage, *, retriever: str = "") -> Document:
    """A scored passage as a LangChain ``Document`` (``id`` = passage id)."""
    p = sp.passage
    meta = _small_metadata(p.metadata)
    meta.update(id=p.id, title=p.title, score=float(sp.score), kind="passage")
    if retriever:
        meta["retriever"] = retriever
    return Document(page_content=p.text, id=p.id, metadata=meta)


def evidence_to_documents(evidence: Evidence | list[ScoredPassage], *, retriever: str = "") -> list[Document]:
    """The passages of an ``Evidence`` (or a list of scored passages) as ``Document`` s."""
    passages = evidence.passages if isinstance(evidence, Evidence) else evidence
    return [passage_to_document(sp, retriever=retriever) for sp in passages]


def documents_to_passages(documents: list[Any] | None) -> list[ScoredPassage]:
    """Inverse of :func:`evidence_to_documents`; also accepts plain strings (the tutorials'
    ``documents: list[str]``; id ``doc-<i>``, score 0), dicts ``{"id", "text" | "page_content",
    "title", "score"}`` and any object with ``page_content`` (and optional ``metadata`` / ``id``)."""
    out = []
    for i, d in enumerate(documents or ()):
        if isinstance(d, str):
            out.append(ScoredPassage(Passage(f"doc-{i}", d, ""), 0.0))
            continue
        if isinstance(d, dict):
            meta = {k: v for k, v in d.items() if k not in ("text", "page_content")}
            pid = d.get("id") or f"doc-{i}"
            text = d.get("text", d.get("page_content", ""))
        elif isinstance(d, Document) or isinstance(getattr(d, "page_content", None), str):
            meta = dict(getattr(d, "metadata", None) or {})
            pid = getattr(d, "id", None) or meta.get("id") or f"doc-{i}"
            text = d.page_content
        else:
            raise TypeError(f"documents must be LangChain Documents, strings or dicts, got {type(d).__name__}")
        raw_score = meta.pop("score", 0.0) or 0.0
        try:
            score = float(raw_score)
        except (TypeError, ValueError):
            raise ValueError(f"documents[{i}]: score must be a number, got {raw_score!r}") from None
        title = meta.pop("title", "") or ""
        for key in ("id", "kind", "retriever"):
            meta.pop(key, None)
        out.append(ScoredPassage(Passage(str(pid), str(text), str(title), meta), score))
    return out


def documents_as_text(documents: list[Any] | None) -> list[str]:
    """The texts of ``documents`` (any accepted shape), for a state declaring ``documents: list[str]``."""
    return [sp.passage.text for sp in documents_to_passages(documents)]


def state_to_evidence(state: dict[str, Any], *, query_key: str = "question") -> Evidence:
    """Rebuild an ``Evidence`` from ``documents`` / ``facts`` / ``trace`` in a state."""
    facts = [f if isinstance(f, Fact) else Fact(str(f)) for f in state.get("facts") or ()]
    question = state.get(query_key) or state.get("question") or last_human_message(state.get("messages")) or ""
    return Evidence(question, documents_to_passages(state.get("documents")), facts, dict(state.get("trace") or {}))


# --------------------------------------------------------------------------- messages


def _content_text(content: Any) -> str:
    """A message's content as text (a list of content parts: their ``text`` parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") for p in content if isinstance(p, (str, dict))]
        return "".join(parts)
    return "" if content is None else str(content)


def last_human_message(messages: Any) -> str:
    """Text of the last human message in ``messages`` ('' when there is none). Accepts LangChain
    messages, dicts ``{"role": "user" | "human", "content"}``, ``(role, content)`` pairs and bare
    strings (a human message, as ``add_messages`` reads them)."""
    for m in reversed(list(messages or ())):
        if isinstance(m, str):
            role, content = "human", m
        elif isinstance(m, Mapping):
            role, content = m.get("role") or m.get("type"), m.get("content")
        elif isinstance(m, (tuple, list)) and len(m) == 2:
            role, content = m
        else:
            role, content = getattr(m, "type", None), getattr(m, "content", None)
        if role in ("human", "user"):
            text = _content_text(content).strip()
            if text:
                return text
    return ""


#: State keys the nodes read, and the types each must have when present and not ``None``.
_KEY_TYPES: dict[str, tuple[type, ...]] = {
    "trace": (Mapping,),
    "documents": (list, tuple),
    "facts": (list, tuple),
    "answers": (list, tuple),
    "topic_entities": (list, tuple, str),
    "sub_questions": (list, tuple),
    "intermediate_answers": (list, tuple),
    "retrievals": (int,),
    "reasoning": (Mapping,),
}


def check_state(state: Any, types: Mapping[str, tuple[type, ...]] = _KEY_TYPES) -> None:
    """A one-line ``ValueError`` when ``state`` is not a mapping or one of the keys nodes read
    (``types``, default :data:`_KEY_TYPES`: ``trace`` a dict, ``documents`` / ``facts`` lists, ...)
    has another type."""
    if not isinstance(state, Mapping):
        raise ValueError(f"graph state must be a dict, got {type(state).__name__}")
    for key, kinds in types.items():
        value = state.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            names = " or ".join({Mapping: "a dict", int: "an int"}.get(k, f"a {k.__name__}") for k in kinds)
            raise ValueError(f"graph state key {key!r} must be {names} (or absent), got {type(value).__name__}")


def question_of(state: dict[str, Any]) -> str:
    """``state["question"]``, else the text of the last human message in ``state["messages"]``.

    A one-line ``ValueError`` when there is none, when it is over-long or not valid Unicode
    (:func:`~kgrag_plugins.methods.base.check_query_text`) or the state is malformed (:func:`check_state`)."""
    from ...methods.base import check_query_text

    check_state(state)
    q = state.get("question")
    if isinstance(q, str) and q.strip():
        return check_query_text(q, "question")
    q = last_human_message(state.get("messages"))
    if q:
        return check_query_text(q, "question")
    raise ValueError("graph state needs a non-empty 'question' or a human message in 'messages'")


def query_of(state: dict[str, Any]) -> str:
    """The text a retrieve step uses: ``state["query"]`` (a follow-up) when it is a non-empty
    string, else :func:`question_of`."""
    from ...methods.base import check_query_text

    check_state(state)
    q = state.get("query")
    return check_query_text(q, "query") if isinstance(q, str) and q.strip() else question_of(state)


def answer_update(state: dict[str, Any], text: str | None, **extra: Any) -> dict[str, Any]:
    """A generate node's update: ``generation`` (+ ``extra``), and, when the state has
    ``messages``, the answer appended as an ``AIMessage`` (one new message: ``messages`` has the
    ``add_messages`` reducer). An empty or missing answer adds no message."""
    update: dict[str, Any] = {"generation": text, **extra}
    if state.get("messages") and text:
        update["messages"] = [AIMessage(content=text)]
    return update


# --------------------------------------------------------------------------- run-time context


def context_value(name: str) -> Any:
    """``Runtime.context[name]`` of the running graph (a dict or an object with attributes);
    ``None`` outside a graph run, without a context, or when the context lacks ``name``."""
    try:
        from langgraph.runtime import get_runtime

        ctx = getattr(get_runtime(), "context", None)
    except (ImportError, RuntimeError, KeyError):  # no graph run (a node invoked on its own)
        return None
    if ctx is None:
        return None
    if isinstance(ctx, Mapping):
        return ctx.get(name)
    return getattr(ctx, name, None)


def context_setting(name: str, default: Any) -> Any:
    """A run-time setting of :class:`KGRAGContext` (``k``, ``k_each``, ``max_steps``: an int >= 1;
    ``route``: ``"simple"`` | ``"complex"``), else ``default`` (outside a graph run, no context, or
    the key absent / ``None``). A one-line ``ValueError`` for a malformed value."""
    value = context_value(name)
    if value is None:
        return default
    if name == "route":
        if value not in ("simple", "complex"):
            raise ValueError(f"context 'route' must be 'simple' or 'complex', got {value!r:.80}")
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"context {name!r} must be an int >= 1, got {value!r:.80}")
    return value


# --------------------------------------------------------------------------- trace


def with_trace(state: dict[str, Any], **entries: Any) -> dict[str, Any]:
    return {**(state.get("trace") or {}), **entries}


def llm_error_trace(state: dict[str, Any], step: str, exc: Exception) -> dict[str, Any]:
    """``trace`` with ``{"step", "error"}`` appended to ``trace["llm_error"]``; logs a WARNING
    (the node keeps its LLM-free output)."""
    logger.warning("LangGraph node step %r: LLM failed, keeping the LLM-free output: %s", step, exc)
    return add_llm_errors(state, [{"step": step, "error": str(exc)}])


def add_llm_errors(state: dict[str, Any], errors: list[dict[str, Any]]) -> dict[str, Any]:
    """``trace`` with ``errors`` appended to ``trace["llm_error"]`` (already logged by the caller)."""
    return with_trace(state, llm_error=[*(state.get("trace") or {}).get("llm_error", []), *errors])
