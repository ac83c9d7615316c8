"""SA-RAG (docs/methods.md §4, §6.3): spreading-activation retrieval and the CoT loop.

Most tests run on a hand-built six-entity index whose embedder maps each text to a designed
vector, so every cosine (and hence every edge weight and activation) is known exactly:
the query is the unit vector e0, and a text embedded as ``_vec(s, axis)`` has cosine ``s`` with it.

Graph (directed triples, raw cosine s of "head relation tail" with the query, rescaled
w = (s - 0.4) / 0.6):

    t0 A -r1-> B   s=1.00  w=1.0
    t1 B -r2-> C   s=0.70  w=0.5
    t2 C -r3-> D   s=0.64  w=0.4
    t3 E -r4-> A   s=1.00  (E is not reachable from A along out-edges)
    t4 D -r5-> F   s=1.00  (hop 4 from A)
    t5 B -r6-> A   s=0.40  w=0.0 (parallel to t0 in the other direction)

Seed (k=1): A. Passages (cosine with the query): pA 0.9 (A), pAB 0.8 (A, B), pB 0.5 (B),
pC 0.3 (C), pD 0.95 (D), pE 0.99 (E).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.sa_rag import (
    CONTEXT_HEADER,
    SARAGCoT,
    SARAGRetriever,
    parse_json_object,
)
from kgrag_plugins.methods.sa_rag.prompts import ANSWERING_SYSTEM, QUESTION_PREFIX, REASONING_SYSTEM
from kgrag_plugins.models.llm import LLMError, ScriptedLLM
from kgrag_plugins.types import Entity, Evidence, Passage

DIM = 8
Q = "Q?"
FOLLOW = "Where is D?"


def _vec(s: float, axis: int) -> np.ndarray:
    """Unit vector with cosine ``s`` to e0 (the query), the rest on ``axis``."""
    v = np.zeros(DIM, dtype=np.float32)
    v[0] = s
    v[axis] = np.sqrt(1.0 - s * s)
    return v


def _axis(i: int) -> np.ndarray:
    return np.eye(DIM, dtype=np.float32)[i]


class LookupEmbedder:
    """Maps known texts to designed vectors (unknown texts -> e7, cosine 0); records every text."""

    name = "test/lookup"
    dim = DIM

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table
        self.seen: list[str] = []

    def embed(self, texts, *, progress=None):
        self.seen.extend(texts)
        out = np.stack([self.table.get(t, _axis(7)) for t in texts]).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def tiny():
    g = KnowledgeGraph()
    for e in "ABCDEF":
        g.add_entity(Entity(e, e, description=f"desc {e}"))
    g.add_triple("A", "r1", "B")
    g.add_triple("B", "r2", "C")
    g.add_triple("C", "r3", "D")
    g.add_triple("E", "r4", "A")
    g.add_triple("D", "r5", "F")
    g.add_triple("B", "r6", "A")
    passages = [Passage(f"p{x}", f"about {x}", f"P{x}") for x in ("A", "AB", "B", "C", "D", "E")]
    for p in passages:
        for e in p.id[1:]:
            g.link(e, p.id)
    table = {
        Q: _axis(0),
        # entity vectors ("name: description"): A is the query direction, the rest orthogonal
        "A: desc A": _axis(0),
        "B: desc B": _axis(2),
        "C: desc C": _axis(3),
        "D: desc D": _axis(4),
        "E: desc E": _axis(5),
        "F: desc F": _axis(6),
        # edge texts
        "A r1 B": _vec(1.0, 1),
        "B r2 C": _vec(0.7, 1),
        "C r3 D": _vec(0.64, 1),
        "E r4 A": _vec(1.0, 1),
        "D r5 F": _vec(1.0, 1),
        "B r6 A": _vec(0.4, 1),
        # passages (title + "\n" + text)
        "PA\nabout A": _vec(0.9, 3),
        "PAB\nabout AB": _vec(0.8, 3),
        "PB\nabout B": _vec(0.5, 3),
        "PC\nabout C": _vec(0.3, 3),
        "PD\nabout D": _vec(0.95, 3),
        "PE\nabout E": _vec(0.99, 3),
        # follow-up question: cos 0.8 with D's entity vector, 0.6 with A's -> seed D
        FOLLOW: 0.6 * _axis(0) + 0.8 * _axis(4),
    }
    emb = LookupEmbedder(table)
    return KnowledgeIndex.build(passages, None, embedder=emb, graph=g, entity_vectors=True, progress=False)


def _sa(index, **kw) -> SARAGRetriever:
    kw.setdefault("k", 1)
    kw.setdefault("hops", 3)
    kw.setdefault("edge_vectors", "lazy")  # these tests watch which edge texts get embedded
    return SARAGRetriever(index, **kw)


def test_index_triple_vectors_give_the_same_retrieval(sample_index, sample_questions):
    lazy = SARAGRetriever(sample_index, edge_vectors="lazy")
    stored = SARAGRetriever(sample_index)  # auto -> the index's triple vectors
    assert stored.edge_vectors == "index"
    for q in sample_questions[:4]:
        a, b = lazy.acquire(q.question), stored.acquire(q.question)
        assert a.passage_ids == b.passage_ids
        assert [f.text for f in a.facts] == [f.text for f in b.facts]
        assert np.allclose([f.score for f in a.facts], [f.score for f in b.facts], atol=1e-5)
    gen = sample_index.path / sample_index.manifest["generation"]
    (stored,) = gen.glob("triple_vectors.*.npy")  # triple_vectors.<fingerprint>.npy (index/vector_cache.py)
    assert np.load(stored).shape == (sample_index.graph.num_triples, 384)
    with pytest.raises(ValueError, match="edge_vectors"):
        SARAGRetriever(sample_index, edge_vectors="nope")


# ---------------------------------------------------------------------- retrieval


def test_activation_values_match_hand_computation(tiny):
    # Spreading from the seed A (a=1), BFS order A, B, C, D; undirected; pair A-B weight
    # max(1.0, 0.0) = 1:
    #   expand A: a(B) = min(1, 0 + 1.0 * 1) = 1
    #   expand B: a(A) = min(1, 1 + 1) = 1;    a(C) = 0 + 0.5 * 1 = 0.5
    #   expand C: a(B) stays 1;                a(D) = 0 + 0.4 * 0.5 = 0.2
    #   expand D: a(C) = 0.5 + 0.4 * 0.2 = 0.58  (already expanded: gains, does not re-spread)
    # A threshold of 0.19 lets D (0.2) into the activated set so its value shows in the trace.
    ev = _sa(tiny, activation_threshold=0.19).acquire(Q)
    act = ev.trace["activation"]
    assert act == pytest.approx({"A": 1.0, "B": 1.0, "C": 0.58, "D": 0.2}, abs=1e-4)
    assert [a["id"] for a in ev.trace["activated"]] == ["A", "B", "C", "D"]  # by activation, desc
    # default threshold 0.5: D drops out, C (0.58, thanks to D's back-flow over C->D) stays
    ev = _sa(tiny).acquire(Q)
    assert ev.trace["activation"] == pytest.approx({"A": 1.0, "B": 1.0, "C": 0.58}, abs=1e-4)
    assert ev.trace["seeds"] == [{"id": "A", "name": "A", "score": 1.0}]
    sub = ev.trace["subgraph"]
    assert (sub["entities"], sub["edges"], sub["pairs"]) == (4, 4, 3)  # t0, t5, t1, t2; pairs AB, BC, CD
    assert sub["entities_by_hop"] == {"0": 1, "1": 1, "2": 1, "3": 1}
    assert sub["capped"] is False
    json.dumps(ev.to_dict())  # the whole Evidence (trace included) is JSON-serialisable


def test_directed_subgraph_but_undirected_spreading(tiny):
    emb = tiny.embedder
    emb.seen.clear()
    ev = _sa(tiny, edge_cache_size=0).acquire(Q)
    # Only the query and the 4 subgraph edge texts are embedded: E->A points *into* the seed
    # (E unreachable along out-edges) and D->F is a 4th hop.
    assert emb.seen == [Q, "A r1 B", "B r6 A", "B r2 C", "C r3 D"]
    assert "E" not in ev.trace["activation"] and "pE" not in ev.passage_ids  # pE has cosine 0.99
    # Undirected: C gets 0.08 back from D over C->D; directed spreading would leave it at 0.5.
    assert "C" in ev.trace["activation"]
    # one hop more reaches F; zero hops leave the seed alone
    ev4 = _sa(tiny, hops=4).acquire(Q)
    assert ev4.trace["subgraph"]["entities"] == 5 and ev4.trace["subgraph"]["edges"] == 5
    ev0 = _sa(tiny, hops=0).acquire(Q)
    assert ev0.trace["subgraph"]["edges"] == 0 and ev0.trace["activation"] == {"A": 1.0}
    assert ev0.passage_ids == ["pA", "pAB"]


def test_activation_threshold_is_strict(tiny):
    # A and B sit at exactly 1.0: a threshold of 1.0 activates nothing (a > 1.0 is false).
    ev = _sa(tiny, activation_threshold=1.0).acquire(Q)
    assert ev.trace["activated"] == [] and ev.passages == [] and ev.facts == []
    assert "no document passed" in ev.trace["note"]
    ev = _sa(tiny, activation_threshold=0.999).acquire(Q)
    assert set(ev.trace["activation"]) == {"A", "B"}


def test_documents_threshold_order_and_no_cap(tiny):
    r = _sa(tiny, document_threshold=0.5)
    ev = r.acquire(Q)
    # activated A, B, C: pA (0.9), pAB (0.8, linked twice, listed once), pB (0.5: >= keeps it);
    # pC (0.3) pruned; pD (0.95) excluded because D (0.2) is not activated.
    assert ev.passage_ids == ["pA", "pAB", "pB"]
    assert [sp.score for sp in ev.passages] == pytest.approx([0.9, 0.8, 0.5], abs=1e-6)
    assert ev.trace["documents"] == {"candidates": 4, "kept": 3}
    assert _sa(tiny, document_threshold=0.5001).acquire(Q).passage_ids == ["pA", "pAB"]
    assert _sa(tiny, document_threshold=0.2).acquire(Q).passage_ids == ["pA", "pAB", "pB", "pC"]
    # retrieve(q, k): the first k of them, no padding when fewer pass
    assert r.retrieve(Q, 2).passage_ids == ["pA", "pAB"]
    ev10 = r.retrieve(Q, 10)
    assert ev10.passage_ids == ["pA", "pAB", "pB"]
    assert (ev10.trace["available"], ev10.trace["returned"]) == (3, 3)
    assert len(ev10.facts) == len(ev.facts)


def test_key_relationships(tiny):
    ev = _sa(tiny).acquire(Q)
    # both endpoints activated and rescaled weight >= 0.45: A r1 B (1.0), B r2 C (0.5);
    # B r6 A has weight 0, C r3 D has an inactive endpoint.
    assert [f.text for f in ev.facts] == ["A r1 B", "B r2 C"]
    assert [f.score for f in ev.facts] == pytest.approx([1.0, 0.5], abs=1e-6)
    f = ev.facts[0]
    assert f.kind == "fact" and (f.data["head"], f.data["relation"], f.data["tail"]) == ("A", "r1", "B")
    assert f.data["raw_weight"] == pytest.approx(1.0)
    assert [f.text for f in _sa(tiny, relation_threshold=0.6).acquire(Q).facts] == ["A r1 B"]
    # C r3 D (0.4) needs D activated as well as a low enough relation threshold
    assert "C r3 D" not in [f.text for f in _sa(tiny, relation_threshold=0.3).acquire(Q).facts]
    ev = _sa(tiny, relation_threshold=0.3, activation_threshold=0.19).acquire(Q)
    assert [f.text for f in ev.facts] == ["A r1 B", "B r2 C", "C r3 D"]
    assert ev.trace["rounds"][0]["selected"] == ["A r1 B", "B r2 C", "C r3 D"]


def test_edge_cap_keeps_edges_nearest_the_seeds(tiny):
    ev = _sa(tiny, max_edges=2).acquire(Q)
    sub = ev.trace["subgraph"]
    # the two hop-1 triples (A->B, B->A) survive; C and D drop out of the subgraph
    assert (sub["edges"], sub["entities"], sub["capped"]) == (2, 2, True)
    assert (sub["reachable_edges"], sub["reachable_entities"]) == (4, 4)
    assert set(ev.trace["activation"]) == {"A", "B"}
    assert _sa(tiny, max_edges=None).acquire(Q).trace["subgraph"]["edges"] == 4


def test_edge_cap_ranks_by_undirected_distance():
    # A->B->C->D->A: D is 3 directed hops from the seed A but adjacent to it for the
    # (undirected) spreading, so the cap keeps D->A (near 0, far 1) before B->C (1, 2).
    g = KnowledgeGraph()
    for e in "ABCD":
        g.add_entity(Entity(e, e))
    for h, t in ("AB", "BC", "CD", "DA"):
        g.add_triple(h, "to", t)
    idx = KnowledgeIndex.build(
        [Passage("p", "river text")],
        None,
        embedder=LookupEmbedder({Q: _axis(0), "A": _axis(0)}),
        graph=g,
        progress=False,
    )
    ev = SARAGRetriever(idx, k=1, hops=3, max_edges=2).acquire(Q)
    assert ev.trace["seeds"][0]["id"] == "A"
    assert ev.trace["rounds"][0]["candidates"] == 2
    assert ev.trace["subgraph"]["entities"] == 3 and ev.trace["subgraph"]["entities_by_hop"] == {"0": 1, "1": 1, "3": 1}


def test_edge_vectors_are_cached(tiny):
    r = _sa(tiny)
    first = r.acquire(Q)
    assert first.trace["subgraph"]["edge_texts_embedded"] == 4
    tiny.embedder.seen.clear()
    again = r.acquire(Q)
    assert again.trace["subgraph"]["edge_texts_embedded"] == 0 and tiny.embedder.seen == [Q]
    assert again.passage_ids == first.passage_ids
    assert r.edge_cache_stats["size"] == 4 and r.edge_cache_stats["hits"] == 4


def test_for_dataset_defaults(tiny):
    m = SARAGRetriever.for_dataset("musique", tiny)
    assert (m.k, m.hops) == (3, 4)
    for name in ("2wikimultihopqa", "2wiki", "2WikiMultiHopQA-dev1000"):
        w = SARAGRetriever.for_dataset(name, tiny)
        assert (w.k, w.hops) == (10, 3)
    assert (lambda r: (r.k, r.hops))(SARAGRetriever.for_dataset("hotpotqa", tiny)) == (3, 4)  # unknown -> MuSiQue
    o = SARAGRetriever.for_dataset("2wiki", tiny, k=5, relation_threshold=0.5)
    assert (o.k, o.hops, o.relation_threshold) == (5, 3, 0.5)
    assert SARAGRetriever.DATASET_DEFAULTS == {"musique": {"k": 3, "hops": 4}, "2wikimultihopqa": {"k": 10, "hops": 3}}
    assert (m.c, m.activation_threshold, m.document_threshold, m.relation_threshold) == (0.4, 0.5, 0.45, 0.45)


def test_context_string_format(tiny):
    ev = _sa(tiny).acquire(Q)
    assert SARAGRetriever.context(ev) == (
        "### Context \n<passages>\nPA\nabout A\n\nPAB\nabout AB\n\nPB\nabout B\n</passages>\n"
        "**Key relationships**\n<facts>\nA r1 B\nB r2 C\n</facts>"
    )
    assert SARAGRetriever.context(Evidence("x")) == (
        "### Context \n<passages>\n\n</passages>\n**Key relationships**\n<facts>\n\n</facts>"
    )
    assert len(CONTEXT_HEADER) == 12


def test_construction_and_query_errors(tiny):
    empty = KnowledgeIndex.build(
        [Passage("p", "text")], None, embedder=LookupEmbedder({}), graph=KnowledgeGraph(), progress=False
    )
    with pytest.raises(ValueError, match="SA-RAG needs an index with a knowledge graph"):
        SARAGRetriever(empty)
    for bad in ({"k": 0}, {"hops": -1}, {"c": 1.0}, {"max_edges": 0}):
        with pytest.raises(ValueError):
            SARAGRetriever(tiny, **bad)
    r = _sa(tiny)
    with pytest.raises(ValueError, match="non-empty"):
        r.acquire("  ")
    with pytest.raises(ValueError, match="k must be"):
        r.retrieve(Q, 0)


def test_on_the_sample_index_with_minilm(sample_index, sample_questions):
    r = SARAGRetriever(sample_index)
    hits = 0
    for q in sample_questions:
        ev = r.acquire(q.question)
        assert len(ev.trace["seeds"]) == 3
        scores = [sp.score for sp in ev.passages]
        assert scores == sorted(scores, reverse=True) and all(s >= 0.45 for s in scores)
        activated = {a["id"] for a in ev.trace["activated"]}
        graph = sample_index.graph
        for pid in ev.passage_ids:  # every document comes from an activated entity
            assert activated & set(graph.entities_of(pid))
        json.dumps(ev.to_dict())
        hits += bool(set(ev.passage_ids[:5]) & set(q.supporting_passage_ids))
    assert hits >= len(sample_questions) // 2


# ---------------------------------------------------------------------- JSON parsing


def test_parse_json_object_is_tolerant():
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('Sure! Here it is:\n```json\n{"a": true}\n```\nDone.') == {"a": True}
    assert parse_json_object('Reasoning first. {"a": "x", "b": {"c": 2}} trailing {') == {"a": "x", "b": {"c": 2}}
    assert parse_json_object("{'a': 1}") is None
    assert parse_json_object('{"answer_possible": True, "x": None}') == {"answer_possible": True, "x": None}
    assert parse_json_object("no json at all") is None
    assert parse_json_object("[1, 2]") is None


# ---------------------------------------------------------------------- CoT


def _reasoning(possible, follow="", summary="A links to B.", answer=""):
    return json.dumps(
        {
            "provided_context": summary,
            "answer_possible": possible,
            "final_answer": answer,
            "additional_question": follow,
        }
    )


def _final(answer, reasoning="step by step"):
    return json.dumps({"reasoning": reasoning, "final_answer": answer})


def test_reason_parses_and_prompts(tiny):
    llm = ScriptedLLM(["```json\n" + _reasoning("false", follow="Who?") + "\n```"])
    cot = SARAGCoT(_sa(tiny), llm)
    out = cot.reason(Q, "CTX")
    assert out == {
        "provided_context": "A links to B.",
        "answer_possible": False,
        "final_answer": "",
        "additional_question": "Who?",
    }
    msgs = llm.calls[0]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "user"]
    assert msgs[0]["content"] == REASONING_SYSTEM and msgs[1]["content"] == QUESTION_PREFIX + Q
    assert msgs[2]["content"] == "CTX" and llm.calls[0]["temperature"] == 0.0
    assert SARAGCoT(_sa(tiny), ScriptedLLM([_reasoning("true")])).reason(Q, "c")["answer_possible"] is True
    assert SARAGCoT(_sa(tiny), ScriptedLLM(["I cannot say."])).reason(Q, "c") is None
    assert SARAGCoT(_sa(tiny), ScriptedLLM(['{"provided_context": "x"}'])).reason(Q, "c") is None
    assert SARAGCoT(_sa(tiny), ScriptedLLM([LLMError("down")])).reason(Q, "c") is None


def test_merge_context():
    new = "### Context \nDOC\n**Key relationships**\nA r B"
    assert SARAGCoT.merge_context("Summary.", new) == (
        "# Known information\n<notes>\nSummary.\n</notes>\n# Additional facts\nDOC\n**Key relationships**\nA r B"
    )


def test_cot_follow_up_then_answer(tiny):
    llm = ScriptedLLM([_reasoning(False, follow=FOLLOW), _reasoning(True, answer="ignored"), _final("Paris")])
    tiny.embedder.seen.clear()
    ans = SARAGCoT(_sa(tiny), llm).run(Q)
    assert ans.text == "Paris" and len(llm.calls) == 3
    first_ctx = llm.calls[0]["messages"][2]["content"]
    assert first_ctx.startswith("### Context \n") and "**Key relationships**\n<facts>\nA r1 B" in first_ctx
    # the follow-up alone drives the second SA retrieval (seed D; pD has cosine 0.57 with it)
    assert FOLLOW in tiny.embedder.seen and not any(Q in t and FOLLOW in t for t in tiny.embedder.seen)
    second_ctx = llm.calls[1]["messages"][2]["content"]
    assert second_ctx.startswith(
        "# Known information\n<notes>\nA links to B.\n</notes>\n# Additional facts\n<passages>\nPD\nabout D\n"
    )
    assert "### Context" not in second_ctx
    assert llm.calls[1]["messages"][1]["content"] == QUESTION_PREFIX + Q  # always the original question
    final = llm.calls[2]["messages"]
    assert final[0]["content"] == ANSWERING_SYSTEM
    assert final[1]["content"] == second_ctx and final[2]["content"] == QUESTION_PREFIX + Q
    trace = ans.metadata["trace"]
    assert trace[0] == {"step": 0, "query": Q, "passages": ["pA", "pAB", "pB"], "facts": 2}
    assert trace[1]["answer_possible"] is False and trace[1]["follow_up"] == FOLLOW
    assert trace[1]["query"] == FOLLOW and trace[1]["passages"] == ["pD"]
    assert trace[2] == {"step": 2, "answer_possible": True, "follow_up": ""}
    assert ans.metadata["stop"] == "answer_possible" and ans.metadata["retrievals"] == 2
    assert ans.evidence.passage_ids == ["pA", "pAB", "pB", "pD"]
    assert [f.text for f in ans.evidence.facts] == ["A r1 B", "B r2 C"]
    assert ans.evidence.trace["queries"] == [Q, FOLLOW]
    json.dumps(ans.to_dict())


def test_cot_stops_early_when_answer_possible(tiny):
    llm = ScriptedLLM([_reasoning(True), _final("B")])
    ans = SARAGCoT(_sa(tiny), llm).run(Q)
    assert ans.text == "B" and len(llm.calls) == 2 and ans.metadata["retrievals"] == 1
    assert llm.calls[1]["messages"][1]["content"].startswith("### Context ")  # unchanged context


def test_cot_at_most_three_steps(tiny):
    llm = ScriptedLLM([_reasoning(False, follow=FOLLOW)] * 3 + [_final("X")])
    ans = SARAGCoT(_sa(tiny), llm).run(Q)
    assert len(llm.calls) == 4 and llm.remaining == 0
    assert ans.metadata["retrievals"] == 4 and ans.metadata["stop"] == "max_steps"
    assert [s["step"] for s in ans.metadata["trace"]] == [0, 1, 2, 3]
    llm0 = ScriptedLLM([_final("Y")])
    assert SARAGCoT(_sa(tiny), llm0, max_steps=0).run(Q).text == "Y" and len(llm0.calls) == 1


def test_cot_failed_reasoning_skips_the_step(tiny):
    # an unreadable reply is asked once more before the step is skipped
    llm = ScriptedLLM([LLMError("timeout"), "no idea", "still none", _reasoning(True), _final("Z")])
    ans = SARAGCoT(_sa(tiny), llm).run(Q)
    assert ans.text == "Z" and len(llm.calls) == 5
    steps = ans.metadata["trace"]
    assert steps[1]["skipped"] and "timeout" in steps[1]["error"]
    assert steps[2]["skipped"] and steps[2]["error"] == "invalid reply: unparseable reply"
    assert steps[3]["answer_possible"] is True and ans.metadata["retrievals"] == 1
    ctxs = {c["messages"][2]["content"] for c in llm.calls[:4]}
    assert len(ctxs) == 1  # skipped steps leave the context alone


def test_cot_no_follow_up_ends_the_loop(tiny):
    llm = ScriptedLLM([_reasoning(False, follow=""), _final("W")])
    ans = SARAGCoT(_sa(tiny), llm).run(Q)
    assert len(llm.calls) == 2 and ans.metadata["stop"] == "no_follow_up" and ans.metadata["retrievals"] == 1


def test_final_answer_retries_and_fallback(tiny):
    r = _sa(tiny)
    llm = ScriptedLLM(["garbage", "Reasoning...\n" + _final(1879)])
    assert SARAGCoT(r, llm).final_answer(Q, "ctx") == "1879" and len(llm.calls) == 2
    llm = ScriptedLLM(["first garbage", LLMError("x"), "\n  Vienna, probably\nmore text"])
    with pytest.raises(LLMError, match="answering call failed"):  # garbage is never the answer
        SARAGCoT(r, llm).final_answer(Q, "ctx")
    assert len(llm.calls) == 3
    llm = ScriptedLLM([LLMError("a"), LLMError("b"), LLMError("c"), _final("never")])
    with pytest.raises(LLMError, match="answering call failed"):
        SARAGCoT(r, llm).final_answer(Q, "ctx")
    assert llm.remaining == 1
    llm = ScriptedLLM(['{"reasoning": "r"}', _final("ok")])  # a JSON reply without final_answer is retried
    assert SARAGCoT(r, llm).final_answer(Q, "ctx") == "ok"


def test_cot_needs_an_llm(tiny):
    with pytest.raises(ValueError, match="needs an LLM"):
        SARAGCoT(_sa(tiny), None)


@pytest.mark.skipif(not os.environ.get("KGRAG_LLM_BASE_URL"), reason="KGRAG_LLM_BASE_URL not set")
def test_cot_with_a_real_llm(sample_index, sample_questions):
    from kgrag_plugins.models.llm import OpenAICompatibleLLM

    q = sample_questions[-1]  # one-hop: "In what year did The Magic Flute premiere?"
    with OpenAICompatibleLLM.from_env() as llm:
        ans = SARAGCoT(SARAGRetriever(sample_index), llm).run(q.question)
    assert ans.text and ans.metadata["trace"][0]["query"] == q.question
    assert 1 <= ans.metadata["retrievals"] <= 4 and ans.evidence.passages
    json.dumps(ans.to_dict())
