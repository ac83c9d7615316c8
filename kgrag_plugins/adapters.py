"""The adapter registry: how the core reaches framework adapters without importing them.

The core (``models/``, ``index/``) never imports ``integrations/``. Where it must recognise or
produce a framework object (``as_llm`` given a LangChain chat model, ``as_embedder`` given a
LlamaIndex embedding, ``KnowledgeIndex.as_retriever``), it asks this registry for a named hook.
Adapter packages register their hooks from the entry-point group :data:`GROUP`; ours is declared in
``pyproject.toml``::

    [project.entry-points."kgrag_plugins.adapters"]
    frameworks = "kgrag_plugins.integrations:register_adapters"

The entry points are loaded once, on the first lookup (loading ``integrations`` imports no
framework). A third-party package can add hooks the same way, or call :func:`register` directly.

Hooks used by the core: ``"llm"`` (object -> our LLM adapter or ``None``), ``"embedder"``
(object -> our Embedder or ``None``), ``"build_index"``, ``"as_retriever"``, ``"as_query_engine"``
(the LlamaIndex entry points behind the :class:`~kgrag_plugins.index.store.KnowledgeIndex`
convenience methods), ``"graphs_load_runner"`` (the runner of ``kgrag bench-load --graphs-dev``: the
graphs/ app served by its dev server, ``make graphs-dev``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

__all__ = ["GROUP", "hook", "register", "require_hook"]

logger = logging.getLogger(__name__)

#: The entry-point group adapter packages register under.
GROUP = "kgrag_plugins.adapters"

_hooks: dict[str, Callable[..., Any]] = {}
_loaded = False
_lock = threading.Lock()


def register(name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as hook ``name`` (a later registration replaces an earlier one)."""
    if not name or not callable(fn):
        raise ValueError(f"register({name!r}, ...): need a name and a callable")
    _hooks[name] = fn


def _load_entry_points() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        for ep in entry_points(group=GROUP):
            try:
                ep.load()()
            except Exception as exc:  # one broken adapter package must not break the core
                logger.warning("adapter entry point %s (%s) failed to load: %s", ep.name, ep.value, exc)


def hook(name: str) -> Callable[..., Any] | None:
    """The hook registered as ``name``, or ``None`` (entry points are loaded on first use)."""
    if name not in _hooks:
        _load_entry_points()
    return _hooks.get(name)


def require_hook(name: str, purpose: str) -> Callable[..., Any]:
    """:func:`hook` that raises a clear ``ImportError`` when nothing registered ``name``."""
    fn = hook(name)
    if fn is None:
        raise ImportError(
            f"{purpose} needs the framework adapters, but no package registered the {name!r} hook in the "
            f"{GROUP!r} entry points: reinstall kgrag-plugins (pip install -e . or pip install kgrag-plugins)"
        )
    return fn
