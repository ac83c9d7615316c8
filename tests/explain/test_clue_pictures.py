"""kgrag_plugins.explain.clues: translator traces drawn as clue entity -> traced passage graphs."""

import pytest

from kgrag_plugins.explain.clues import clue_subgraph, draw_clues, draw_trace

TRACE = {
    "clues": [
        {
            "entity": "e1",
            "name": "Hank Snow",
            "relation": "was born in",
            "direction": "forward",
            "step": 0,
            "score": 0.9,
            "passage_ids": ["p1", "p2"],
        },
        {
            "entity": "e2",
            "name": "Brooklyn",
            "relation": "is a community in",
            "direction": "reverse",
            "step": 1,
            "score": 0.5,
            "passage_ids": ["p2"],
        },
    ]
}


def test_clue_subgraph_nodes_edges_and_roles():
    g = clue_subgraph(TRACE)
    assert g.graph["center"] == "entity:e1"
    assert g.nodes["entity:e1"]["hop"] == 0 and g.nodes["entity:e2"]["hop"] == 1
    assert g.nodes["passage:p1"]["type"] == "passage" and g.nodes["passage:p1"]["hop"] == 1
    rels = {(u, v): a["relation"] for u, v, a in g.edges(data=True)}
    assert rels[("entity:e1", "passage:p1")] == "was born in"
    # reverse clues point from the passage to the entity (the entity is the tail, App. J)
    assert rels[("passage:p2", "entity:e2")] == "is a community in"
    assert g.number_of_nodes() == 4 and g.number_of_edges() == 3


def test_clue_subgraph_truncates_and_refuses_empty():
    g = clue_subgraph(TRACE, max_nodes=2)
    assert g.number_of_nodes() == 2 and g.graph["truncated"]
    with pytest.raises(ValueError, match="no clues.*no entity found"):
        clue_subgraph({"clues": [], "reason": "no entity found"})


def test_draw_clues_png_and_html(tmp_path):
    info = draw_clues(TRACE, tmp_path / "c.png")
    assert info["entities"] == ["Hank Snow", "Brooklyn"] and info["passages"] == 2
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    draw_clues(TRACE, tmp_path / "c.html")
    html = (tmp_path / "c.html").read_text()
    assert "Hank Snow" in html and "was born in" in html


def test_draw_trace_dispatches_on_the_trace_kind(tmp_path):
    class _Index:  # draw_trace only reads .passages (clues) or .graph (activation)
        passages = None
        graph = None

    info = draw_trace(_Index(), TRACE, tmp_path / "t.html")
    assert info["entities"] == ["Hank Snow", "Brooklyn"]
