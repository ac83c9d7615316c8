"""KG-Infused RAG (kgrag_plugins.methods.kg_infused): parser, LLM-free and LLM paths, curated KGs."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import HashEmbedder

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.activation import ActivationMemory, out_triples
from kgrag_plugins.methods.kg_infused import KGInfusedRetriever, ParsedTriple, parse_triples
from kgrag_plugins.methods.kg_infused import prompts as P
from kgrag_plugins.models.llm import LLMError, LLMResponseError, ScriptedLLM
from kgrag_plugins.types import Entity, Evidence, Passage, ScoredPassage

# --------------------------------------------------------------------------- parser


def test_parse_formats_without_candidates():
    text = """Selected Triples:
1. <Marie Curie | place of birth | Warsaw>
- <Warsaw,located on,Vistula>
* (Pierre Curie | spouse | Marie Curie)
<"Paris" | 'capital of' | France>
2) <Nobel Prize> | <awarded by> | <Royal Swedish Academy>
Vistula | flows into | Baltic Sea
<marie curie|PLACE OF BIRTH|  warsaw >
This line, with commas, is prose and not a triple.
"""
    got = parse_triples(text)
    assert [(t.head, t.relation, t.tail) for t in got] == [
        ("Marie Curie", "place of birth", "Warsaw"),
        ("Warsaw", "located on", "Vistula"),
        ("Pierre Curie", "spouse", "Marie Curie"),
        ("Paris", "capital of", "France"),
        ("Nobel Prize", "awarded by", "Royal Swedish Academy"),
        ("Vistula", "flows into", "Baltic Sea"),
    ]  # the last bracketed triple is a case/spacing duplicate of the first
    assert all(t.index is None for t in got)
    assert parse_triples("") == [] and parse_triples("No relevant triples.") == []
    assert parse_triples("<only | two>") == []
    # a separator inside a name is ambiguous without candidates: the rest goes to the tail
    assert parse_triples("<Curie, physicist, Warsaw, Poland>")[0] == ("Curie", "physicist", "Warsaw, Poland", None)


CANDS = {
    "Marie Curie | place of birth | Warsaw": 0,
    "Marie Curie | spouse | Pierre Curie": 1,
    "Warsaw, Poland | located on | the Vistula": 2,
    "<Marie Curie | award received | Nobel Prize in Physics>": 3,
}


def test_parse_matches_candidates_tolerantly():
    text = """Here are the relevant triples:
1. <marie curie | Place Of Birth | warsaw>
2. <Marie Curie's | spouse | Pierre Curie.>
3. <Warsaw, Poland, located on, Vistula>
4. <Marie Curie | award recieved | Nobel Prize in Physics>
5. <Marie Curie | invented | the telephone>
6. <Marie Curie | place of birth | Warsaw>
"""
    got = parse_triples(text, CANDS)
    # case, possessive/punctuation, a comma inside a name with comma separators, leading article,
    # a typo (near miss) all map to candidates; the invented triple and the repeat are dropped
    assert [t.index for t in got] == [0, 1, 2, 3]
    assert got[0] == ParsedTriple("Marie Curie", "place of birth", "Warsaw", 0)  # candidate's own text
    assert got[2].head == "Warsaw, Poland" and got[2].tail == "the Vistula"


def test_parse_candidates_order_and_bare_lines():
    text = "Marie Curie, spouse, Pierre Curie\n(Marie Curie | place of birth | Warsaw)\nMarie Curie, was, a physicist"
    assert [t.index for t in parse_triples(text, CANDS)] == [1, 0]
    assert parse_triples("<Albert Einstein | place of birth | Ulm>", CANDS) == []
    assert parse_triples("<Marie Curie | place of birth | Warsaw>", {}) == []
    # short texts need an exact (folded) match: no fuzzy "A r C" -> "A r B"
    assert parse_triples("<A | r | C>", {"A | r | B": 7}) == []
    assert parse_triples("<a|R|b>", {"A | r | B": 7})[0].index == 7


def test_postprocess_strips_markers():
    assert P.postprocess(" ### Note:\nCurie was born in Warsaw.</s>") == "Curie was born in Warsaw."
    assert P.postprocess("Summary:\nA summary.") == "A summary."
    assert P.postprocess("New Query:\nWhere is Warsaw?") == "Where is Warsaw?"
    assert P.postprocess(" Answer: Vistula") == "Vistula"
    assert P.postprocess("Answer:\nVistula</s>") == "Vistula"
    assert P.postprocess("Enhanced Passage:\nText.") == "Text."
    assert P.postprocess("Vistula") == "Vistula"
    assert P.postprocess("Answer:") == "Answer:"  # nothing after the marker: kept as is


def test_prompts_follow_the_paper():
    assert "select only the triples that are relevant to the question" in P.TRIPLES_SELECTION
    assert "Output triples exactly as they appear in angle brackets" in P.TRIPLES_SELECTION
    assert "{previous_selected_triples}" in P.TRIPLES_UPDATE and "{new_retrieved_triples}" in P.TRIPLES_UPDATE
    assert "regardless of their direct relevance" in P.TRIPLES_SUMMARY
    assert "{triples_summary}" in P.QUERY_EXPANSION and "{triples_summary}" not in P.QUERY_EXPANSION_ONLY_QUERY
    assert "expert in text enhancement and fact integration" in P.AUG_PASSAGE
    assert P.ANSWER_WITH_RETRIEVAL.rstrip().endswith("Answer:") and "{passages}" in P.ANSWER_WITH_RETRIEVAL
    assert P.format_candidate_groups([("A", [("A", "r", "B")]), ("C", []), ("D", [("D", "s", "E")])]) == (
        "[1] A\n<A | r | B>\n\n[2] D\n<D | s | E>"
    )
    assert P.format_passages([("T", "text"), ("", "bare")]) == "[1] T\ntext\n\n[2] bare"


# --------------------------------------------------------------------------- hand-made graphs


def _index(graph: KnowledgeGraph, passages=None, embedder=None) -> KnowledgeIndex:
    passages = passages or [Passage(f"p{i}", f"filler passage number {i}", title=f"P{i}") for i in range(8)]
    return KnowledgeIndex.build(
        passages, embedder=embedder or HashEmbedder(dim=1024), graph=graph, entity_vectors=True, progress=False
    )


@pytest.fixture(scope="module")
def hub_index():
    """Hub -> T0..T59 ("links to"); every Ti -> Hub ("back to"), Ti -> T(i+1) ("next"),
    Ti -> Ui ("leaf")."""
    g = KnowledgeGraph()
    g.add_entity(Entity("hub", "Hub", description="zorblax hub"))
    for i in range(60):
        g.add_entity(Entity(f"t{i}", f"T{i}", description=f"node {i}"))
        g.add_entity(Entity(f"u{i}", f"U{i}", description=f"leaf {i}"))
    for i in range(60):
        g.add_triple("hub", "links to", f"t{i}")
    for i in range(60):
        g.add_triple(f"t{i}", "back to", "hub")
        g.add_triple(f"t{i}", "next", f"t{(i + 1) % 60}")
        g.add_triple(f"t{i}", "leaf", f"u{i}")
    return _index(g)


def test_rounds_respect_caps_and_exclude_explored(hub_index):
    r = KGInfusedRetriever(hub_index, k_entities=1, rounds=2, select_per_round=40, select_min_ratio=0.0)
    mem = r.seed("zorblax hub")
    assert [e for e, _ in mem.seeds] == ["hub"] and "hub" in mem.explored
    r.activate("zorblax hub", mem)
    r0, r1 = mem.rounds
    hub_triples = set(range(60))  # triple indices of hub -> Ti
    assert r0.frontier == ["hub"] and r0.candidates == 50  # 60 out-triples sampled to 50
    assert len(r0.selected) == 40
    sel0 = [ti for ti in mem.triples if ti in hub_triples]
    assert len(sel0) == 40 and set(sel0) <= set(out_triples(hub_index.graph, "hub"))
    assert len(r0.next_frontier) == 10  # 40 new tails, first 10 kept
    assert r0.next_frontier == [hub_index.graph.triple(ti).tail for ti in mem.triples[:10]]
    assert r1.frontier == r0.next_frontier and r1.candidates == 30
    assert len(r1.next_frontier) == 10 and len(set(r1.next_frontier)) == 10
    assert "hub" not in r1.next_frontier and not set(r1.next_frontier) & set(r1.frontier)
    assert mem.explored >= {"hub", *r0.next_frontier, *r1.next_frontier}
    # activate() continues from where the memory is: no rounds left -> nothing changes
    assert len(r.activate("zorblax hub", mem).rounds) == 2
    more = KGInfusedRetriever(hub_index, k_entities=1, rounds=3, select_per_round=40, select_min_ratio=0.0)
    assert [rt.round for rt in more.activate("zorblax hub", mem).rounds] == [0, 1, 2]


def test_llm_free_selection_top_m_and_floor(hub_index):
    r = KGInfusedRetriever(hub_index, k_entities=1, rounds=1, select_per_round=5, select_min_ratio=0.0)
    mem = r.activate("zorblax hub", r.seed("zorblax hub"))
    assert len(mem.rounds[0].selected) == 5
    scores = mem.rounds[0].extra["scores"]
    assert scores == sorted(scores, reverse=True)
    strict = KGInfusedRetriever(hub_index, k_entities=1, rounds=1, select_per_round=5, select_min_ratio=1.0)
    mem2 = strict.activate("zorblax hub", strict.seed("zorblax hub"))
    assert all(s == pytest.approx(mem2.rounds[0].extra["scores"][0]) for s in mem2.rounds[0].extra["scores"])


def test_embedding_cache_embeds_only_candidates_once(hub_index):
    calls: list[int] = []

    class Counting(HashEmbedder):
        def embed(self, texts, *, progress=None):
            calls.append(len(texts))
            return super().embed(texts, progress=progress)

    idx = KnowledgeIndex(
        hub_index.passages, hub_index.graph, Counting(dim=1024), hub_index.manifest, None, hub_index.entity_vectors
    )
    r = KGInfusedRetriever(idx, k_entities=1, rounds=1, select_per_round=3, triple_vectors="lazy")
    r.retrieve("zorblax hub", 3)
    # 1 query + 50 candidate triples (+ expanded query), never the whole graph (240 triples)
    assert sum(calls) <= 1 + 50 + 1 and 50 in calls
    calls.clear()
    r.retrieve("zorblax hub", 3)
    assert calls == []  # query vectors and triple vectors are cached
    # "index" mode embeds every triple once (stored with the index), then only queries
    calls.clear()
    stored = KGInfusedRetriever(idx, k_entities=1, rounds=1, select_per_round=3)
    assert stored.triple_vectors == "index"
    ev = stored.retrieve("zorblax hub", 3)
    assert idx.graph.num_triples in calls and sum(calls) - idx.graph.num_triples <= 2
    assert [f.text for f in ev.facts] == [f.text for f in r.retrieve("zorblax hub", 3).facts]


def _chain_index():
    g = KnowledgeGraph()
    for n in ("Alpha", "Beta", "Gamma", "Delta"):
        g.add_entity(Entity(n.lower(), n, description=f"{n} entity"))
    g.add_triple("alpha", "precedes", "beta")
    g.add_triple("beta", "precedes", "gamma")  # gamma has no out-triples
    g.add_triple("delta", "points to", "alpha")
    return _index(g)


def test_early_stop_when_frontier_empty():
    idx = _chain_index()
    r = KGInfusedRetriever(idx, k_entities=1, rounds=6, select_min_ratio=0.0)
    q = "what precedes Alpha"
    mem = r.activate(q, r.seed(q))
    assert [rt.frontier for rt in mem.rounds] == [["alpha"], ["beta"], ["gamma"]]
    assert mem.rounds[-1].candidates == 0 and mem.rounds[-1].next_frontier == []
    ev = r.retrieve(q, 3)
    assert ev.trace["rounds"] == 3 and len(ev.trace["activation_rounds"]) == 3
    assert [f.text for f in ev.facts] == ["Alpha precedes Beta", "Beta precedes Gamma"]
    # tails already explored end the activation too
    g = KnowledgeGraph()
    for n in ("Alpha", "Beta"):
        g.add_entity(Entity(n.lower(), n))
    g.add_triple("alpha", "precedes", "beta")
    g.add_triple("beta", "follows", "alpha")
    r2 = KGInfusedRetriever(_index(g), k_entities=1, rounds=6, select_min_ratio=0.0)
    mem2 = r2.activate("Alpha", r2.seed("Alpha"))
    assert len(mem2.rounds) == 2 and mem2.rounds[1].next_frontier == []


def test_constructor_and_answer_need_checks(hub_index):
    with pytest.raises(ValueError, match="knowledge graph"):
        KGInfusedRetriever(_index(KnowledgeGraph()))
    r = KGInfusedRetriever(hub_index)
    ev = r.retrieve("zorblax hub", 2)
    assert r.write_note("q", ev.passages) is None and r.augment("q", "note", "summary") is None
    with pytest.raises(ValueError, match="needs an LLM"):
        r.answer("zorblax hub", ev)
    with pytest.raises(ValueError, match="needs an LLM"):
        r.run("zorblax hub")


# --------------------------------------------------------------------------- dual retrieval


def _sp(pid: str, score: float = 0.5) -> ScoredPassage:
    return ScoredPassage(Passage(pid, pid), score)


def test_dual_retrieval_merge_order(hub_index, monkeypatch):
    r = KGInfusedRetriever(hub_index)
    lists = {"q": [_sp(x) for x in "abcdefghij"], "x": [_sp(x) for x in "bxaydzcwvu"]}
    monkeypatch.setattr(r, "_search", lambda text, n: lists[text][:n])
    assert [sp.passage.id for sp in r.dual_retrieve("q", "x")] == list("abcxyd")
    # q' top-6 = b x a y d z -> first 3 not in {a, b, c}: x y d
    assert [sp.passage.id for sp in r.dual_retrieve("q", "x", k_each=2)] == list("abxy")
    ev = r._dual("q", "x", 3, 2)[0]
    assert [sp.passage.id for sp in ev] == ["a", "b"]  # k < 6: the merge truncated (q's first)
    merged, src = r._dual("q", "x", 3, 10)
    # k > 6: q's next (d is taken -> e), then q''s next unused (z), alternately
    assert [sp.passage.id for sp in merged] == list("abcxydezfw")
    assert src == ["q", "q", "q", "q'", "q'", "q'", "q", "q'", "q", "q'"]
    # identical queries: q' contributes q's ranks 4-6
    assert [sp.passage.id for sp in r.dual_retrieve("q", "q")] == list("abcdef")


# --------------------------------------------------------------------------- sample index (MiniLM)

QUESTION = "On which river does the city where Marie Curie was born stand?"


def test_llm_free_end_to_end_on_sample_index(sample_index):
    r = KGInfusedRetriever(sample_index)
    mem = r.seed(QUESTION)
    sims = sample_index.entity_vectors @ sample_index.embed_query(QUESTION)
    ids = sample_index.graph.entity_ids
    assert [e for e, _ in mem.seeds] == [ids[i] for i in np.argsort(-sims, kind="stable")[:3]]
    assert [s for _, s in mem.seeds] == pytest.approx(sorted(sims, reverse=True)[:3], abs=1e-5)

    ev = r.retrieve(QUESTION, 6)
    assert isinstance(ev, Evidence) and len(ev.passages) == 6 and len(set(ev.passage_ids)) == 6
    t = ev.trace
    assert t["retriever"] == "kg-infused" and t["mode"] == "llm-free" and 1 <= t["rounds"] <= 2
    assert [s["id"] for s in t["seeds"]] == [e for e, _ in mem.seeds]
    assert t["facts"] and [f.text for f in ev.facts] == t["facts"]
    assert all(0 < f.score <= 1 and f.data["relation"] == "mentions" for f in ev.facts)
    # summary = template sentences; q' = q + verbalised triples (word budget)
    assert t["summary"] == " ".join(f + "." for f in t["facts"])
    assert t["expanded_query"].startswith(QUESTION + " " + t["facts"][0])
    assert len(t["expanded_query"].split()) <= len(QUESTION.split()) + r.qe_max_words
    # 3 + 3 merge against the underlying dense searches
    dense_q = [p.id for p, _ in sample_index.passages.dense_search(sample_index.embed_query(QUESTION), 6)]
    dense_x = [p.id for p, _ in sample_index.passages.dense_search(sample_index.embed_query(t["expanded_query"]), 6)]
    assert ev.passage_ids[:3] == dense_q[:3]
    assert ev.passage_ids[3:] == [p for p in dense_x if p not in dense_q[:3]][:3]
    assert t["passage_sources"] == ["q"] * 3 + ["q'"] * 3
    for rt in t["activation_rounds"]:
        assert len(rt["frontier"]) <= 10 and len(rt["selected"]) <= r.select_per_round
    assert r.retrieve(QUESTION, 2).passage_ids == ev.passage_ids[:2]
    ten = r.retrieve(QUESTION, 10)
    assert ten.passage_ids[:6] == ev.passage_ids and len(set(ten.passage_ids)) == 10


def test_llm_free_activation_reaches_bridge_entities(sample_index):
    """2-hop sample questions: the activated facts contain the bridge (question entity -> the
    entity the answer passage is about), and q' brings in that passage (not in q's top 3)."""
    r = KGInfusedRetriever(sample_index)
    for q, fact, bridge in (
        (
            "When was the university founded at which Niels Bohr set up his institute for theoretical physics?",
            "Niels Bohr mentions University of Copenhagen",
            "s-016",
        ),
        (
            "On which river does the city where Frédéric Chopin spent his career after leaving Poland lie?",
            "Frédéric Chopin mentions Paris",
            "s-004",
        ),
    ):
        ev = r.retrieve(q, 6)
        assert fact in [f.text for f in ev.facts], q
        assert bridge in ev.passage_ids[3:] and ev.trace["passage_sources"][ev.passage_ids.index(bridge)] == "q'", q


# --------------------------------------------------------------------------- curated KG (MetaQA format)

KB = """Inception|directed_by|Christopher Nolan
Inception|starred_actors|Leonardo DiCaprio
Inception|release_year|2010
Inception|has_genre|Science Fiction
Christopher Nolan|born_in|London
Christopher Nolan|spouse|Emma Thomas
London|capital_of|United Kingdom
Leonardo DiCaprio|born_in|Los Angeles
"""

KB_PASSAGES = [
    Passage(
        "c1", "Inception is a 2010 science fiction action film written and directed by Christopher Nolan.", "Inception"
    ),
    Passage(
        "c2",
        "Christopher Nolan is a British-American filmmaker. He was born in Westminster, London.",
        "Christopher Nolan",
    ),
    Passage("c3", "London is the capital and largest city of England and the United Kingdom.", "London"),
    Passage("c4", "Leonardo DiCaprio is an American actor born in Los Angeles, California.", "Leonardo DiCaprio"),
    Passage("c5", "Emma Thomas is a British film producer.", "Emma Thomas"),
    Passage("c6", "Los Angeles is the most populous city in California.", "Los Angeles"),
    Passage("c7", "Science fiction is a genre of speculative fiction.", "Science fiction"),
]
KB_Q = "Where was the director of Inception born?"


@pytest.fixture(scope="module")
def metaqa_index(tmp_path_factory):
    from kgrag_plugins.index.importers import load_kg

    d = tmp_path_factory.mktemp("metaqa")
    (d / "kb.txt").write_text(KB, encoding="utf-8")
    graph, rep = load_kg(d / "kb.txt", "metaqa", progress=False)
    assert rep.triples == 8
    return KnowledgeIndex.build(KB_PASSAGES, d / "index", graph=graph, entity_vectors=True, progress=False)


def test_llm_free_on_curated_kg(metaqa_index):
    r = KGInfusedRetriever(metaqa_index, k_entities=1, rounds=2)
    ev = r.retrieve(KB_Q, 6)
    t = ev.trace
    assert t["seeds"][0]["id"] == "Inception"
    facts = [f.text for f in ev.facts]
    assert "Inception directed_by Christopher Nolan" in facts
    assert "Christopher Nolan born_in London" in facts  # reached in round 1 (2 hops)
    assert "Christopher Nolan" in t["activation_rounds"][1]["frontier"]
    assert all(not f.data["sources"] for f in ev.facts)  # curated triples have no source passages
    assert "c2" in ev.passage_ids


# --------------------------------------------------------------------------- LLM path (scripted)


class Script:
    """Dispatches on the prompt's instruction text; records (kind, prompt) per call."""

    def __init__(self, **replies):
        self.replies = replies
        self.seen: list[tuple[str, str]] = []

    @staticmethod
    def kind(prompt: str) -> str:
        for key, marker in (
            ("update", "Previously Selected Triples:"),
            ("select", "Retrieved Entity Triples:"),
            ("summary", "write a summary that captures"),
            ("qe", "Related Paragraph:"),
            ("vanilla_qe", "New Query:"),
            ("note", "write a note"),
            ("aug", "Enhanced Passage:"),
            ("answer", "Answer:"),
        ):
            if marker in prompt:
                return key
        raise AssertionError(prompt)

    def __call__(self, messages):
        prompt = messages[-1]["content"]
        k = self.kind(prompt)
        self.seen.append((k, prompt))
        reply = self.replies[k]
        if isinstance(reply, list):
            reply = reply.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def prompts(self, kind):
        return [p for k, p in self.seen if k == kind]


def _full_script(**over):
    replies = dict(
        select="Selected Triples:\n1. <inception | Directed_By | christopher nolan>\n"
        "2. <Inception | won | Academy Award>",
        update=["<Christopher Nolan|born_in|London>\n<London | capital_of | United Kingdom>", "No new triples."],
        summary="### Summary:\nInception was directed by Christopher Nolan, who was born in London.</s>",
        qe="New Query:\nWhere was Christopher Nolan born?",
        vanilla_qe="New Query:\nInception director",
        note="Note:\nInception was directed by Christopher Nolan.",
        aug="Enhanced Passage:\nInception was directed by Christopher Nolan, born in London.",
        answer=" Answer: London</s>",
    )
    replies.update(over)
    return Script(**replies)


def test_llm_path_prompts_parsing_and_pipeline(metaqa_index):
    s = _full_script()
    llm = ScriptedLLM(s)
    r = KGInfusedRetriever(metaqa_index, llm=llm, k_entities=1, rounds=3)
    ans = r.run(KB_Q)
    kinds = [k for k, _ in s.seen]
    assert kinds == ["select", "update", "update", "summary", "qe", "note", "aug", "answer"]
    sel = s.prompts("select")[0]
    assert KB_Q in sel and "[1] Inception" in sel
    assert "<Inception | directed_by | Christopher Nolan>" in sel and "<Inception | release_year | 2010>" in sel
    upd = s.prompts("update")[0]
    assert "Previously Selected Triples:\n<previous_triples>\n<Inception | directed_by | Christopher Nolan>" in upd
    assert "[1] Christopher Nolan\n<Christopher Nolan | born_in | London>" in upd
    assert "<Inception | release_year | 2010>" not in upd  # old candidates are not shown again
    ev = ans.evidence
    assert [f.text for f in ev.facts] == ["Inception directed_by Christopher Nolan", "Christopher Nolan born_in London"]
    assert all(f.score == 1.0 for f in ev.facts)
    rounds = ev.trace["activation_rounds"]
    assert [rt["frontier"] for rt in rounds] == [["Inception"], ["Christopher Nolan"], ["London"]]
    assert rounds[0]["selected"] == ["Inception | directed_by | Christopher Nolan"]  # "won" ignored
    assert "Academy Award" in rounds[0]["extra"]["reply"] and rounds[0]["extra"]["mode"] == "llm"
    # round 1 ignored the London triple (not a candidate then); round 2 (frontier London) got
    # a reply without triples and selected nothing
    assert rounds[1]["selected"] == ["Christopher Nolan | born_in | London"] and rounds[2]["selected"] == []
    # summary prompt lists every selected triple; post-processed outputs flow on
    summ = s.prompts("summary")[0]
    assert "<Inception | directed_by | Christopher Nolan>\n<Christopher Nolan | born_in | London>" in summ
    assert ev.trace["summary"] == "Inception was directed by Christopher Nolan, who was born in London."
    assert ev.trace["summary"] in s.prompts("qe")[0] and KB_Q in s.prompts("qe")[0]
    assert ev.trace["expanded_query"] == "Where was Christopher Nolan born?"
    note_prompt = s.prompts("note")[0]
    assert "Question to be answered:\n" + KB_Q in note_prompt
    first = ev.passages[0].passage
    assert f"[1] {first.title}\n{first.text}" in note_prompt
    aug = s.prompts("aug")[0]
    assert "Retrieved Passage:\n<passage>\nInception was directed by Christopher Nolan." in aug
    assert ev.trace["summary"] in aug
    ap = s.prompts("answer")[0]
    assert "Passages:\n<passages>\nInception was directed by Christopher Nolan, born in London." in ap and KB_Q in ap
    assert ans.text == "London"
    md = ans.metadata
    assert md["note"] == "Inception was directed by Christopher Nolan."
    assert md["enhanced_note"] == "Inception was directed by Christopher Nolan, born in London."
    assert md["summary"] == ev.trace["summary"] and md["expanded_query"] == ev.trace["expanded_query"]
    assert md["trace"]["retriever"] == "kg-infused" and "llm_error" not in md
    assert all(c["temperature"] == 0.0 for c in llm.calls)


def test_llm_reply_without_triples_stops_and_skips_summary(metaqa_index):
    s = _full_script(select="None of these triples are relevant.")
    r = KGInfusedRetriever(metaqa_index, llm=ScriptedLLM(s), k_entities=1, rounds=3)
    ev = r.retrieve(KB_Q, 6)
    assert ev.trace["rounds"] == 1 and ev.facts == [] and ev.trace["summary"] == ""
    assert [k for k, _ in s.seen] == ["select", "vanilla_qe"]  # no summary call, vanilla QE
    assert ev.trace["expanded_query"] == "Inception director"


def test_llm_error_in_selection_falls_back(metaqa_index):
    s = _full_script(select=LLMResponseError("boom"), summary=LLMError("down"), qe=LLMError("down"))
    r = KGInfusedRetriever(metaqa_index, llm=ScriptedLLM(s), k_entities=1, rounds=2)
    ev = r.retrieve(KB_Q, 6)  # must not raise
    rt0 = ev.trace["activation_rounds"][0]
    assert "boom" in rt0["extra"]["llm_error"] and rt0["extra"]["mode"].startswith("embedding")
    assert rt0["selected"]  # LLM-free selection took over for that round
    steps = [e["step"] for e in ev.trace["llm_error"]]
    assert steps[0] == "triple_selection" and "summary" in steps and "query_expansion" in steps
    # summary / expansion fell back to the templates
    assert ev.trace["summary"] == " ".join(f.text + "." for f in ev.facts)
    assert ev.trace["expanded_query"].startswith(KB_Q + " ")


def test_llm_caps_frontier_at_ten(hub_index):
    graph = hub_index.graph
    chosen = out_triples(graph, "hub")[:12]
    reply = "\n".join(
        f"<{graph.name_of(graph.triple(ti).head)} | links to | {graph.name_of(graph.triple(ti).tail)}>" for ti in chosen
    )
    s = Script(select=reply, update="nothing new", summary="s", qe="q2")
    r = KGInfusedRetriever(hub_index, llm=ScriptedLLM(s), k_entities=1, rounds=2)
    mem = r.activate("zorblax hub", r.seed("zorblax hub"))
    assert mem.triples == chosen and mem.rounds[0].candidates == 50
    assert mem.rounds[0].next_frontier == [graph.triple(ti).tail for ti in chosen[:10]]
    assert len(mem.rounds) == 2 and mem.rounds[1].next_frontier == []


def test_answer_without_note_uses_passages_and_facts(metaqa_index):
    s = _full_script()
    r = KGInfusedRetriever(metaqa_index, llm=ScriptedLLM(s), k_entities=1)
    ev = Evidence(KB_Q, [ScoredPassage(KB_PASSAGES[1], 0.9)])
    ev.facts = ActivationMemory(metaqa_index.graph).facts()  # empty
    ans = r.answer(KB_Q, ev)
    p = s.prompts("answer")[0]
    assert "Passages:\n<passages>\n[1] Christopher Nolan\nChristopher Nolan is a British-American" in p
    assert ans.text == "London" and ans.metadata["raw"] == " Answer: London</s>"
    mem = r.seed(KB_Q)
    mem.add_triples([0])
    ev.facts = mem.facts()
    r.answer(KB_Q, ev)
    assert "- Inception directed_by Christopher Nolan" in s.prompts("answer")[1]


def test_run_survives_note_failure(metaqa_index):
    s = _full_script(note=LLMError("note down"))
    r = KGInfusedRetriever(metaqa_index, llm=ScriptedLLM(s), k_entities=1)
    ans = r.run(KB_Q)
    assert ans.metadata["note"] is None and ans.metadata["enhanced_note"] is None
    assert [e["step"] for e in ans.metadata["llm_error"]] == ["write_note"]
    assert "[1] " in s.prompts("answer")[0]  # raw passages in the answer prompt
    assert "aug" not in [k for k, _ in s.seen]


@pytest.mark.skipif(not os.environ.get("KGRAG_LLM_BASE_URL"), reason="KGRAG_LLM_BASE_URL not set")
def test_real_llm_end_to_end(metaqa_index):
    from kgrag_plugins.models.llm import OpenAICompatibleLLM

    r = KGInfusedRetriever(metaqa_index, llm=OpenAICompatibleLLM.from_env(), k_entities=1, rounds=2)
    ans = r.run(KB_Q)
    assert ans.metadata["trace"]["rounds"] >= 1 and ans.metadata["note"]
    assert "london" in ans.text.lower()


def test_llm_expansion_is_cut_to_one_short_line(hub_index):
    llm = ScriptedLLM(["New Query:\n\n  where is   the zorblax hub located\nrambling on\nand on"])
    r = KGInfusedRetriever(hub_index, llm=llm, qe_max_words=4)
    assert r.expand_query("Where is the hub?", "The hub is a place.") == "where is the zorblax"
    assert "The hub is a place." in llm.calls[0]["messages"][-1]["content"]
