"""The bundled sample corpus as a saved index: what ``graphs/`` and ``kgrag mcp`` open by default.

Indexed once with the LLM-free ``parsekg`` builder (entities, mentions triples and KG-Translator's
ParseKG, so every method runs on it) into ``$KGRAG_CACHE_DIR/graphs/sample-<hash>`` and reopened from
there afterwards; the key holds the corpus hash, the index format and the package version.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["build_sample_index", "sample_index_dir", "sample_index_path"]


def sample_index_path() -> Path:
    """Cache directory of the sample index (it may not exist yet), keyed by corpus and version."""
    from .._version import __version__
    from ..config import INDEX_FORMAT_VERSION, cache_dir
    from .loaders import bundled_file

    with bundled_file("sample_corpus.jsonl") as p:
        digest = hashlib.sha256(Path(p).read_bytes()).hexdigest()[:12]
    key = f"sample-parsekg-v{INDEX_FORMAT_VERSION}-{__version__}-{digest}"
    return (cache_dir() / "graphs" / key).resolve()


def build_sample_index(target: Path) -> None:
    """Index the bundled sample into ``target`` (built beside it, then renamed: concurrent
    processes never see a half-built index; the loser of a race drops its copy)."""
    from ..index.store import KnowledgeIndex
    from .loaders import sample_corpus

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        log.info("building the sample index (parsekg builder) into %s", target)
        index = KnowledgeIndex.build(
            sample_corpus(),
            tmp / "index",
            builder="parsekg",
            entity_vectors=True,
            settings={"corpus": "kgrag sample"},
            progress=False,
        )
        index.close()
        try:
            os.replace(tmp / "index", target)
        except OSError:
            if not (target / "manifest.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sample_index_dir() -> Path:
    """The sample index's directory, built on first call."""
    target = sample_index_path()
    if not target.exists():
        build_sample_index(target)
    return target
