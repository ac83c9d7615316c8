"""What an index embeds: passages (with the window vectors of long ones, :mod:`.windows`) and
entities (``"name: description"``, SA-RAG's description embedding text)."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ..models.embed_base import Embedder
from ..models.embed_windows import max_tokens, window_texts
from ..types import Passage
from .graph import KnowledgeGraph
from .windows import PassageWindows

__all__ = ["embed_passages", "embed_windows", "entity_text", "entity_vectors"]


def embed_passages(
    embedder: Embedder, passages: Sequence[Passage], progress: bool | None
) -> tuple[np.ndarray, PassageWindows, dict[str, Any]]:
    """Each passage's vector of ``embed_text``, the window vectors of the long ones, and timings
    (``embed_passages_s``; ``embed_windows_s`` and ``windows`` when there are windows)."""
    t0 = time.perf_counter()
    vecs = np.asarray(embedder.embed([p.embed_text for p in passages], progress=progress), dtype=np.float32)
    timings: dict[str, Any] = {"embed_passages_s": time.perf_counter() - t0}
    dim = vecs.shape[1] if vecs.ndim == 2 and vecs.shape[1] else int(embedder.dim)
    windows, wt = embed_windows(embedder, passages, progress, dim)
    timings.update(wt)
    return vecs, windows, timings


def embed_windows(
    embedder: Embedder, passages: Sequence[Passage], progress: bool | None, dim: int | None = None
) -> tuple[PassageWindows, dict[str, Any]]:
    """The window vectors of the passages longer than the embedder's input, and their timings."""
    t0 = time.perf_counter()
    texts: list[str] = []
    owners: list[str] = []
    floor = max_tokens(embedder) // 2
    for p in passages:
        if len(p.text) <= floor:
            continue  # certainly fits: a token covers at least one character
        w = window_texts(embedder, p.title, p.text)
        texts += w
        owners += [p.id] * len(w)
    if not texts:
        return PassageWindows.empty(int(dim or embedder.dim)), {}
    wv = np.asarray(embedder.embed(texts, progress=progress), dtype=np.float32)
    return PassageWindows(wv, owners), {"embed_windows_s": time.perf_counter() - t0, "windows": len(texts)}


def entity_text(graph: KnowledgeGraph, row: int) -> str:
    e = graph._entity_at(row)
    return f"{e.name}: {e.description}" if e.description else e.name


def entity_vectors(
    graph: KnowledgeGraph, embedder: Embedder, progress: bool | None, timings: dict[str, float]
) -> np.ndarray | None:
    """Entity vectors of ``"name: description"`` (SA-RAG's description embedding text)."""
    if graph.num_entities == 0:
        return None
    t0 = time.perf_counter()
    ent = embedder.embed([entity_text(graph, i) for i in range(graph.num_entities)], progress=progress)
    timings["embed_entities_s"] = time.perf_counter() - t0
    return ent
