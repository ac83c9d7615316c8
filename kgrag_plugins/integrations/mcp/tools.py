"""What the MCP tools do, free of the SDK: one lazily opened index, argument checks, short results.

:class:`IndexTools` answers ``retrieve`` / ``explain`` / ``list_methods`` / ``index_info``; a bad
argument raises :class:`ToolInputError` (a ``ValueError``) with a one-line message, which the server
(:mod:`.server`) returns to the client as a tool error. The index opens on first use (``KGRAG_INDEX_DIR``
or the bundled sample index when no directory is given) and is shared by every call; each retrieval
reads one index generation (``Retriever.retrieve`` holds :meth:`KnowledgeIndex.reading`) and first
adopts a newer generation another process committed (``KGRAG_INDEX_FOLLOW=0`` pins the first one).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from ...names import resolve_name
from .._common import LLM_METHODS, METHODS, make_method

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_METHOD", "MAX_K", "METHOD_INFO", "IndexTools", "ToolInputError"]

DEFAULT_METHOD = "activation"
MAX_K = 50
MAX_QUESTION_CHARS = 2000
#: characters of a passage's text a result carries (the full passage stays in the index)
TEXT_CHARS = 600
MAX_FACTS = 10

#: method -> (one-line description, what it needs from the index: "passages", "graph", "parsekg")
METHOD_INFO: dict[str, tuple[str, tuple[str, ...]]] = {
    "dense": ("MiniLM cosine similarity over passage vectors", ("passages",)),
    "bm25": ("BM25 keyword search over passages", ("passages",)),
    "hybrid": ("dense + BM25 fused by reciprocal rank", ("passages",)),
    "ppr": ("personalised PageRank from the question's entities over the graph", ("passages", "graph")),
    "activation": (
        "spreading activation from the question's entities over the graph (recommended)",
        ("passages", "graph"),
    ),
    "sa_rag": ("SA-RAG: spreading activation over a question subgraph, LLM-free reasoning", ("passages", "graph")),
    "kg_infused": ("KG-Infused RAG, LLM-free: activated facts expand the query", ("passages", "graph")),
    "frag": ("FRAG: hop-routed reasoning paths from the question's entities", ("graph",)),
    "translator": ("KG-Translator, LLM-free: clues translated into the ParseKG and traced", ("passages", "parsekg")),
    "know3": (
        "Know3-RAG: activation with KG-verified evidence (trains a small KGE on first use)",
        ("passages", "graph"),
    ),
}


class ToolInputError(ValueError):
    """A tool argument the server refuses (empty question, unknown method, k out of range)."""


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _short(value: Any) -> Any:
    """A trace value as a short, JSON-able summary (lists and dicts become their sizes)."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, str):
        return _clip(value, 120)
    if isinstance(value, (list, tuple, dict)):
        return {"count": len(value)}
    return _clip(repr(value), 80)


def trace_summary(trace: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The trace in a few keys: retriever, score kind, fallback, seeds, timings, and counts of the rest."""
    out: dict[str, Any] = {"retriever": trace.get("retriever"), "score_kind": trace.get("score_kind")}
    out["seconds"] = round(seconds, 3)
    if trace.get("fallback"):
        out["fallback"] = trace["fallback"]
    seeds = trace.get("seeds") or trace.get("topic_entities") or []
    names = [s.get("name", s.get("id")) if isinstance(s, dict) else s for s in seeds[:8]]
    if names:
        out["seeds"] = [_clip(str(n), 60) for n in names]
    for key in ("timings_ms", "timings"):
        if isinstance(trace.get(key), dict):
            out[key] = {k: round(v, 2) if isinstance(v, float) else v for k, v in list(trace[key].items())[:10]}
    skip = {"retriever", "score_kind", "fallback", "seeds", "timings_ms", "timings", "summary", "expanded_query"}
    steps = {k: _short(v) for k, v in trace.items() if k not in skip}
    out["steps"] = dict(list(steps.items())[:16])
    return out


class IndexTools:
    """The four tools over one index directory (``None``: ``KGRAG_INDEX_DIR``, else the sample)."""

    def __init__(self, index_dir: str | Path | None = None, *, follow: bool | None = None) -> None:
        self._dir = Path(index_dir).expanduser() if index_dir is not None else None
        self._follow = follow
        self._index: Any = None
        self._retrievers: dict[str, Any] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ the index
    def index_dir(self) -> Path:
        """The directory served: the one given, ``KGRAG_INDEX_DIR``, else the sample (built once)."""
        if self._dir is not None:
            return self._dir
        from ...config import env

        configured = env("INDEX_DIR")
        if configured:
            return Path(configured).expanduser()
        from ...datasets.sample_index import sample_index_dir

        return sample_index_dir()

    @property
    def index(self) -> Any:
        """The :class:`KnowledgeIndex`, opened on first use and brought to the newest generation."""
        with self._lock:
            if self._index is None:
                from ...index.store import KnowledgeIndex

                path = self.index_dir()
                if not (path / "manifest.json").is_file():
                    raise FileNotFoundError(f"{path} is not a kgrag index (no manifest.json); build one: kgrag index")
                self._index = KnowledgeIndex.open(path)
                log.info("serving %s (%s)", path, self._index.counts)
            elif self._following():
                self._index.follow()
            return self._index

    def _following(self) -> bool:
        if self._follow is not None:
            return self._follow
        from ...config import env

        return (env("INDEX_FOLLOW") or "1").strip().lower() not in ("0", "false", "no", "off")

    def close(self) -> None:
        """Release the index (a later call opens it again)."""
        with self._lock:
            if self._index is not None:
                self._index.close()
            self._index, self._retrievers = None, {}

    def _missing(self, index: Any, method: str) -> str | None:
        """Why ``method`` cannot run on ``index`` (``None``: it can)."""
        needs = METHOD_INFO.get(method, ("", ("passages",)))[1]
        if "passages" in needs and not len(index.passages):
            return "the index has no passages"
        if "graph" in needs and not index.graph.num_entities:
            return "the index has no graph entities"
        if "parsekg" in needs and index.parsekg is None:
            return "the index has no ParseKG (build it with --builder parsekg)"
        return None

    def _retriever(self, method: str) -> tuple[str, Any]:
        key = resolve_name(str(method), METHODS)
        if key not in METHODS:
            raise ToolInputError(f"unknown method {method!r}; use one of: {', '.join(METHODS)} (see list_methods)")
        index = self.index
        why = self._missing(index, key)
        if why:
            raise ToolInputError(f"method {key!r} cannot run on this index: {why}")
        with self._lock:
            if key not in self._retrievers:
                self._retrievers[key] = make_method(index, key)
            return key, self._retrievers[key]

    # ------------------------------------------------------------------ the tools
    def retrieve(self, question: str, method: str = DEFAULT_METHOD, k: int = 5) -> dict[str, Any]:
        """Passages (id, title, clipped text, score), facts and a trace summary for ``question``."""
        question = _check_question(question)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ToolInputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
        key, retriever = self._retriever(method)
        start = time.perf_counter()
        ev = retriever.retrieve(question, k)
        seconds = time.perf_counter() - start
        passages = [
            {
                "id": sp.passage.id,
                "title": sp.passage.title,
                "text": _clip(sp.passage.text, TEXT_CHARS),
                "score": sp.score,
            }
            for sp in ev.passages[:k]
        ]
        facts = [{"kind": f.kind, "text": _clip(f.display, 300), "score": f.score} for f in ev.facts[:MAX_FACTS]]
        out: dict[str, Any] = {
            "question": question,
            "method": key,
            "score_kind": ev.score_kind,
            "passages": passages,
            "facts": facts,
            "trace": trace_summary(ev.trace, seconds),
        }
        if ev.trace.get("answers"):
            out["answers"] = [str(a) for a in ev.trace["answers"][:k]]
        return out

    def explain(self, question: str, k: int = 5) -> str:
        """Markdown: how spreading activation got from the question to its passages."""
        from .explain_text import explain_markdown

        question = _check_question(question)
        _, retriever = self._retriever("activation")
        ev = retriever.retrieve(question, k)
        return explain_markdown(self.index, ev)

    def list_methods(self) -> list[dict[str, Any]]:
        """Every method: name, description, whether it runs on this index, whether it can use an LLM."""
        index = self.index
        out = []
        for name in METHODS:
            description = METHOD_INFO.get(name, ("", ()))[0]
            why = self._missing(index, name)
            row: dict[str, Any] = {"name": name, "description": description, "available": why is None}
            if why:
                row["why_not"] = why
            row["llm"] = "optional; this server runs it LLM-free" if name in LLM_METHODS else "none"
            row["default"] = name == DEFAULT_METHOD
            out.append(row)
        return out

    def index_info(self) -> dict[str, Any]:
        """Counts, embedder, builder, generation and path of the served index."""
        index = self.index
        m = index.manifest
        return {
            "path": str(index.path),
            "counts": dict(index.counts),
            "embedder": m.get("embedder"),
            "builder": m.get("builder"),
            "generation": m.get("generation"),
            "format_version": m.get("format_version"),
            "kgrag_version": m.get("kgrag_version"),
            "created": m.get("created"),
        }


def _check_question(question: Any) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ToolInputError("question must be a non-empty string")
    question = question.strip()
    if len(question) > MAX_QUESTION_CHARS:
        raise ToolInputError(f"question is {len(question)} characters; the limit is {MAX_QUESTION_CHARS}")
    return question
