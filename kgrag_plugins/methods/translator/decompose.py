"""Multi-hop retrieval for KG-Translator (§4 "we implement multi-hop retrieval by chaining query
decomposition", docs/methods.md §3(a) step 8).

**With an LLM**: after each translation round the LLM reads the question, the top passages so far
and the queries already used (prompt ❸) and answers ``So the next search query is <query>`` or
``None``; the new query is translated and traced like the question. ``max_steps`` caps the
number of decomposition calls (default 2, GFM-RAG's IRCoT setting that the paper refers to; the
paper's own cap is unknown). Contexts of all rounds are merged and re-ranked by MiniLM cosine to
the *original* question. An invalid reply (checked by
:func:`~kgrag_plugins.methods.translator.prompts.parse_next_query`, one retry through
``complete_validated``) ends the loop and falls back to the LLM-free bridge step.

**LLM-free bridge step (our addition, not in the paper)**: the entities mentioned in the first
round's top passages that were not translated yet become entity candidates of a second round,
ranked by MiniLM cosine of their name vector to the question; their clues are traced the same
way. Whether the retriever runs it by default is decided by measurement (docs/translator.md).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np

from ...models.replies import complete_validated
from .prompts import NEXT_QUERY_SCHEMA, decomposition_prompt, parse_next_query

logger = logging.getLogger(__name__)

#: Passages shown to the LLM per decomposition call.
CONTEXT_PASSAGES = 5


def next_query(
    llm: Any,
    question: str,
    passages: Sequence[str],
    used_queries: Sequence[str],
    *,
    errors: list[dict[str, Any]] | None = None,
    instruction: str | None = None,
) -> tuple[str, str | None]:
    """One prompt-❸ call: ``("query", q)``, ``("stop", None)`` (evidence suffices) or
    ``("failed", None)`` (no valid reply after the retry; the caller goes LLM-free).
    ``instruction`` replaces prompt ❸'s instruction text (:func:`.prompts.decomposition_prompt`)."""
    prompt = decomposition_prompt(question, list(passages)[:CONTEXT_PASSAGES], list(used_queries), instruction)

    def validate(reply: str) -> tuple[str, str | None]:
        q = parse_next_query(reply)
        if q is None:
            return ("stop", None)
        if q.casefold().strip() in {u.casefold().strip() for u in used_queries}:
            return ("stop", None)  # a repeated query would trace the same clues again
        return ("query", q)

    out = complete_validated(
        llm, prompt, validate, step="translator.decompose", errors=errors, log=logger, schema=NEXT_QUERY_SCHEMA
    )
    return out if out is not None else ("failed", None)


def bridge_entities(
    index: Any,
    passage_ids: Sequence[str],
    qvec: np.ndarray,
    *,
    pool: set[str],
    exclude: set[str],
    alpha: int,
    vectors: Callable[[list[str]], np.ndarray] | None = None,
) -> list[tuple[str, float]]:
    """Entities of ``passage_ids`` (graph links) inside ``pool`` and not in ``exclude``, ranked by
    cosine of their name vector (``vectors(ids)``) to ``qvec``; the ``alpha`` best as
    ``(entity id, cosine)`` (first-seen order without ``vectors``)."""
    g = index.graph
    cands = [e for p in passage_ids for e in g.entities_of(p) if e in pool and e not in exclude]
    cands = list(dict.fromkeys(cands))
    if not cands or alpha < 1:
        return []
    if vectors is None:
        return [(e, 0.0) for e in cands[:alpha]]
    sims = np.asarray(vectors(cands), dtype=np.float32) @ np.asarray(qvec, dtype=np.float32)
    order = np.argsort(-sims, kind="stable")[:alpha]
    return [(cands[i], float(sims[i])) for i in order]
