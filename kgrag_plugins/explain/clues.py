"""Pictures of a KG-Translator trace: clue entities, their clue relations and traced passages.

KG-Translator (paper §3.3-3.4, Eq. 8-9) translates a question into ``(entity, relation)`` clues
and traces each clue to the sentences, then passages, that contain it. The picture shows that
chain: one node per clue entity (colour = translation round: 0 the question's own entities,
1 the LLM-free bridge or the LLM decomposition's next step), one node per traced passage, and an
edge per clue labelled with its relation (entity -> passage for forward clues, passage -> entity
for reverse clues, App. J). Rendering is shared with :mod:`.draw` (PNG or self-contained HTML).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .draw import _output_format, _shorten, _write_picture

__all__ = ["clue_subgraph", "draw_clues", "draw_trace"]


def clue_subgraph(trace: dict[str, Any], passages: Any = None, max_nodes: int = 40) -> Any:
    """A ``networkx.MultiDiGraph`` of a translator trace (``Evidence.trace`` with ``"clues"``).

    Nodes carry ``name``, ``type`` (``"clue entity"`` / ``"passage"``), ``hop`` (the clue's
    translation step for entities, step + 1 for passages) and ``description``; edges carry the
    clue ``relation``. ``passages`` (a :class:`~kgrag_plugins.index.passages.PassageStore`) gives
    passage titles; without it nodes are named by passage id. At most ``max_nodes`` nodes, best
    clues first. Raises ``ValueError`` when the trace has no clues (say why, from its reason).
    """
    import networkx as nx

    clues = list(trace.get("clues") or [])
    if not clues:
        why = trace.get("reason") or "the retriever found no clue"
        raise ValueError(f"the trace has no clues to draw ({why}); is it a KG-Translator trace?")
    clues.sort(key=lambda c: (int(c.get("step", 0)), -float(c.get("score", 0.0))))
    g = nx.MultiDiGraph(center=None, hops=0, total=len(clues), truncated=None)
    budget = max(2, int(max_nodes))
    for c in clues:
        ent = f"entity:{c['entity']}"
        step = int(c.get("step", 0))
        if ent not in g:
            if g.number_of_nodes() >= budget:
                break
            g.add_node(
                ent,
                name=str(c.get("name") or c["entity"]),
                type="clue entity",
                hop=step,
                description=f"clue entity, translation step {step}",
            )
            g.graph["center"] = g.graph["center"] or ent
        for pid in c.get("passage_ids") or []:
            node = f"passage:{pid}"
            if node not in g:
                if g.number_of_nodes() >= budget:
                    g.graph["truncated"] = (budget, None)
                    break
                title = pid
                if passages is not None and pid in passages:
                    p = passages.get(pid)
                    title = p.title or pid
                    text = p.text
                else:
                    text = ""
                g.add_node(node, name=str(title), type="passage", hop=step + 1, description=_shorten(text, 200))
            rel = str(c.get("relation") or "")
            u, v = (node, ent) if c.get("direction") == "reverse" else (ent, node)
            g.add_edge(u, v, relation=rel)
    g.graph["hops"] = max((a["hop"] for _, a in g.nodes(data=True)), default=0)
    return g


def draw_clues(trace: dict[str, Any], out: str | Path, passages: Any = None, max_nodes: int = 40) -> dict[str, Any]:
    """Draw a translator trace into ``out`` (``.png`` / ``.html`` / ``.htm``; atomic write).
    Returns ``{"nodes", "edges", "entities", "passages", "out"}``."""
    fmt = _output_format(Path(out))  # checked before any work
    g = clue_subgraph(trace, passages=passages, max_nodes=max_nodes)
    ents = [a["name"] for _, a in g.nodes(data=True) if a["type"] == "clue entity"]
    n_pass = sum(1 for _, a in g.nodes(data=True) if a["type"] == "passage")
    g.graph["title"] = (
        f"KG-Translator clues: {len(ents)} entities -> {n_pass} traced passages; "
        f"entities: {_shorten(', '.join(ents), 80)}"
    )
    return {**_write_picture(g, out, fmt), "entities": ents, "passages": n_pass}


def draw_trace(index: Any, trace: dict[str, Any], out: str | Path, max_nodes: int = 40) -> dict[str, Any]:
    """Draw any retriever's trace: translator clues (:func:`draw_clues`) when the trace has
    ``"clues"``, else the activated subgraph (:func:`~kgrag_plugins.explain.draw.draw_activation`)."""
    if "clues" in trace:
        return draw_clues(trace, out, passages=index.passages, max_nodes=max_nodes)
    from .draw import draw_activation

    return draw_activation(index.graph, trace, out, max_nodes=max_nodes)


def draw_evidence(index: Any, evidence: Any, out: str | Path, max_nodes: int = 40) -> dict[str, Any]:
    """Draw any retriever's :class:`~kgrag_plugins.types.Evidence`: FRAG / Know³-completion
    paths (:func:`~kgrag_plugins.explain.paths.draw_paths`) when its facts are paths and the trace
    has no activation or clues, else :func:`draw_trace`. Adds ``"what"`` (a phrase naming what was
    drawn) to the returned info."""
    trace = evidence.trace or {}
    has_paths = any(getattr(f, "kind", "") in ("path", "completion") for f in evidence.facts)
    if has_paths and "clues" not in trace and not trace.get("activated"):
        from .paths import draw_paths

        info = draw_paths(evidence.facts, out, graph=index.graph)
        return {**info, "what": "path entities"}
    info = draw_trace(index, trace, out, max_nodes=max_nodes)
    what = "clue entities and traced passages" if "clues" in trace else "activated entities"
    return {**info, "what": what}
