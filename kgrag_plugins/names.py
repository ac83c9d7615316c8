"""Method names: ``-`` and ``_`` are interchangeable (``kg-infused`` == ``kg_infused``).

Every registry of method names (the retrieval bench's retrievers, the KGQA retrievers, the QA
systems, the agents, the framework adapters' methods and variants) resolves what a user typed with
:func:`resolve_name`, so each entry point (``kgrag ask --retriever``, ``kgrag bench --retrievers`` /
``--systems`` / ``--retriever-opt``, ``KnowledgeIndex.as_retriever``, the LangChain and
LlamaIndex adapters) accepts both spellings and maps them to the one registered name. Registered
names keep their own spelling (``sa-rag-cap2000``, ``vanilla-rag:activation``,
``self-ask+kg-infused``, ``kg_infused``): both sides are compared through :func:`name_key`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["name_key", "resolve_name", "resolve_names"]


def name_key(name: str) -> str:
    """The spelling-free key of a method name: stripped, lower case, ``_`` read as ``-``."""
    return name.strip().lower().replace("_", "-")


def resolve_name(name: str, known: Iterable[str]) -> str:
    """The name in ``known`` that ``name`` spells (the same up to ``-`` / ``_`` and case; an exact
    match wins). ``name`` unchanged when none does, so the caller's unknown-name error shows what
    was typed."""
    names = list(known)
    if name in names:
        return name
    key = name_key(name)
    return next((n for n in names if name_key(n) == key), name)


def resolve_names(names: Iterable[str], known: Iterable[str]) -> list[str]:
    """:func:`resolve_name` of each of ``names``."""
    registered = list(known)
    return [resolve_name(n, registered) for n in names]
