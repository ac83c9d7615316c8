"""Window vectors of long passages, and the passage vectors that come with them (issue 34).

A passage longer than the embedder's input gets extra vectors, one per overlapping window past
the part its own vector covers (:func:`kgrag_plugins.models.embed_windows.window_texts`). Its dense
score is the best cosine of its own vector and its windows' (max pooling over windows, as
long-document dense retrievers such as MaxP score a document by its best passage), so the
passage stays the unit every retriever ranks and returns.

On disk: ``windows.npy`` (float32, one row per window) and ``window_ids.json`` (the passage id of
each row) beside ``vectors.npy``; an index without them has no windows (indexes built before
this change open unchanged). The vectors are made by :func:`kgrag_plugins.index.embedding.embed_passages`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import IndexCorruptError

__all__ = ["PassageWindows"]


@dataclass
class PassageWindows:
    """Window vectors (``vectors``, unit rows) and the passage id of each row (``owners``)."""

    vectors: np.ndarray
    owners: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls, dim: int) -> "PassageWindows":
        return cls(np.zeros((0, dim), dtype=np.float32), [])

    def __len__(self) -> int:
        return len(self.owners)

    def select(self, keep: set[str] | Sequence[str]) -> "PassageWindows":
        """The windows of the passages in ``keep`` (a delete, or a subset index)."""
        keep = set(keep)
        rows = [i for i, pid in enumerate(self.owners) if pid in keep]
        return PassageWindows(self.vectors[rows], [self.owners[i] for i in rows])

    def concat(self, other: "PassageWindows | None") -> "PassageWindows":
        if other is None or not len(other):
            return self
        return PassageWindows(np.concatenate([self.vectors, other.vectors]), self.owners + other.owners)

    def save(self, d: Path) -> None:
        """Write ``windows.npy`` and ``window_ids.json`` into ``d`` (nothing when empty)."""
        if not len(self):
            return
        np.save(d / "windows.npy", self.vectors)  # into a new generation: live only after the manifest switch
        (d / "window_ids.json").write_text(json.dumps(self.owners), encoding="utf-8")

    @classmethod
    def load(cls, d: Path, dim: int, known: set[str], fix: str) -> "PassageWindows | None":
        """The windows saved in ``d``, None when it has none; damage raises IndexCorruptError."""
        vpath, ipath = d / "windows.npy", d / "window_ids.json"
        if not vpath.exists() and not ipath.exists():
            return None
        try:
            vecs = np.load(vpath, allow_pickle=False)
            owners = json.loads(ipath.read_text(encoding="utf-8"))
        except (OSError, ValueError, EOFError) as e:
            raise IndexCorruptError(f"{vpath} / {ipath.name} cannot be read ({type(e).__name__}); {fix}") from None
        ok = (
            isinstance(owners, list)
            and vecs.ndim == 2
            and vecs.shape == (len(owners), dim)
            and np.issubdtype(vecs.dtype, np.floating)
            and all(isinstance(o, str) and o in known for o in owners)
        )
        if not ok:
            raise IndexCorruptError(
                f"{vpath} (shape {vecs.shape}) and {ipath} do not match the index's passages and "
                f"embedder (dim {dim}); {fix}"
            )
        return cls(np.ascontiguousarray(vecs, dtype=np.float32), owners)
