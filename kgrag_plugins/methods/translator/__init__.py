"""KG-Translator: clue translation into a ParseKG, clue tracing, ranking (docs/methods.md §3).

:class:`TranslatorRetriever` is the retriever (LLM-free by default). The parts:
:mod:`.entities` / :mod:`.relations` (LLM-free translation), :mod:`.tracing` (Eq. 8-10),
:mod:`.decompose` (prompt ❸ loop and the LLM-free bridge step), :mod:`.prompts` (App. M),
:mod:`.constraints` / :mod:`.decoding` (constrained decoding backends).
"""

from typing import Any

from ...index.vector_cache import register_precompute
from .entities import EntityTranslator, LLMFreeBackend
from .relations import RelationTranslator
from .retriever import BEAMS, DEFAULT_BEAMS, TranslatorRetriever, beams_for


def _precompute(index: Any) -> None:
    """``kgrag index --precompute translator``: relation-window and head-entity name vectors."""
    RelationTranslator(index).ensure()
    EntityTranslator(index).prepare()


register_precompute("translator", _precompute)

__all__ = [
    "BEAMS",
    "DEFAULT_BEAMS",
    "EntityTranslator",
    "LLMFreeBackend",
    "RelationTranslator",
    "TranslatorRetriever",
    "beams_for",
]
