"""Framework-free helpers shared by the LangChain and LlamaIndex adapters.

- :func:`make_method`: a kgrag retriever by name (``"activation"``, ``"frag"``, ...), for
  ``as_retriever(method=...)`` in both frameworks.
- :func:`select_facts`: the facts an adapter shows (opt-in, capped, de-duplicated).
- :func:`relevance_scores`: cosine-like scores in [0, 1] for passages and facts (DESIGN.md,
  "Conventions for the integrations"): each method scores on its own scale (activation mass,
  PPR, FRAG path scores ...), which a framework's score cut-offs cannot read; the adapters expose
  ``max(0, cos(query, item))`` from the index's own vectors instead and keep the method's score
  as ``method_score``. The method's *order* is kept.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..names import resolve_name

if TYPE_CHECKING:  # pragma: no cover
    from ..methods.base import Retriever
    from ..types import Evidence, Fact, ScoredPassage

__all__ = [
    "METHODS",
    "ScoredItem",
    "fact_id",
    "fact_metadata",
    "make_method",
    "passage_metadata",
    "relevance_scores",
    "scored_items",
    "select_facts",
]

logger = logging.getLogger("kgrag_plugins.integrations")

#: Default cap on fact / path / clue items after the passages.
DEFAULT_MAX_FACTS = 5


def _dense(index: Any, **kw: Any) -> Retriever:
    from ..methods.baselines import DenseRetriever

    return DenseRetriever(index, **kw)


def _bm25(index: Any, **kw: Any) -> Retriever:
    from ..methods.baselines import BM25Retriever

    return BM25Retriever(index, **kw)


def _hybrid(index: Any, **kw: Any) -> Retriever:
    from ..methods.baselines import HybridRetriever

    return HybridRetriever(index, **kw)


def _ppr(index: Any, **kw: Any) -> Retriever:
    from ..methods.baselines import PPRRetriever

    return PPRRetriever(index, **kw)


def _activation(index: Any, **kw: Any) -> Retriever:
    from ..methods.activation import ActivationRetriever

    return ActivationRetriever(index, **kw)


def _sa_rag(index: Any, **kw: Any) -> Retriever:
    from ..methods.sa_rag import SARAGRetriever

    return SARAGRetriever(index, **kw)


def _kg_infused(index: Any, **kw: Any) -> Retriever:
    from ..methods.kg_infused import KGInfusedRetriever

    return KGInfusedRetriever(index, **kw)


def _frag(index: Any, **kw: Any) -> Retriever:
    from ..methods.frag import FRAGRetriever

    return FRAGRetriever(index, **kw)


def _translator(index: Any, **kw: Any) -> Retriever:
    from ..methods.translator import TranslatorRetriever

    return TranslatorRetriever(index, **kw)


def _know3(index: Any, base: Any = "activation", **kw: Any) -> Retriever:
    from ..methods.know3 import Know3Retriever

    inner = make_method(index, base) if isinstance(base, str) else base
    return Know3Retriever(index, inner, **kw)


#: method name -> factory ``(index, **opts) -> Retriever``; ``-`` and ``_`` are interchangeable.
METHODS: dict[str, Callable[..., Retriever]] = {
    "dense": _dense,
    "bm25": _bm25,
    "hybrid": _hybrid,
    "ppr": _ppr,
    "activation": _activation,
    "sa_rag": _sa_rag,
    "kg_infused": _kg_infused,
    "frag": _frag,
    "translator": _translator,
    "know3": _know3,
}
#: Methods whose retrieval step can use an LLM (``llm=`` is passed only to these).
LLM_METHODS = frozenset({"kg_infused", "frag", "translator", "know3"})


def make_method(index: Any, method: str = "activation", *, llm: Any = None, **opts: Any) -> Retriever:
    """The kgrag retriever ``method`` over ``index`` (``opts`` go to its constructor).

    ``llm`` (ours, LangChain, LlamaIndex: :func:`~kgrag_plugins.models.llm.as_llm`) is given to the
    methods that use one (:data:`LLM_METHODS`); an ``llm`` for an LLM-free method raises.
    """
    from ..models.llm import as_llm

    key = resolve_name(method, METHODS)  # kg-infused -> kg_infused
    if key not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(sorted(METHODS))}")
    if llm is not None:
        if key not in LLM_METHODS:
            raise ValueError(f"method {method!r} is LLM-free; methods that take an llm: {sorted(LLM_METHODS)}")
        opts["llm"] = as_llm(llm)
    return METHODS[key](index, **opts)


def select_facts(evidence: Evidence, include_facts: bool = True, max_facts: int | None = None) -> list[Fact]:
    """The facts an adapter shows: none unless ``include_facts``; first ``max_facts`` distinct
    ``(kind, text)`` pairs in the method's order (``None``: all)."""
    if not include_facts:
        return []
    out, seen = [], set()
    for f in evidence.facts:
        key = (f.kind, f.text)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
        if max_facts is not None and len(out) >= max_facts:
            break
    return out


def relevance_scores(
    index: Any, query: str, passage_ids: Sequence[str], fact_texts: Sequence[str] = ()
) -> tuple[list[float], list[float]] | None:
    """``max(0, cos(query, x))`` for each passage (its stored vector) and fact text (embedded
    with the query in one batch), or ``None`` when ``index`` has no embedder / passage vectors.

    A passage the store does not hold (e.g. from another index) scores 0.
    """
    store = getattr(index, "passages", None)
    embedder = getattr(index, "embedder", None)
    vectors = getattr(store, "vectors", None)
    if store is None or embedder is None or vectors is None:
        return None
    try:
        vecs = np.asarray(embedder.embed([query, *fact_texts], progress=False), dtype=np.float32)
    except Exception as exc:  # an embedder failure must not break retrieval: keep method scores
        logger.warning("relevance scores unavailable (%s: %s); using the method's scores", type(exc).__name__, exc)
        return None
    q = vecs[0]
    p_scores = []
    for pid in passage_ids:
        if pid in store:
            v = vectors[store.position(pid)]
            p_scores.append(_unit(float(np.dot(q, v) / (np.linalg.norm(v) * np.linalg.norm(q) or 1.0))))
        else:
            p_scores.append(0.0)
    f_scores = [_unit(float(np.dot(q, v) / (np.linalg.norm(v) * np.linalg.norm(q) or 1.0))) for v in vecs[1:]]
    return p_scores, f_scores


def _unit(x: float) -> float:
    return min(1.0, max(0.0, x))


# --------------------------------------------------------------------------- items with metadata


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def small_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """Keep flat, JSON-friendly entries (string keys; scalars and lists of scalars) so vector stores
    and LlamaIndex's ``TextNode`` (``dict[str, Any]``) accept them."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            continue
        if _scalar(value):
            out[key] = value
        elif isinstance(value, (list, tuple)) and all(_scalar(v) for v in value):
            out[key] = list(value)
    return out


def passage_metadata(sp: ScoredPassage, *, retriever: str = "", rank: int | None = None) -> dict[str, Any]:
    """``title``, ``kind="passage"``, ``passage_id`` (+ ``retriever``, ``rank``) over the passage's own
    flat metadata."""
    p = sp.passage
    meta = small_metadata(p.metadata)
    meta.update(title=p.title, kind="passage", passage_id=p.id)
    if retriever:
        meta["retriever"] = retriever
    if rank is not None:
        meta["rank"] = rank
    return meta


def fact_id(fact: Fact) -> str:
    """A stable id ``"<kind>:<hash of kind + text>"`` (fusion and de-duplication rely on it)."""
    digest = hashlib.sha1(f"{fact.kind}\x1f{fact.text}".encode("utf-8")).hexdigest()[:16]
    return f"{fact.kind}:{digest}"


def fact_metadata(fact: Fact, *, retriever: str = "") -> dict[str, Any]:
    """The fact's flat data (its own ``kind`` / ``title`` keys renamed ``fact_*``) plus ``kind``;
    ``masked``: the raw text with its ``##`` / ``@@`` marks, when the shown text differs from it."""
    meta = {f"fact_{k}" if k in ("kind", "title") else k: v for k, v in small_metadata(fact.data).items()}
    meta["kind"] = fact.kind
    if fact.display != fact.text:
        meta.setdefault("masked", fact.text)
    if retriever:
        meta["retriever"] = retriever
    return meta


@dataclass
class ScoredItem:
    """One passage or fact as an adapter shows it: id, text, score and flat metadata."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


def scored_items(
    evidence: Evidence,
    *,
    index: Any = None,
    include_facts: bool = True,
    max_facts: int | None = DEFAULT_MAX_FACTS,
    retriever: str = "",
    score: str = "cosine",
) -> list[ScoredItem]:
    """Passages (method order) then facts (:func:`select_facts`) as :class:`ScoredItem` s.

    ``score="cosine"``: ``item.score`` = :func:`relevance_scores` against ``evidence.query`` (needs
    ``index``), the method's score kept as ``metadata["method_score"]``; ``"method"`` (or no index):
    the method's own score. When the retrieval called an LLM, the first item's metadata holds its
    totals (:func:`usage_metadata`: ``llm_calls``, ``llm_prompt_tokens``, ``llm_completion_tokens``,
    ``llm_seconds``; once, so summing over items is safe; ``Evidence.trace["llm_usage"]`` has them
    per step).
    """
    if score not in ("cosine", "method"):
        raise ValueError(f"score must be 'cosine' or 'method', got {score!r}")
    facts = select_facts(evidence, include_facts, max_facts)
    rel = None
    if score == "cosine" and index is not None:
        rel = relevance_scores(index, evidence.query, evidence.passage_ids, [f.display for f in facts])
    items = []
    for i, sp in enumerate(evidence.passages):
        meta = passage_metadata(sp, retriever=retriever, rank=i + 1)
        s = float(sp.score)
        if rel is not None:
            meta["method_score"], s = s, rel[0][i]
        items.append(ScoredItem(sp.passage.id, sp.passage.text, s, meta))
    seen = {it.id for it in items}
    for j, f in enumerate(facts):
        fid = fact_id(f)
        if fid in seen:
            continue
        seen.add(fid)
        meta = fact_metadata(f, retriever=retriever)
        s = float(f.score)
        if rel is not None:
            meta["method_score"], s = s, rel[1][j]
        items.append(ScoredItem(fid, f.display, s, meta))
    if items:
        items[0].metadata.update(usage_metadata(evidence))
    return items


#: Flat metadata keys of a retrieval's LLM usage totals (on its first document / node).
USAGE_METADATA_KEYS = {
    "calls": "llm_calls",
    "prompt_tokens": "llm_prompt_tokens",
    "completion_tokens": "llm_completion_tokens",
    "seconds": "llm_seconds",
}


def usage_metadata(evidence: Evidence) -> dict[str, Any]:
    """``{"llm_calls", "llm_prompt_tokens", "llm_completion_tokens", "llm_seconds",
    "llm_tokens_estimated"?}`` from ``evidence.trace["llm_usage"]["total"]`` (flat, so vector
    stores accept it); ``{}`` for an LLM-free retrieval."""
    usage = evidence.trace.get("llm_usage") if isinstance(evidence.trace, dict) else None
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict) or not total.get("calls"):
        return {}
    out = {flat: total.get(key, 0) for key, flat in USAGE_METADATA_KEYS.items()}
    if total.get("estimated"):
        out["llm_tokens_estimated"] = True
    return out
