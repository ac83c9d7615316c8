"""The state schema every kgrag graph shares (:class:`KGRAGState`) and the translation between
state keys and kgrag shapes (``Document`` <-> ``ScoredPassage``, state -> ``Evidence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from typing_extensions import TypedDict

from ...types import Evidence, Fact, Passage, ScoredPassage

if TYPE_CHECKING:  # pragma: no cover
    pass


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


def question_of(state: dict[str, Any]) -> str:
    q = state.get("question")
    if not isinstance(q, str) or not q.strip():
        raise ValueError("graph state needs a non-empty 'question'")
    return q


def with_trace(state: dict[str, Any], **entries: Any) -> dict[str, Any]:
    return {**(state.get("trace") or {}), **entries}


def llm_error_trace(state: dict[str, Any], step: str, exc: Exception) -> dict[str, Any]:
    errors = [*(state.get("trace") or {}).get("llm_error", []), {"step": step, "error": str(exc)}]
    return with_trace(state, llm_error=errors)
