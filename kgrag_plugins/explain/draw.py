"""Draw the neighbourhood of one entity of a KnowledgeGraph (``kgrag show-graph``).

Two outputs from the same spring layout (networkx, seed 0):

* ``.png`` -- matplotlib (Agg canvas, no pyplot, so no global backend switch);
* ``.html``/``.htm`` -- a self-contained page with an inline SVG: no scripts, no network or CDN
  references; hovering a node or edge shows its full text through SVG ``<title>`` tooltips.

Only :func:`find_entity` looks at every entity (one pass, two when the name is not found and
suggestions are computed); everything else is bounded by the size of the k-hop neighbourhood.
"""

from __future__ import annotations

import contextlib
import difflib
import heapq
import html
import io
import math
import os
import re
import secrets
import warnings
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..index.graph import KnowledgeGraph, UnknownEntityError

if TYPE_CHECKING:  # pragma: no cover
    import networkx

__all__ = ["find_entity", "neighbourhood", "draw_neighbourhood", "relation_label", "SUFFIXES"]

SUFFIXES = (".png", ".html", ".htm")
NODE_LABEL_CHARS = 40
EDGE_LABEL_CHARS = 30
TOOLTIP_DESCRIPTION_CHARS = 1000
MAX_SUGGESTIONS = 5

# hop 0 (the centre), 1, 2, ... ; cycled beyond the end
HOP_COLOURS = ("#e45756", "#4c78a8", "#54a24b", "#f58518", "#b279a2", "#72b7b2", "#9d755d", "#bab0ac")

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PLACEHOLDER = re.compile(r"#{2,}")


# --------------------------------------------------------------------------- entity lookup
def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def find_entity(graph: KnowledgeGraph, name: str) -> str:
    """Entity id for a user-typed name.

    Tries, in order: the exact id, the exact name, a case/whitespace-insensitive name, an exact
    alias, a case-insensitive alias. Several entities on the same (best) tier -> the one with most
    edges, then the first in graph order. No match -> :class:`UnknownEntityError` whose message
    lists up to 5 close names (difflib); they are also on the error as ``.suggestions``
    (``[(name, id), ...]``).
    """
    raw = name if isinstance(name, str) else str(name)
    if raw in graph:
        return raw
    query = raw.strip()
    if not query:
        err = UnknownEntityError("empty entity name")
        err.suggestions = []  # type: ignore[attr-defined]
        raise err
    if query in graph:
        return query
    key = _norm(query)
    best_tier, best = 5, []  # tiers: 1 name, 2 name ci, 3 alias, 4 alias ci
    for ent in graph.entities():  # the single full pass
        n = ent.name
        if n == query:
            tier = 1
        elif best_tier > 1 and _norm(n) == key:
            tier = 2
        elif best_tier > 2 and ent.aliases:
            if query in ent.aliases:
                tier = 3
            elif best_tier > 3 and any(_norm(a) == key for a in ent.aliases):
                tier = 4
            else:
                continue
        else:
            continue
        if tier < best_tier:
            best_tier, best = tier, [ent.id]
        elif tier == best_tier:
            best.append(ent.id)
    if best:
        if len(best) == 1:
            return best[0]
        return max(enumerate(best), key=lambda je: (_degree(graph, je[1]), -je[0]))[1]
    suggestions = _close_names(graph, key)
    if suggestions:
        listed = ", ".join(f"{n!r} ({i})" for n, i in suggestions)
        msg = f"no entity named {query!r}; did you mean: {listed}?"
    else:
        msg = f"no entity named {query!r} and no similar names among {len(graph)} entities"
    err = UnknownEntityError(msg)
    err.suggestions = suggestions  # type: ignore[attr-defined]
    raise err


def _degree(graph: KnowledgeGraph, entity_id: str) -> int:
    i = graph.index_of(entity_id)
    return sum(int(m.indptr[i + 1] - m.indptr[i]) for m in (graph.adjacency("out"), graph.adjacency("in")))


def _close_names(graph: KnowledgeGraph, key: str, n: int = MAX_SUGGESTIONS, cutoff: float = 0.6):
    """Up to ``n`` ``(name, id)`` whose name or alias is most similar to ``key`` (difflib ratio).

    Like ``difflib.get_close_matches`` but streaming with a bounded heap whose floor raises the
    cutoff, so a graph of millions of names costs one pass and O(n) memory.
    """
    sm = difflib.SequenceMatcher(autojunk=False)
    sm.set_seq2(key)
    heap: list[tuple[float, int, str, str]] = []  # (score, -order, name, id); min-heap of the best n
    floor = cutoff
    for order, ent in enumerate(graph.entities()):
        best = 0.0
        for cand in (ent.name, *ent.aliases):
            sm.set_seq1(_norm(cand))
            if sm.real_quick_ratio() >= floor and sm.quick_ratio() >= floor:
                r = sm.ratio()
                if r >= floor and r > best:
                    best = r
        if best:
            item = (best, -order, ent.name, ent.id)
            if len(heap) < n:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
            if len(heap) == n:
                floor = max(floor, heap[0][0])
    return [(nm, eid) for _, _, nm, eid in sorted(heap, reverse=True)]


# --------------------------------------------------------------------------- neighbourhood
def neighbourhood(graph: KnowledgeGraph, entity_id: str, hops: int = 2, max_nodes: int = 60) -> "networkx.MultiDiGraph":
    """The ``hops``-hop neighbourhood of ``entity_id`` (edges followed in both directions).

    Returns the induced ``networkx.MultiDiGraph`` (edges keyed by relation, attr ``relation``)
    with node attrs ``name``, ``type``, ``description``, ``hop``. When the neighbourhood has more
    than ``max_nodes`` nodes, the ones closest to the centre are kept (by hop distance; within
    the hop level that does not fit whole, by degree inside the whole neighbourhood, then id) and
    ``G.graph["truncated"] = (kept, total)``; otherwise it is ``None``. ``G.graph`` also holds
    ``center``, ``hops`` and ``total``. Nodes come in (hop, id) order, edges in (head, tail,
    relation) order, so the result (and its layout) is deterministic.
    """
    import networkx as nx

    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    dist = graph.k_hop([entity_id], hops, "both")  # UnknownEntityError for a bad id
    total = len(dist)
    if total <= max_nodes:
        kept = list(dist)
    else:
        levels: dict[int, list[str]] = defaultdict(list)
        for eid, d in dist.items():
            levels[d].append(eid)
        kept = []
        for d in sorted(levels):
            level, room = levels[d], max_nodes - len(kept)
            if len(level) <= room:
                kept.extend(level)
                continue
            deg = _inner_degrees(graph, level, dist)
            order = sorted(range(len(level)), key=lambda j: (-deg[j], level[j]))
            kept.extend(level[j] for j in order[:room])
            break
    sub = graph.subgraph(kept)
    g = nx.MultiDiGraph(center=entity_id, hops=hops, total=total, truncated=None)
    if len(kept) < total:
        g.graph["truncated"] = (len(kept), total)
    for eid in sorted(kept, key=lambda e: (dist[e], e)):
        a = sub.nodes[eid]
        g.add_node(eid, name=a["name"], type=a["type"], description=a["description"], hop=dist[eid])
    for u, v, k, a in sorted(sub.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        g.add_edge(u, v, key=k, relation=a["relation"])
    return g


def _inner_degrees(graph: KnowledgeGraph, ids: list[str], dist: dict[str, int]) -> np.ndarray:
    """Edges (in + out, parallel edges counted) from each of ``ids`` to a node of ``dist``.

    Costs the total degree of ``ids`` plus ``len(dist)``, never the size of the graph.
    """
    rows = np.fromiter((graph.index_of(e) for e in ids), dtype=np.int64, count=len(ids))
    inside = np.sort(np.fromiter((graph.index_of(e) for e in dist), dtype=np.int64, count=len(dist)))
    counts = np.zeros(len(ids), dtype=np.int64)
    for m in (graph.adjacency("out"), graph.adjacency("in")):
        starts = m.indptr[rows].astype(np.int64)
        lengths = m.indptr[rows + 1].astype(np.int64) - starts
        n = int(lengths.sum())
        if n == 0:
            continue
        owner = np.repeat(np.arange(len(ids)), lengths)
        first = np.cumsum(lengths) - lengths
        gather = np.arange(n, dtype=np.int64) - np.repeat(first, lengths) + np.repeat(starts, lengths)
        nb = m.indices[gather].astype(np.int64)
        pos = np.searchsorted(inside, nb)
        hit = (pos < len(inside)) & (inside[np.minimum(pos, len(inside) - 1)] == nb)
        counts += np.bincount(owner[hit], minlength=len(ids))
    return counts


# --------------------------------------------------------------------------- text helpers
def _clean(text: object) -> str:
    return _CONTROL.sub("", "" if text is None else str(text))


def _shorten(text: str, limit: int) -> str:
    s = " ".join(_clean(text).split())
    if len(s) <= limit:
        return s
    cut = s[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "\u2026"


def relation_label(relation: str, limit: int = EDGE_LABEL_CHARS) -> str:
    """Short edge label: ``##`` placeholders dropped, whitespace collapsed, cut to ``limit`` chars."""
    stripped = " ".join(_PLACEHOLDER.sub(" ", _clean(relation)).split())
    return _shorten(stripped or relation, limit)


def _node_tooltip(g, n) -> str:
    a = g.nodes[n]
    lines = [_clean(a.get("name")) or str(n), f"id: {_clean(n)}"]
    if a.get("type"):
        lines.append(f"type: {_clean(a['type'])}")
    lines.append("centre" if a["hop"] == 0 else f"hop: {a['hop']}")
    if a.get("description"):
        desc = " ".join(_clean(a["description"]).split())
        lines.append(_shorten(desc, TOOLTIP_DESCRIPTION_CHARS))
    return "\n".join(lines)


def _hop_colour(hop: int) -> str:
    return HOP_COLOURS[hop % len(HOP_COLOURS)]


# --------------------------------------------------------------------------- layout
def _layout(g) -> dict:
    """Spring layout (seed 0) of the undirected simple skeleton of ``g``, as ``{node: (x, y)}``."""
    import networkx as nx

    skel = nx.Graph()
    skel.add_nodes_from(g.nodes)
    skel.add_edges_from((u, v) for u, v in g.edges() if u != v)
    if skel.number_of_nodes() == 1:
        return {n: (0.0, 0.0) for n in skel}
    pos = nx.spring_layout(skel, seed=0)
    return {n: (float(p[0]), float(p[1])) for n, p in pos.items()}


def _edge_groups(g):
    """``(u, v, relation, rad, loop_index)`` per edge; parallel/antiparallel edges get distinct arcs.

    ``rad`` follows matplotlib's ``arc3``: the control point is ``mid + rad * (dy, -dx)``.
    """
    pairs: dict[tuple, list[tuple[str, str, str]]] = defaultdict(list)
    for u, v, a in g.edges(data=True):
        pairs[(u, v) if u <= v else (v, u)].append((u, v, a["relation"]))
    out = []
    for (a, _b), edges in pairs.items():
        if edges[0][0] == edges[0][1]:  # self-loops
            out.extend((u, v, rel, 0.0, j) for j, (u, v, rel) in enumerate(edges))
            continue
        k = len(edges)
        step = min(0.3, 1.2 / max(k - 1, 1))
        for j, (u, v, rel) in enumerate(edges):
            off = (j - (k - 1) / 2) * step if k > 1 else 0.0
            out.append((u, v, rel, off if u == a else -off, -1))
    return out


def _title(g, name: str) -> str:
    if g.graph.get("title"):
        return str(g.graph["title"])
    c = g.graph["center"]
    t = f"{_shorten(name, 80)} ({_clean(c)}) \u2014 {g.graph['hops']}-hop neighbourhood: "
    t += f"{g.number_of_nodes()} nodes, {g.number_of_edges()} edges"
    if g.graph.get("truncated"):
        kept, total = g.graph["truncated"]
        t += f" (closest {kept} of {total} nodes shown)"
    return t


# --------------------------------------------------------------------------- PNG
def _render_png(g, pos: dict, name: str) -> bytes:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Circle, FancyArrowPatch
    except ImportError as e:  # pragma: no cover - matplotlib is the `explain` extra
        raise ImportError(
            "PNG output needs matplotlib: pip install 'kgrag-plugins[explain]', or write .html instead"
        ) from e

    n = g.number_of_nodes()
    side = min(24.0, max(8.0, 4.0 + 2.2 * math.sqrt(n)))
    fig = Figure(figsize=(side, side), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_axis_off()
    ax.set_aspect("equal", adjustable="datalim")
    center = g.graph["center"]
    sizes = {v: (900.0 if v == center else 320.0) for v in g}  # points^2
    radius_pt = {v: math.sqrt(s) / 2 for v, s in sizes.items()}
    xs = np.array([pos[v][0] for v in g])
    ys = np.array([pos[v][1] for v in g])
    span = max(float(np.ptp(xs)) if n else 0.0, float(np.ptp(ys)) if n else 0.0, 1.0)
    text_kw = {"parse_math": False}  # names may contain '$'

    for u, v, rel, rad, loop in _edge_groups(g):
        x1, y1 = pos[u]
        x2, y2 = pos[v]
        label = relation_label(rel)
        if loop >= 0:
            r = 0.035 * span * (1 + 0.6 * loop)
            ax.add_patch(Circle((x1, y1 + r), r, fill=False, lw=0.9, ec="#777777", zorder=1))
            lx, ly, angle = x1, y1 + 2 * r, 0.0
        else:
            ax.add_patch(
                FancyArrowPatch(
                    (x1, y1),
                    (x2, y2),
                    arrowstyle="-|>",
                    mutation_scale=11,
                    connectionstyle=f"arc3,rad={rad}",
                    shrinkA=radius_pt[u] + 1,
                    shrinkB=radius_pt[v] + 1,
                    lw=0.9,
                    color="#777777",
                    zorder=1,
                )
            )
            dx, dy = x2 - x1, y2 - y1
            lx, ly = (x1 + x2) / 2 + 0.5 * rad * dy, (y1 + y2) / 2 - 0.5 * rad * dx
            angle = _upright(math.degrees(math.atan2(dy, dx)))  # equal aspect: data angle == screen angle
        ax.text(
            lx,
            ly,
            label,
            rotation=angle,
            rotation_mode="anchor",
            fontsize=7,
            color="#444444",
            ha="center",
            va="center",
            zorder=3,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75},
            **text_kw,
        )

    nodes = list(g)
    ax.scatter(
        xs,
        ys,
        s=[sizes[v] for v in nodes],
        c=[_hop_colour(g.nodes[v]["hop"]) for v in nodes],
        edgecolors=["black" if v == center else "white" for v in nodes],
        linewidths=[2.5 if v == center else 1.0 for v in nodes],
        zorder=2,
    )
    for v in nodes:
        a = g.nodes[v]
        ax.annotate(
            _shorten(a.get("name") or v, NODE_LABEL_CHARS),
            pos[v],
            xytext=(0, -(radius_pt[v] + 3)),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=10 if v == center else 8,
            fontweight="bold" if v == center else "normal",
            zorder=4,
            **text_kw,
        )
    hops_present = sorted({g.nodes[v]["hop"] for v in nodes})
    handles = [
        Line2D(
            [],
            [],
            marker="o",
            ls="",
            markersize=9,
            markerfacecolor=_hop_colour(h),
            markeredgecolor="black" if h == 0 else "white",
            label="centre" if h == 0 else f"hop {h}",
        )
        for h in hops_present
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=8, frameon=False)
    ax.set_title(_title(g, name), fontsize=11, **text_kw)
    ax.margins(0.12)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph .* missing from", category=UserWarning)
        fig.savefig(buf, format="png", bbox_inches="tight", facecolor="white")
    return buf.getvalue()


# --------------------------------------------------------------------------- HTML / SVG
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.2em;margin:0 0 .3em}
.meta{color:#555;margin:.2em 0 .8em}
.legend span{display:inline-block;margin-right:1.2em}
.legend i{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:.3em;vertical-align:middle}
svg{max-width:100%;height:auto;border:1px solid #ddd;background:#fff}
svg text{font-family:inherit}
.edge path{fill:none;stroke:#999;stroke-width:1.2}
.edge text{font-size:10px;fill:#555;paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}
.edge:hover path{stroke:#000;stroke-width:2.2}
.edge:hover text{fill:#000}
.node circle{stroke:#fff;stroke-width:1.5}
.node.centre circle{stroke:#000;stroke-width:3}
.node text{font-size:12px;fill:#222;paint-order:stroke;stroke:#fff;stroke-width:3px}
.node.centre text{font-size:14px;font-weight:bold}
.node:hover circle{stroke:#000;stroke-width:2.5}
details{margin-top:1em}
table{border-collapse:collapse;font-size:.9em}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
"""


def _e(text: object) -> str:
    return html.escape(_clean(text), quote=True)


def _render_html(g, pos: dict, name: str) -> bytes:
    n = g.number_of_nodes()
    center = g.graph["center"]
    side = int(min(1800, max(640, 240 * math.sqrt(n))))
    pad = 90
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    inner = side - 2 * pad
    x0, y0 = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2

    def px(v):
        x, y = pos[v]
        return side / 2 + (x - x0) / span * inner, side / 2 - (y - y0) / span * inner  # SVG y points down

    radius = {v: (16.0 if v == center else 10.0) for v in g}
    names = {v: _clean(g.nodes[v].get("name")) or str(v) for v in g}
    parts = [
        f'<svg viewBox="0 0 {side} {side}" width="{side}" height="{side}" role="img" '
        f'aria-label="{_e(_title(g, name))}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#999"/></marker></defs>',
        '<g class="edges">',
    ]
    f = "{:.1f}".format
    for u, v, rel, rad, loop in _edge_groups(g):
        (ax_, ay), (bx, by) = px(u), px(v)
        tip = f"{names[u]} \u2014[{_clean(rel)}]\u2192 {names[v]}"
        if loop >= 0:
            r = radius[u] * (1.6 + 0.9 * loop)
            d = (
                f"M{f(ax_ - radius[u] * 0.6)},{f(ay - radius[u] * 0.8)} "
                f"C{f(ax_ - 1.6 * r)},{f(ay - 3 * r)} {f(ax_ + 1.6 * r)},{f(ay - 3 * r)} "
                f"{f(ax_ + radius[u] * 0.6)},{f(ay - radius[u] * 0.8)}"
            )
            lx, ly, angle = ax_, ay - 2.4 * r - 4, 0.0
        else:
            dx, dy = bx - ax_, by - ay
            cx, cy = (ax_ + bx) / 2 - rad * dy, (ay + by) / 2 + rad * dx  # arc3 with y pointing down
            sx, sy = _toward(ax_, ay, cx, cy, bx, by, radius[u])
            ex, ey = _toward(bx, by, cx, cy, ax_, ay, radius[v] + 1)
            d = f"M{f(sx)},{f(sy)} Q{f(cx)},{f(cy)} {f(ex)},{f(ey)}"
            lx, ly = 0.25 * ax_ + 0.5 * cx + 0.25 * bx, 0.25 * ay + 0.5 * cy + 0.25 * by
            angle = _upright(math.degrees(math.atan2(dy, dx)))
        rot = f' transform="rotate({angle:.1f} {f(lx)} {f(ly)})"' if angle else ""
        parts.append(
            f'<g class="edge"><title>{_e(tip)}</title><path d="{d}" marker-end="url(#arrow)"/>'
            f'<text x="{f(lx)}" y="{f(ly)}" text-anchor="middle" dominant-baseline="middle"{rot}>'
            f"{_e(relation_label(rel))}</text></g>"
        )
    parts.append('</g><g class="nodes">')
    for v in g:
        x, y = px(v)
        hop = g.nodes[v]["hop"]
        cls = "node centre" if v == center else f"node hop{hop}"
        parts.append(
            f'<g class="{cls}"><title>{_e(_node_tooltip(g, v))}</title>'
            f'<circle cx="{f(x)}" cy="{f(y)}" r="{radius[v]:g}" fill="{_hop_colour(hop)}"/>'
            f'<text x="{f(x)}" y="{f(y + radius[v] + 14)}" text-anchor="middle">'
            f"{_e(_shorten(names[v], NODE_LABEL_CHARS))}</text></g>"
        )
    parts.append("</g></svg>")

    hops_present = sorted({g.nodes[v]["hop"] for v in g})
    legend = "".join(
        f'<span><i style="background:{_hop_colour(h)}"></i>{"centre" if h == 0 else f"hop {h}"}</span>'
        for h in hops_present
    )
    rows = "".join(
        f"<tr><td>{_e(names[u])}</td><td>{_e(a['relation'])}</td><td>{_e(names[v])}</td></tr>"
        for u, v, a in g.edges(data=True)
    )
    title = _title(g, name)
    doc = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{_e(title)}</h1>\n"
        '<p class="meta">Hover a node or an edge for its full text.</p>\n'
        f'<p class="legend">{legend}</p>\n' + "\n".join(parts) + "\n"
        f"<details><summary>Triples ({g.number_of_edges()})</summary>\n"
        f"<table><tr><th>head</th><th>relation</th><th>tail</th></tr>{rows}</table></details>\n"
        "</body>\n</html>\n"
    )
    return doc.encode("utf-8")


def _upright(degrees: float) -> float:
    """An edge angle folded into (-90, 90] so rotated labels never read upside down."""
    while degrees > 90:
        degrees -= 180
    while degrees <= -90:
        degrees += 180
    return degrees


def _toward(x: float, y: float, cx: float, cy: float, ox: float, oy: float, r: float) -> tuple[float, float]:
    """Point at distance ``r`` from ``(x, y)`` toward the control point (or the other end)."""
    dx, dy = cx - x, cy - y
    d = math.hypot(dx, dy)
    if d < 1e-9:
        dx, dy = ox - x, oy - y
        d = math.hypot(dx, dy)
    if d < 1e-9:
        return x, y
    return x + dx / d * r, y + dy / d * r


# --------------------------------------------------------------------------- output
def _output_format(out: Path) -> str:
    suffix = out.suffix.lower()
    if suffix == ".png":
        return "png"
    if suffix in (".html", ".htm"):
        return "html"
    raise ValueError(f"unsupported output file {str(out)!r}: the name must end with one of {', '.join(SUFFIXES)}")


def _atomic_write(out: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``out``, fsync, then ``os.replace``; no partial file on error."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # mode honours the umask
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_picture(g, out: str | Path, fmt: str, name: str = "") -> dict:
    """Lay out ``g``, render it as ``fmt`` (``"png"`` / ``"html"``) and write ``out`` atomically;
    returns ``{"nodes", "edges", "out"}`` (every ``draw_*`` function ends here)."""
    pos = _layout(g)
    data = _render_png(g, pos, name) if fmt == "png" else _render_html(g, pos, name)
    _atomic_write(Path(out), data)
    return {"nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "out": str(out)}


def draw_neighbourhood(graph: KnowledgeGraph, name: str, out: str | Path, hops: int = 2, max_nodes: int = 60) -> dict:
    """Draw the ``hops``-hop neighbourhood of the entity ``name`` resolves to into ``out``.

    ``.png`` -> matplotlib image; ``.html``/``.htm`` -> self-contained HTML with an inline SVG and
    hover tooltips (full name/type/description, full relation text). Other suffixes raise
    ``ValueError`` (checked before any work). Parent directories are created; the file is written
    atomically. Returns ``{"entity", "name", "nodes", "edges", "truncated", "out"}``.
    """
    fmt = _output_format(Path(out))  # checked before any work
    entity_id = find_entity(graph, name)
    g = neighbourhood(graph, entity_id, hops=hops, max_nodes=max_nodes)
    ent_name = graph.entity(entity_id).name
    info = _write_picture(g, out, fmt, ent_name)
    return {"entity": entity_id, "name": ent_name, **info, "truncated": g.graph["truncated"] is not None}


# --------------------------------------------------------------------------- activation pictures
def _activation_values(trace: dict) -> dict[str, float]:
    """Entity id -> activation from a retriever trace (list-of-dicts or ``{id: value}`` form)."""
    act = trace.get("activated") or {}
    if isinstance(act, dict):
        return {str(k): float(v) for k, v in act.items()}
    return {str(a["id"]): float(a.get("activation", a.get("value", 0.0))) for a in act}


def activation_subgraph(graph: KnowledgeGraph, trace: dict, max_nodes: int = 40) -> "networkx.MultiDiGraph":
    """The activated part of the graph from a spreading-activation trace.

    Nodes are the seeds (``trace["seeds"]``) and the most activated entities (``trace["activated"]``)
    up to ``max_nodes``; ``hop`` is the distance from the nearest seed inside that node set
    (unreachable nodes get one more than the largest distance); the node description starts with
    the activation value. Works with the traces of ``activation``, ``sa-rag`` and ``kg-infused``.
    """
    import networkx as nx

    seeds = [
        str(s["id"]) if isinstance(s, dict) else str(s[0] if isinstance(s, (list, tuple)) else s)
        for s in trace.get("seeds", [])
    ]
    seeds = [s for s in dict.fromkeys(seeds) if s in graph]
    values = _activation_values(trace)
    ranked = sorted((e for e in values if e in graph), key=lambda e: (-values[e], e))
    kept = list(dict.fromkeys(seeds + ranked))[: max(1, max_nodes)]
    if not kept:
        raise ValueError("the trace has no seeds or activated entities to draw")
    sub = graph.subgraph(kept)
    und = nx.Graph(sub.to_undirected())
    dist: dict[str, int] = {}
    for s in seeds:
        if s in und:
            for n, d in nx.single_source_shortest_path_length(und, s).items():
                dist[n] = min(d, dist.get(n, d))
    far = max(dist.values(), default=0) + 1
    g = nx.MultiDiGraph(center=seeds[0] if seeds else kept[0], hops=far, total=len(values), truncated=None)
    for eid in sorted(kept, key=lambda e: (dist.get(e, far), -values.get(e, 0.0), e)):
        a = sub.nodes[eid]
        act = values.get(eid, 1.0 if eid in seeds else 0.0)
        g.add_node(
            eid,
            name=a["name"],
            type=a["type"],
            hop=dist.get(eid, far),
            description=f"activation {act:.3f}. {a['description']}".strip(),
        )
    for u, v, k, a in sorted(sub.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        g.add_edge(u, v, key=k, relation=a["relation"])
    return g


def draw_activation(graph: KnowledgeGraph, trace: dict, out: str | Path, max_nodes: int = 40) -> dict:
    """Draw the activated subgraph of a retrieval trace (``Evidence.trace``) into ``out``
    (``.png`` or ``.html``, as :func:`draw_neighbourhood`); colours are hops from the seeds.
    Returns ``{"nodes", "edges", "seeds", "out"}``."""
    fmt = _output_format(Path(out))  # checked before any work
    g = activation_subgraph(graph, trace, max_nodes=max_nodes)
    seeds = [g.nodes[n]["name"] for n in g if g.nodes[n]["hop"] == 0]
    g.graph["title"] = (
        f"Activated subgraph ({trace.get('retriever', 'activation')}): {g.number_of_nodes()} entities, "
        f"{g.number_of_edges()} edges; seeds: {_shorten(', '.join(seeds), 80)}"
    )
    return {**_write_picture(g, out, fmt), "seeds": seeds}
