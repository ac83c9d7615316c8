"""The agents' pluggable retrieve step: anything retrievable as ``query, k -> Evidence``.

:func:`as_retrieve_step` accepts, in this order of detection:

- a :class:`RetrieveStep` (returned as is);
- a kgrag :class:`~kgrag_plugins.methods.base.Retriever` (``retrieve(q, k)`` / ``aretrieve``);
- a LlamaIndex ``BaseRetriever`` (``retrieve(q)`` -> ``NodeWithScore`` list; the first ``k``
  passage nodes are kept; nodes with ``metadata["kind"]`` ``fact`` / ``path`` / ``clue`` become facts);
- a LangChain ``BaseRetriever`` (``invoke(q)`` -> ``Document`` list; the first ``k`` are kept);
- a LangGraph node, compiled graph or other LangChain ``Runnable``, or a plain callable taking a
  state dict: called with ``{"question": q, "query": q}``; its ``documents`` (``Document`` s or
  dicts) and ``facts`` are read;
- a plain callable ``query -> list[str | Document | NodeWithScore | ScoredPassage | Passage | dict]``
  or ``-> Evidence`` (a second positional parameter receives ``k``).

A callable is taken as a state node when ``input="state"``, or (``"auto"``) when its first
parameter is named ``state`` or annotated with a dict / ``TypedDict`` type; otherwise it gets the
query string. Framework types are recognised without importing a framework the caller has not
loaded (an object of a framework's class means that framework is loaded).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..integrations import _instance_of
from ..methods.base import Retriever
from ..types import Evidence, Fact, Passage, ScoredPassage

__all__ = ["RetrieveStep", "as_retrieve_step", "to_evidence"]

logger = logging.getLogger(__name__)

_FACT_KINDS = ("fact", "path", "clue")

ACCEPTED = (
    "a kgrag Retriever, a LlamaIndex BaseRetriever, a LangChain BaseRetriever, a LangGraph node / compiled "
    "graph / Runnable or a callable taking a state dict {'question', 'query'} and returning {'documents': [...]}, "
    "a callable query -> list of str / Document / NodeWithScore / ScoredPassage / Passage, or -> Evidence, "
    "or a RetrieveStep"
)


class RetrieveStep:
    """A retrieval callable for the agents: ``step(query, k=None) -> Evidence`` and
    ``await step.acall(query, k=None)``. ``k=None`` uses the step's default :attr:`k`.

    Attributes: ``name`` (shown in traces and document metadata), ``k`` (default passages per
    call), ``kind`` (what was wrapped), ``source`` (the wrapped object), ``calls`` (how many
    retrievals this step has run).
    """

    def __init__(
        self,
        fn: Callable[[str, int], Evidence],
        *,
        name: str = "retriever",
        k: int = 6,
        afn: Callable[[str, int], Awaitable[Evidence]] | None = None,
        kind: str = "callable",
        source: Any = None,
    ) -> None:
        _check_k(k)
        self._fn = fn
        self._afn = afn
        self.name = name
        self.k = int(k)
        self.kind = kind
        self.source = source
        self.calls = 0

    def __repr__(self) -> str:
        return f"RetrieveStep({self.name!r}, kind={self.kind!r}, k={self.k})"

    def _args(self, query: Any, k: int | None) -> tuple[str, int]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"retrieve step {self.name!r}: query must be a non-empty string, got {query!r}")
        k = self.k if k is None else k
        _check_k(k)
        return query, int(k)

    def _finish(self, query: str, k: int, ev: Evidence) -> Evidence:
        if not isinstance(ev, Evidence):
            ev = to_evidence(query, ev, k)
        if len(ev.passages) > k:
            ev = ev.top(k)
        ev.trace.setdefault("retriever", self.name)
        self.calls += 1
        return ev

    def __call__(self, query: str, k: int | None = None) -> Evidence:
        query, k = self._args(query, k)
        return self._finish(query, k, self._fn(query, k))

    async def acall(self, query: str, k: int | None = None) -> Evidence:
        """Async retrieval: the wrapped object's own async API when it has one, else a worker thread."""
        query, k = self._args(query, k)
        if self._afn is not None:
            ev = await self._afn(query, k)
        else:
            ev = await asyncio.to_thread(self._fn, query, k)
        return self._finish(query, k, ev)


def _check_k(k: Any) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int (passages per retrieval), got {k!r}")


# ---------------------------------------------------------------------- shape conversion


def _text_id(text: str) -> str:
    return "txt-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _is_document(x: Any) -> bool:
    return _instance_of(x, "langchain_core.documents", "Document") or (
        hasattr(x, "page_content") and hasattr(x, "metadata")
    )


def _is_node_with_score(x: Any) -> bool:
    return _instance_of(x, "llama_index.core.schema", "NodeWithScore") or (
        hasattr(x, "node") and hasattr(x, "score") and callable(getattr(getattr(x, "node", None), "get_content", None))
    )


def _from_node(nws: Any) -> ScoredPassage | Fact:
    node = nws.node
    meta = dict(getattr(node, "metadata", None) or {})
    text = node.get_content()
    score = float(nws.score) if nws.score is not None else 0.0
    if meta.get("kind") in _FACT_KINDS:
        return Fact(text, kind=str(meta["kind"]), score=score)
    title = str(meta.pop("title", "") or "")
    pid = str(meta.pop("id", None) or getattr(node, "node_id", None) or _text_id(text))
    meta.pop("kind", None)
    return ScoredPassage(Passage(pid, text, title, meta), score)


def _from_document(doc: Any) -> ScoredPassage | Fact:
    meta = dict(doc.metadata or {})
    if meta.get("kind") in _FACT_KINDS:
        return Fact(doc.page_content, kind=str(meta["kind"]), score=float(meta.get("score") or 0.0))
    text = doc.page_content
    pid = str(getattr(doc, "id", None) or meta.get("id") or meta.get("source") or _text_id(text))
    score = float(meta.pop("score", 0.0) or 0.0)
    title = str(meta.pop("title", "") or "")
    for key in ("id", "kind", "retriever"):
        meta.pop(key, None)
    return ScoredPassage(Passage(pid, text, title, meta), score)


def _item(x: Any) -> ScoredPassage | Fact:
    if isinstance(x, ScoredPassage):
        return x
    if isinstance(x, Passage):
        return ScoredPassage(x, 0.0)
    if isinstance(x, Fact):
        return x
    if isinstance(x, str):
        return ScoredPassage(Passage(_text_id(x), x), 0.0)
    if _is_document(x):
        return _from_document(x)
    if _is_node_with_score(x):
        return _from_node(x)
    if isinstance(x, Mapping):
        if x.get("kind") in _FACT_KINDS:
            return Fact(str(x.get("text", "")), kind=str(x["kind"]), score=float(x.get("score") or 0.0))
        return _dict_passage(x)
    raise TypeError(
        f"a retriever returned a {type(x).__name__}; expected str, LangChain Document, LlamaIndex "
        "NodeWithScore, ScoredPassage, Passage or a dict {'id', 'text', 'title', 'score'}"
    )


def _dict_passage(d: Mapping[str, Any]) -> ScoredPassage:
    """A dict ``{"id", "text" | "page_content", "title", "score", ...}`` as a scored passage."""
    text = str(d.get("text", d.get("page_content", "")))
    meta = {k: v for k, v in d.items() if k not in ("id", "text", "page_content", "title", "score", "kind")}
    pid = str(d.get("id") or _text_id(text))
    return ScoredPassage(Passage(pid, text, str(d.get("title") or ""), meta), float(d.get("score") or 0.0))


def to_evidence(query: str, result: Any, k: int | None = None) -> Evidence:
    """Whatever a retriever returned as an :class:`Evidence` (at most ``k`` passages; facts are
    kept whole): an ``Evidence``; a list of str / Document / NodeWithScore / ScoredPassage /
    Passage / dict items; or a state update ``{"documents": [...], "facts": [...]}``."""
    if isinstance(result, Evidence):
        return result.top(k) if k is not None and len(result.passages) > k else result
    trace: dict[str, Any] = {}
    extra_facts: list[Fact] = []
    if isinstance(result, Mapping):
        extra_facts = [f if isinstance(f, Fact) else Fact(str(f)) for f in result.get("facts") or ()]
        if isinstance(result.get("trace"), Mapping):
            trace = {"node": dict(result["trace"])}
        result = result.get("documents") or []
    if result is None:
        result = []
    if isinstance(result, (str, bytes)) or not isinstance(result, (list, tuple)):
        raise TypeError(
            f"a retriever returned {type(result).__name__}; expected a list of passages/documents/nodes, "
            "an Evidence, or a state update {'documents': [...]}"
        )
    passages: list[ScoredPassage] = []
    facts: list[Fact] = []
    seen: set[str] = set()
    for x in result:
        it = _item(x)
        if isinstance(it, Fact):
            facts.append(it)
        elif it.passage.id not in seen:
            seen.add(it.passage.id)
            passages.append(it)
    if k is not None:
        passages = passages[:k]
    return Evidence(query, passages, facts + extra_facts, trace)


# ---------------------------------------------------------------------- detection


def _first_param(fn: Callable[..., Any]) -> tuple[inspect.Parameter | None, int]:
    """The first parameter of ``fn`` and how many positional parameters it has (-1: *args)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, 1
    params = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return (params[0] if params else None), -1
    return (params[0] if params else None), len(params)


def _takes_state(fn: Callable[..., Any]) -> bool:
    first, _ = _first_param(fn)
    if first is None:
        return False
    if first.name in ("state", "inputs", "input_state"):
        return True
    ann = first.annotation
    if isinstance(ann, str):
        try:
            ann = typing.get_type_hints(fn).get(first.name, ann)
        except Exception:  # noqa: BLE001 - unresolvable forward reference: judge by name only
            return False
    origin = typing.get_origin(ann) or ann
    if isinstance(origin, type) and (issubclass(origin, (dict, Mapping)) or typing.is_typeddict(origin)):
        return True
    return False


def _run_coroutine(name: str, make: Callable[[], Any]) -> Any:
    """Run an async retriever from sync code (the agents' nodes are sync; LangGraph runs them in
    a worker thread under ``ainvoke``). Inside a running event loop of this thread use ``acall``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    raise TypeError(f"{name} is async and an event loop is running here: use `await step.acall(query)`")


def _state_fns(obj: Any, k_default: int) -> tuple[Callable[[str, int], Any], Callable[[str, int], Awaitable[Any]]]:
    def state_of(query: str) -> dict[str, Any]:
        return {"question": query, "query": query}

    if callable(getattr(obj, "invoke", None)):

        def fn(query: str, k: int) -> Evidence:
            return to_evidence(query, obj.invoke(state_of(query)), k)

        async def afn(query: str, k: int) -> Evidence:
            return to_evidence(query, await obj.ainvoke(state_of(query)), k)

        return fn, afn

    def fn2(query: str, k: int) -> Evidence:
        if inspect.iscoroutinefunction(obj):
            name = getattr(obj, "__name__", "node")
            return to_evidence(query, _run_coroutine(name, lambda: obj(state_of(query))), k)
        return to_evidence(query, obj(state_of(query)), k)

    async def afn2(query: str, k: int) -> Evidence:
        if inspect.iscoroutinefunction(obj):
            return to_evidence(query, await obj(state_of(query)), k)
        return await asyncio.to_thread(fn2, query, k)

    return fn2, afn2


def as_retrieve_step(obj: Any, k: int = 6, *, name: str | None = None, input: str = "auto") -> RetrieveStep:
    """Wrap ``obj`` as a :class:`RetrieveStep` with default ``k`` passages per call (see the module
    docstring for what is accepted). ``input`` (``"auto"`` | ``"state"`` | ``"query"``) says how a
    plain callable or a ``Runnable`` is called; ``auto``: ``Runnable`` s and callables whose first
    parameter is ``state`` or dict-typed get a state dict, other callables the query.
    Anything else raises ``TypeError`` naming the accepted kinds."""
    if input not in ("auto", "state", "query"):
        raise ValueError(f"input must be 'auto', 'state' or 'query', got {input!r}")
    _check_k(k)
    if isinstance(obj, RetrieveStep):
        return obj
    label = name or getattr(obj, "name", None)
    if isinstance(obj, Retriever):
        return RetrieveStep(
            obj.retrieve, afn=obj.aretrieve, name=str(label or "retriever"), k=k, kind="kgrag", source=obj
        )
    if _instance_of(obj, "llama_index.core.base.base_retriever", "BaseRetriever"):

        def li_fn(query: str, kk: int) -> Evidence:
            return to_evidence(query, obj.retrieve(query), kk)

        async def li_afn(query: str, kk: int) -> Evidence:
            return to_evidence(query, await obj.aretrieve(query), kk)

        return RetrieveStep(
            li_fn, afn=li_afn, name=str(name or type(obj).__name__), k=k, kind="llama_index", source=obj
        )
    if _instance_of(obj, "langchain_core.retrievers", "BaseRetriever"):

        def lc_fn(query: str, kk: int) -> Evidence:
            return to_evidence(query, obj.invoke(query), kk)

        async def lc_afn(query: str, kk: int) -> Evidence:
            return to_evidence(query, await obj.ainvoke(query), kk)

        return RetrieveStep(lc_fn, afn=lc_afn, name=str(name or type(obj).__name__), k=k, kind="langchain", source=obj)
    is_runnable = _instance_of(obj, "langchain_core.runnables", "Runnable") or (
        callable(getattr(obj, "invoke", None)) and callable(getattr(obj, "ainvoke", None))
    )
    if is_runnable and input != "query":
        fn, afn = _state_fns(obj, k)
        return RetrieveStep(fn, afn=afn, name=str(label or type(obj).__name__), k=k, kind="node", source=obj)
    if is_runnable:  # input == "query": a Runnable query -> documents

        def rq_fn(query: str, kk: int) -> Evidence:
            return to_evidence(query, obj.invoke(query), kk)

        async def rq_afn(query: str, kk: int) -> Evidence:
            return to_evidence(query, await obj.ainvoke(query), kk)

        return RetrieveStep(rq_fn, afn=rq_afn, name=str(label or type(obj).__name__), k=k, kind="runnable", source=obj)
    if callable(obj):
        fname = str(name or getattr(obj, "__name__", None) or type(obj).__name__)
        if input == "state" or (input == "auto" and _takes_state(obj)):
            fn, afn = _state_fns(obj, k)
            return RetrieveStep(fn, afn=afn, name=fname, k=k, kind="node", source=obj)
        _, n_pos = _first_param(obj)
        pass_k = n_pos == -1 or n_pos >= 2
        is_async = inspect.iscoroutinefunction(obj)

        def call(query: str, kk: int) -> Any:
            return obj(query, kk) if pass_k else obj(query)

        def q_fn(query: str, kk: int) -> Evidence:
            if is_async:
                return to_evidence(query, _run_coroutine(fname, lambda: call(query, kk)), kk)
            return to_evidence(query, call(query, kk), kk)

        async def q_afn(query: str, kk: int) -> Evidence:
            if is_async:
                return to_evidence(query, await call(query, kk), kk)
            return await asyncio.to_thread(q_fn, query, kk)

        return RetrieveStep(q_fn, afn=q_afn, name=fname, k=k, kind="callable", source=obj)
    raise TypeError(f"cannot use a {type(obj).__module__}.{type(obj).__name__} as a retrieve step: expected {ACCEPTED}")
