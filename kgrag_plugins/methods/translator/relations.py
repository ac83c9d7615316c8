"""LLM-free relation translation (KG-Translator §3.3 Eq. 2/6, docs/methods.md §3(e)).

The fine-tuned translator decodes β relation spans of at most 16 tokens constrained to be
substrings of the entity's out-hyperrelations R⁺ (in-hyperrelations R⁻ for reverse
translation). Without an LLM: every hyperrelation is cut into windows of at most
:data:`WINDOW` whitespace tokens (stride :data:`STRIDE`; a shorter hyperrelation is one
window), and the β windows of the entity's R± with the highest MiniLM cosine to the question
are its relations. A window is a substring of its hyperrelation, so every clue is valid by
construction (the same guarantee constrained decoding gives).

Decisions (docs/methods.md §3(d)): "token" here is a whitespace token (the LLM path counts
tokenizer tokens; Part B's constraints); windows may start at any word boundary; spans that
are only masks / punctuation are skipped. **Window vectors** are computed for the whole ParseKG
once, on first use (or by ``kgrag index --precompute translator``), and persisted in the index
generation as ``translator_windows.<fingerprint>.npy`` (like ``index.triple_vectors``), so a
query costs one matrix-vector product per entity; the one-off cost is reported by
:attr:`RelationTranslator.build_seconds` and in the benchmark JSON.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...index.vector_cache import cached

logger = logging.getLogger(__name__)

#: Longest relation span (tokens), as the paper's decoding cap.
WINDOW = 16
#: Step between window starts (tokens).
STRIDE = 8
_CONTENT = re.compile(r"[A-Za-z]{2,}")
VECTORS_FILE = "translator_windows.npy"


@dataclass
class RelationMatch:
    """A translated relation span of one hyperrelation of ``entity``."""

    entity: str
    text: str
    hyperrelation: int
    score: float
    direction: str = "forward"


def windows_of(text: str, window: int = WINDOW, stride: int = STRIDE) -> list[str]:
    """≤``window``-token substrings of ``text`` (whitespace tokens, start every ``stride``)."""
    toks = text.split()
    if not toks:
        return []
    if len(toks) <= window:
        spans = [" ".join(toks)]
    else:
        spans = [" ".join(toks[i : i + window]) for i in range(0, len(toks) - window + stride, stride)]
        spans = [s for s in spans if s]
    # the masked placeholder alone, or punctuation only, is not a relation
    return list(dict.fromkeys(s for s in spans if _CONTENT.search(s.replace("##", ""))))


class RelationTranslator:
    """β best windows of an entity's R⁺ / R⁻ by MiniLM cosine to the question."""

    def __init__(self, index: Any, *, window: int = WINDOW, stride: int = STRIDE) -> None:
        self.index = index
        self.window, self.stride = window, stride
        self.build_seconds = 0.0
        self.reset()

    def reset(self) -> None:
        self._offsets: np.ndarray | None = None  # hyperrelation id -> first window row
        self._texts: list[str] = []
        self._vectors: np.ndarray | None = None

    def _build(self) -> None:
        kg = self.index.parsekg
        t0 = time.perf_counter()
        texts: list[str] = []
        offsets = np.zeros(kg.num_hyperrelations + 1, dtype=np.int64)
        for h in range(kg.num_hyperrelations):
            ws = windows_of(kg.hyperrelation(h), self.window, self.stride)
            texts.extend(ws)
            offsets[h + 1] = len(texts)
        # stored in the index generation under the texts' fingerprint (index/vector_cache.py)
        vectors = cached(self.index, VECTORS_FILE, texts, what="relation windows")
        self._offsets, self._texts, self._vectors = offsets, texts, vectors
        self.build_seconds = time.perf_counter() - t0
        logger.info(
            "relation windows: %d windows of %d hyperrelations in %.1fs",
            len(texts),
            kg.num_hyperrelations,
            self.build_seconds,
        )

    def ensure(self) -> None:
        """Compute (or load) the window vectors now."""
        if self._offsets is None:
            self._build()

    def windows(self, hyper_id: int) -> tuple[list[str], np.ndarray]:
        self.ensure()
        a, b = int(self._offsets[hyper_id]), int(self._offsets[hyper_id + 1])  # type: ignore[index]
        return self._texts[a:b], self._vectors[a:b]  # type: ignore[index]

    def hyperrelations(self, entity: str, direction: str = "forward") -> list[int]:
        kg = self.index.parsekg
        return kg.out_hyperrelations(entity) if direction == "forward" else kg.in_hyperrelations(entity)

    def translate(
        self, question: str, entity: str, beta: int, *, direction: str = "forward", qvec: np.ndarray | None = None
    ) -> list[RelationMatch]:
        """The ``beta`` windows of ``entity``'s R⁺ (forward) or R⁻ (reverse) closest to ``question``;
        at most one window per hyperrelation. Empty when the entity has no such hyperrelation."""
        hypers = self.hyperrelations(entity, direction)
        if not hypers or beta < 1:
            return []
        self.ensure()
        if qvec is None:
            qvec = self.index.embed_query(question)
        best: list[RelationMatch] = []
        for h in hypers:
            texts, vecs = self.windows(h)
            if not texts:
                continue
            sims = vecs @ qvec
            i = int(np.argmax(sims))
            best.append(RelationMatch(entity, texts[i], h, float(sims[i]), direction))
        best.sort(key=lambda r: -r.score)
        return best[:beta]
