"""Small trained heads on top of an embedder (FRAG's hop classifier and path ranker): one
``.npz`` file per model, written atomically and tied to the embedder that produced its inputs."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np


def embedder_name(embedder: Any) -> str:
    """The name a model file records for its embedder."""
    return str(getattr(embedder, "name", type(embedder).__name__))


def save_npz(path: str | Path, embedder: Any, **arrays: Any) -> Path:
    """Write ``arrays`` plus the embedder's name to ``path`` atomically (a temporary file in the
    same directory, then ``os.replace``; nothing is left behind if writing fails)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp.npz")
    try:
        np.savez(tmp, embedder=np.array(embedder_name(embedder)), **arrays)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_npz(path: str | Path, embedder: Any, what: str) -> dict[str, np.ndarray]:
    """Read a model file written by :func:`save_npz`; raise ``FileNotFoundError`` when it is
    missing and ``ValueError`` when it was trained with another embedder."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} at {path}")
    with np.load(path, allow_pickle=False) as d:
        data = {k: d[k] for k in d.files}
    trained_with, used = str(data["embedder"]), embedder_name(embedder)
    if used != trained_with:
        raise ValueError(f"{path} was trained with embedder {trained_with!r}, not {used!r}")
    return data
