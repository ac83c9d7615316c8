"""kgrag_plugins.explain.draw on small hand-made graphs (offline, no models)."""

import os
import xml.etree.ElementTree as ET

import pytest

from kgrag_plugins.explain import draw
from kgrag_plugins.explain.draw import draw_neighbourhood, find_entity, neighbourhood, relation_label
from kgrag_plugins.index.graph import KnowledgeGraph, UnknownEntityError
from kgrag_plugins.types import Entity

LONG_REL = "## was awarded jointly with her husband the prize named ##"

# hop distances from "curie":
#   0 curie
#   1 warsaw (out), sorbonne (out), pierre (in + out, parallel), lab (out), prize (out)
#   2 vistula, paris, france (from pierre), nobel (from prize)
#   3 seine (paris -> seine), 4 le_havre
ENTITIES = [
    Entity("curie", "Marie Curie", ["Maria Skłodowska"], "Physicist and chemist", "person"),
    Entity("warsaw", "Warsaw", [], "Capital of Poland", "city"),
    Entity("sorbonne", "Sorbonne", [], "University in Paris", "organisation"),
    Entity("pierre", "Pierre Curie", [], "Physicist", "person"),
    Entity("lab", "R&D <Lab>", [], 'A "quoted" <b>bold</b> description & more', "organisation"),
    Entity("prize", "$100 & $200 prize", [], "Dollar signs must not trigger mathtext", "award"),
    Entity("vistula", "Vistula", [], "River", "river"),
    Entity("paris", "Paris", ["City of Light"], "Capital of France", "city"),
    Entity("france", "France", [], "Country", "country"),
    Entity("nobel", "Nobel Prize", [], "", ""),
    Entity("seine", "Seine", [], "River", "river"),
    Entity("le_havre", "Le Havre", [], "Port", "city"),
    Entity("paris_tx", "PARIS", [], "Paris, Texas", "city"),
]
TRIPLES = [
    ("curie", "## was born in ##", "warsaw"),
    ("curie", "worked at", "sorbonne"),
    ("pierre", "spouse", "curie"),
    ("curie", "spouse", "pierre"),
    ("curie", LONG_REL, "pierre"),
    ("curie", "founded", "lab"),
    ("curie", "won", "prize"),
    ("warsaw", "on river", "vistula"),
    ("sorbonne", "in city", "paris"),
    ("pierre", "citizen of", "france"),
    ("prize", "part of", "nobel"),
    ("paris", "on river", "seine"),
    ("seine", "mouth at", "le_havre"),
    ("lab", "self-reference", "lab"),
]


@pytest.fixture
def kg():
    g = KnowledgeGraph()
    for e in ENTITIES:
        g.add_entity(e)
    for h, r, t in TRIPLES:
        g.add_triple(h, r, t)
    return g


def star_graph():
    """c -> a0..a4 ; a_i -> b_i_0..b_i_2 ; z (hop 2) is linked to a0, a1 and a2; a3 <-> a4."""
    g = KnowledgeGraph()
    g.add_entity(Entity("c", "Centre"))
    for i in range(5):
        g.add_entity(Entity(f"a{i}", f"A{i}"))
        g.add_triple("c", "r", f"a{i}")
        for j in range(3):
            g.add_entity(Entity(f"b{i}{j}", f"B{i}{j}"))
            g.add_triple(f"a{i}", "r", f"b{i}{j}")
    g.add_entity(Entity("z", "Z"))
    for i in range(3):
        g.add_triple(f"a{i}", "s", "z")
    g.add_triple("a4", "s", "a3")  # a3, a4: two extra edges inside the neighbourhood (a0..a2 get one: z)
    g.add_triple("a3", "t", "a4")
    return g


# --------------------------------------------------------------------------- find_entity
def test_find_entity_exact_id_and_name(kg):
    assert find_entity(kg, "curie") == "curie"
    assert find_entity(kg, "Marie Curie") == "curie"
    assert find_entity(kg, "  Marie Curie ") == "curie"
    assert find_entity(kg, "R&D <Lab>") == "lab"
    # an exact name beats a case-insensitive one; an exact id beats everything
    assert find_entity(kg, "PARIS") == "paris_tx"
    assert find_entity(kg, "paris") == "paris"


def test_find_entity_case_insensitive_and_alias(kg):
    assert find_entity(kg, "marie   CURIE") == "curie"
    assert find_entity(kg, "Maria Skłodowska") == "curie"
    assert find_entity(kg, "maria SKŁODOWSKA") == "curie"
    assert find_entity(kg, "city of light") == "paris"
    # two case-insensitive matches ("Paris", "PARIS"): the better connected one wins
    assert find_entity(kg, "pArIs") == "paris"


def test_find_entity_suggestions(kg):
    with pytest.raises(UnknownEntityError) as ei:
        find_entity(kg, "Mary Curie")
    msg = str(ei.value)
    assert "Mary Curie" in msg and "did you mean" in msg and "Marie Curie" in msg and "(curie)" in msg
    assert ("Marie Curie", "curie") in ei.value.suggestions
    with pytest.raises(UnknownEntityError, match="no similar names"):
        find_entity(kg, "qqqqqqqqqqqqqqqq")
    with pytest.raises(UnknownEntityError, match="empty"):
        find_entity(kg, "   ")


def test_find_entity_at_most_five_suggestions():
    g = KnowledgeGraph()
    for i in range(12):
        g.add_entity(Entity(f"n{i}", f"Node {i}"))
    with pytest.raises(UnknownEntityError) as ei:
        find_entity(g, "Node")
    sugg = ei.value.suggestions
    assert len(sugg) == 5 and len(set(sugg)) == 5
    assert str(ei.value).count("'Node ") == 5
    assert sugg[0] == ("Node 0", "n0")  # equal scores keep graph order


# --------------------------------------------------------------------------- neighbourhood
def test_neighbourhood_hop_limits(kg):
    g0 = neighbourhood(kg, "curie", hops=0)
    assert list(g0) == ["curie"] and g0.number_of_edges() == 0
    g1 = neighbourhood(kg, "curie", hops=1)
    assert set(g1) == {"curie", "warsaw", "sorbonne", "pierre", "lab", "prize"}
    assert g1.has_edge("pierre", "curie")  # incoming edges are followed too
    g2 = neighbourhood(kg, "curie", hops=2)
    assert set(g2) == set(g1) | {"vistula", "paris", "france", "nobel"}
    assert "seine" not in g2 and "le_havre" not in g2
    assert set(neighbourhood(kg, "curie", hops=4)) == set(g2) | {"seine", "le_havre"}
    assert g2.graph["truncated"] is None and g2.graph["center"] == "curie" and g2.graph["total"] == 10


def test_neighbourhood_attributes_and_edges(kg):
    g = neighbourhood(kg, "curie", hops=2)
    a = g.nodes["lab"]
    assert (a["name"], a["type"], a["hop"]) == ("R&D <Lab>", "organisation", 1)
    assert a["description"].startswith('A "quoted"')
    assert g.nodes["curie"]["hop"] == 0 and g.nodes["paris"]["hop"] == 2
    rels = {k for _, _, k in g.edges("curie", keys=True)}
    assert {"spouse", LONG_REL, "## was born in ##"} <= rels
    assert g.number_of_edges("curie", "pierre") == 2 and g.has_edge("lab", "lab")
    assert list(g)[0] == "curie"  # (hop, id) order


def test_neighbourhood_truncation_keeps_centre_and_closest():
    g = star_graph()
    full = neighbourhood(g, "c", hops=2)
    assert full.number_of_nodes() == 1 + 5 + 15 + 1 and full.graph["truncated"] is None
    t = neighbourhood(g, "c", hops=2, max_nodes=8)
    assert t.graph["truncated"] == (8, 22) and t.number_of_nodes() == 8
    # centre + all of hop 1 first; then hop 2 by inner degree (z has 3 edges), then id
    assert set(t) == {"c", "a0", "a1", "a2", "a3", "a4", "z", "b00"}
    assert all(t.nodes[n]["hop"] <= 2 for n in t)
    # the hop-1 level itself overflows: highest inner degree (a3/a4: 6, a0..a2: 5) first, then by id
    t3 = neighbourhood(g, "c", hops=2, max_nodes=3)
    assert set(t3) == {"c", "a3", "a4"} and t3.graph["truncated"] == (3, 22)
    t1 = neighbourhood(g, "c", hops=2, max_nodes=1)
    assert list(t1) == ["c"]


def test_neighbourhood_bad_arguments(kg):
    with pytest.raises(UnknownEntityError):
        neighbourhood(kg, "nobody")
    with pytest.raises(ValueError):
        neighbourhood(kg, "curie", hops=-1)
    with pytest.raises(ValueError):
        neighbourhood(kg, "curie", max_nodes=0)


def test_nothing_but_find_entity_scans_the_graph(kg, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("full scan of the graph")

    for attr in ("entities", "triples", "names"):
        monkeypatch.setattr(kg, attr, boom)
    monkeypatch.setattr(KnowledgeGraph, "entity_ids", property(boom))
    info = draw_neighbourhood(kg, "curie", tmp_path / "g.html")  # an exact id needs no scan
    assert info["nodes"] == 10


# --------------------------------------------------------------------------- labels
def test_relation_label_is_short():
    assert relation_label("## was born in ##") == "was born in"
    lab = relation_label(LONG_REL)
    assert len(lab) <= 30 and lab.endswith("\u2026") and lab.startswith("was awarded")
    assert relation_label("x" * 100).endswith("\u2026") and len(relation_label("x" * 100)) == 30
    assert relation_label("##") == "##"


# --------------------------------------------------------------------------- PNG
def test_png_output(kg, tmp_path):
    import matplotlib.image

    out = tmp_path / "sub" / "curie.png"
    info = draw_neighbourhood(kg, "marie curie", out, hops=2)
    assert info == {
        "entity": "curie",
        "name": "Marie Curie",
        "nodes": 10,
        "edges": 12,
        "truncated": False,
        "out": str(out),
    }
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    img = matplotlib.image.imread(out)
    assert img.ndim == 3 and img.shape[2] in (3, 4) and min(img.shape[:2]) > 200
    assert [p.name for p in out.parent.iterdir()] == ["curie.png"]  # no temp file left behind


def test_png_truncated_and_single_node(tmp_path):
    info = draw_neighbourhood(star_graph(), "Centre", tmp_path / "s.PNG", max_nodes=8)
    assert info["truncated"] is True and info["nodes"] == 8
    g = KnowledgeGraph()
    g.add_entity(Entity("solo", "Solo"))
    info = draw_neighbourhood(g, "solo", tmp_path / "solo.png")
    assert info["nodes"] == 1 and info["edges"] == 0
    assert (tmp_path / "solo.png").read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------- HTML
def _svg(doc: str) -> ET.Element:
    start, end = doc.index("<svg"), doc.index("</svg>") + len("</svg>")
    return ET.fromstring(doc[start:end])  # well-formed XML => correctly escaped


def test_html_output(kg, tmp_path):
    out = tmp_path / "curie.html"
    info = draw_neighbourhood(kg, "Marie Curie", out, hops=2)
    assert info["out"] == str(out) and info["nodes"] == 10 and info["edges"] == 12
    doc = out.read_text(encoding="utf-8")
    assert doc.startswith("<!DOCTYPE html>") and "<svg" in doc
    # self-contained: no network references of any kind, no scripts, no external stylesheets
    low = doc.lower()
    assert "http://" not in low and "https://" not in low and "//cdn" not in low
    assert "<script" not in low and "<link" not in low and "src=" not in low and "@import" not in low
    # escaping: the raw name never appears, the escaped one does
    assert "R&D <Lab>" not in doc and "R&amp;D &lt;Lab&gt;" in doc
    assert "<b>bold</b>" not in doc

    svg = _svg(doc)
    texts = [t.text for t in svg.iter("text")]
    titles = [t.text for t in svg.iter("title")]
    g = neighbourhood(kg, "curie", hops=2)
    for n in g:
        assert g.nodes[n]["name"] in texts, n
    node_tip = next(t for t in titles if t.startswith("R&D <Lab>\n"))
    assert "type: organisation" in node_tip and 'A "quoted" <b>bold</b> description & more' in node_tip
    assert any(t.startswith("Marie Curie") and "type: person" in t and "Physicist" in t for t in titles)
    # edges: short label on the drawing, the full relation in the tooltip
    assert any(LONG_REL in t and "Marie Curie" in t and "Pierre Curie" in t for t in titles)
    assert any("## was born in ##" in t for t in titles)
    assert "was born in" in texts and relation_label(LONG_REL) in texts and LONG_REL not in texts
    assert sum(e.get("class") == "edge" for e in svg.iter("g")) == 12


def test_html_is_deterministic_and_htm_allowed(kg, tmp_path):
    a, b = tmp_path / "a.html", tmp_path / "b.htm"
    draw_neighbourhood(kg, "curie", a)
    draw_neighbourhood(kg, "curie", b)
    assert a.read_bytes() == b.read_bytes()


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("name", ["g.jpg", "g.svg", "g", "g.png.txt"])
def test_bad_suffix(kg, tmp_path, name):
    with pytest.raises(ValueError, match=r"\.png.*\.html"):
        draw_neighbourhood(kg, "nobody at all", tmp_path / name)  # suffix checked before the lookup
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".png", ".html"])
def test_failed_write_leaves_no_partial_file(kg, tmp_path, monkeypatch, suffix):
    out = tmp_path / f"g{suffix}"
    out.write_bytes(b"old")

    def fail_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(draw.os, "replace", fail_replace)
    with pytest.raises(OSError, match="disk full"):
        draw_neighbourhood(kg, "curie", out)
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == [out.name]  # the temp file was removed
    monkeypatch.undo()

    new = tmp_path / f"new{suffix}"

    def fail_render(*a, **k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(draw, "_render_png" if suffix == ".png" else "_render_html", fail_render)
    with pytest.raises(RuntimeError):
        draw_neighbourhood(kg, "curie", new)
    assert not new.exists() and sorted(os.listdir(tmp_path)) == [out.name]
