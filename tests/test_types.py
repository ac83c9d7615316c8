"""JSON round trips and small behaviours of the core types."""

import json

import pytest

from kgrag_plugins.types import Answer, Entity, Evidence, Fact, Passage, Path, ScoredPassage, Triple


def _roundtrip(obj):
    return type(obj).from_dict(json.loads(json.dumps(obj.to_dict())))


def test_every_type_survives_json():
    p = Passage("p1", "Text.", "Title", {"lang": "en"})
    objs = [
        p,
        Entity("e1", "Marie Curie", ["Curie"], "physicist", "PERSON"),
        Triple("e1", "born in", "e2", ["p1"]),
        Path(["e1", "e2", "e3"], ["born in", "capital of"], 0.5),
        Fact("Marie Curie born in Warsaw", "fact", 0.9, {"triple": 3}),
        ScoredPassage(p, 0.7),
    ]
    for obj in objs:
        assert _roundtrip(obj) == obj
    ev = Evidence("q?", [ScoredPassage(p, 0.7)], [Fact("f")], {"seeds": ["e1"]})
    back = _roundtrip(ev)
    assert back.to_dict() == ev.to_dict() and back.passage_ids == ["p1"]
    ans = Answer("q?", "Warsaw", ev, {"raw": "Warsaw."})
    assert _roundtrip(ans).to_dict() == ans.to_dict()
    assert _roundtrip(Answer("q?", "x")).evidence is None


def test_unknown_field_is_rejected():
    with pytest.raises(ValueError, match="unknown field"):
        Entity.from_dict({"id": "e", "name": "n", "colour": "red"})


def test_path_shape_and_verbalisation():
    path = Path(["a", "b", "c"], ["r1", "r2"])
    assert path.verbalize({"a": "A", "c": "C"}) == "A -> r1 -> b -> r2 -> C"
    with pytest.raises(ValueError, match="len\\(relations\\)"):
        Path(["a", "b"], [])


def test_embed_text_and_top():
    assert Passage("p", "body", "T").embed_text == "T\nbody"
    assert Passage("p", "body").embed_text == "body"
    ev = Evidence("q", [ScoredPassage(Passage(str(i), "t"), 1.0 / (i + 1)) for i in range(4)])
    assert ev.top(2).passage_ids == ["0", "1"] and len(ev.passages) == 4
    assert Triple("h", "r", "t").verbalize({"h": "H"}) == "H r t"
