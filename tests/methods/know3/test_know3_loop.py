"""The Know³ loop's control flow (docs/methods.md §5(a)) with a scripted LLM and LLM-free: accepted at
turn 0, retrieval at turn 1, forced output at T, invalid replies -> retry -> LLM-free step with a
WARNING and a trace entry, reasons instead of exceptions, and freshness after ``add_passages``.

Real components throughout: a ``mentions`` graph over a small corpus, the activation retriever,
a KGE trained on the graph (tiny settings), spaCy; the bag-of-words test embedder keeps it fast.
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest
from conftest import HashEmbedder

from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.activation import ActivationRetriever
from kgrag_plugins.methods.know3 import Know3Retriever, ThresholdSchedule
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.types import Passage

CORPUS = [
    Passage("jaws", "Jaws is a 1975 film directed by Steven Spielberg. The film stars Roy Scheider.", "Jaws"),
    Passage("spielberg", "Steven Spielberg was born in Cincinnati. He directed Jaws and E.T.", "Steven Spielberg"),
    Passage("cincinnati", "Cincinnati is a city in Ohio. Cincinnati lies on the Ohio River.", "Cincinnati"),
    Passage("scheider", "Roy Scheider was born in Orange, New Jersey. He starred in Jaws.", "Roy Scheider"),
    Passage("ohio", "Ohio is a state of the United States. Columbus is the capital of Ohio.", "Ohio"),
    Passage("et", "E.T. is a 1982 film directed by Steven Spielberg. Henry Thomas starred in E.T.", "E.T."),
    Passage("orange", "Orange is a township in New Jersey. Orange lies near Newark.", "Orange, New Jersey"),
    Passage("thomas", "Henry Thomas was born in San Antonio. Henry Thomas starred in E.T.", "Henry Thomas"),
]
Q = "Where was the director of Jaws born?"
KGE = {"epochs": 3, "dim": 16, "negatives": 32, "batch_size": 64, "progress": False}


def _index() -> KnowledgeIndex:
    return KnowledgeIndex.build(
        CORPUS, None, embedder=HashEmbedder(dim=256), builder="mentions", progress=False, overlap=False
    )


@pytest.fixture(scope="module")
def index() -> KnowledgeIndex:
    return _index()


@pytest.fixture(scope="module")
def kge(index):
    from kgrag_plugins.index.kge import kge_for_index

    return kge_for_index(index, **KGE)


def _know3(index, kge, llm=None, theta0: float = 1e9, **kw) -> Know3Retriever:
    return Know3Retriever(
        index, ActivationRetriever(index), llm=llm, kge=kge, theta0=theta0, method="raw", kge_kwargs=KGE, **kw
    )


def _triple(s: str, p: str, o: str) -> str:
    return json.dumps([{"subject": s, "predicate": p, "object": o}])


class Script:
    """A scripted LLM that answers by prompt kind; ``answers`` are the QA replies in order."""

    def __init__(
        self,
        answers,
        *,
        relevance="The passage is on topic. The reliability of the passage is yes.",
        query="Where was Steven Spielberg born?",
    ):
        self.answers = list(answers)
        self.relevance, self.query = relevance, query
        self.kinds: list[str] = []
        self.llm = ScriptedLLM(self)

    def __call__(self, messages) -> str:
        first, last = messages[0]["content"], messages[-1]["content"]
        if first.startswith("I have a task to extract"):
            self.kinds.append("extract")
            text = re.search(r"<text>\n(.*?)\n</text>", last, re.S).group(1)
            if "Cincinnati" in text and "answer is" in text:
                return _triple("Steven Spielberg", "was born in", "Cincinnati")
            if "Spielberg" in text and "answer is" in text:
                return _triple("Jaws", "directed by", "Steven Spielberg")
            return "None"
        if first.startswith("I need your help determining the reliability"):
            self.kinds.append("relevance")
            return self.relevance(last) if callable(self.relevance) else self.relevance
        if "Please directly output the new question:" in last:
            self.kinds.append("query")
            return self.query
        self.kinds.append("qa")
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_answer_accepted_at_turn_0(index, kge) -> None:
    s = Script(["Jaws was directed by Steven Spielberg. The answer is Steven Spielberg."])
    ans = _know3(index, kge, s.llm).run(Q)
    k3 = ans.evidence.trace["know3"]
    assert ans.text == "Steven Spielberg" and ans.metadata["turn"] == 0 and ans.metadata["decision"] == "accept"
    (turn,) = k3["turns"]
    assert turn["score"] is not None and turn["theta"] == 1e9 and turn["reason"].startswith("score")
    assert turn["extraction"]["triples"][0]["head"] == "jaws" and turn["verification"]["triples"][0]["raw"] is not None
    assert s.kinds == ["qa", "extract"]  # no retrieval happened
    assert "No reference available." in s.llm.calls[0]["messages"][0]["content"]
    # retrieve() of an LLM loop without references fills from the base ranking, marked as such
    assert ans.evidence.passage_ids == k3["fill"] and len(ans.evidence.passages) <= 5


def test_retrieval_at_turn_1(index, kge) -> None:
    s = Script(
        ["I am not sure. The answer is unknown.", "Steven Spielberg was born in Cincinnati. The answer is Cincinnati."]
    )
    ans = _know3(index, kge, s.llm).run(Q, k=3)
    turns = ans.evidence.trace["know3"]["turns"]
    assert [t["decision"] for t in turns] == ["retrieve", "accept"] and ans.text == "Cincinnati"
    assert turns[0]["score"] is None and turns[0]["reason"].startswith("not verifiable")
    assert turns[0]["query"] == Q and turns[0]["query_by"] == "Q"  # q_1 = Q (Eq. 3)
    q_kg = turns[0]["q_kg"]
    assert (
        any(e["role"] == "query" and e["id"] == "jaws" for e in q_kg["entities"])
        and "Related entities:" in q_kg["text"]
    )
    refs = turns[0]["references"]
    assert refs["kept"] and all(c["relevant"] and c["relevance_by"] == "llm" for c in refs["kept"])
    assert all(c["verification"]["sentinel"] is not None for c in refs["kept"])  # no triples: 10000 - #entities
    assert len(refs["kept"]) <= 5 and len({c["id"] for c in refs["kept"]}) == len(refs["kept"])
    qa_turn1 = [c for c in s.llm.calls if "think step by step" in c["messages"][-1]["content"]][1]["messages"][0][
        "content"
    ]
    assert (
        "<references>\nReference 1:" in qa_turn1 and "No reference available." not in qa_turn1.split("<references>")[1]
    )
    assert ans.evidence.passage_ids[: len(refs["kept"])] == [c["id"] for c in refs["kept"]][:3]


def test_forced_output_at_T_and_query_generation(index, kge) -> None:
    s = Script(["I am not sure. The answer is unknown."])
    r = _know3(index, kge, s.llm, theta0=-1e9)
    ans = r.run(Q)
    turns = ans.evidence.trace["know3"]["turns"]
    assert [t["decision"] for t in turns] == ["retrieve", "retrieve", "forced"] and ans.metadata["turn"] == 2
    assert turns[1]["query"] == "Where was Steven Spielberg born?" and turns[1]["query_by"] == "llm"
    assert s.kinds.count("query") == 1 and s.kinds.count("qa") == 3
    kept = ans.evidence.trace["know3"]["references"]
    assert len(kept) == len(set(kept))  # D^c_{t+1} = D^c_t ∪ kept, no duplicates


def test_invalid_replies_fall_back_with_warning_and_trace(index, kge, caplog) -> None:
    s = Script(
        ["@@ ## ~~ ^^^", "@@ ## ~~ ^^^", "Steven Spielberg was born in Cincinnati. The answer is Cincinnati."],
        relevance="Looks fine.",
    )
    with caplog.at_level(logging.WARNING):
        ans = _know3(index, kge, s.llm).run(Q, k=3)
    errors = ans.metadata["llm_error"]
    steps = [(e["step"], e["kind"]) for e in errors]
    assert ("answer", "invalid_reply") in steps and ("relevance_check", "invalid_reply") in steps
    assert "fell back to the LLM-free path" in caplog.text
    turns = ans.evidence.trace["know3"]["turns"]
    assert turns[0]["answer"] == "" and turns[0]["extraction"]["reason"] == "empty text"
    kept = turns[0]["references"]["kept"] + turns[0]["references"]["dropped"]
    judged = [c for c in kept if c["relevance_by"]]
    assert judged and all(c["relevance_by"] == "minilm (llm fallback)" for c in judged)
    assert ans.text == "Cincinnati"


def test_llm_free_loop_keeps_the_base_top_k_and_explains_itself(index, kge) -> None:
    base = ActivationRetriever(index)
    r = Know3Retriever(index, base, kge=kge, theta0=-1e9, kge_kwargs=KGE)  # never verified: runs to T
    for q in (Q, "Which films did Steven Spielberg direct?", "Who starred in E.T.?"):
        ev = r.retrieve(q, 3)
        assert set(ev.passage_ids) == set(base.retrieve(q, 3).passage_ids)  # merge="rerank": Recall@k kept
        k3 = ev.trace["know3"]
        assert [t["decision"] for t in k3["turns"]] == ["retrieve", "retrieve", "forced"]
        assert k3["turns"][1]["query_by"] == "Q + entities" and ev.trace["mode"] == "llm-free"
        assert all("reason" in c for t in k3["turns"][:2] for c in t["references"]["dropped"])
    accepted = Know3Retriever(index, base, kge=kge, theta0=1e9, method="raw", kge_kwargs=KGE).retrieve(Q, 3)
    (turn,) = accepted.trace["know3"]["turns"]  # the top references' triples verify: output at turn 0
    assert turn["decision"] == "accept" and turn["answer_refs"] == base.retrieve(Q, 2).passage_ids
    assert accepted.passage_ids == base.retrieve(Q, 3).passage_ids and turn["verification"]["scored"] > 0


def test_unknown_entities_and_empty_extraction_give_reasons(index, kge) -> None:
    r = Know3Retriever(index, kge=kge, theta0=-1e9, kge_kwargs=KGE)
    ev = r.retrieve("Who is Zorblax Quintavian?", 3)
    turns = ev.trace["know3"]["turns"]
    assert turns[0]["q_kg"]["reasons"] == ["no query entity linked to the KG"]
    assert turns[0]["q_kg"]["text"] == "Who is Zorblax Quintavian?" and turns[-1]["decision"] == "forced"
    s = Script(["Zorblax Quintavian founded Glimmerdorf. The answer is Glimmerdorf."])
    ans = _know3(index, kge, s.llm, theta0=-1e9, max_turns=1).run("Who founded Glimmerdorf?")
    t0 = ans.evidence.trace["know3"]["turns"][0]
    assert t0["score"] is None and t0["reason"].startswith("not verifiable") and t0["extraction"]["reason"]
    assert ans.evidence.trace["know3"]["turns"][-1]["decision"] == "forced"


def test_threshold_schedule_is_calibrated_by_default(index, kge) -> None:
    r = Know3Retriever(index, kge=kge, method="raw", kge_kwargs=KGE)
    info = r.prepare()
    assert info["schedule"]["source"] == "calibrated:p90:held-out" and info["verifier"]["method"] == "raw"
    assert r.schedule.theta(0) == pytest.approx(r.verifier.calibrate(90.0))
    paper = Know3Retriever(index, kge=kge, schedule=ThresholdSchedule.paper("hotpotqa", "glm4-9b"), kge_kwargs=KGE)
    assert paper.prepare()["schedule"]["kind"] == "logistic-ramp-as-extracted"
    with pytest.raises(ValueError):
        Know3Retriever(index, merge="shuffle")


def test_stays_valid_after_add_passages() -> None:
    idx = _index()
    r = Know3Retriever(idx, theta0=-1e9, kge_kwargs=KGE)
    r.retrieve(Q, 3)
    old_kge = r.kge
    new = Passage("dw", "DreamWorks was founded by Steven Spielberg in Glendale.", "DreamWorks")
    idx.add_passages([new], progress=False)
    ev = r.retrieve("Who founded DreamWorks?", 3)
    assert "dw" in ev.passage_ids
    assert r.kge is not old_kge and r.kge.has_entity("dreamworks")  # retrained on the new graph
    assert ev.trace["know3"]["final_turn"] == 2


def test_merge_options(index, kge) -> None:
    base = ActivationRetriever(index, bridge=0, bm25_seeds=0)  # the merge rules, not the base's extra places
    b3 = base.retrieve(Q, 3).passage_ids
    for merge in ("rerank", "score"):
        ev = Know3Retriever(index, base, kge=kge, theta0=-1e9, merge=merge, kge_kwargs=KGE).retrieve(Q, 3)
        refs = ev.trace["know3"]["references"]
        assert set(ev.passage_ids) == set(b3)
        kept_first = [p for p in ev.passage_ids if p in refs]
        assert ev.passage_ids[: len(kept_first)] == kept_first  # D^c members lead
        if merge == "rerank":
            assert kept_first == [p for p in b3 if p in refs]  # ... in base order
    b2 = base.retrieve(Q, 2).passage_ids
    r = Know3Retriever(index, base, kge=kge, theta0=-1e9, merge="tail", max_new=1, relevance_min=-1.0, kge_kwargs=KGE)
    ev = r.retrieve(Q, 2)
    refs = ev.trace["know3"]["references"]
    new = [p for p in refs if p not in b2][:1]
    assert new  # the loop kept a passage outside the base top 2: it takes the last place
    assert ev.passage_ids == b2[:1] + new


def test_theta0_is_calibrated_on_held_out_triples_not_fitted_ones(index, kge) -> None:
    """A trained KGE ranks its own training triples first, so their percentile collapses to the
    score floor; θ_0 comes from the held-out split, and a floor θ_0 still accepts a floor score."""
    from kgrag_plugins.methods.know3.scoring import TripleVerifier

    assert kge.valid_rows is not None and len(kge.valid_rows)
    v = TripleVerifier(kge, index.graph, method="type_rank")
    held = v.calibrate(50.0)
    assert v.calibration_source == "held-out"
    sc = v.score_rows(kge.valid_rows)["type_rank"]
    assert held == pytest.approx(float(np.percentile(sc[~np.isnan(sc)], 50.0)))
    # without held-out rows: the known triples (the fallback), reported as such
    kge.valid_rows, saved = None, kge.valid_rows
    try:
        known = v.calibrate(50.0)
        assert v.calibration_source == "known"
        sk = v.score_rows(v.known_rows)["type_rank"]
        assert known == pytest.approx(float(np.percentile(sk[~np.isnan(sk)], 50.0)))
    finally:
        kge.valid_rows = saved

    class Floor:
        method, calibration_source = "type_rank", "held-out"

        def calibrate(self, percentile: float) -> float:
            return 0.0

    s = ThresholdSchedule.calibrated(Floor())
    assert s.theta0 > 0.0 and s.accept(0.0, 0) and not s.accept(1e-9, 0)
    assert s.source == "calibrated:p90:held-out"
