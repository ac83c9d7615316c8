"""KG-Translator retriever on a hand-made corpus with known clues (docs/methods.md §3): forward and
reverse translation, tracing roles, ranking, bad input, the backend protocol, the scripted-LLM
decomposition loop and the LLM-free bridge step."""

from __future__ import annotations

import pytest

from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.translator import (
    DEFAULT_BEAMS,
    EntityTranslator,
    LLMFreeBackend,
    TranslatorRetriever,
    beams_for,
)
from kgrag_plugins.methods.translator.prompts import parse_next_query
from kgrag_plugins.methods.translator.relations import windows_of
from kgrag_plugins.methods.translator.tracing import Clue, trace_clue
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.models.prompting import DATA_NOTICE
from kgrag_plugins.models.replies import InvalidReply
from kgrag_plugins.types import Passage

CORPUS = [
    Passage(
        "p-snow",
        "Hank Snow was a Canadian country singer. Snow was born in Brooklyn, Nova Scotia. "
        "He recorded the song I'm Movin' On in 1950.",
        "Hank Snow",
    ),
    Passage(
        "p-brooklyn",
        "Brooklyn is a small community in Queens County, Nova Scotia. The village lies on the Atlantic coast.",
        "Brooklyn, Nova Scotia",
    ),
    Passage(
        "p-cash",
        "Johnny Cash was an American singer. Cash married June Carter in 1968. He toured with Hank Snow in the 1950s.",
        "Johnny Cash",
    ),
    Passage(
        "p-carter",
        "June Carter was an American singer and actress. The Carter Family raised June Carter in Virginia.",
        "June Carter",
    ),
    Passage(
        "p-curie",
        "Marie Curie was a physicist and chemist. Curie won the Nobel Prize in Physics in 1903. "
        "She was born in Warsaw.",
        "Marie Curie",
    ),
    Passage("p-warsaw", "Warsaw is the capital of Poland. The Vistula River flows through Warsaw.", "Warsaw"),
    Passage(
        "p-nobel",
        "The Nobel Prize in Physics is awarded by the Royal Swedish Academy of Sciences. "
        "Pierre Curie shared the Nobel Prize in Physics with Marie Curie.",
        "Nobel Prize in Physics",
    ),
    Passage(
        "p-decoy",
        "Country music is a genre of popular music. Many singers recorded songs about trains.",
        "Country music",
    ),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return KnowledgeIndex.build(
        CORPUS, tmp_path_factory.mktemp("translator") / "idx", builder="parsekg", progress=False
    )


@pytest.fixture(scope="module")
def retriever(index):
    return TranslatorRetriever(index, fusion=None)


def _ent(index, name: str) -> str:
    ids = EntityTranslator(index).resolve(name)
    assert ids, name
    return ids[0]


# --------------------------------------------------------------------------- translation
def test_translator_forward_clue_and_tracing(retriever, index):
    ev = retriever.retrieve("Where was Hank Snow born?", k=1)
    assert ev.passage_ids == ["p-snow"]
    snow = _ent(index, "Hank Snow")
    best = max(ev.facts, key=lambda f: f.score)
    assert best.kind == "clue"
    assert best.data["entity"] == snow and best.data["direction"] == "forward"
    assert "born in" in best.data["relation"]
    assert best.data["relation"] in index.parsekg.hyperrelation(index.parsekg.out_hyperrelations(snow)[1])
    assert any("born in Brooklyn" in s for s in best.data["sentences"])
    assert ev.trace["direction"] == ["forward"]
    assert {"embed", "ner", "entity_translation", "relation_translation", "tracing", "ranking"} <= set(
        ev.trace["timings"]
    )


def test_translator_reverse_when_entity_is_only_a_tail(retriever, index):
    # "Atlantic coast" is never a sentence subject: forward translation cannot reach it (App. J)
    ev = retriever.retrieve("Which village lies on the Atlantic coast?", k=1)
    assert ev.trace["direction"] == ["forward", "reverse"]
    assert ev.passage_ids == ["p-brooklyn"]
    rev = [f for f in ev.facts if f.data["direction"] == "reverse"]
    assert rev and rev[0].data["entity"] == _ent(index, "Atlantic coast")
    assert "lies on" in rev[0].data["relation"]


def test_translator_no_reverse_without_reverse_option(index):
    r = TranslatorRetriever(index, fusion=None, reverse=False, backfill=False)
    ev = r.retrieve("Which village lies on the Atlantic coast?", k=3)
    assert ev.trace["direction"] == ["forward"]
    assert "p-brooklyn" not in ev.passage_ids


def test_translator_tracing_respects_roles(index):
    kg = index.parsekg
    snow = _ent(index, "Hank Snow")
    # "## toured with ## in ##" has Johnny Cash as head and Hank Snow as tail
    fwd = trace_clue(kg, Clue(snow, "Hank Snow", "toured with", "forward"))
    rev = trace_clue(kg, Clue(snow, "Hank Snow", "toured with", "reverse"))
    assert fwd.passage_ids == []
    assert rev.passage_ids == ["p-cash"]
    # a relation that is not a substring of any of the entity's hyperrelations traces nothing
    assert trace_clue(kg, Clue(snow, "Hank Snow", "was elected mayor of", "forward")).sentences == []


def test_translator_ranking_is_cosine_to_question(index):
    ev = TranslatorRetriever(index, fusion=None, bridge=False).retrieve(
        "Who shared the Nobel Prize in Physics with Marie Curie?", k=5
    )
    traced = [sp for sp in ev.passages if sp.passage.id not in ev.trace.get("backfill", [])]
    assert {sp.passage.id for sp in traced} == {"p-curie", "p-nobel"}
    q = index.embed_query("Who shared the Nobel Prize in Physics with Marie Curie?")
    for sp in traced:
        v = index.passages.vectors[index.passages.position(sp.passage.id)]
        assert sp.score == pytest.approx(float(v @ q), abs=1e-5)
    assert [sp.score for sp in traced] == sorted((sp.score for sp in traced), reverse=True)
    # backfilled (dense) passages come after every traced one
    assert all(sp.score < traced[-1].score for sp in ev.passages[len(traced) :])


def test_translator_relations_are_windows_of_hyperrelations(index):
    long = " ".join(f"word{i}" for i in range(40))
    ws = windows_of(long)
    assert all(len(w.split()) <= 16 and w in long for w in ws)
    assert ws[0].startswith("word0 ") and ws[-1].endswith("word39")
    assert windows_of("## ##.") == []
    r = TranslatorRetriever(index, fusion=None)
    curie = _ent(index, "Marie Curie")
    rels = r.relations.translate("Where was Marie Curie born?", curie, 2)
    assert len(rels) == 2 and "born in" in rels[0].text
    hypers = [index.parsekg.hyperrelation(h) for h in index.parsekg.out_hyperrelations(curie)]
    assert all(any(m.text in h for h in hypers) for m in rels)


def test_translator_entity_tiers(index):
    et = EntityTranslator(index)
    exact = et.translate("where was hank snow Born? Hank Snow", 3)
    assert exact[0].name == "Hank Snow" and exact[0].tier == "exact"
    fuzzy = et.translate("Where was Hank Snoww born?", 1, ner=[])
    assert fuzzy and fuzzy[0].name == "Hank Snow" and fuzzy[0].tier in {"fuzzy", "embedding"}
    # forward pool = head entities only; reverse pool = tails
    assert _ent(index, "Atlantic coast") not in et.pool("forward")
    assert _ent(index, "Atlantic coast") in et.pool("reverse")


def test_translator_beams_per_dataset(index):
    assert beams_for("HotpotQA") == (3, 3) and beams_for("2wikimultihopqa") == (3, 1)
    assert beams_for("musique") == (3, 5) == beams_for("popqa")
    assert beams_for("my-corpus") == DEFAULT_BEAMS
    r = TranslatorRetriever(index, fusion=None, dataset="2wikimultihopqa")
    assert (r.alpha, r.beta) == (3, 1)
    assert (TranslatorRetriever(index, fusion=None, dataset="musique", beta=2).beta) == 2


# --------------------------------------------------------------------------- bad input
def test_translator_no_entity_gives_empty_evidence_with_reason(retriever):
    ev = retriever.retrieve("what is the weather like today?", k=5)
    assert ev.passages == [] and ev.facts == []
    assert "no entity" in ev.trace["reason"]


def test_translator_entity_without_relations(index):
    class Backend:  # names an entity that heads nothing: no relations, no passages
        def entities(self, question, alpha):
            return ["Poland"]

        def relations(self, question, entity, beta):
            return []

    ev = TranslatorRetriever(index, fusion=None, backend=Backend(), reverse=False).retrieve("Tell me about Poland", k=3)
    assert ev.passages == [] and "reason" in ev.trace


def test_translator_index_without_parsekg_is_refused(tmp_path):
    idx = KnowledgeIndex.build(CORPUS[:2], tmp_path / "plain", progress=False)
    with pytest.raises(ValueError, match='builder="parsekg"'):
        TranslatorRetriever(idx)


def test_translator_empty_parsekg(tmp_path):
    # a corpus without named entities gives a ParseKG with no sentences
    idx = KnowledgeIndex.build(
        [Passage("x", "it is raining and cold outside.")], tmp_path / "e", builder="parsekg", progress=False
    )
    ev = TranslatorRetriever(idx).retrieve("Is it raining?", 3)
    assert ev.passages == [] and "empty ParseKG" in ev.trace["reason"]


def test_translator_bad_arguments(index):
    with pytest.raises(TypeError, match="unknown option"):
        TranslatorRetriever(index, alpah=3)
    with pytest.raises(ValueError, match="alpha and beta"):
        TranslatorRetriever(index, alpha=0)
    with pytest.raises(ValueError, match="query"):
        TranslatorRetriever(index).retrieve("  ", 3)


# --------------------------------------------------------------------------- backend protocol
def test_translator_uses_backend_when_given(index):
    calls = []

    class Backend:
        def entities(self, question, alpha):
            calls.append(("e", alpha))
            return ["Marie Curie"]

        def relations(self, question, entity, beta):
            calls.append(("r", entity, beta))
            return ["was born in"]

    r = TranslatorRetriever(index, fusion=None, backend=Backend(), alpha=2, beta=4, backfill=False)
    ev = r.retrieve("Where was she born?", 5)  # the backend decides, not the question text
    assert ("e", 2) in calls and ("r", "Marie Curie", 4) in calls
    assert ev.passage_ids[0] == "p-curie"
    assert ev.facts[0].data["relation"] == "was born in"


def test_translator_llm_free_backend_protocol(index):
    b = LLMFreeBackend(index)
    names = b.entities("Where was Marie Curie born?", 2)
    assert names[0] == "Marie Curie"
    rels = b.relations("Where was Marie Curie born?", "Marie Curie", 1)
    assert rels and "born in" in rels[0]


# --------------------------------------------------------------------------- multi-hop
def test_translator_parse_next_query():
    assert parse_next_query("Snow is Canadian. So the next search query is: Where is Brooklyn?") == "Where is Brooklyn?"
    assert parse_next_query("It is Warsaw. So the next search query is None") is None
    assert parse_next_query('So the next search query is "None".') is None
    with pytest.raises(InvalidReply):
        parse_next_query("I think the answer is Warsaw.")


def test_translator_scripted_decomposition_loop(index):
    llm = ScriptedLLM(
        [
            "Hank Snow was born in Brooklyn. So the next search query is: Which village lies on the Atlantic coast?",
            "Brooklyn lies on the Atlantic coast. So the next search query is None",
        ]
    )
    r = TranslatorRetriever(index, fusion=None, llm=llm, backfill=False)
    ev = r.retrieve("Where was Hank Snow born?", 5)
    assert ev.trace["queries"] == ["Where was Hank Snow born?", "Which village lies on the Atlantic coast?"]
    assert len(llm.calls) == 2 and llm.remaining == 0
    assert {"p-snow", "p-brooklyn"} <= set(ev.passage_ids)
    assert any(f.data["direction"] == "reverse" for f in ev.facts)  # step 2 needed reverse translation
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "So the next search query is" in prompt and "<passages>" in prompt and DATA_NOTICE in prompt


def test_translator_decomposition_step_cap_and_bad_replies(index):
    llm = ScriptedLLM(lambda msgs: "So the next search query is: Where was Marie Curie born?")
    ev = TranslatorRetriever(index, fusion=None, llm=llm, max_steps=1, backfill=False).retrieve(
        "Where was Hank Snow born?", 5
    )
    assert len(llm.calls) == 1 and "p-curie" in ev.passage_ids
    bad = ScriptedLLM(lambda msgs: "I refuse to follow the format")
    ev = TranslatorRetriever(index, fusion=None, llm=bad, backfill=False, bridge=False).retrieve(
        "Where was Hank Snow born?", 5
    )
    assert len(bad.calls) == 2  # one retry, then the LLM-free path
    assert ev.passage_ids == ["p-snow"] and ev.trace["llm_errors"]


def test_translator_bridge_step_adds_second_hop(index):
    q = "Where was the singer who toured with Johnny Cash born?"
    plain = TranslatorRetriever(index, fusion=None, bridge=False, backfill=False, reverse=False).retrieve(q, 5)
    bridged = TranslatorRetriever(index, fusion=None, bridge=True, backfill=False, reverse=False).retrieve(q, 5)
    assert plain.passage_ids == ["p-cash"]
    assert "p-snow" in bridged.passage_ids  # Hank Snow is mentioned in Johnny Cash's passage
    assert any(c["step"] == 1 for c in bridged.trace["clues"])


# --------------------------------------------------------------------------- CLI
def test_translator_kgrag_ask(index, capsys):
    from kgrag_plugins.cli import main

    rc = main(["ask", "--index", str(index.path), "--retriever", "translator", "-k", "1", "Where was Hank Snow born?"])
    out = capsys.readouterr().out
    assert rc == 0 and "[p-snow]" in out and "clue" in out


def test_translator_traced_bonus_mixes_with_dense(index):
    q = "Where was Hank Snow born?"
    strict = TranslatorRetriever(index, fusion=None).retrieve(q, 3)
    big = TranslatorRetriever(index, fusion=None, traced_bonus=5.0).retrieve(q, 3)
    assert big.passage_ids[0] == strict.passage_ids[0] == "p-snow"
    # a very negative bonus leaves the dense ranking: traced passages only where dense has them
    neg = TranslatorRetriever(index, fusion=None, traced_bonus=-5.0).retrieve(q, 3)
    dense = [p.id for p, _ in index.passages.dense_search(index.embed_query(q), 6) if p.id != "p-snow"][:3]
    assert neg.passage_ids == dense


def test_translator_trace_is_drawn_as_clues(index, tmp_path, capsys):
    """`kgrag ask --retriever translator --draw` draws clue entities -> traced passages."""
    from kgrag_plugins.cli import main

    out = tmp_path / "clues.html"
    rc = main(
        [
            "ask",
            "--index",
            str(index.path),
            "--retriever",
            "translator",
            "-k",
            "2",
            "--draw",
            str(out),
            "Where was Hank Snow born?",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0 and "clue entities and traced passages" in err
    html = out.read_text()
    assert "Hank Snow" in html and "KG-Translator clues" in html
    assert "born in" in html  # the clue relation labels its edge


def test_translator_rrf_fusion_with_dense(index):
    """fusion="rrf": scores are Σ 1/(60 + rank) over the traced and dense rankings, best first."""
    from kgrag_plugins.methods.translator.retriever import RRF_K

    q = "Where was Hank Snow born?"
    strict = TranslatorRetriever(index, fusion=None, backfill=False).retrieve(q, 8)
    fused = TranslatorRetriever(index, fusion="rrf").retrieve(q, 4)
    traced = strict.passage_ids
    dense = [p.id for p, _ in index.passages.dense_search(index.embed_query(q), 8)]
    expect: dict[str, float] = {}
    for ids in (traced, dense):
        for r, pid in enumerate(ids):
            expect[pid] = expect.get(pid, 0.0) + 1.0 / (RRF_K + r + 1)
    best = sorted(expect, key=lambda p: -expect[p])[:4]
    assert fused.passage_ids == best
    scores = [sp.score for sp in fused.passages]
    assert scores == sorted(scores, reverse=True)
    assert abs(scores[0] - expect[best[0]]) < 1e-9
    assert fused.trace["fusion"]["method"] == "rrf"
    with pytest.raises(ValueError, match="fusion"):
        TranslatorRetriever(index, fusion="max")


def test_translator_dense_first_is_the_default_fusion(index):
    """Default fusion="dense-first": the dense top 2, then the traced passages, then dense."""
    from kgrag_plugins.methods.translator.retriever import DENSE_FIRST

    q = "Who did Johnny Cash marry?"
    traced = TranslatorRetriever(index, fusion=None, backfill=False).retrieve(q, 8).passage_ids
    dense = [p.id for p, _ in index.passages.dense_search(index.embed_query(q), 8)]
    ev = TranslatorRetriever(index).retrieve(q, 4)
    expect = list(dict.fromkeys(dense[:DENSE_FIRST] + traced + dense))[:4]
    assert traced and ev.passage_ids == expect
    assert ev.trace["fusion"]["method"] == "dense-first"
    assert [sp.score for sp in ev.passages] == sorted((sp.score for sp in ev.passages), reverse=True)


@pytest.mark.parametrize("fusion", ["dense-first", "rrf"])
def test_translator_fusion_keeps_dense_ranking_when_nothing_translates(index, fusion):
    """A question naming no entity: no clue facts and the reason in the trace; with fusion the
    passages are the dense ranking (the fused list degenerates to it), in the paper's order none."""
    q = "what is the weather like today?"
    paper = TranslatorRetriever(index, fusion=None).retrieve(q, 3)
    assert paper.passages == [] and "no entity" in paper.trace["reason"]
    ev = TranslatorRetriever(index, fusion=fusion).retrieve(q, 3)
    dense = [p.id for p, _ in index.passages.dense_search(index.embed_query(q), 3)]
    assert ev.facts == [] and "no entity" in ev.trace["reason"]
    assert ev.passage_ids == dense and ev.trace["fusion"]["traced"] == 0
    assert [sp.score for sp in ev.passages] == sorted((sp.score for sp in ev.passages), reverse=True)


def test_translator_picks_a_backend_for_a_plain_llm(index):
    """An LLM given as ``backend=`` is wrapped by choose_backend: a generic (non-vLLM) LLM gets
    unconstrained decoding + projection, and its replies are projected onto the ParseKG."""
    from kgrag_plugins.methods.translator.decoding import ProjectionBackend

    llm = ScriptedLLM(lambda messages: "Johnny Cash@@ married")
    r = TranslatorRetriever(index, fusion=None, backend=llm, reverse=False, bridge=False)
    assert isinstance(r.backend, ProjectionBackend)
    ev = r.retrieve("Who did Johnny Cash marry?", 3)
    assert ev.facts and {f.data["entity"] for f in ev.facts} == {_ent(index, "Johnny Cash")}
