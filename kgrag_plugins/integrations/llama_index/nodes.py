"""Evidence as LlamaIndex nodes (DESIGN.md, "Conventions for the integrations")::

    Evidence.passages -> NodeWithScore(TextNode(id_=passage.id, text, metadata={"title", "kind": "passage"}), score)
    Evidence.facts    -> NodeWithScore(TextNode(text=fact.display, metadata={"kind": "fact"|"path"|"clue"}), score)

Passages come first (in the method's order), then facts. Only ``title`` is shown to the LLM /
embedder; the other metadata keys are excluded from both. Fact text is :attr:`Fact.display
<kgrag_plugins.types.Fact.display>`: entity names, never ``##`` masks (the raw text in
``metadata["masked"]``). With ``index=`` the scores are
cosine-like in [0, 1] (:func:`~kgrag_plugins.integrations._common.relevance_scores`; the method's
score in ``metadata["method_score"]``), otherwise the method's own scores.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.schema import NodeWithScore, TextNode

from ...types import Evidence, Fact, ScoredPassage
from .._common import ScoredItem, fact_id, fact_metadata, passage_metadata, scored_items

__all__ = ["evidence_to_nodes", "fact_to_node", "item_to_node", "passage_to_node"]

#: Metadata keys shown to the LLM and the embedder; everything else is excluded from both.
_VISIBLE_KEYS = ("title",)


def _node(node_id: str, text: str, metadata: dict[str, Any]) -> TextNode:
    hidden = [k for k in metadata if k not in _VISIBLE_KEYS]
    return TextNode(
        id_=node_id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )


def item_to_node(item: ScoredItem) -> NodeWithScore:
    """A :class:`~kgrag_plugins.integrations._common.ScoredItem` as a ``NodeWithScore``."""
    return NodeWithScore(node=_node(item.id, item.text, dict(item.metadata)), score=float(item.score))


def passage_to_node(sp: ScoredPassage, *, retriever: str = "", rank: int | None = None) -> NodeWithScore:
    """One scored passage as a ``NodeWithScore`` (node id = passage id; the method's score)."""
    meta = passage_metadata(sp, retriever=retriever, rank=rank)
    return NodeWithScore(node=_node(sp.passage.id, sp.passage.text, meta), score=float(sp.score))


def fact_to_node(fact: Fact, *, retriever: str = "") -> NodeWithScore:
    """One fact / path / clue as a ``NodeWithScore``; the id is a stable hash of kind + text."""
    return NodeWithScore(
        node=_node(fact_id(fact), fact.display, fact_metadata(fact, retriever=retriever)), score=float(fact.score)
    )


def evidence_to_nodes(
    evidence: Evidence,
    *,
    include_facts: bool = True,
    max_facts: int | None = None,
    retriever: str = "",
    index: Any = None,
    score: str = "method",
) -> list[NodeWithScore]:
    """Passages (in order) followed by facts (when ``include_facts``; at most ``max_facts``).

    ``score="cosine"`` with an ``index``: cosine-like scores in [0, 1] (see the module docstring).
    """
    items = scored_items(
        evidence, index=index, include_facts=include_facts, max_facts=max_facts, retriever=retriever, score=score
    )
    return [item_to_node(it) for it in items]
