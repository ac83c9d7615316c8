"""Pictures of FRAG's reasoning paths and of Know³'s verifier scores (PNG / self-contained HTML).

* :func:`draw_paths`: FRAG (paper §3.2-3.3, docs/methods.md §2) returns its top reasoning paths as
  ``Fact(kind="path")`` with ``data = {"nodes", "relations", "inverse", "answer", "hops"}``; the
  picture merges them: topic entities at hop 0, every later entity at its position on a path, one
  edge per path step labelled with its relation (drawn in the KG's direction: ``inverse`` steps
  point back).
* :func:`draw_verification`: Know³ (paper §3.2, Eq. 3-5; docs/methods.md §5) scores each checked triple
  with a KG embedding (relative rank, lower = more plausible) and compares the mean with θ_t;
  the picture shows the triples, each edge labelled with its relation and score, and the decision in
  the title.

Rendering is shared with :mod:`.draw` (spring layout, inline SVG with hover text, no script).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .draw import _output_format, _shorten, _write_picture

__all__ = ["draw_paths", "draw_verification", "path_subgraph", "verification_subgraph"]


def _path_data(fact: Any) -> dict[str, Any] | None:
    data = getattr(fact, "data", None) if not isinstance(fact, dict) else fact.get("data", fact)
    if not isinstance(data, dict) or not data.get("nodes"):
        return None
    return data


def _name(graph: Any, entity_id: str) -> str:
    if graph is not None and entity_id in graph:
        return str(graph.name_of(entity_id))
    return entity_id


def path_subgraph(facts: Any, graph: Any = None, max_paths: int = 8) -> Any:
    """A ``networkx.MultiDiGraph`` of the first ``max_paths`` FRAG path facts (``Evidence.facts`` or
    their ``data`` dicts). ``graph`` (the index's KnowledgeGraph) names the entities. Raises
    ``ValueError`` when no fact is a path."""
    import networkx as nx

    paths = [d for d in (_path_data(f) for f in facts or []) if d is not None][: max(1, int(max_paths))]
    if not paths:
        raise ValueError("no FRAG path among the facts (is it a FRAG evidence?)")
    g = nx.MultiDiGraph(center=str(paths[0]["nodes"][0]), hops=0, total=len(paths), truncated=None)
    seen: set[tuple[str, str, str]] = set()
    for rank, p in enumerate(paths, 1):
        nodes = [str(n) for n in p["nodes"]]
        inverse = list(p.get("inverse") or [False] * (len(nodes) - 1))
        for pos, n in enumerate(nodes):
            if n not in g:
                role = "topic entity" if pos == 0 else ("answer" if pos == len(nodes) - 1 else "bridge entity")
                g.add_node(n, name=_name(graph, n), type=role, hop=pos, description=f"{role} of path {rank}")
            else:
                g.nodes[n]["hop"] = min(g.nodes[n]["hop"], pos)
        for i, rel in enumerate(p.get("relations") or []):
            u, v = nodes[i], nodes[i + 1]
            if i < len(inverse) and inverse[i]:
                u, v = v, u
            if (u, v, str(rel)) not in seen:
                seen.add((u, v, str(rel)))
                g.add_edge(u, v, relation=str(rel))
    g.graph["hops"] = max((a["hop"] for _, a in g.nodes(data=True)), default=0)
    return g


def draw_paths(facts: Any, out: str | Path, graph: Any = None, max_paths: int = 8) -> dict[str, Any]:
    """Draw FRAG's top paths into ``out`` (``.png`` / ``.html``; atomic write). Returns ``{"nodes",
    "edges", "paths", "answers", "out"}`` (answers: the end entities' names, best path first)."""
    fmt = _output_format(Path(out))  # checked before any work
    g = path_subgraph(facts, graph=graph, max_paths=max_paths)
    answers = list(dict.fromkeys(g.nodes[n]["name"] for n in g if g.nodes[n]["type"] == "answer"))
    topics = [g.nodes[n]["name"] for n in g if g.nodes[n]["hop"] == 0]
    g.graph["title"] = (
        f"FRAG paths: {g.graph['total']} paths from {_shorten(', '.join(topics), 60)}; "
        f"answers: {_shorten(', '.join(answers), 80)}"
    )
    return {**_write_picture(g, out, fmt), "paths": g.graph["total"], "answers": answers}


def verification_subgraph(check: dict[str, Any], max_triples: int = 20) -> Any:
    """A ``networkx.MultiDiGraph`` of a Know³ check (``KGVerifier.check`` / the verifier node's
    ``verification``): heads at hop 0, tails at hop 1, edges labelled ``relation · score``. Raises
    ``ValueError`` when no triple was scored (with the check's reason)."""
    import networkx as nx

    triples = [t for t in check.get("triples") or [] if t.get("head") and t.get("tail")][: max(1, int(max_triples))]
    if not triples:
        raise ValueError(f"the check has no scored triple to draw ({check.get('reason') or 'nothing extracted'})")
    g = nx.MultiDiGraph(center=str(triples[0]["head"]), hops=1, total=len(triples), truncated=None)
    for t in triples:
        score = t.get("score")
        shown = "unscored" if score is None else f"{float(score):.2f}"
        for key, hop in (("head", 0), ("tail", 1)):
            n = str(t[key])
            if n not in g:
                g.add_node(n, name=n, type=key, hop=hop, description="")
            g.nodes[n]["hop"] = min(g.nodes[n]["hop"], hop)
        g.add_edge(str(t["head"]), str(t["tail"]), relation=f"{t.get('relation', '')} · {shown}")
        g.nodes[str(t["tail"])]["description"] += f"{t.get('relation', '')}: score {shown}. "
    return g


def draw_verification(check: dict[str, Any], out: str | Path, max_triples: int = 20) -> dict[str, Any]:
    """Draw a Know³ check into ``out`` (``.png`` / ``.html``). Returns ``{"nodes", "edges",
    "score", "threshold", "decision", "out"}``."""
    fmt = _output_format(Path(out))  # checked before any work
    g = verification_subgraph(check, max_triples=max_triples)
    score, theta = check.get("score"), check.get("threshold")
    fmt_num = lambda x: "n/a" if x is None else f"{float(x):.3f}"  # noqa: E731
    g.graph["title"] = (
        f"Know³ verifier ({check.get('source', '?')}): {g.graph['total']} triples, score {fmt_num(score)} "
        f"vs θ {fmt_num(theta)} -> {check.get('decision', '?')} (lower score = more plausible)"
    )
    return {**_write_picture(g, out, fmt), "score": score, "threshold": theta, "decision": check.get("decision")}
