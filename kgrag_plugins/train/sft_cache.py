"""A cache of built translator SFT data, keyed by a fingerprint of everything the build reads.

Building the App. F.1 pairs (spaCy over every supporting passage, MiniLM over every 10-word window)
takes tens of minutes on 2 cores for the shared halves, so :func:`cached_sft_data` keeps the
result under ``$KGRAG_CACHE_DIR/sft/translator-<fingerprint>.jsonl`` (with its build counts beside
it). The fingerprint covers the source files' bytes (each dataset's ``questions.jsonl`` and
``corpus.jsonl``), the question limit, the window width, the placeholder, the embedder, the spaCy
model and :data:`BUILD_VERSION` (bumped whenever the pair construction changes), so a changed
input or recipe rebuilds and an unchanged one never does. Written atomically (temp file +
rename): a killed build leaves no half entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import cache_dir

__all__ = ["BUILD_VERSION", "cached_sft_data", "sft_fingerprint"]

logger = logging.getLogger(__name__)

#: bump when :func:`kgrag_plugins.train.translator.build_sft_data` builds different pairs from the same input
BUILD_VERSION = 1


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sft_fingerprint(files: Sequence[Path], settings: dict[str, Any]) -> str:
    """sha256 (first 16 hex) of the files' bytes and the JSON of ``settings``."""
    h = hashlib.sha256(json.dumps({**settings, "build_version": BUILD_VERSION}, sort_keys=True).encode())
    for path in files:
        h.update(path.name.encode())
        h.update(_file_digest(path).encode())
    return h.hexdigest()[:16]


def cached_sft_data(
    files: Sequence[Path],
    settings: dict[str, Any],
    build: Callable[[], tuple[list[Any], Any]],
    *,
    root: str | Path | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any], bool]:
    """``(records, stats, reused)``: the cached pairs for this fingerprint, else ``build()``'s
    (``(examples, stats)``, examples with ``to_record()``, stats with ``steps`` / ``duplicates`` /
    ``skipped``), stored for next time. ``root`` defaults to ``$KGRAG_CACHE_DIR/sft``."""
    base = Path(root) if root is not None else cache_dir() / "sft"
    key = sft_fingerprint(files, settings)
    data, meta = base / f"translator-{key}.jsonl", base / f"translator-{key}.json"
    if data.is_file() and meta.is_file():
        try:
            stats = json.loads(meta.read_text(encoding="utf-8"))
            records = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
            if len(records) == stats.get("examples"):
                logger.info("translator SFT data: %d pairs reused from %s", len(records), data)
                return records, stats, True
            logger.warning("SFT cache entry %s is incomplete; rebuilding", data)
        except (OSError, ValueError) as exc:
            logger.warning("SFT cache entry %s is unreadable (%s); rebuilding", data, exc)
    examples, built = build()
    records = [e.to_record() for e in examples]
    stats = {
        "examples": len(records),
        "steps": getattr(built, "steps", None),
        "duplicates": getattr(built, "duplicates", None),
        "skipped": dict(getattr(built, "skipped", {}) or {}),
        "fingerprint": key,
        "settings": settings,
    }
    base.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (data, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)),
        (meta, json.dumps(stats, indent=2, ensure_ascii=False) + "\n"),
    ):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return records, stats, False
