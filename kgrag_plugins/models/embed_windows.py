"""Overlapping windows over texts longer than an embedder's input (issue 34, long documents).

A sentence embedder reads a bounded number of tokens: all-MiniLM-L6-v2 embeds the first 256 word
pieces of a text and ignores the rest, so a fact at the end of a long article is invisible to
dense search. :func:`window_texts` cuts such a text into overlapping windows that each fit; the
index embeds them beside the passage's own vector, and a passage's dense score is the best of
its vector and its windows' (:class:`kgrag_plugins.index.windows.PassageWindows`). The passage
stays the unit every method returns.

Token counts come from the embedder's own tokenizer when it exposes one
(:meth:`token_spans`, ``max_tokens``: the bundled MiniLM on torch and on ONNX Runtime); any
other embedder (a LangChain / LlamaIndex / HTTP one) is windowed by whitespace words with a
conservative :data:`WORDS_PER_TOKEN` estimate.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FALLBACK_MAX_TOKENS", "WINDOW_OVERLAP", "max_tokens", "token_spans", "window_texts"]

#: The input length assumed for an embedder that does not say (the common 256 of MiniLM/MPNet).
FALLBACK_MAX_TOKENS = 256
#: Word pieces per whitespace word assumed without a tokenizer (English prose is ~1.3).
WORDS_PER_TOKEN = 1 / 1.6
#: Share of a window repeated at the start of the next one, so a sentence cut by one window's
#: end is whole in the next.
WINDOW_OVERLAP = 0.25
#: Tokens left free in each window for the special tokens and the title line.
_MARGIN = 4

_WORD = re.compile(r"\S+")


def max_tokens(embedder: Any) -> int:
    """Tokens one vector of ``embedder`` sees (its ``max_tokens``, else :data:`FALLBACK_MAX_TOKENS`)."""
    n = getattr(embedder, "max_tokens", None)
    return int(n) if isinstance(n, int) and n > 8 else FALLBACK_MAX_TOKENS


def token_spans(embedder: Any, text: str) -> list[tuple[int, int]]:
    """Character spans of ``text``'s tokens, by the embedder's tokenizer when it has one.

    Without one, spans of whitespace words each counted as ``1 / WORDS_PER_TOKEN`` tokens are
    approximated by :func:`window_texts` (it scales the window length instead).
    """
    spans = getattr(embedder, "token_spans", None)
    if callable(spans):
        return list(spans(text))
    return [m.span() for m in _WORD.finditer(text)]


def window_texts(embedder: Any, title: str | None, text: str) -> list[str]:
    """The windows to embed beside a passage's own vector, or ``[]`` when the passage fits.

    The passage's own vector already covers its first ``max_tokens`` tokens (title included), so
    windows start one stride in and run to the end; each carries the title line (as the
    passage's embedding text does) and overlaps the previous one by :data:`WINDOW_OVERLAP`.
    """
    limit = max_tokens(embedder)
    exact = callable(getattr(embedder, "token_spans", None))
    spans = token_spans(embedder, text)
    title_len = len(token_spans(embedder, title)) if title else 0
    size = limit - _MARGIN - title_len
    if not exact:  # whitespace words: fewer of them fit
        size = int((limit - _MARGIN - title_len / WORDS_PER_TOKEN) * WORDS_PER_TOKEN)
    if size < 16:  # a title about as long as the window: windows of the text alone
        title = None
        size = limit - _MARGIN if exact else int((limit - _MARGIN) * WORDS_PER_TOKEN)
    if len(spans) <= size:
        return []
    stride = max(1, int(size * (1 - WINDOW_OVERLAP)))
    out: list[str] = []
    start = stride
    while True:
        piece = spans[start : start + size]
        if not piece:
            break
        chunk = text[piece[0][0] : piece[-1][1]]
        out.append(f"{title}\n{chunk}" if title else chunk)
        if start + size >= len(spans):
            break
        start += stride
    return out
