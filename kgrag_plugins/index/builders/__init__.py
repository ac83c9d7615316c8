"""Knowledge-graph builders: corpus -> :class:`~kgrag_plugins.index.graph.KnowledgeGraph`.

``mentions`` and ``parsekg`` are LLM-free (spaCy); ``llm`` runs the SA-RAG extraction prompts
through any :class:`~kgrag_plugins.models.llm.LLM` with an on-disk cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...types import Passage
from ..graph import KnowledgeGraph
from ..parsekg import ParseKG

BUILDERS = ("mentions", "parsekg", "llm")


def run_builder(
    builder: str,
    passages: Sequence[Passage],
    *,
    graph: KnowledgeGraph | None = None,
    parsekg: ParseKG | None = None,
    llm: Any = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    **options: Any,
) -> tuple[KnowledgeGraph, ParseKG | None, dict[str, Any]]:
    """Run one builder over ``passages`` (extending ``graph``/``parsekg`` when given).

    Returns the graph, the ParseKG (``parsekg`` builder only, else the one passed in) and the
    builder's statistics as a dict.
    """
    if builder == "mentions":
        from .mentions import build_mentions_graph

        g, stats = build_mentions_graph(passages, graph=graph, progress=progress, **options)
        return g, parsekg, stats.to_dict()
    if builder == "parsekg":
        from .parsekg import build_parsekg

        g, kg, stats = build_parsekg(passages, graph=graph, parsekg=parsekg, progress=progress, **options)
        return g, kg, stats.to_dict()
    if builder == "llm":
        if llm is None:
            raise ValueError(
                "builder 'llm' needs an LLM: pass llm=... or set KGRAG_LLM_BASE_URL / KGRAG_LLM_MODEL "
                "(use builder 'mentions' or 'parsekg' to build without one)"
            )
        from .llm_extract import build_llm_graph

        g, stats = build_llm_graph(passages, llm, cache_dir=cache_dir, graph=graph, progress=progress, **options)
        out = stats.to_dict()
        out["builder"] = "llm"
        return g, parsekg, out
    raise ValueError(f"unknown builder {builder!r}; choose one of {', '.join(BUILDERS)}")
