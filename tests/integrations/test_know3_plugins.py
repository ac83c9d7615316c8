"""Know³ plug-ins: the LangGraph KGE verifier node inside a user-written graph, ``know3_wrap`` /
``know3_graph`` control flow, the LlamaIndex postprocessor contract and the query engine.

Real components: a ``mentions`` graph, spaCy SVO extraction, a KGE trained on the graph (tiny
settings); the bag-of-words test embedder keeps it fast. θ_0 is set to ±1e9 where a test needs a
fixed decision (accept everything / nothing verifies), else the calibrated default is used.
"""

from __future__ import annotations

import pytest
from conftest import HashEmbedder

from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.know3.verify import KGVerifier
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.types import Passage

CORPUS = [
    Passage("jaws", "Jaws is a 1975 film directed by Steven Spielberg. The film stars Roy Scheider.", "Jaws"),
    Passage("spielberg", "Steven Spielberg was born in Cincinnati. He directed Jaws and E.T.", "Steven Spielberg"),
    Passage("cincinnati", "Cincinnati is a city in Ohio. Cincinnati lies on the Ohio River.", "Cincinnati"),
    Passage("scheider", "Roy Scheider was born in Orange, New Jersey. He starred in Jaws.", "Roy Scheider"),
    Passage("ohio", "Ohio is a state of the United States. Columbus is the capital of Ohio.", "Ohio"),
    Passage("et", "E.T. is a 1982 film directed by Steven Spielberg. Henry Thomas starred in E.T.", "E.T."),
]
Q = "Where was the director of Jaws born?"
KGE = {"epochs": 3, "dim": 16, "negatives": 32, "batch_size": 64, "progress": False}
ANSWER = "Steven Spielberg was born in Cincinnati. The answer is Cincinnati."


@pytest.fixture(scope="module")
def index() -> KnowledgeIndex:
    return KnowledgeIndex.build(
        CORPUS, None, embedder=HashEmbedder(dim=256), builder="mentions", progress=False, overlap=False
    )


@pytest.fixture(scope="module")
def kge(index):
    from kgrag_plugins.index.kge import kge_for_index

    return kge_for_index(index, **KGE)


def _verifier(index, kge, theta0):
    return KGVerifier(index, kge=kge, theta0=theta0, method="raw", kge_kwargs=KGE)


# --------------------------------------------------------------------------- framework-free check
def test_kg_verifier_check_scores_text_and_documents(index, kge):
    v = _verifier(index, kge, 1e9)
    res = v.check(ANSWER)
    assert res["source"] == "generation" and res["score"] is not None and res["triples"]
    assert res["decision"] == "accept" and res["threshold"] == 1e9
    strict = _verifier(index, kge, -1e9).check(ANSWER)
    assert strict["score"] == res["score"] and strict["decision"] == "retrieve"
    assert _verifier(index, kge, -1e9).check(ANSWER, turn=2)["decision"] == "accept"  # forced at T
    docs = v.check(None, passages=[CORPUS[1]])
    assert docs["source"] == "documents" and docs["score"] is not None
    empty = v.check("   ")
    assert empty["score"] is None and "nothing to verify" in empty["reason"]
    unknown = v.check("Zorblax Quux visited Plimbo Vale.")
    assert unknown["score"] is None and unknown["reason"]
    with pytest.raises(TypeError, match="text must be a str"):
        v.check(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- LangGraph
def test_verifier_node_inside_a_user_graph(index, kge):
    from langgraph.graph import END, START, StateGraph

    from kgrag_plugins.integrations.langgraph import Know3State, make_kge_verifier_node

    def my_agent(state):
        return {"generation": ANSWER}

    g = StateGraph(Know3State)
    g.add_node("agent", my_agent)
    g.add_node("verify", make_kge_verifier_node(_verifier(index, kge, 1e9)))
    g.add_edge(START, "agent")
    g.add_edge("agent", "verify")
    g.add_edge("verify", END)
    out = g.compile().invoke({"question": Q})
    v = out["verification"]
    assert v["decision"] == "accept" and v["score"] is not None and v["source"] == "generation"
    assert any(t["tail"] for t in v["triples"]) and "extraction" not in v
    assert out["trace"]["verify"]["extraction"]["triples"]


def test_know3_wrap_loops_until_accepted_or_T(index, kge):
    from kgrag_plugins.integrations.langgraph import know3_wrap

    calls: list[str] = []

    def agent(state):  # a user's retrieve step: records the query it was given
        calls.append(state["query"])
        return {"documents": [{"id": "spielberg", "text": CORPUS[1].text, "title": CORPUS[1].title}]}

    never = know3_wrap(agent, _verifier(index, kge, -1e9))
    out = never.invoke({"question": Q})
    assert len(calls) == 3 and out["turn"] == 2  # turns 0, 1, 2 (T = 2): forced output at T
    assert calls[0] == Q and out["verification"]["decision"] == "accept"
    assert out["trace"]["enhance"]["turn"] == 2
    calls.clear()
    once = know3_wrap(agent, _verifier(index, kge, 1e9)).invoke({"question": Q})
    assert len(calls) == 1 and once["turn"] == 0 and once["verification"]["decision"] == "accept"
    with pytest.raises(TypeError, match="KnowledgeIndex or a KGVerifier"):
        know3_wrap(agent, "not an index")


def test_know3_graph_compiled_and_usable(index, kge):
    from kgrag_plugins.integrations.langgraph import know3_graph

    g = know3_graph(index, k=3, kge=kge, theta0=1e9, method="raw", kge_kwargs=KGE)
    out = g.invoke({"question": Q})
    assert out["documents"] and out["turn"] == 0
    assert out["verification"]["source"] == "documents"  # no LLM: the retrieved documents are verified


# --------------------------------------------------------------------------- LlamaIndex
def _nodes():
    from llama_index.core.schema import NodeWithScore, TextNode

    return [NodeWithScore(node=TextNode(text=p.text, id_=p.id, metadata={"title": p.title}), score=1.0) for p in CORPUS]


def test_kge_verifier_postprocessor_contract(index, kge):
    from kgrag_plugins.integrations.llama_index import KGEVerifierPostprocessor

    v = _verifier(index, kge, 1e9)
    expected = {s["id"]: s["score"] for s in v.score_passages(CORPUS)}
    assert any(s is not None for s in expected.values())
    keep_all = KGEVerifierPostprocessor(verifier=v).postprocess_nodes(_nodes())
    assert [n.node.node_id for n in keep_all] == [p.id for p in CORPUS]
    assert {n.node.node_id: n.node.metadata["kge_score"] for n in keep_all} == expected
    # θ below every score: every scorable node is contradicted and dropped; unscorable ones stay
    drop = KGEVerifierPostprocessor(verifier=v, threshold=-1e9).postprocess_nodes(_nodes())
    assert [n.node.node_id for n in drop] == [pid for pid, s in expected.items() if s is None]
    reorder = KGEVerifierPostprocessor(verifier=v, threshold=-1e9, mode="reorder").postprocess_nodes(_nodes())
    assert len(reorder) == len(CORPUS)
    assert [n.node.node_id for n in reorder][: len(drop)] == [n.node.node_id for n in drop]
    assert KGEVerifierPostprocessor(verifier=v).postprocess_nodes([]) == []
    with pytest.raises(ValueError, match="mode"):
        KGEVerifierPostprocessor(verifier=v, mode="sort")


def test_know3_query_engine_llm_free(index, kge):
    from kgrag_plugins.integrations.llama_index import Know3QueryEngine

    engine = Know3QueryEngine(index, k=3, kge=kge, theta0=-1e9, method="raw", kge_kwargs=KGE)
    resp = engine.query(Q)
    assert resp.source_nodes and resp.metadata["turn"] == 2  # nothing verifies: runs to T
    assert resp.metadata["know3"]["turns"]


def test_know3_query_engine_prompts_reach_the_llm(index, kge):
    """get_prompts / update_prompts (LlamaIndex PromptMixin) change the instruction text the LLM
    sees; the references stay in their data block and the data notice stays."""
    from llama_index.core.prompts import PromptTemplate

    from kgrag_plugins.integrations.llama_index import Know3QueryEngine
    from kgrag_plugins.methods.know3.prompts import QA
    from kgrag_plugins.models.prompting import DATA_NOTICE

    llm = ScriptedLLM(lambda messages: ANSWER)
    engine = Know3QueryEngine(index, llm=llm, k=3, kge=kge, theta0=1e9, method="raw", kge_kwargs=KGE)
    prompts = engine.get_prompts()
    assert set(prompts) == {"qa", "reference_generation", "query_generation"}
    assert prompts["qa"].get_template() == QA
    engine.update_prompts({"qa": PromptTemplate("MY QA INSTRUCTION"), "unknown": PromptTemplate("x")})
    assert engine.get_prompts()["qa"].get_template() == "MY QA INSTRUCTION"
    resp = engine.query(Q)
    assert resp.response == "Cincinnati"
    qa_calls = [c for c in llm.calls if "MY QA INSTRUCTION" in c["messages"][-1]["content"]]
    assert qa_calls and all(QA not in c["messages"][-1]["content"] for c in qa_calls)
    text = qa_calls[0]["messages"][-1]["content"]
    assert DATA_NOTICE in text and "<references>" in text
    with pytest.raises(ValueError, match="fields"):
        engine.update_prompts({"qa": PromptTemplate("Answer {question}")})
