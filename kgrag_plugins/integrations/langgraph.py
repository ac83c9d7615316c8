"""LangGraph adapters: node factories and compiled graphs around the framework-free methods.

State (:class:`KGRAGState`) uses the official RAG examples' keys plus ours:

- ``question`` (input), ``generation`` (answer text; absent/``None`` without an LLM)
- ``documents``: LangChain ``Document`` s, ``id`` = passage id, ``metadata`` = ``{"id", "title",
  "score", "kind": "passage", "retriever"}``; nodes also accept plain dicts ``{"id", "text",
  "title", "score"}`` as input
- ``facts``: verbalised facts / paths / clues (``list[str]``)
- ``trace``: dict, one entry per step (``retrieve``, ``activation``, ``retrievals``, ``reasoning``, ...)
- KG-Infused RAG: ``activation`` (a JSON-able snapshot of the activation memory), ``summary``,
  ``expanded_query``, ``note``; SA-RAG: ``query`` (current follow-up), ``context``, ``reasoning``, ``steps``
- FRAG / hop routing (METHODS.md §2, paper ``frag``): ``route`` (``"simple"`` | ``"complex"``, written by
  the router node), ``answers`` (LLM-free candidate answers: end entities of the top paths, best
  first), ``topic_entities`` (optional input: entity ids that replace FRAG's question linking);
  ``facts`` then hold the verbalised paths (``"Tom Hanks <- starred_actors <- Big -> directed_by -> ..."``)

Handles (index, retriever, LLM) are captured by the node factories (closures), never stored in state.
Every node is a ``RunnableLambda`` (``invoke`` / ``ainvoke``; ``add_node(name, node)``), and every
compiled graph can be added as a subgraph node of a user's graph (shared keys flow both ways).
The graph builders take ``checkpointer=`` for standalone use (as a subgraph the parent's applies).
No reducers are used, so a parent state may declare the same keys with plain overwrite semantics.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np
from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import END, START, StateGraph

from ..index.store import KnowledgeIndex
from ..models.llm import as_llm
from ..types import Evidence, Fact, Passage, ScoredPassage

if TYPE_CHECKING:  # pragma: no cover
    from langgraph.graph.state import CompiledStateGraph

    from ..methods.activation import ActivationMemory
    from ..methods.base import Retriever
    from ..methods.frag import FRAGRetriever
    from ..models.embed import Embedder

__all__ = [
    "KGRAGState",
    "activation_graph",
    "documents_to_passages",
    "evidence_to_documents",
    "frag_graph",
    "kg_infused_graph",
    "make_activation_node",
    "make_augment_node",
    "make_dual_retrieve_node",
    "make_frag_node",
    "make_generate_node",
    "make_hop_router",
    "make_note_node",
    "make_query_expansion_node",
    "make_retrieve_node",
    "make_route_node",
    "make_sa_reason_node",
    "make_sa_retrieve_node",
    "passage_to_document",
    "route_by_hops",
    "sa_rag_graph",
    "sa_route_after_reason",
    "sa_route_after_retrieve",
    "state_to_evidence",
]


class KGRAGState(TypedDict, total=False):
    """Graph state shared by every kgrag graph (all keys optional; start with ``{"question": ...}``)."""

    question: str
    documents: list[Document]
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


# --------------------------------------------------------------------------- shape translation


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
    """Inverse of :func:`evidence_to_documents`; also accepts dicts ``{"id", "text", "title", "score"}``."""
    out = []
    for i, d in enumerate(documents or ()):
        if isinstance(d, Document):
            meta = dict(d.metadata)
            pid = d.id or meta.get("id") or f"doc-{i}"
            text = d.page_content
        elif isinstance(d, dict):
            meta = {k: v for k, v in d.items() if k not in ("text", "page_content")}
            pid = d.get("id") or f"doc-{i}"
            text = d.get("text", d.get("page_content", ""))
        else:
            raise TypeError(f"documents must be LangChain Documents or dicts, got {type(d).__name__}")
        score = float(meta.pop("score", 0.0) or 0.0)
        title = meta.pop("title", "") or ""
        for key in ("id", "kind", "retriever"):
            meta.pop(key, None)
        out.append(ScoredPassage(Passage(str(pid), text, title, meta), score))
    return out


def state_to_evidence(state: dict[str, Any], *, query_key: str = "question") -> Evidence:
    """Rebuild an ``Evidence`` from ``documents`` / ``facts`` / ``trace`` in a state."""
    facts = [f if isinstance(f, Fact) else Fact(str(f)) for f in state.get("facts") or ()]
    return Evidence(
        state.get(query_key) or state.get("question", ""),
        documents_to_passages(state.get("documents")),
        facts,
        dict(state.get("trace") or {}),
    )


def _question(state: dict[str, Any]) -> str:
    q = state.get("question")
    if not isinstance(q, str) or not q.strip():
        raise ValueError("graph state needs a non-empty 'question'")
    return q


def _trace(state: dict[str, Any], **entries: Any) -> dict[str, Any]:
    return {**(state.get("trace") or {}), **entries}


def _node(name: str, func: Callable[[dict], dict], afunc: Callable[[dict], Any] | None = None) -> RunnableLambda:
    return RunnableLambda(func, afunc=afunc, name=name)


# --------------------------------------------------------------------------- generic nodes


def make_retrieve_node(retriever: Retriever, k: int = 5) -> RunnableLambda:
    """Any kgrag ``Retriever`` as a node: query = ``state["query"]`` or ``state["question"]``;
    writes ``documents``, ``facts`` and ``trace["retrieve"]``. ``ainvoke`` awaits ``aretrieve``."""
    name = getattr(retriever, "name", "retriever")

    def update(state: dict[str, Any], ev: Evidence) -> dict[str, Any]:
        return {
            "documents": evidence_to_documents(ev, retriever=name),
            "facts": [f.text for f in ev.facts],
            "trace": _trace(state, retrieve=ev.trace),
        }

    def retrieve(state: dict[str, Any]) -> dict[str, Any]:
        return update(state, retriever.retrieve(state.get("query") or _question(state), k))

    async def aretrieve(state: dict[str, Any]) -> dict[str, Any]:
        return update(state, await retriever.aretrieve(state.get("query") or _question(state), k))

    return _node("retrieve", retrieve, aretrieve)


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
        if _is_frag(method):
            return _frag_generate_node(method)
        if callable(getattr(method, "final_answer", None)):  # SA-RAG CoT

            def generate(state: dict[str, Any]) -> dict[str, Any]:
                q = _question(state)
                context = state.get("context") or method.retriever.context(state_to_evidence(state))
                return {"generation": method.final_answer(q, context)}

        elif callable(getattr(method, "answer", None)):  # KG-Infused RAG

            def generate(state: dict[str, Any]) -> dict[str, Any]:
                ans = method.answer(_question(state), state_to_evidence(state), note=state.get("note"))
                return {"generation": ans.text}

        else:
            raise TypeError(f"{type(method).__name__} has no answer()/final_answer() step")
        return _node("generate", generate)

    from ..methods.answer import generate_answer

    model = as_llm(llm)

    def generate(state: dict[str, Any]) -> dict[str, Any]:
        ans = generate_answer(model, _question(state), state_to_evidence(state), max_passages=max_passages)
        return {"generation": ans.text}

    return _node("generate", generate)


# --------------------------------------------------------------------------- KG-Infused RAG nodes


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
    from ..methods.activation import RoundTrace
    from ..methods.kg_infused import KGInfusedMemory

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


def _llm_error(state: dict[str, Any], step: str, exc: Exception) -> dict[str, Any]:
    errors = [*(state.get("trace") or {}).get("llm_error", []), {"step": step, "error": str(exc)}]
    return _trace(state, llm_error=errors)


def make_activation_node(retriever: Any) -> RunnableLambda:
    """KG-Infused RAG seed + spreading activation (``KGInfusedRetriever.seed`` / ``activate``):
    writes ``facts``, ``activation`` (a JSON-able memory snapshot) and ``trace["activation"]``."""

    def activate(state: dict[str, Any]) -> dict[str, Any]:
        q = _question(state)
        memory = retriever.activate(q, retriever.seed(q))
        return {
            "facts": [f.text for f in memory.facts(getattr(memory, "scores", None))],
            "activation": _memory_to_state(memory),
            "trace": _trace(state, activation=memory.trace()),
        }

    return _node("activate", activate)


def make_query_expansion_node(retriever: Any) -> RunnableLambda:
    """KG-Infused RAG subgraph summary + KG-based query expansion (``summarize`` / ``expand_query``
    over the ``activation`` snapshot): writes ``summary``, ``expanded_query``."""

    def expand(state: dict[str, Any]) -> dict[str, Any]:
        q = _question(state)
        memory = _memory_from_state(retriever.index.graph, state.get("activation"))
        n_errors = len(memory.llm_errors)
        summary = retriever.summarize(q, memory)
        update: dict[str, Any] = {"summary": summary, "expanded_query": retriever.expand_query(q, summary, memory)}
        if len(memory.llm_errors) > n_errors:  # the method fell back to its LLM-free step
            errors = [*(state.get("trace") or {}).get("llm_error", []), *memory.llm_errors[n_errors:]]
            update["trace"] = _trace(state, llm_error=errors)
        return update

    return _node("expand_query", expand)


def make_dual_retrieve_node(retriever: Any, k_each: int | None = None) -> RunnableLambda:
    """KG-Infused RAG dual retrieval: ``k_each`` (default ``retriever.k_passages``, 3) passages for
    the question + ``k_each`` new ones for ``expanded_query``; writes ``documents``."""

    def dual(state: dict[str, Any]) -> dict[str, Any]:
        q = _question(state)
        n = k_each if k_each is not None else getattr(retriever, "k_passages", 3)
        passages = retriever.dual_retrieve(q, state.get("expanded_query") or q, k_each=n)
        return {"documents": evidence_to_documents(passages, retriever=getattr(retriever, "name", ""))}

    return _node("retrieve", dual)


def make_note_node(retriever: Any) -> RunnableLambda:
    """KG-Infused RAG passage note over ``documents`` (``write_note``): writes ``note`` (``None``
    without an LLM, or after an LLM error, which goes to ``trace["llm_error"]``)."""
    from ..models.llm import LLMError

    def note(state: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"note": retriever.write_note(_question(state), documents_to_passages(state.get("documents")))}
        except LLMError as exc:
            return {"note": None, "trace": _llm_error(state, "write_note", exc)}

    return _node("write_note", note)


def make_augment_node(retriever: Any) -> RunnableLambda:
    """KG-guided knowledge augmentation (``augment``): rewrites ``note`` with ``summary``. The plain
    note goes to ``trace["passage_note"]`` and is kept when augmentation returns ``None`` or fails."""
    from ..models.llm import LLMError

    def augment(state: dict[str, Any]) -> dict[str, Any]:
        note = state.get("note")
        if note is None:
            return {}
        try:
            augmented = retriever.augment(_question(state), note, state.get("summary") or "")
        except LLMError as exc:
            return {"trace": _llm_error(state, "augment", exc)}
        return {"note": augmented if augmented is not None else note, "trace": _trace(state, passage_note=note)}

    return _node("augment", augment)


# --------------------------------------------------------------------------- SA-RAG nodes


def _merge_documents(old: list[Any], new: list[Document]) -> list[Any]:
    seen = {getattr(d, "id", None) or (d.get("id") if isinstance(d, dict) else None) for d in old}
    return list(old) + [d for d in new if d.id not in seen]


def make_sa_retrieve_node(retriever: Any, cot: Any = None, k: int | None = None) -> RunnableLambda:
    """SA-RAG knowledge acquisition: writes ``documents``, ``facts``, ``context`` (the SA-RAG context
    string) and appends to ``trace["retrievals"]``.

    A follow-up (``query`` set by the reason node, with a ``reasoning`` in state) retrieves for the
    follow-up question alone; the context becomes ``cot.merge_context(provided_context, new)``,
    documents/facts accumulate and ``query`` is consumed (reset to ``None``). Otherwise it is a fresh
    run for ``question``: ``steps`` / ``reasoning`` / the SA trace lists are reset (so a checkpointed
    thread can ask a new question). ``k=None`` uses the method's uncapped ``acquire``; an int caps
    the passages via ``retrieve``.
    """

    def sa_retrieve(state: dict[str, Any]) -> dict[str, Any]:
        reasoning = state.get("reasoning") or {}
        follow_up = bool(state.get("query")) and cot is not None and reasoning.get("provided_context") is not None
        query = state["query"] if follow_up else _question(state)
        ev = retriever.acquire(query) if k is None else retriever.retrieve(query, k)
        context = retriever.context(ev)
        docs = evidence_to_documents(ev, retriever=getattr(retriever, "name", ""))
        facts = [f.text for f in ev.facts]
        record = {"query": query, **ev.trace}
        if follow_up:
            context = cot.merge_context(reasoning["provided_context"], context)
            docs = _merge_documents(state.get("documents") or [], docs)
            facts = list(dict.fromkeys([*(state.get("facts") or []), *facts]))
            trace = _trace(state, retrievals=[*(state.get("trace") or {}).get("retrievals", []), record])
            return {"documents": docs, "facts": facts, "context": context, "query": None, "trace": trace}
        trace = _trace(state, retrievals=[record], reasoning=[])
        update = {"documents": docs, "facts": facts, "context": context, "trace": trace}
        if cot is not None:
            update.update(steps=0, reasoning=None, query=None)
        return update

    return _node("retrieve", sa_retrieve)


def make_sa_reason_node(cot: Any) -> RunnableLambda:
    """One SA-RAG CoT reasoning step over ``context``: writes ``reasoning`` (``None`` when the call
    failed), ``steps`` (+1), ``query`` (the follow-up question) and appends to ``trace["reasoning"]``
    (``{"error": why}`` for a failed step)."""

    def reason(state: dict[str, Any]) -> dict[str, Any]:
        out, error = cot.reason_with_error(_question(state), state.get("context") or "")
        entry = out if out is not None else {"error": error}
        update: dict[str, Any] = {
            "reasoning": out,
            "steps": int(state.get("steps") or 0) + 1,
            "trace": _trace(state, reasoning=[*(state.get("trace") or {}).get("reasoning", []), entry]),
        }
        if out and not out.get("answer_possible") and out.get("additional_question"):
            update["query"] = str(out["additional_question"])
        return update

    return _node("reason", reason)


def sa_route_after_reason(max_steps: int, *, done: str = "generate") -> Callable[[dict[str, Any]], str]:
    """Router after ``reason``: ``done`` when answerable (or no follow-up, or a failed call at the
    step cap), ``"reason"`` again after a failed call, ``"retrieve"`` for a follow-up question."""

    def route(state: dict[str, Any]) -> str:
        out = state.get("reasoning")
        if out is None:
            return "reason" if int(state.get("steps") or 0) < max_steps else done
        if out.get("answer_possible") or not out.get("additional_question"):
            return done
        return "retrieve"

    return route


def sa_route_after_retrieve(max_steps: int, *, done: str = "generate") -> Callable[[dict[str, Any]], str]:
    """Router after ``retrieve``: ``"reason"`` while fewer than ``max_steps`` reasoning steps ran."""

    def route(state: dict[str, Any]) -> str:
        return "reason" if int(state.get("steps") or 0) < max_steps else done

    return route


# --------------------------------------------------------------------------- FRAG / hop routing nodes

_ROUTES = ("simple", "complex")
_RouteFn = Callable[[str], "tuple[str, float | None, str]"]


def _is_frag(obj: Any) -> bool:
    from ..methods.frag import FRAGRetriever

    return isinstance(obj, FRAGRetriever)


def _check_route(route: Any, source: str) -> str:
    if route not in _ROUTES:
        raise ValueError(f"{source} returned route {route!r}; expected 'simple' or 'complex'")
    return route


def _hop_router(classifier: Any, embedder: Embedder | None = None) -> _RouteFn:
    """``question -> (route, p_complex | None, by)`` for any accepted ``classifier`` (see make_route_node)."""
    from ..methods.frag import heuristic_route
    from ..methods.hop_classifier import HopClassifier, strip_topic_marks

    if classifier is None:
        return lambda q: (heuristic_route(q), None, "heuristic")
    if isinstance(classifier, (str, os.PathLike)):
        classifier = HopClassifier.load(classifier, embedder=embedder)
    if _is_frag(classifier):
        frag = classifier
        by = "mode" if frag.mode != "auto" else ("classifier" if frag.classifier is not None else "heuristic")
        return lambda q: (*frag.route(q), by)
    plain = strip_topic_marks  # as FRAGRetriever.route feeds its classifier
    if callable(getattr(classifier, "predict_proba", None)):

        def by_proba(q: str) -> tuple[str, float | None, str]:
            p = float(np.ravel(classifier.predict_proba([plain(q)]))[0])
            return ("complex" if p >= 0.5 else "simple"), p, "classifier"

        return by_proba
    if callable(getattr(classifier, "route", None)) or callable(classifier):
        fn = classifier.route if callable(getattr(classifier, "route", None)) else classifier

        def by_route(q: str) -> tuple[str, float | None, str]:
            out = fn(plain(q))
            route, p = out if isinstance(out, tuple) else (out, None)
            return route, (None if p is None else float(p)), "classifier"

        return by_route
    raise TypeError(
        "classifier must be None, a HopClassifier (or its saved path), a FRAGRetriever, an object with "
        f"predict_proba()/route(), or a callable question -> route; got {type(classifier).__name__}"
    )


def make_route_node(classifier: Any = None, *, embedder: Embedder | None = None) -> RunnableLambda:
    """FRAG's hop-aware router (METHODS.md §2 step 2, paper ``frag``) as a node: writes ``route``
    (``"simple"``: at most 2 hops; ``"complex"``) and ``trace["route"] = {"route", "p_complex", "by"}``.

    ``classifier``: a trained :class:`~kgrag_plugins.methods.hop_classifier.HopClassifier`, the path
    of a saved one (loaded with ``embedder``, default MiniLM), a ``FRAGRetriever`` (its own
    ``route``: classifier, heuristic or forced ``mode``), any object with ``predict_proba`` (P(complex))
    or ``route``, a callable ``question -> route`` (these three get the question with its ``[ ]`` topic
    markers removed, as ``FRAGRetriever.route`` feeds its classifier), or ``None``: the LLM-free
    :func:`~kgrag_plugins.methods.frag.heuristic_route`. ``by`` is ``"classifier"``, ``"heuristic"``
    or ``"mode"``. The route is always recomputed from ``state["query"]`` or ``state["question"]``
    (a ``route`` already in the state is overwritten), so a checkpointed thread re-routes each question.
    """
    router = _hop_router(classifier, embedder)

    def route(state: dict[str, Any]) -> dict[str, Any]:
        r, p, by = router(state.get("query") or _question(state))
        r = _check_route(r, "the hop classifier")
        return {"route": r, "trace": _trace(state, route={"route": r, "p_complex": p, "by": by})}

    return _node("router", route)


def route_by_hops(state: dict[str, Any]) -> Literal["simple", "complex"]:
    """Conditional-edge function after :func:`make_route_node`: ``state["route"]``."""
    return _check_route(state.get("route"), "state['route']")  # type: ignore[return-value]


def make_frag_node(retriever: FRAGRetriever, route: str | None = None, k: int = 5) -> RunnableLambda:
    """FRAG path retrieval (METHODS.md §2 steps 3-7) as a node: ``retriever.evidence(query, k, route=...)``.

    ``route`` forces FRAG's simple or complex pipeline; ``None`` uses ``state["route"]`` when set, else
    the retriever routes itself. ``state["topic_entities"]`` (entity ids), when given, replaces the
    question's entity linking. Writes ``facts`` (the verbalised paths, best first), ``documents``
    (passages linked to path entities; empty for a KG without passages), ``answers`` (LLM-free: end
    entities of the top paths), ``route`` and ``trace["frag"]`` (FRAG's trace: topic entities, sizes,
    timings; ``error`` when no topic entity was found). ``ainvoke`` runs it in a worker thread.
    """
    if route is not None and route not in _ROUTES:
        raise ValueError(f"route must be None, 'simple' or 'complex', got {route!r}")
    if not _is_frag(retriever):
        raise TypeError(f"make_frag_node needs a FRAGRetriever, got {type(retriever).__name__}")

    def args(state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        chosen = route or (state["route"] if state.get("route") in _ROUTES else None)
        return state.get("query") or _question(state), {"route": chosen, "topic_entities": state.get("topic_entities")}

    def update(state: dict[str, Any], ev: Evidence) -> dict[str, Any]:
        return {
            "documents": evidence_to_documents(ev, retriever=retriever.name),
            "facts": [f.text for f in ev.facts],
            "answers": list(ev.trace.get("answers") or []),
            "route": ev.trace.get("route"),
            "trace": _trace(state, frag=ev.trace),
        }

    def frag(state: dict[str, Any]) -> dict[str, Any]:
        q, kw = args(state)
        return update(state, retriever.evidence(q, k, **kw))

    async def afrag(state: dict[str, Any]) -> dict[str, Any]:
        q, kw = args(state)
        return update(state, await asyncio.to_thread(retriever.evidence, q, k, **kw))

    return _node(f"frag_{route}" if route else "frag", frag, afrag)


def _frag_generate_node(frag: FRAGRetriever) -> RunnableLambda:
    """FRAG's answer step (§2 step 8) over the paths in ``facts`` and the ``answers`` in state."""

    def generate(state: dict[str, Any]) -> dict[str, Any]:
        q = _question(state)
        frag_trace = dict((state.get("trace") or {}).get("frag") or {})
        frag_trace["answers"] = list(state.get("answers") or frag_trace.get("answers") or [])
        facts = [f if isinstance(f, Fact) else Fact(str(f), kind="path") for f in state.get("facts") or ()]
        ev = Evidence(q, documents_to_passages(state.get("documents")), facts, frag_trace)
        ans = frag.answer(q, evidence=ev)
        update: dict[str, Any] = {"generation": ans.text}
        if ans.metadata.get("llm_error"):
            errors = [
                *(state.get("trace") or {}).get("llm_error", []),
                {"step": "answer", "error": ans.metadata["llm_error"]},
            ]
            update["trace"] = _trace(state, llm_error=errors)
        return update

    return _node("generate", generate)


# --------------------------------------------------------------------------- compiled graphs


def _method(retriever_or_index: Any, build: Callable[[KnowledgeIndex], Any]) -> Any:
    return build(retriever_or_index) if isinstance(retriever_or_index, KnowledgeIndex) else retriever_or_index


def _same_llm(a: Any, b: Any) -> bool:
    inner = lambda x: getattr(x, "chat_model", None) or getattr(x, "llm", None) or x  # noqa: E731
    return a is b or (a is not None and inner(a) is inner(b))


def activation_graph(
    retriever_or_index: Any, llm: Any = None, *, k: int = 5, checkpointer: Any = None, **kw: Any
) -> CompiledStateGraph:
    """``retrieve`` (``ActivationRetriever``, LLM-free) ``-> [generate]`` (``generate`` only with ``llm``).

    ``kw`` go to ``ActivationRetriever`` when an index is given. Any other kgrag ``Retriever`` works too.
    """

    def build(index: KnowledgeIndex) -> Any:
        from ..methods.activation import ActivationRetriever

        return ActivationRetriever(index, **kw)

    retriever = _method(retriever_or_index, build)
    g = StateGraph(KGRAGState)
    g.add_node("retrieve", make_retrieve_node(retriever, k))
    g.add_edge(START, "retrieve")
    if llm is not None:
        g.add_node("generate", make_generate_node(llm))
        g.add_edge("retrieve", "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge("retrieve", END)
    return g.compile(checkpointer=checkpointer, name="activation")


def kg_infused_graph(
    retriever_or_index: Any, llm: Any = None, *, k_each: int | None = None, checkpointer: Any = None, **kw: Any
) -> CompiledStateGraph:
    """KG-Infused RAG: ``activate -> expand_query -> retrieve -> [write_note -> augment -> generate]``.

    From an index, builds ``KGInfusedRetriever(index, llm=llm, **kw)``. With a retriever, its own
    ``llm`` is used (passing a different ``llm`` is an error). The note/augment/generate steps
    run only when there is an LLM; otherwise the graph ends after dual retrieval.
    """
    llm = as_llm(llm)

    def build(index: KnowledgeIndex) -> Any:
        from ..methods.kg_infused import KGInfusedRetriever

        return KGInfusedRetriever(index, llm=llm, **kw)

    kgi = _method(retriever_or_index, build)
    if llm is not None and not _same_llm(getattr(kgi, "llm", None), llm):
        raise ValueError("kg_infused_graph: pass the LLM to KGInfusedRetriever(..., llm=...) or build from an index")
    g = StateGraph(KGRAGState)
    steps = [
        ("activate", make_activation_node(kgi)),
        ("expand_query", make_query_expansion_node(kgi)),
        ("retrieve", make_dual_retrieve_node(kgi, k_each)),
    ]
    if getattr(kgi, "llm", None) is not None:
        steps += [
            ("write_note", make_note_node(kgi)),
            ("augment", make_augment_node(kgi)),
            ("generate", make_generate_node(method=kgi)),
        ]
    prev = START
    for name, node in steps:
        g.add_node(name, node)
        g.add_edge(prev, name)
        prev = name
    g.add_edge(prev, END)
    return g.compile(checkpointer=checkpointer, name="kg_infused")


def sa_rag_graph(
    retriever_or_index: Any,
    llm: Any = None,
    *,
    max_steps: int | None = None,
    k: int | None = None,
    checkpointer: Any = None,
    **kw: Any,
) -> CompiledStateGraph:
    """SA-RAG (+ CoT): ``retrieve -> [reason <-> retrieve -> generate]``.

    From an index, builds ``SARAGRetriever(index, **kw)``; ``llm`` may also be a ready ``SARAGCoT``.
    With an LLM the CoT loop runs at most ``max_steps`` reasoning steps (default: the CoT's
    ``max_steps``, 3), retrieving again for each follow-up question, then answers from the merged
    context. Without one the graph ends after retrieval.
    """
    from ..methods.sa_rag import SARAGCoT, SARAGRetriever

    retriever = _method(retriever_or_index, lambda index: SARAGRetriever(index, **kw))
    g = StateGraph(KGRAGState)
    if llm is None:
        g.add_node("retrieve", make_sa_retrieve_node(retriever, k=k))
        g.add_edge(START, "retrieve")
        g.add_edge("retrieve", END)
        return g.compile(checkpointer=checkpointer, name="sa_rag")
    if isinstance(llm, SARAGCoT):
        cot = llm
    else:
        cot = SARAGCoT(retriever, as_llm(llm), **({} if max_steps is None else {"max_steps": max_steps}))
    steps = max_steps if max_steps is not None else cot.max_steps
    g.add_node("retrieve", make_sa_retrieve_node(retriever, cot, k=k))
    g.add_node("reason", make_sa_reason_node(cot))
    g.add_node("generate", make_generate_node(method=cot))
    g.add_edge(START, "retrieve")
    g.add_conditional_edges("retrieve", sa_route_after_retrieve(steps), ["reason", "generate"])
    g.add_conditional_edges("reason", sa_route_after_reason(steps), ["reason", "retrieve", "generate"])
    g.add_edge("generate", END)
    return g.compile(checkpointer=checkpointer, name="sa_rag")


def _branch(node: Any, route: str, k: int) -> Any:
    from ..methods.base import Retriever

    if _is_frag(node):
        return make_frag_node(node, route, k)
    if isinstance(node, Retriever):
        return make_retrieve_node(node, k)
    if isinstance(node, Runnable) or callable(node):
        return node
    raise TypeError(
        f"the {route} branch must be a kgrag Retriever, a Runnable / compiled graph or a callable node, "
        f"got {type(node).__name__}"
    )


def make_hop_router(
    simple: Any, complex: Any, *, classifier: Any = None, k: int = 5, checkpointer: Any = None
) -> CompiledStateGraph:
    """FRAG's hop-aware routing (METHODS.md §2, paper ``frag``) in front of any two branches:
    ``START -> router -> simple | complex -> END``.

    ``router`` is :func:`make_route_node` (``classifier`` as there; ``None``: the heuristic) and
    :func:`route_by_hops` picks the node named ``"simple"`` or ``"complex"``. Each branch may be a
    kgrag ``Retriever`` (a :func:`make_retrieve_node` with ``k``; a ``FRAGRetriever`` becomes a
    :func:`make_frag_node` forced to that branch's pipeline), a LangChain ``Runnable`` or compiled
    LangGraph graph (added as a subgraph node as is; shared state keys flow both ways), or a plain
    callable node ``state -> dict``. (The router node is not called ``route``: older LangGraph
    releases reject a node named like a state key.)
    """
    g = StateGraph(KGRAGState)
    g.add_node("router", make_route_node(classifier))
    g.add_node("simple", _branch(simple, "simple", k))
    g.add_node("complex", _branch(complex, "complex", k))
    g.add_edge(START, "router")
    g.add_conditional_edges("router", route_by_hops, {"simple": "simple", "complex": "complex"})
    g.add_edge("simple", END)
    g.add_edge("complex", END)
    return g.compile(checkpointer=checkpointer, name="hop_router")


def frag_graph(
    index_or_retriever: Any,
    *,
    classifier: Any = None,
    llm: Any = None,
    k: int = 5,
    checkpointer: Any = None,
    **frag_kwargs: Any,
) -> CompiledStateGraph:
    """FRAG (METHODS.md §2, paper ``frag``): ``router -> frag_simple | frag_complex -> [generate]``.

    From an index, builds ``FRAGRetriever(index, classifier=classifier, llm=llm, **frag_kwargs)``;
    the router uses its ``route`` (the trained classifier, else the heuristic; ``mode="simple"`` /
    ``"complex"`` forces a branch). Both branches are :func:`make_frag_node` on that one retriever
    with the pipeline forced. With a ready ``FRAGRetriever``, ``classifier`` (if given) overrides only
    the router, ``frag_kwargs`` are not allowed and ``llm`` must be its own. ``generate`` (FRAG's
    reasoning prompt over the top paths, first line of the reply) runs only when the retriever has an
    LLM; otherwise ``generation`` stays unset and ``answers`` holds the LLM-free answers.
    """
    from ..methods.frag import FRAGRetriever

    built = isinstance(index_or_retriever, KnowledgeIndex)
    llm = as_llm(llm)
    frag = _method(
        index_or_retriever, lambda index: FRAGRetriever(index, classifier=classifier, llm=llm, **frag_kwargs)
    )
    if not isinstance(frag, FRAGRetriever):
        raise TypeError(f"frag_graph needs a KnowledgeIndex or a FRAGRetriever, got {type(frag).__name__}")
    if not built:
        if frag_kwargs:
            raise ValueError(f"frag_graph: pass {sorted(frag_kwargs)} to FRAGRetriever(...) or build from an index")
        if llm is not None and not _same_llm(frag.llm, llm):
            raise ValueError("frag_graph: pass the LLM to FRAGRetriever(..., llm=...) or build from an index")
    router = frag if built or classifier is None else classifier
    g = StateGraph(KGRAGState)
    g.add_node("router", make_route_node(router, embedder=frag.index.embedder))
    g.add_node("frag_simple", make_frag_node(frag, "simple", k))
    g.add_node("frag_complex", make_frag_node(frag, "complex", k))
    g.add_edge(START, "router")
    g.add_conditional_edges("router", route_by_hops, {"simple": "frag_simple", "complex": "frag_complex"})
    if frag.llm is not None:
        g.add_node("generate", make_generate_node(method=frag))
        g.add_edge("frag_simple", "generate")
        g.add_edge("frag_complex", "generate")
        g.add_edge("generate", END)
    else:
        g.add_edge("frag_simple", END)
        g.add_edge("frag_complex", END)
    return g.compile(checkpointer=checkpointer, name="frag")
