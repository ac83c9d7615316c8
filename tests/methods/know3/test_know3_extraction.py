"""Triple extraction for the Know³ verifier: LLM-free spaCy SVO on sentences with known triples,
linking to KG ids and relation labels, the Fig. 9 path with its fallback, and the KGQA mappings."""

from __future__ import annotations

import logging

import pytest
from conftest import HashEmbedder

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.know3.extraction import TripleExtractor, chain_triples, path_triples
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.types import Entity, Passage, Path

ENTITIES = [
    "Albert Einstein",
    "Ulm",
    "Germany",
    "Steven Spielberg",
    "Jaws",
    "Close Encounters",
    "Karl",
    "Emich, 5th Prince of Leiningen",
    "Hank Snow",
    "Liverpool",
    "Paramount Pictures",
    "Big (film)",
    "Tom Hanks",
]
TRIPLES = [
    ("Albert Einstein", "was born in", "Ulm"),
    ("Steven Spielberg", "directed", "Jaws"),
    ("Karl", "son of", "Emich, 5th Prince of Leiningen"),
    ("Hank Snow", "was born in", "Liverpool"),
    ("Big (film)", "stars", "Tom Hanks"),
    ("Big (film)", "released by", "Paramount Pictures"),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    g = KnowledgeGraph()
    for e in ENTITIES:
        g.add_entity(Entity(e, e))
    for h, r, t in TRIPLES:
        g.add_triple(h, r, t)
    passages = [Passage("p1", "Albert Einstein was born in Ulm.", "Albert Einstein")]
    return KnowledgeIndex.build(passages, None, graph=g, embedder=HashEmbedder(), progress=False)


@pytest.fixture(scope="module")
def extractor(index):
    return TripleExtractor(index)


@pytest.mark.parametrize(
    ("text", "title", "expected"),
    [
        (
            "Albert Einstein was born in Ulm, Germany in 1879.",
            None,
            {("Albert Einstein", "was born in", "Ulm"), ("Albert Einstein", "was born in", "Germany")},
        ),
        (
            "Steven Spielberg directed Jaws and wrote Close Encounters.",
            None,
            {("Steven Spielberg", "directed", "Jaws")},
        ),
        (
            "Karl was the son of Emich, 5th Prince of Leiningen.",
            None,
            {("Karl", "son of", "Emich, 5th Prince of Leiningen")},
        ),
        ("He was born in Liverpool in 1914.", "Hank Snow", {("Hank Snow", "was born in", "Liverpool")}),
        (
            "The film stars Tom Hanks and was released by Paramount Pictures.",
            "Big (film)",
            {("Big (film)", "stars", "Tom Hanks"), ("Big (film)", "released by", "Paramount Pictures")},
        ),
    ],
)
def test_svo_extraction_links_known_triples(extractor, text, title, expected) -> None:
    ex = extractor.extract(text, title=title)
    assert ex.method == "svo"
    assert expected <= set(ex.keys), (ex.keys, ex.dropped)


def test_links_record_how_and_unlinkable_parts_are_dropped_with_reasons(extractor) -> None:
    ex = extractor.extract("Albert Einstein was born in Ulm, Germany in 1879.")
    born = next(t for t in ex.triples if t.tail == "Ulm")
    assert born.link["relation"] == "exact" and born.link["head"] in ("hint", "name")
    assert any(d["triple"][2] == "1879" and "unknown entity" in d["reason"] for d in ex.dropped)
    # no KG relation is similar enough to "wrote" (bag-of-words test embedder): dropped, with why
    ex2 = extractor.extract("Steven Spielberg directed Jaws and wrote Close Encounters.")
    assert ex2.keys == [("Steven Spielberg", "directed", "Jaws")]
    assert ex2.dropped == [
        {"triple": ["Steven Spielberg", "wrote", "Close Encounters"], "reason": "unknown relation 'wrote'"}
    ]
    # "was son of" is not a label: the closest relation by vector similarity is taken
    (son,) = extractor.extract("Karl was the son of Emich, 5th Prince of Leiningen.").triples
    assert son.relation == "son of" and son.link["relation"].startswith("vector:")


def test_empty_text_and_unknown_entities_give_a_reason(extractor) -> None:
    assert extractor.extract("   ").reason == "empty text"
    ex = extractor.extract("Zorblax visited Quuxland.")
    assert ex.triples == [] and ex.reason == "no extracted triple could be linked to the KG"
    assert ex.dropped and "unknown entity" in ex.dropped[0]["reason"]
    assert extractor.extract("Blue is nice.").reason in (
        "no triples extracted",
        "no extracted triple could be linked to the KG",
    )


def test_pronoun_without_title_is_dropped(extractor) -> None:
    ex = extractor.extract("He was born in Liverpool.")
    assert ex.triples == []


def test_llm_extraction_and_its_fallback(index, caplog) -> None:
    good = '[{"subject": "Steven Spielberg", "predicate": "directed", "object": "Jaws"}]'
    ex = TripleExtractor(index, llm=ScriptedLLM([good])).extract("Spielberg made Jaws.")
    assert ex.method == "llm" and ex.keys == [("Steven Spielberg", "directed", "Jaws")]
    llm = ScriptedLLM(["Spielberg directed it.", "still prose"])
    errors: list[dict] = []
    with caplog.at_level(logging.WARNING):
        ex = TripleExtractor(index, llm=llm).extract("Steven Spielberg directed Jaws.", errors=errors)
    assert len(llm.calls) == 2 and ex.method == "svo (llm fallback)"
    assert ex.keys == [("Steven Spielberg", "directed", "Jaws")]
    assert errors and errors[0]["step"] == "triple_extraction" and errors[0]["kind"] == "invalid_reply"
    assert "fell back to the LLM-free path" in caplog.text
    # entity hints reach the prompt, and the text stays inside its data block
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert (
        "<text>\nSteven Spielberg directed Jaws.\n</text>" in prompt
        and "Steven Spielberg" in prompt.split("<entities>")[1]
    )


def test_kgqa_triples() -> None:
    assert chain_triples("Big", ["directed_by"], "Penny Marshall") == ([("Big", "directed_by", "Penny Marshall")], None)
    triples, why = chain_triples("Big", ["directed_by", "directed"], "Awakenings")
    assert triples == [] and "intermediate" in why
    p = Path(["Big", "Penny Marshall", "Awakenings"], ["directed_by", "directed_by"], inverse=[False, True])
    assert path_triples(p) == [
        ("Big", "directed_by", "Penny Marshall"),
        ("Awakenings", "directed_by", "Penny Marshall"),
    ]
