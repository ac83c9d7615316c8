"""Every compiled graph the package exports can describe its input/output as JSON schema
(``typing_extensions.TypedDict`` state; ``typing.TypedDict`` raises ``PydanticUserError`` on
Python < 3.12)."""

from __future__ import annotations

import pytest

import kgrag_plugins.integrations.langgraph as lg
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.types import Entity

#: The graph builders of the public surface (names ending in ``_graph`` plus the hop router).
BUILDERS = {
    "activation_graph",
    "kg_infused_graph",
    "sa_rag_graph",
    "frag_graph",
    "translator_graph",
    "know3_graph",
    "make_hop_router",
}


def test_every_exported_graph_builder_is_covered():
    exported = {n for n in lg.__all__ if n.endswith("_graph")} | {"make_hop_router"}
    assert exported == BUILDERS


@pytest.fixture(scope="module")
def kg_index(sample_index):
    g = KnowledgeGraph()
    for h, r, t in [("Big", "directed_by", "Penny Marshall"), ("Big", "starred_actors", "Tom Hanks")]:
        g.add_entity(Entity(h, h))
        g.add_entity(Entity(t, t))
        g.add_triple(h, r, t)
    return KnowledgeIndex.build([], graph=g, embedder=sample_index.embedder, progress=False)


@pytest.fixture(scope="module")
def parsekg_index(tmp_path_factory, sample_index):
    from kgrag_plugins.types import Passage

    passages = [
        Passage("p1", "Marie Curie was born in Warsaw.", "Marie Curie"),
        Passage("p2", "Warsaw is in Poland.", "Warsaw"),
    ]
    path = tmp_path_factory.mktemp("schema-parsekg") / "index"
    return KnowledgeIndex.build(passages, path, builder="parsekg", embedder=sample_index.embedder, progress=False)


def _graphs(sample_index, kg_index, parsekg_index):
    from kgrag_plugins.methods.baselines import DenseRetriever

    llm = ScriptedLLM(lambda messages: "unused")
    dense = DenseRetriever(sample_index)
    return {
        "activation": lg.activation_graph(sample_index),
        "activation+llm": lg.activation_graph(sample_index, llm),
        "kg_infused": lg.kg_infused_graph(sample_index),
        "kg_infused+llm": lg.kg_infused_graph(sample_index, llm),
        "sa_rag": lg.sa_rag_graph(sample_index),
        "sa_rag+llm": lg.sa_rag_graph(sample_index, llm),
        "frag": lg.frag_graph(kg_index),
        "frag+llm": lg.frag_graph(kg_index, llm=llm),
        "translator": lg.translator_graph(parsekg_index),
        "translator+llm": lg.translator_graph(parsekg_index, llm),
        "hop_router": lg.make_hop_router(dense, dense),
        "know3": lg.know3_graph(sample_index),
        "know3+llm": lg.know3_graph(sample_index, llm=llm),
    }


def test_input_and_output_json_schemas(sample_index, kg_index, parsekg_index):
    graphs = _graphs(sample_index, kg_index, parsekg_index)
    assert {name.split("+")[0] for name in graphs} == {
        "activation",
        "kg_infused",
        "sa_rag",
        "frag",
        "translator",
        "hop_router",
        "know3",
    }
    for name, compiled in graphs.items():
        inp = compiled.get_input_jsonschema()
        out = compiled.get_output_jsonschema()
        assert inp["type"] == "object" and "question" in inp["properties"], name
        assert {"documents", "generation", "facts", "trace"} <= set(out["properties"]), name
        assert inp["properties"]["question"]["type"] == "string", name


def test_state_is_a_typing_extensions_typeddict():
    import typing_extensions

    assert type(lg.KGRAGState) is type(typing_extensions.TypedDict("Probe", {"x": int}))


def test_schema_accepts_tutorial_documents_and_messages(sample_index):
    inp = lg.activation_graph(sample_index).get_input_jsonschema()
    kinds = inp["properties"]["documents"]["items"]["anyOf"]
    assert {"type": "string"} in kinds and {"$ref": "#/$defs/Document"} in kinds
    assert any(k.get("type") == "object" for k in kinds)  # dicts
    assert inp["properties"]["messages"]["type"] == "array"
