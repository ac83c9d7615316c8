"""Evidence as LlamaIndex nodes (DESIGN.md, "Conventions for the integrations")::

    Evidence.passages -> NodeWithScore(TextNode(id_=passage.id, text, metadata={"title", "kind": "passage"}), score)
    Evidence.facts    -> NodeWithScore(TextNode(text=fact.text, metadata={"kind": "fact"|"path"|"clue"}), fact.score)

Passages come first (in the method's order, scores descending), then facts. Only ``title`` is shown
to the LLM / embedder; the other metadata keys are excluded from both.
"""

from __future__ import annotations

import hashlib
from typing import Any

from llama_index.core.schema import NodeWithScore, TextNode

from ...types import Evidence, Fact, ScoredPassage

__all__ = ["evidence_to_nodes", "fact_to_node", "passage_to_node"]

#: Metadata keys shown to the LLM and the embedder; everything else is excluded from both.
_VISIBLE_KEYS = ("title",)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _small_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """Keep flat, JSON-friendly entries (scalars and lists of scalars) so vector stores accept them."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if _scalar(value):
            out[key] = value
        elif isinstance(value, (list, tuple)) and all(_scalar(v) for v in value):
            out[key] = list(value)
    return out


def _node(node_id: str, text: str, metadata: dict[str, Any]) -> TextNode:
    hidden = [k for k in metadata if k not in _VISIBLE_KEYS]
    return TextNode(
        id_=node_id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )


def passage_to_node(sp: ScoredPassage, *, retriever: str = "", rank: int | None = None) -> NodeWithScore:
    """One scored passage as a ``NodeWithScore`` (node id = passage id)."""
    p = sp.passage
    meta = _small_metadata(p.metadata)
    meta.update(title=p.title, kind="passage", passage_id=p.id)
    if retriever:
        meta["retriever"] = retriever
    if rank is not None:
        meta["rank"] = rank
    return NodeWithScore(node=_node(p.id, p.text, meta), score=float(sp.score))


def fact_to_node(fact: Fact, *, retriever: str = "") -> NodeWithScore:
    """One fact / path / clue as a ``NodeWithScore``; the id is a stable hash of kind + text."""
    digest = hashlib.sha1(f"{fact.kind}\x1f{fact.text}".encode("utf-8")).hexdigest()[:16]
    meta = {f"fact_{k}" if k in ("kind", "title") else k: v for k, v in _small_metadata(fact.data).items()}
    meta["kind"] = fact.kind
    if retriever:
        meta["retriever"] = retriever
    return NodeWithScore(node=_node(f"{fact.kind}:{digest}", fact.text, meta), score=float(fact.score))


def evidence_to_nodes(
    evidence: Evidence, *, include_facts: bool = True, max_facts: int | None = None, retriever: str = ""
) -> list[NodeWithScore]:
    """Passages (in order) followed by facts (when ``include_facts``; at most ``max_facts``)."""
    nodes = [passage_to_node(sp, retriever=retriever, rank=i) for i, sp in enumerate(evidence.passages, 1)]
    if include_facts:
        facts = evidence.facts if max_facts is None else evidence.facts[:max_facts]
        seen = {n.node.node_id for n in nodes}
        for f in facts:
            n = fact_to_node(f, retriever=retriever)
            if n.node.node_id not in seen:  # BaseRetriever drops duplicate ids anyway
                seen.add(n.node.node_id)
                nodes.append(n)
    return nodes
