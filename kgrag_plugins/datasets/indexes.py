"""The cached index of a benchmark's corpus: built once per corpus hash, embedder and graph builder.

:func:`dataset_index` is what ``kgrag bench``, ``kgrag bench --qa``, ``kgrag linking``, the DPO
trainer and the benchmark scripts open a dataset's corpus with. Entries live under
``KGRAG_CACHE_DIR`` (:func:`kgrag_plugins.config.cache_dir`) as
``<dataset>-<corpus hash>-<embedder>[-<builder>]``; one whose corpus hash does not match, or that
cannot be read, is rebuilt.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from ..config import cache_dir as default_cache_dir
from ..index.store import KnowledgeIndex, read_manifest
from ..models.embed import Embedder, default_embedder
from .loaders import Dataset

logger = logging.getLogger(__name__)

__all__ = ["dataset_index"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def dataset_index(
    dataset: Dataset,
    *,
    cache_dir: str | Path | None = None,
    embedder: Embedder | None = None,
    builder: str | None = None,
    progress: bool = True,
) -> tuple[KnowledgeIndex, bool]:
    """The cached index for a dataset's corpus (keyed by corpus hash, embedder and builder).

    Returns ``(index, reused)``. A cache entry whose corpus hash does not match is rebuilt. A
    graph index (``builder`` given) reuses the passage vectors of the plain index.
    """
    if dataset.corpus is None:
        raise ValueError(f"dataset {dataset.name!r} has no passage corpus to index")
    embedder = embedder or default_embedder()
    chash = dataset.corpus_hash()
    name = f"{_slug(dataset.name)}-{chash}-{_slug(embedder.name)}" + (f"-{builder}" if builder else "")
    path = Path(cache_dir or default_cache_dir()) / name
    if (path / "manifest.json").is_file():
        try:
            cached = read_manifest(path)
            # "windows": built with long passages' window vectors (older cache entries are rebuilt)
            if cached.get("corpus_hash") == chash and "windows" in cached:
                return KnowledgeIndex.open(path, embedder=embedder), True
        except (ValueError, FileNotFoundError) as e:  # damaged cache entry: rebuild it
            if isinstance(e, ConnectionError):  # its Chroma server is down (ChromaServerError): not damage
                raise
            logger.warning("rebuilding cached index at %s: %s", path, e)
    if builder is None:
        index = KnowledgeIndex.build(
            dataset.corpus, path, embedder=embedder, settings={"dataset": dataset.name}, progress=progress
        )
        return index, False
    base, _ = dataset_index(dataset, cache_dir=cache_dir, embedder=embedder, progress=progress)
    by_id = {p.id: i for i, p in enumerate(base.passages)}
    vectors = base.passages.vectors[[by_id[p.id] for p in dataset.corpus]]
    index = KnowledgeIndex.build(
        dataset.corpus,
        path,
        embedder=embedder,
        builder=builder,
        vectors=vectors,
        windows=base.passages.windows,
        settings={"dataset": dataset.name},
        progress=progress,
    )
    return index, False
