"""FRAG adapters: the hop router node, make_hop_router, frag_graph (LangGraph) and HopAwareRetriever
(LlamaIndex) over a hand-made MetaQA-style movie KG (one-way triples, no passages)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.graph import END, START, StateGraph
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine
from pydantic import PrivateAttr
from typing_extensions import TypedDict

from kgrag_plugins.integrations.langgraph import (
    KGRAGState,
    frag_graph,
    make_frag_node,
    make_generate_node,
    make_hop_router,
    make_route_node,
    route_by_hops,
)
from kgrag_plugins.integrations.llama_index import HopAwareRetriever
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.methods.frag import FRAGRetriever, heuristic_route
from kgrag_plugins.methods.frag.hop_classifier import HopClassifier
from kgrag_plugins.models.llm import LLMError, ScriptedLLM
from kgrag_plugins.types import Evidence, Fact

SIMPLE_Q = "which person directed the movies starred by [Tom Hanks]"  # 2 hops
COMPLEX_Q = "who directed the films that share actors with the films directed by [Penny Marshall]"  # 3 hops
DIRECTORS = {"Penny Marshall", "Robert Zemeckis"}

MOVIES = {  # movie: (directors, actors, year, genre) -- stored one way, like MetaQA's kb.txt
    "Big": (["Penny Marshall"], ["Tom Hanks"], "1988", "Comedy"),
    "A League of Their Own": (["Penny Marshall"], ["Tom Hanks", "Geena Davis"], "1992", "Comedy"),
    "Awakenings": (["Penny Marshall"], ["Robin Williams", "Robert De Niro"], "1990", "Drama"),
    "Forrest Gump": (["Robert Zemeckis"], ["Tom Hanks", "Robin Wright"], "1994", "Drama"),
    "Cast Away": (["Robert Zemeckis"], ["Tom Hanks", "Helen Hunt"], "2000", "Drama"),
    "Back to the Future": (["Robert Zemeckis"], ["Michael J. Fox"], "1985", "Comedy"),
    "Taxi Driver": (["Martin Scorsese"], ["Robert De Niro", "Jodie Foster"], "1976", "Drama"),
}

#: Hand-written hop-labelled questions for a tiny HopClassifier (delta = 2: 3 hops is complex).
TRAIN = [
    ("who directed [Big]", 1),
    ("what movies did [Tom Hanks] act in", 1),
    ("when was [Forrest Gump] released", 1),
    ("what genre is [Cast Away]", 1),
    ("which films did [Penny Marshall] direct", 1),
    ("who starred in [Awakenings]", 1),
    ("what year did [Big] come out", 1),
    (SIMPLE_Q, 2),
    ("what genres are the films directed by [Robert Zemeckis]", 2),
    ("who acted in the movies directed by [Penny Marshall]", 2),
    ("when were the films starred by [Geena Davis] released", 2),
    ("who are the co-stars of [Helen Hunt]", 2),
    (COMPLEX_Q, 3),
    ("which years were the movies released that share directors with the films starred by [Tom Hanks]", 3),
    ("who are the actors in the films directed by the director of [Cast Away]", 3),
    ("what are the genres of the films that share actors with the films of [Robert De Niro]", 3),
    ("the films that share actors with the film [Big] were directed by who", 3),
    ("who co-starred with the actors of the movies directed by [Robert Zemeckis]", 3),
    ("what languages are the films that share directors with the films of [Forrest Gump] in", 3),
    ("when were the movies released whose directors also directed the films of [Jodie Foster]", 3),
]


def _nodes(graph, state, **kw) -> tuple[list[str], dict[str, Any]]:
    """Stream ``updates``; return the node names in order and the merged final state."""
    names, final = [], dict(state)
    for chunk in graph.stream(state, stream_mode="updates", **kw):
        for name, update in chunk.items():
            names.append(name)
            final.update(update or {})
    return names, final


@pytest.fixture(scope="module")
def movie_index():
    from kgrag_plugins.index.graph import KnowledgeGraph
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.types import Entity

    g = KnowledgeGraph()

    def triple(h: str, r: str, t: str) -> None:
        g.add_entity(Entity(h, h))
        g.add_entity(Entity(t, t))
        g.add_triple(h, r, t)

    for movie, (directors, actors, year, genre) in MOVIES.items():
        for d in directors:
            triple(movie, "directed_by", d)
        for a in actors:
            triple(movie, "starred_actors", a)
        triple(movie, "release_year", year)
        triple(movie, "has_genre", genre)
    return KnowledgeIndex.build([], graph=g, progress=False)  # the real MiniLM embedder


@pytest.fixture(scope="module")
def frag(movie_index) -> FRAGRetriever:
    return FRAGRetriever(movie_index)


@pytest.fixture(scope="module")
def hop_clf(movie_index) -> HopClassifier:
    qs, hops = zip(*TRAIN)
    return HopClassifier(movie_index.embedder).fit(list(qs), list(hops))


def _plain(q: str) -> str:
    return q.replace("[", "").replace("]", "")


# --------------------------------------------------------------------------- the route node


def test_route_node_heuristic():
    node = make_route_node()
    out = node.invoke({"question": SIMPLE_Q, "trace": {"earlier": 1}})
    assert out == {
        "route": "simple",
        "trace": {"earlier": 1, "route": {"route": "simple", "p_complex": None, "by": "heuristic"}},
    }
    assert node.invoke({"question": COMPLEX_Q, "route": "simple"})["route"] == heuristic_route(COMPLEX_Q) == "complex"
    assert node.invoke({"question": COMPLEX_Q, "query": SIMPLE_Q})["route"] == "simple"  # query wins over question
    assert route_by_hops({"route": "complex"}) == "complex"
    with pytest.raises(ValueError, match="route"):
        route_by_hops({"question": "q"})
    with pytest.raises(ValueError, match="question"):
        node.invoke({})


def test_route_node_with_a_trained_classifier(hop_clf, movie_index, tmp_path):
    node = make_route_node(hop_clf)
    for q, hops in [(TRAIN[0][0], 1), (SIMPLE_Q, 2), (COMPLEX_Q, 3), (TRAIN[15][0], 3)]:
        out = node.invoke({"question": q})
        p = float(hop_clf.predict_proba([_plain(q)])[0])  # brackets removed, as FRAGRetriever.route does
        assert out["trace"]["route"] == {"route": out["route"], "p_complex": pytest.approx(p), "by": "classifier"}
        assert out["route"] == ("complex" if hops > 2 else "simple")
    # a saved classifier, loaded by path with the index's embedder
    path = hop_clf.save(tmp_path / "hop.npz")
    out = make_route_node(str(path), embedder=movie_index.embedder).invoke({"question": COMPLEX_Q})
    assert out["route"] == "complex" and out["trace"]["route"]["by"] == "classifier"
    # a FRAGRetriever routes with its own classifier (or its forced mode)
    via_frag = make_route_node(FRAGRetriever(movie_index, classifier=hop_clf)).invoke({"question": COMPLEX_Q})
    assert via_frag["trace"]["route"]["p_complex"] == pytest.approx(out["trace"]["route"]["p_complex"])
    forced = make_route_node(FRAGRetriever(movie_index, mode="complex")).invoke({"question": TRAIN[0][0]})
    assert forced["trace"]["route"] == {"route": "complex", "p_complex": None, "by": "mode"}


def test_route_node_accepts_stubs_and_rejects_bad_routes():
    class Stub:
        def __init__(self, route: str):
            self.route_value, self.seen = route, []

        def route(self, q: str) -> str:
            self.seen.append(q)
            return self.route_value

    stub = Stub("complex")
    out = make_route_node(stub).invoke({"question": "who directed [Big]"})
    assert out["route"] == "complex" and stub.seen == ["who directed Big"]
    assert make_route_node(lambda q: "simple").invoke({"question": COMPLEX_Q})["route"] == "simple"
    with pytest.raises(ValueError, match="'medium'"):
        make_route_node(Stub("medium")).invoke({"question": "q?"})
    with pytest.raises(TypeError, match="classifier"):
        make_route_node(42)


# --------------------------------------------------------------------------- the FRAG node


def test_frag_node_writes_paths_answers_and_trace(frag):
    node = make_frag_node(frag, "simple", k=3)
    out = node.invoke({"question": SIMPLE_Q, "trace": {"route": {"route": "simple"}}})
    assert out["documents"] == []  # a pure KG has no passages
    assert out["facts"] and all(f.startswith("Tom Hanks <- starred_actors <- ") for f in out["facts"])
    assert "Tom Hanks <- starred_actors <- Big -> directed_by -> Penny Marshall" in out["facts"]
    assert DIRECTORS <= set(out["answers"]) and out["answers"][0] in DIRECTORS
    ev = frag.evidence(SIMPLE_Q, 3, route="simple")
    assert out["facts"] == [f.text for f in ev.facts] and out["answers"] == ev.trace["answers"]
    assert out["route"] == "simple" and out["trace"]["route"] == {"route": "simple"}  # earlier entries kept
    assert out["trace"]["frag"]["topic_entities"] == ["Tom Hanks"] and out["trace"]["frag"]["route"] == "simple"
    # forced complex pipeline; async path gives the same result
    cx = make_frag_node(frag, "complex")
    sync = cx.invoke({"question": SIMPLE_Q})
    assert sync["route"] == "complex" and sync["trace"]["frag"]["k"] == frag.complex_hops
    assert asyncio.run(cx.ainvoke({"question": SIMPLE_Q}))["facts"] == sync["facts"]
    # route=None follows state["route"]; gold topic entities replace linking
    auto = make_frag_node(frag).invoke({"question": "who directed it", "route": "simple", "topic_entities": ["Big"]})
    assert auto["route"] == "simple" and auto["trace"]["frag"]["linking"] == "given"
    assert all(f.startswith("Big ") for f in auto["facts"]) and "Penny Marshall" in auto["answers"]
    with pytest.raises(ValueError, match="route"):
        make_frag_node(frag, "medium")
    with pytest.raises(TypeError, match="FRAGRetriever"):
        make_frag_node(object(), "simple")  # type: ignore[arg-type]


def test_frag_node_without_a_topic_entity_reports_the_error(frag):
    out = make_frag_node(frag, "simple").invoke({"question": "which films did [Nobody Known] direct"})
    assert out["facts"] == [] and out["answers"] == [] and out["documents"] == []
    assert "no topic entity" in out["trace"]["frag"]["error"]


# --------------------------------------------------------------------------- make_hop_router


class _Recorder(Retriever):
    """A kgrag Retriever that records its calls and returns one fixed fact."""

    def __init__(self, name: str):
        self.name, self.calls = name, []

    def _retrieve(self, query: str, k: int) -> Evidence:
        self.calls.append((query, k))
        return Evidence(query, [], [Fact(f"{self.name} fact")], {"retriever": self.name})


def test_hop_router_picks_the_branch(hop_clf):
    simple, complex_ = _Recorder("one-hop"), _Recorder("multi-hop")
    graph = make_hop_router(simple, complex_, classifier=hop_clf, k=2)
    names, final = _nodes(graph, {"question": SIMPLE_Q})
    assert names == ["router", "simple"] and simple.calls == [(SIMPLE_Q, 2)] and not complex_.calls
    assert final["route"] == "simple" and final["facts"] == ["one-hop fact"]
    assert final["trace"]["route"]["by"] == "classifier" and final["trace"]["retrieve"]["retriever"] == "one-hop"
    names, final = _nodes(graph, {"question": COMPLEX_Q})
    assert names == ["router", "complex"] and complex_.calls == [(COMPLEX_Q, 2)] and len(simple.calls) == 1
    assert final["route"] == "complex" and final["facts"] == ["multi-hop fact"]
    afinal = asyncio.run(graph.ainvoke({"question": COMPLEX_Q}))
    assert afinal["facts"] == ["multi-hop fact"] and len(complex_.calls) == 2
    with pytest.raises(TypeError, match="simple branch"):
        make_hop_router(42, complex_)


def test_hop_router_with_a_subgraph_and_a_callable_branch(movie_index):
    calls: list[str] = []

    def lookup(state: dict[str, Any]) -> dict[str, Any]:  # a plain callable node
        calls.append(state["question"])
        return {"facts": ["looked up"], "answers": ["x"]}

    sub = frag_graph(movie_index, mode="complex")  # a compiled graph as the complex branch
    graph = make_hop_router(lookup, sub)  # heuristic router
    final = graph.invoke({"question": SIMPLE_Q})
    assert calls == [SIMPLE_Q] and final["facts"] == ["looked up"] and final["route"] == "simple"
    final = graph.invoke({"question": COMPLEX_Q})
    assert calls == [SIMPLE_Q] and final["route"] == "complex"
    assert final["facts"][0].startswith("Penny Marshall") and final["trace"]["frag"]["route"] == "complex"
    assert final["trace"]["route"]["by"] == "mode"  # the subgraph's own router overwrote the entry
    inner = [(ns, list(u)) for ns, u in graph.stream({"question": COMPLEX_Q}, stream_mode="updates", subgraphs=True)]
    assert [u for ns, u in inner if ns and ns[0].startswith("complex:")] == [["router"], ["frag_complex"]]


# --------------------------------------------------------------------------- frag_graph


def test_frag_graph_llm_free(movie_index):
    graph = frag_graph(movie_index, k=3)
    names, final = _nodes(graph, {"question": SIMPLE_Q})
    assert names == ["router", "frag_simple"] and final["route"] == "simple"
    assert "generation" not in final and DIRECTORS <= set(final["answers"])
    assert final["trace"]["route"] == {"route": "simple", "p_complex": None, "by": "heuristic"}
    names, final = _nodes(graph, {"question": COMPLEX_Q})
    assert names == ["router", "frag_complex"] and final["trace"]["frag"]["k"] == 4
    assert any(f.count("->") + f.count("<-") >= 6 for f in final["facts"])  # paths of 3+ hops
    afinal = asyncio.run(graph.ainvoke({"question": COMPLEX_Q}))
    assert afinal["facts"] == final["facts"] and afinal["answers"] == final["answers"]


def test_frag_graph_with_a_classifier_and_a_ready_retriever(movie_index, hop_clf):
    final = frag_graph(movie_index, classifier=hop_clf).invoke({"question": COMPLEX_Q})
    assert final["route"] == "complex" and final["trace"]["route"]["by"] == "classifier"
    assert final["trace"]["route"]["p_complex"] >= 0.5
    ready = FRAGRetriever(movie_index)
    graph = frag_graph(ready, classifier=lambda q: "complex")  # the classifier overrides only the router
    assert graph.invoke({"question": SIMPLE_Q})["route"] == "complex"
    with pytest.raises(ValueError, match="FRAGRetriever"):
        frag_graph(ready, max_paths=3)
    with pytest.raises(ValueError, match="llm"):
        frag_graph(ready, llm=ScriptedLLM(["x"]))
    with pytest.raises(TypeError, match="FRAGRetriever"):
        frag_graph(_Recorder("x"))


def test_frag_graph_with_an_llm_uses_the_reasoning_prompt(movie_index):
    llm = ScriptedLLM(["Penny Marshall\nBecause Tom Hanks starred in Big, directed by Penny Marshall."])
    graph = frag_graph(movie_index, llm=llm, k=3)
    names, final = _nodes(graph, {"question": SIMPLE_Q})
    assert names == ["router", "frag_simple", "generate"] and final["generation"] == "Penny Marshall"
    assert len(llm.calls) == 1 and llm.calls[0]["stop"][0] == "\n"
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "Reasoning Paths:\n<paths>\n" + "\n".join(final["facts"]) + "\n</paths>" in prompt
    assert f"Question:\n{_plain(SIMPLE_Q)}" in prompt
    # same as the method's own answer step
    ref = ScriptedLLM(["Penny Marshall"])
    ans = FRAGRetriever(movie_index, llm=ref).answer(
        SIMPLE_Q, evidence=FRAGRetriever(movie_index).evidence(SIMPLE_Q, 3)
    )
    assert ans.text == final["generation"] and ref.calls[0]["messages"] == llm.calls[0]["messages"]
    # an LLM error falls back to the best LLM-free answer and is traced
    failing = frag_graph(movie_index, llm=ScriptedLLM([LLMError("model down")]))
    out = failing.invoke({"question": SIMPLE_Q})
    assert out["generation"] == out["answers"][0] and out["trace"]["llm_error"] == [
        {"step": "answer", "error": "model down"}
    ]


def test_generate_node_frag_branch_and_existing_branches(frag):
    node = make_generate_node(method=frag)  # LLM-free: the first candidate answer
    assert node.invoke({"question": SIMPLE_Q, "facts": ["a -> r -> b"], "answers": ["b", "c"]}) == {"generation": "b"}
    assert node.invoke({"question": SIMPLE_Q, "facts": []}) == {"generation": ""}
    with pytest.raises(TypeError, match="answer"):
        make_generate_node(method=object())


class ParentState(TypedDict, total=False):
    user_input: str
    question: str
    facts: list[str]
    answers: list[str]
    documents: list[Document]
    report: str


def test_frag_graph_inside_a_parent_graph(movie_index):
    def prepare(state: ParentState) -> dict[str, Any]:
        return {"question": state["user_input"].strip()}

    def report(state: ParentState) -> dict[str, Any]:
        return {"report": f"{state['answers'][0]} via {state['facts'][0]} ({len(state['facts'])} paths)"}

    g = StateGraph(ParentState)
    g.add_node("prepare", prepare)
    g.add_node("frag", frag_graph(movie_index, k=3))
    g.add_node("report", report)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "frag")
    g.add_edge("frag", "report")
    g.add_edge("report", END)
    parent = g.compile()
    names, _ = _nodes(parent, {"user_input": f"  {SIMPLE_Q} "})
    assert names == ["prepare", "frag", "report"]
    final = parent.invoke({"user_input": f"  {SIMPLE_Q} "})
    assert set(final) == set(ParentState.__annotations__)  # route / trace stay inside the subgraph
    assert final["answers"][0] in DIRECTORS and final["report"].startswith(final["answers"][0] + " via Tom Hanks <-")
    afinal = asyncio.run(parent.ainvoke({"user_input": SIMPLE_Q}))
    assert afinal["report"] == final["report"]


def test_frag_graph_on_a_corpus_graph_returns_passages(sample_index):
    final = frag_graph(sample_index, k=3).invoke({"question": "Which city was [Marie Curie] born in?"})
    assert final["trace"]["frag"]["topic_entities"] == ["Marie Curie"]
    assert final["facts"] and all(f.startswith("Marie Curie ") for f in final["facts"])
    docs = final["documents"]
    assert docs and all(isinstance(d, Document) and d.metadata["kind"] == "passage" for d in docs)
    assert all(d.metadata["retriever"] == "frag" for d in docs) and "Warsaw" in final["answers"]


def test_state_schema_documents_the_frag_keys():
    assert {"route", "answers", "topic_entities"} <= set(KGRAGState.__annotations__)


# --------------------------------------------------------------------------- LlamaIndex: HopAwareRetriever


class ScriptedLlamaLLM(CustomLLM):
    """A LlamaIndex LLM returning one scripted reply and recording prompts."""

    reply: str = "Penny Marshall and Robert Zemeckis."
    _prompts: list[str] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=8192, num_output=256, model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        return CompletionResponse(text=self.reply)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield CompletionResponse(text=self.reply, delta=self.reply)


def test_hop_aware_retriever_returns_path_nodes(movie_index):
    r = HopAwareRetriever(movie_index, k=3)
    nodes = r.retrieve(SIMPLE_Q)
    assert nodes and all(n.node.metadata["kind"] == "path" for n in nodes)
    assert all(n.node.metadata["retriever"] == "frag" for n in nodes)
    # node scores are cosine-like in [0, 1] (issue 17); FRAG's path scores, best first, are kept
    scores = [n.node.metadata["method_score"] for n in nodes]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
    assert all(0.0 <= n.score <= 1.0 for n in nodes)
    texts = [n.node.get_content() for n in nodes]
    assert texts == [f.text for f in r.last_evidence.facts][:5]  # max_facts=5 by default (issue 17)
    assert "Tom Hanks <- starred_actors <- Big -> directed_by -> Penny Marshall" in [
        f.text for f in r.last_evidence.facts
    ]
    top = nodes[0].node.metadata
    assert top["answer"] == top["nodes"][-1] and top["hops"] == len(top["relations"]) == len(top["inverse"])
    assert r.last_route == "simple" and r.last_trace["route"] == "simple"
    assert r.last_answers == r.last_trace["answers"] and DIRECTORS <= set(r.last_answers)
    anodes = asyncio.run(r.aretrieve(SIMPLE_Q))
    assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]
    # routing: a complex question goes to the 4-hop pipeline; mode forces one
    r.retrieve(COMPLEX_Q)
    assert r.last_route == "complex" and r.last_trace["k"] == 4
    forced = HopAwareRetriever(movie_index, mode="simple", max_facts=2)
    assert len(forced.retrieve(COMPLEX_Q)) == 2 and forced.last_route == "simple"


def test_hop_aware_retriever_with_a_classifier_or_a_ready_retriever(movie_index, hop_clf):
    r = HopAwareRetriever(movie_index, classifier=hop_clf)
    r.retrieve(COMPLEX_Q)
    assert r.last_route == "complex" and r.last_trace["p_complex"] >= 0.5
    ready = FRAGRetriever(movie_index, mode="complex")
    assert HopAwareRetriever(ready).retriever is ready
    with pytest.raises(ValueError, match="FRAGRetriever"):
        HopAwareRetriever(ready, classifier=hop_clf)
    with pytest.raises(TypeError, match="KnowledgeIndex"):
        HopAwareRetriever(_Recorder("x"))  # type: ignore[arg-type]


def test_hop_aware_retriever_unknown_topic_entity_gives_an_empty_result(movie_index):
    r = HopAwareRetriever(movie_index)
    assert r.retrieve("which films did [Nobody Known] direct") == []
    assert "no topic entity" in r.last_trace["error"] and r.last_answers == []


def test_hop_aware_retriever_in_a_query_engine(movie_index):
    llm = ScriptedLlamaLLM()
    retriever = HopAwareRetriever(movie_index, k=3, max_facts=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    response = engine.query(SIMPLE_Q)
    assert str(response) == "Penny Marshall and Robert Zemeckis."
    prompt = llm._prompts[0]
    assert SIMPLE_Q in prompt and all(f.text in prompt for f in retriever.last_evidence.facts[:5])
    assert "kind" not in prompt and "hops" not in prompt  # path metadata stays hidden from the LLM
    assert len(response.source_nodes) == 5 and all(n.node.metadata["kind"] == "path" for n in response.source_nodes)
    assert str(asyncio.run(engine.aquery(SIMPLE_Q))) == str(response)


def test_hop_aware_retriever_on_a_corpus_graph(sample_index):
    r = HopAwareRetriever(sample_index, k=2)
    nodes = r.retrieve("Which city was [Marie Curie] born in?")
    kinds = [n.node.metadata["kind"] for n in nodes]
    n_passages = kinds.count("passage")
    assert n_passages >= 1 and kinds[:n_passages] == ["passage"] * n_passages  # passages first, then paths
    assert set(kinds[n_passages:]) == {"path"}
    assert [n.node.node_id for n in nodes[:n_passages]] == r.last_evidence.passage_ids


def test_numpy_probabilities_are_plain_floats(movie_index, hop_clf):
    out = make_route_node(hop_clf).invoke({"question": SIMPLE_Q})
    assert type(out["trace"]["route"]["p_complex"]) is float  # not np.float64: the trace stays plain data


def test_hop_router_with_frag_retriever_branches(frag):
    """A FRAGRetriever branch becomes a FRAG node forced to that branch's pipeline."""
    graph = make_hop_router(frag, frag, classifier=lambda q: "complex", k=2)
    names, final = _nodes(graph, {"question": SIMPLE_Q})
    assert names == ["router", "complex"] and final["route"] == "complex"
    assert final["trace"]["frag"]["route"] == "complex" and final["trace"]["frag"]["k"] == frag.complex_hops
    assert final["answers"] == frag.evidence(SIMPLE_Q, 2, route="complex").trace["answers"]
