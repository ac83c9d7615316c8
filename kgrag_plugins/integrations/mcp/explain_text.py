"""A retrieval explained in Markdown: the activated subgraph of :mod:`kgrag_plugins.explain` as text."""

from __future__ import annotations

from typing import Any

__all__ = ["explain_markdown"]

MAX_ENTITIES = 10
MAX_EDGES = 12
MAX_FACTS = 5


def _one_line(text: Any, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _activation(trace: dict[str, Any]) -> dict[str, float]:
    """Entity id -> activation from a trace's ``activated`` (a list of dicts or an ``{id: value}`` map)."""
    act = trace.get("activated") or {}
    if isinstance(act, dict):
        return {str(k): float(v) for k, v in act.items()}
    return {str(a["id"]): float(a.get("activation", a.get("value", 0.0))) for a in act if isinstance(a, dict)}


def explain_markdown(index: Any, evidence: Any) -> str:
    """Seeds, the most activated entities (hops from a seed), the relations between them, and the
    passages and facts they led to, for an ``activation`` / ``sa-rag`` / ``kg-infused`` evidence."""
    from ...explain.draw import activation_subgraph, relation_label

    trace = evidence.trace
    lines = [f"## Why these passages: {_one_line(evidence.query, 200)}", ""]
    lines.append(
        f"Method: `{trace.get('retriever', 'activation')}`; scores: {evidence.score_kind or 'retriever score'}."
    )
    if evidence.fallback:
        lines.append(f"Note: {evidence.fallback}.")
    try:
        g = activation_subgraph(index.graph, trace, max_nodes=MAX_ENTITIES)
    except ValueError:
        g = None
    seeds = [s for s in trace.get("seeds", []) if isinstance(s, dict)]
    if seeds:
        named = ", ".join(
            f"{_one_line(s.get('name', s.get('id')), 60)} ({s.get('weight', s.get('score', 1.0))})" for s in seeds
        )
        lines += ["", f"**Seeds** (entities linked in the question, weight): {named}"]
    if g is not None and g.number_of_nodes():
        lines += ["", "**Most activated entities** (activation, hops from a seed):"]
        values = _activation(trace)
        for node, attrs in list(g.nodes(data=True))[:MAX_ENTITIES]:
            act = values.get(str(node))
            shown = f"{act:.3f}" if act is not None else "seed"
            lines.append(f"- {_one_line(attrs.get('name', node), 60)}: {shown}, hop {attrs.get('hop')}")
        edges = list(g.edges(data=True))
        if edges:
            lines += ["", "**Relations among them:**"]
            for u, v, attrs in edges[:MAX_EDGES]:
                rel = relation_label(str(attrs.get("relation") or "related to"), 60)
                lines.append(
                    f"- {_one_line(g.nodes[u].get('name', u), 50)} —{rel}→ {_one_line(g.nodes[v].get('name', v), 50)}"
                )
            if len(edges) > MAX_EDGES:
                lines.append(f"- … {len(edges) - MAX_EDGES} more")
    elif not seeds:
        lines += ["", "No entity of the graph was linked in the question, so nothing spread; passages are dense hits."]
    bridged = {b.get("id"): b.get("from") for b in trace.get("bridges", []) if isinstance(b, dict)}
    if evidence.passages:
        lines += ["", "**Passages:**"]
        for i, sp in enumerate(evidence.passages, 1):
            via = f" (named by the title of {bridged[sp.passage.id]})" if sp.passage.id in bridged else ""
            title = _one_line(sp.passage.title, 80)
            lines.append(f"{i}. `{sp.passage.id}` {title}: score {sp.score:.4f}{via}")
    if evidence.facts:
        lines += ["", "**Facts among the activated entities:**"]
        lines += [f"- {_one_line(f.display, 160)}" for f in evidence.facts[:MAX_FACTS]]
    return "\n".join(lines) + "\n"
