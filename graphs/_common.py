"""Shared loading for the ``graphs/`` entry modules: one index and one LLM per process.

* Index: ``KGRAG_INDEX_DIR`` (a saved :class:`~kgrag_plugins.index.store.KnowledgeIndex`) if set; else
  the bundled sample corpus indexed once with the LLM-free ``parsekg`` builder (entities, mentions
  triples and KG-Translator's ParseKG, so every method graph runs on it) into
  ``$KGRAG_CACHE_DIR/graphs/sample-<hash>`` and reopened from there afterwards. Each run (the
  factory is called per run) first follows writers in other processes: when ``manifest.json`` names
  a newer generation, the index adopts it (:meth:`KnowledgeIndex.follow`) and the cached graphs'
  retrievers refresh, so a run started after a commit returned answers from it or a newer one.
  ``KGRAG_INDEX_FOLLOW=0`` pins the generation opened first.
* LLM: ``None`` (every graph's LLM-free path: the "(e)" parts of docs/methods.md) unless ``KGRAG_LLM_BASE_URL`` is set,
  then :meth:`OpenAICompatibleLLM.from_env` (``KGRAG_LLM_MODEL``, ``KGRAG_LLM_API_KEY``, ...).

Nothing is loaded at import time: each module's ``build_graph()`` (sync, for scripts) and ``graph``
(the async factory ``langgraph.json`` names, :func:`served`) go through :func:`cached_graph`, so
``langgraph dev`` and ``import graphs.frag`` stay cheap until a graph is first used.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("kgrag_plugins.graphs")

#: a sample question (sq-01, gold passages s-001 + s-005) the docs and tests run through every graph
SAMPLE_QUESTION = "Which river flows through the city where Marie Curie was born?"

_lock = threading.RLock()
_cache: dict[str, Any] = {}


def _sample_dir() -> Path:
    """Cache directory of the sample index (:func:`kgrag_plugins.datasets.sample_index.sample_index_path`)."""
    from kgrag_plugins.datasets.sample_index import sample_index_path

    return sample_index_path()


def _build_sample(target: Path) -> None:
    """Index the bundled sample into ``target`` (:func:`kgrag_plugins.datasets.sample_index.build_sample_index`)."""
    from kgrag_plugins.datasets.sample_index import build_sample_index

    build_sample_index(target)


def index_dir() -> Path:
    """``KGRAG_INDEX_DIR``, else the sample index's cache directory (built on first call)."""
    from kgrag_plugins.config import env

    configured = env("INDEX_DIR")
    if configured:
        return Path(configured).expanduser()
    target = _sample_dir()
    if not target.exists():
        _build_sample(target)
    return target


def load_index() -> Any:
    """The process's :class:`KnowledgeIndex` (opened once)."""
    with _lock:
        if "index" not in _cache:
            from kgrag_plugins.index.store import KnowledgeIndex

            _cache["index"] = KnowledgeIndex.open(index_dir())
        return _cache["index"]


def load_llm() -> Any:
    """An :class:`OpenAICompatibleLLM` when ``KGRAG_LLM_BASE_URL`` is set, else ``None`` (LLM-free)."""
    from kgrag_plugins.config import env

    if not env("LLM_BASE_URL"):
        return None
    with _lock:
        if "llm" not in _cache:
            from kgrag_plugins.models.llm import OpenAICompatibleLLM

            _cache["llm"] = OpenAICompatibleLLM.from_env()
        return _cache["llm"]


def _follow(index: Any) -> None:
    """Adopt the index's newest generation on disk unless ``KGRAG_INDEX_FOLLOW`` is off."""
    from kgrag_plugins.config import env

    if (env("INDEX_FOLLOW") or "1").strip().lower() not in ("0", "false", "no", "off"):
        index.follow()


def cached_graph(name: str, build: Callable[[Any, Any], Any]) -> Any:
    """``build(index, llm)`` once per process; the compiled graph is reused by every run (after
    :func:`_follow` brought the shared index to the newest generation)."""
    with _lock:
        if "index" in _cache:
            _follow(_cache["index"])
        if name not in _cache:
            _cache[name] = build(load_index(), load_llm())
        return _cache[name]


def served(build: Callable[[], Any]) -> Callable[..., Awaitable[Any]]:
    """The async graph factory ``langgraph.json`` points at: ``build`` runs in a worker thread, so
    opening or building the index never blocks the server's event loop (``langgraph dev`` flags
    blocking calls there). Scripts call the module's sync ``build_graph()`` instead."""

    async def graph(config: Any = None) -> Any:
        return await asyncio.to_thread(build)

    graph.__doc__ = f"Async factory of {getattr(build, '__module__', '')}.build_graph for the LangGraph server."
    return graph


def reset() -> None:
    """Forget the cached index, LLM and graphs (tests switch ``KGRAG_INDEX_DIR``)."""
    with _lock:
        index = _cache.pop("index", None)
        _cache.clear()
    if index is not None:
        index.close()
