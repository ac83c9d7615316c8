"""Tests for the LLM entity/relation extraction graph builder (kgrag_plugins.index.builders.llm_extract)."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import zlib

import pytest

from kgrag_plugins.index.builders import llm_extract
from kgrag_plugins.index.builders.llm_extract import ExtractionStats, build_llm_graph
from kgrag_plugins.index.builders.llm_replies import chunk_words, parse_entities, parse_json, parse_triples
from kgrag_plugins.index.builders.prompts import NER_SYSTEM, PROMPT_VERSION, RE_SYSTEM
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.models.llm import LLMResponseError, LLMTimeoutError, ScriptedLLM
from kgrag_plugins.types import Entity, Passage

# --------------------------------------------------------------------------- fixtures / helpers


def ent(name, etype="PERSON", aliases=(), info=""):
    return {"name": name, "type": etype, "aliases": list(aliases), "entity_information": info}


def ner(*entities) -> str:
    return json.dumps(list(entities))


def rel(*triples) -> str:
    return json.dumps({"triples": [list(t) for t in triples]})


PASSAGES = [
    Passage("p1", "zq1 Barack Obama was born in Honolulu. Obama was president of the United States.", "Barack Obama"),
    Passage("p2", "zq2 Michelle Obama married Obama in Chicago.", "Michelle Obama"),
    Passage("p3", "zq3 Honolulu is the capital of Hawaii.", "Honolulu"),
]

NER_REPLIES = {
    "zq1": ner(
        ent("Barack Obama", aliases=["Obama"], info="Barack Obama is a former president of the United States."),
        ent("Honolulu", "GPE", info="Honolulu is a city."),
        ent("United States", "GPE", aliases=["USA"], info="The United States is a country."),
    ),
    "zq2": ner(
        ent("Michelle Obama", info="Michelle Obama married Barack Obama."),
        ent("Obama", info="Obama is a politician."),
        ent("Chicago", "GPE", info="Chicago is a city."),
    ),
    "zq3": ner(
        ent("Honolulu", "GPE", info="Honolulu is the capital of Hawaii."),
        ent("Hawaii", "GPE", info="Hawaii is a US state."),
    ),
}

RE_REPLIES = {
    "zq1": rel(["Barack Obama", "born in", "Honolulu"], ["Obama", "president of", "United States"]),
    "zq2": rel(["Michelle Obama", "married", "Obama"], ["Michelle Obama", "married in", "Chicago"]),
    "zq3": rel(["Honolulu", "capital of", "Hawaii"]),
}


class Crash(Exception):
    """Not an LLMError: simulates the process being killed mid-build."""


def is_re(messages) -> bool:
    return "named_entities:" in messages[-1]["content"]


def marker(messages) -> str:
    m = re.search(r"zq\d+", messages[-1]["content"])
    return m.group() if m else ""


def make_llm(ner_replies=None, re_replies=None, *, override=None, delay=False) -> ScriptedLLM:
    """A ScriptedLLM answering by passage marker; ``override(messages)`` may return a reply first."""
    ner_replies = NER_REPLIES if ner_replies is None else ner_replies
    re_replies = RE_REPLIES if re_replies is None else re_replies

    def fn(messages):
        if delay:  # perturb completion order under concurrency
            time.sleep((zlib.crc32(messages[-1]["content"].encode()) % 5) * 0.002)
        if override is not None:
            reply = override(messages)
            if reply is not None:
                return reply
        if is_re(messages):
            return re_replies.get(marker(messages), '{"triples": []}')
        return ner_replies.get(marker(messages), "[]")

    return ScriptedLLM(fn)


def snapshot(g: KnowledgeGraph):
    return (
        [e.to_dict() for e in g.entities()],
        [t.to_dict() for t in g.triples()],
        {e.id: g.passages_of(e.id) for e in g.entities()},
    )


def build(passages=PASSAGES, llm=None, **kw):
    kw.setdefault("progress", False)
    return build_llm_graph(passages, llm or make_llm(), **kw)


# --------------------------------------------------------------------------- graph construction


def test_builds_entities_triples_links_and_stats():
    llm = make_llm()
    t0 = time.perf_counter()
    g, stats = build(llm=llm)
    wall = time.perf_counter() - t0

    assert set(g.entity_ids) == {"barack_obama", "honolulu", "united_states", "michelle_obama", "chicago", "hawaii"}
    obama = g.entity("barack_obama")
    assert (obama.name, obama.type) == ("Barack Obama", "PERSON")
    assert obama.description == "Barack Obama is a former president of the United States."
    assert g.entity("united_states").aliases == ["USA"]
    assert g.entity("hawaii").type == "GPE"
    assert g.entity("honolulu").description == "Honolulu is a city."  # first non-empty wins

    triples = {(t.head, t.relation, t.tail): t.source_ids for t in g.triples()}
    assert triples == {
        ("barack_obama", "born in", "honolulu"): ["p1"],
        ("barack_obama", "president of", "united_states"): ["p1"],
        ("michelle_obama", "married", "barack_obama"): ["p2"],
        ("michelle_obama", "married in", "chicago"): ["p2"],
        ("honolulu", "capital of", "hawaii"): ["p3"],
    }
    assert g.passages_of("honolulu") == ["p1", "p3"]
    assert g.passages_of("barack_obama") == ["p1", "p2"]
    assert sorted(g.entities_of("p3")) == ["hawaii", "honolulu"]

    assert stats.passages == 3
    assert stats.llm_calls == 6 == len(llm.calls)
    assert (stats.cached, stats.failed, stats.unparsed, stats.dropped_triples) == (0, 0, 0, 0)
    assert (stats.entities, stats.triples) == (6, 5)
    assert 0 < stats.seconds <= wall  # the build's own clock, in seconds, inside this call
    assert set(stats.to_dict()) == {
        "passages",
        "llm_calls",
        "cached",
        "failed",
        "unparsed",
        "fallback_chunks",
        "entities",
        "triples",
        "dropped_triples",
        "prompt_tokens",
        "completion_tokens",
        "seconds",
    }


def test_prompts_sent_to_the_llm():
    llm = make_llm()
    build(PASSAGES[:1], llm=llm)
    ner_call, re_call = llm.calls
    assert ner_call["messages"][0] == {"role": "system", "content": NER_SYSTEM}
    assert "Barack Obama\nzq1 Barack Obama was born" in ner_call["messages"][-1]["content"]  # title prepended
    assert re_call["messages"][0] == {"role": "system", "content": RE_SYSTEM}
    assert 'named_entities: ["Barack Obama", "Honolulu", "United States"]' in re_call["messages"][-1]["content"]
    assert ner_call["temperature"] == 0.0 and ner_call["max_tokens"] > 512
    for text in (NER_SYSTEM, RE_SYSTEM):
        assert "JSON" in text and "Example" in text
    assert all(t in NER_SYSTEM for t in ("PERSON", "ORGANIZATION", "GPE", "MISC", "aliases", "entity_information"))


def test_alias_resolution_merges_across_passages():
    passages = [
        Passage("a", "zq1 text"),
        Passage("b", "zq2 text"),
        Passage("c", "zq3 text"),
        Passage("d", "zq4 text"),
    ]
    ner_replies = {
        "zq1": ner(ent("Barack Obama", aliases=["Obama"], info="Barack Obama is a politician.")),
        "zq2": ner(ent("obama"), ent("Kenya", "GPE")),  # new name is an alias (case-insensitive)
        "zq3": ner(ent("President Obama", aliases=["barack   obama"])),  # new alias equals the name
        "zq4": ner(ent("Barack  OBAMA", aliases=["B. Obama"])),  # same name after normalisation
    }
    re_replies = {"zq2": rel(["Obama", "father from", "Kenya"])}
    g, stats = build(passages, make_llm(ner_replies, re_replies))

    assert g.entity_ids == ["barack_obama", "kenya"]
    obama = g.entity("barack_obama")
    assert obama.name == "Barack Obama"
    assert obama.aliases == ["Obama", "President Obama", "B. Obama"]
    assert obama.description == "Barack Obama is a politician."
    assert g.passages_of("barack_obama") == ["a", "b", "c", "d"]
    assert [(t.head, t.relation, t.tail) for t in g.triples()] == [("barack_obama", "father from", "kenya")]
    assert stats.entities == 2 and stats.dropped_triples == 0


def test_triple_endpoint_merged_under_other_name_is_kept():
    """The paper code silently dropped this edge (docs/methods.md §4(d)); here it resolves."""
    passages = [Passage("a", "zq1"), Passage("b", "zq2")]
    ner_replies = {
        "zq1": ner(ent("Barack Obama")),
        "zq2": ner(ent("Obama", aliases=["Barack Obama"]), ent("Harvard Law School", "ORGANIZATION")),
    }
    re_replies = {"zq2": rel(["Obama", "studied at", "Harvard Law School"])}
    g, stats = build(passages, make_llm(ner_replies, re_replies))
    assert [(t.head, t.tail, t.source_ids) for t in g.triples()] == [("barack_obama", "harvard_law_school", ["b"])]
    assert g.entity("barack_obama").aliases == ["Obama"]
    assert g.passages_of("barack_obama") == ["a", "b"]


def test_unknown_endpoints_and_self_loops_are_dropped():
    re_replies = dict(RE_REPLIES)
    re_replies["zq1"] = rel(
        ["Barack Obama", "born in", "Honolulu"],
        ["Barack Obama", "met", "Angela Merkel"],  # not an extracted entity
        ["Obama", "also known as", "Barack Obama"],  # self-loop after resolution
        ["Barack Obama", "visited"],  # wrong shape: skipped by the parser, not counted
    )
    g, stats = build(llm=make_llm(re_replies=re_replies))
    assert stats.dropped_triples == 2
    assert "angela_merkel" not in g
    assert stats.triples == 4


def test_slug_ids_are_collision_safe_and_existing_graph_is_extended():
    graph = KnowledgeGraph()
    graph.add_entity(Entity("hawaii_state", "Hawaii", ["Hawaiʻi"], "", "GPE"))
    graph.add_entity(Entity("at_t", "Something else"))
    passages = [Passage("a", "zq1")]
    ner_replies = {"zq1": ner(ent("AT&T", "ORGANIZATION"), ent("AT T", "ORGANIZATION"), ent("hawaii", "GPE"))}
    re_replies = {"zq1": rel(["AT&T", "operates in", "Hawaii"])}
    g, stats = build(passages, make_llm(ner_replies, re_replies), graph=graph)
    assert g is graph
    assert g.entity_ids == ["hawaii_state", "at_t", "at_t_2", "at_t_3"]
    assert g.entity("at_t_2").name == "AT&T" and g.entity("at_t_3").name == "AT T"
    assert [(t.head, t.tail) for t in g.triples()] == [("at_t_2", "hawaii_state")]
    assert g.passages_of("hawaii_state") == ["a"]
    assert stats.entities == 2


def test_unknown_types_and_bad_items():
    reply = json.dumps(
        [
            {"name": "Widget", "type": "product", "aliases": "Gadget", "entity_information": 7},
            {"name": "", "type": "PERSON"},
            "just a string",
            {"type": "PERSON"},
            {"name": "Ada Lovelace", "type": " person ", "aliases": ["Ada", None, "ada lovelace"]},
        ]
    )
    ents = parse_entities(reply)
    assert ents == [
        {"name": "Widget", "type": "MISC", "aliases": ["Gadget"], "entity_information": ""},
        {"name": "Ada Lovelace", "type": "PERSON", "aliases": ["Ada"], "entity_information": ""},
    ]


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[{"name": "A"}]', [{"name": "A"}]),
        ('```json\n[{"name": "A"}]\n```', [{"name": "A"}]),
        ('Here you go:\n```\n[{"name": "A"}]\n```\nLet me know!', [{"name": "A"}]),
        ('The entities are [{"name": "A"}]. Hope this helps.', [{"name": "A"}]),
        ('{"entities": [{"name": "A"},],}', {"entities": [{"name": "A"}]}),
        ('[{"name": "A", "aliases": ["x",]}, {"name": "B"},]', [{"name": "A", "aliases": ["x"]}, {"name": "B"}]),
        ('[{"name": "A"}, {"name": "B", "aliases": ["x", "y', [{"name": "A"}]),
        ('[{"name": "A"}, {"name": "B", "aliases": ["x"]', [{"name": "A"}]),  # B incomplete
        ('```json\n{"entities": [{"name": "A, [b]"}, {"name": "B"', {"entities": [{"name": "A, [b]"}]}),
        ('{"triples": [["a", "r", "b"], ["c", "r2"', {"triples": [["a", "r", "b"]]}),
        ('[{"name": "A \\"quoted\\" ]"}, {"na', [{"name": 'A "quoted" ]'}]),
    ],
)
def test_parse_json_tolerates_llm_formatting(text, expected):
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "I cannot help with that.", "{", '[{"name": "A"', "null", "42"])
def test_parse_json_gives_none_on_garbage(text):
    assert parse_json(text) is None


def test_typed_parsers():
    assert parse_entities('{"entities": [{"name": "A"}]}') == [ent("A", "MISC")]
    assert parse_entities('{"name": "A", "type": "GPE"}') == [ent("A", "GPE")]
    assert parse_entities("See [1]. " + ner(ent("A"))) == [ent("A")]  # skips the non-entity [1]
    assert parse_entities("[]") == []
    assert parse_entities("no json") is None
    assert parse_triples('{"triples": [["a", "r", "b"], ["a", "r"], ["a", "", "b"], [1, "r", "b"], "x"]}') == [
        ["a", "r", "b"]
    ]
    assert parse_triples('[[" a ", "r", "b "]]') == [["a", "r", "b"]]
    assert parse_triples('["a", "r", "b"]') == [["a", "r", "b"]]
    assert parse_triples('{"relations": [["a", "r", "b"]]}') == [["a", "r", "b"]]
    assert parse_triples('{"triples": []}') == []
    assert parse_triples("nothing") is None


def test_messy_replies_parse_in_a_build():
    ner_replies = {
        "zq1": "```json\n" + NER_REPLIES["zq1"] + "\n```\nThese are all the entities I found.",
        "zq2": "Sure! " + json.dumps({"entities": json.loads(NER_REPLIES["zq2"])}).replace("}]", "},]"),
        "zq3": NER_REPLIES["zq3"][:-1] + ', {"name": "Pacific Oc',  # truncated mid-item
    }
    re_replies = dict(RE_REPLIES)
    re_replies["zq1"] = RE_REPLIES["zq1"][:-2] + ', ["Obama", "born in'  # truncated mid-triple
    g, stats = build(llm=make_llm(ner_replies, re_replies))
    ref, _ = build()
    assert snapshot(g) == snapshot(ref)
    assert stats.unparsed == 0


def test_garbage_reply_is_counted_and_the_build_continues(caplog, tmp_path):
    ner_replies = dict(NER_REPLIES)
    ner_replies["zq2"] = "I'm sorry, I can't help with that."
    re_replies = dict(RE_REPLIES)
    re_replies["zq3"] = "The text says Honolulu is the capital of Hawaii."
    llm = make_llm(ner_replies, re_replies)
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.build"):
        g, stats = build(llm=llm, cache_dir=tmp_path)
    assert stats.unparsed == 4 and stats.fallback_chunks == 2  # each invalid reply asked once more
    assert stats.llm_calls == 7  # no RE call for the chunk whose NER reply was unusable
    assert "michelle_obama" not in g
    assert "hawaii" in g and g.num_triples == 2  # p3's entities kept, its triples lost
    assert sum("fell back" in r.getMessage() for r in caplog.records) == 3  # 2 steps + the summary
    assert all(r.name == "kgrag_plugins.build" for r in caplog.records)

    # chunks that fell back are not cached: a rebuild with a working LLM extracts them again
    llm2 = make_llm()
    g2, stats2 = build(llm=llm2, cache_dir=tmp_path)
    assert len(llm2.calls) == 4 and stats2.cached == 1 and stats2.fallback_chunks == 0
    ref, _ = build()
    assert snapshot(g2) == snapshot(ref)


# --------------------------------------------------------------------------- failures


def test_llm_error_on_one_chunk(caplog, tmp_path):
    def override(messages):
        if marker(messages) == "zq2":
            return LLMTimeoutError("timed out after 3 attempts")
        return None

    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.build"):
        g, stats = build(llm=make_llm(override=override), cache_dir=tmp_path)
    assert stats.failed == 1
    assert stats.llm_calls == 5
    assert "michelle_obama" not in g and "chicago" not in g
    assert {"barack_obama", "honolulu", "hawaii"} <= set(g.entity_ids)
    assert any("timed out" in r.getMessage() for r in caplog.records)

    # a failed chunk is not cached: the re-run retries exactly that chunk
    llm2 = make_llm()
    g2, stats2 = build(llm=llm2, cache_dir=tmp_path)
    assert len(llm2.calls) == 2 and stats2.cached == 2 and stats2.failed == 0
    assert snapshot(g2) == snapshot(build()[0])


def test_all_chunks_failing_raises():
    llm = make_llm(override=lambda m: LLMResponseError("connection refused"))
    graph = KnowledgeGraph()
    with pytest.raises(RuntimeError, match=r"all 3 chunk.*could not be reached.*connection refused"):
        build(llm=llm, graph=graph)
    assert graph.num_entities == 0


def test_empty_input():
    g, stats = build([], llm=make_llm())
    assert g.num_entities == 0 and stats.llm_calls == 0 and stats.passages == 0
    g, stats = build([Passage("e", "   ")], llm=make_llm())
    assert g.num_entities == 0 and stats.passages == 1


def test_argument_validation():
    with pytest.raises(ValueError, match="concurrency"):
        build(concurrency=0)
    with pytest.raises(ValueError, match="overlap"):
        build(max_words=100, overlap=100)
    with pytest.raises(ValueError, match="max_words"):
        build(max_words=0, overlap=0)
    with pytest.raises(ValueError, match="LLM"):
        build_llm_graph(PASSAGES, None, progress=False)


# --------------------------------------------------------------------------- cache / resume


def test_cache_resume_after_crash(tmp_path):
    passages = [Passage(f"p{i}", f"zq{i} Entity{i} relates to Hub.") for i in range(1, 6)]
    ner_replies = {
        f"zq{i}": ner(ent(f"Entity{i}", "MISC"), ent("Hub", "GPE", info="Hub is a place.")) for i in range(6)
    }
    re_replies = {f"zq{i}": rel([f"Entity{i}", "relates to", "Hub"]) for i in range(6)}
    reference, _ = build(passages, make_llm(ner_replies, re_replies))

    def crash(messages):  # the 3rd chunk (and anything after) kills the build
        return Crash("killed") if marker(messages) in {"zq3", "zq4", "zq5"} else None

    cache = tmp_path / "cache"
    with pytest.raises(Crash):
        build(passages, make_llm(ner_replies, re_replies, override=crash), cache_dir=cache, concurrency=1)
    files = sorted(cache.glob("*.json"))
    assert len(files) == 2
    assert not list(cache.glob("*.tmp"))
    assert all(re.fullmatch(r"[0-9a-f]{24}\.json", f.name) for f in files)
    cached = json.loads(files[0].read_text())
    assert cached["prompt_version"] == PROMPT_VERSION and set(cached) >= {"entities", "triples"}

    llm = make_llm(ner_replies, re_replies)
    g, stats = build(passages, llm, cache_dir=cache, concurrency=2)
    assert len(llm.calls) == stats.llm_calls == (5 - 2) * 2
    assert {marker(c["messages"]) for c in llm.calls} == {"zq3", "zq4", "zq5"}
    assert stats.cached == 2
    assert snapshot(g) == snapshot(reference)

    # a third run is served entirely from the cache
    llm3 = make_llm(ner_replies, re_replies)
    g3, stats3 = build(passages, llm3, cache_dir=cache)
    assert llm3.calls == [] and stats3.cached == 5 and snapshot(g3) == snapshot(reference)


def test_cache_invalidation_and_corrupt_files(tmp_path, monkeypatch, caplog):
    build(cache_dir=tmp_path)
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 3
    files[0].write_text("{not json")
    llm = make_llm()
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.build"):
        _, stats = build(llm=llm, cache_dir=tmp_path)
    assert len(llm.calls) == 2 and stats.cached == 2  # the corrupt file is recomputed
    assert any("unreadable" in r.getMessage() for r in caplog.records)

    monkeypatch.setattr(llm_extract, "PROMPT_VERSION", "changed-prompts")
    llm = make_llm()
    _, stats = build(llm=llm, cache_dir=tmp_path)
    assert len(llm.calls) == 6 and stats.cached == 0


def test_cache_key_includes_model():
    class Named(ScriptedLLM):
        model = "phi4"

    assert llm_extract._model_key(Named(lambda m: "")) == "phi4"
    assert llm_extract._model_key(make_llm()) == "ScriptedLLM"
    assert llm_extract._cache_key("phi4", "text") != llm_extract._cache_key("gemma3", "text")


def test_identical_chunks_are_extracted_once():
    passages = [Passage("a", "zq1 same text"), Passage("b", "zq1 same text")]
    llm = make_llm({"zq1": ner(ent("Thing", "MISC"))})
    g, stats = build(passages, llm)
    assert len(llm.calls) == 2 and stats.cached == 1
    assert g.passages_of("thing") == ["a", "b"]


# --------------------------------------------------------------------------- concurrency / chunking / tokens


def test_concurrency_does_not_change_the_graph():
    names = ["Alpha", "Beta", "Gamma", "Delta"]
    passages = [Passage(f"p{i}", f"zq{i} text {i}") for i in range(16)]
    ner_replies, re_replies = {}, {}
    for i in range(16):
        a, b = names[i % 4], names[(i + 1) % 4]
        ner_replies[f"zq{i}"] = ner(
            ent(a if i % 3 else a.lower(), "MISC", aliases=[f"{a}-{i}"], info=f"{a} seen in {i}." if i > 4 else ""),
            ent(b, "MISC"),
        )
        re_replies[f"zq{i}"] = rel([a, f"r{i % 5}", b], [b, "next", f"{a}-{i}"])
    g1, s1 = build(passages, make_llm(ner_replies, re_replies, delay=True), concurrency=1)
    g4, s4 = build(passages, make_llm(ner_replies, re_replies, delay=True), concurrency=4)
    assert snapshot(g1) == snapshot(g4)
    d1, d4 = s1.to_dict(), s4.to_dict()
    d1.pop("seconds"), d4.pop("seconds")
    assert d1 == d4
    assert s1.triples > 4


def test_chunk_words():
    words = [f"w{i}" for i in range(1200)]
    chunks = chunk_words(" ".join(words), max_words=500, overlap=100)
    assert [c.split()[0] for c in chunks] == ["w0", "w400", "w800"]
    assert [len(c.split()) for c in chunks] == [500, 500, 400]
    assert chunk_words("a b c", 500, 100) == ["a b c"]
    assert chunk_words("", 500, 100) == []
    assert chunk_words("a b c d e", 2, 0) == ["a b", "c d", "e"]
    assert chunk_words("a b c d", 2, 1) == ["a b", "b c", "c d"]


def test_long_passage_is_chunked_with_overlap():
    text = "zq7 " + " ".join(f"w{i}" for i in range(1, 1200))
    llm = make_llm(override=lambda m: None if is_re(m) else ner(ent("Widget", "MISC")))
    g, stats = build([Passage("long", text, "Long")], llm, max_words=500, overlap=100, concurrency=1)
    ner_texts = [c["messages"][-1]["content"] for c in llm.calls if not is_re(c["messages"])]
    assert len(ner_texts) == 3 and stats.llm_calls == 6
    assert "w399 w400" in ner_texts[0] and "w400 w401" in ner_texts[1]  # 100-word overlap
    assert "Long\nw400 " in ner_texts[1]  # the title is repeated on every chunk
    assert g.passages_of("widget") == ["long"]


def test_token_counts(tmp_path):
    g, stats = build(cache_dir=tmp_path)
    assert stats.prompt_tokens > stats.completion_tokens > 0
    # roughly: the system prompts dominate; cl100k gives well over 1 token per 10 characters
    assert stats.prompt_tokens > 3 * len(NER_SYSTEM) // 10
    g2, stats2 = build(cache_dir=tmp_path)
    assert (stats2.llm_calls, stats2.prompt_tokens, stats2.completion_tokens) == (0, 0, 0)
    assert stats2.cached == 3


def test_token_count_fallback_without_tiktoken(monkeypatch, caplog):
    monkeypatch.setattr(llm_extract, "_ENCODER", None)
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import fails
    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.build"):
        count = llm_extract._token_counter()
    assert count("one two three") == 4
    assert any("tiktoken" in r.getMessage() for r in caplog.records)


def test_stats_dataclass_defaults():
    s = ExtractionStats()
    assert s.to_dict()["llm_calls"] == 0 and s.seconds == 0.0


# --------------------------------------------------------------------------- structured outputs


def test_ner_and_re_declare_their_schemas_to_a_backend_that_enforces_them():
    """A backend with ``supports_schema`` gets NER_SCHEMA / RE_SCHEMA with each call and has every
    reply counted as constrained; the scripted replies (the prompts' shapes) match the schemas'
    regexes in full, and a reply outside them (a fifth alias, an unknown type) does not."""
    seen: list[tuple[str, bool]] = []
    llm = make_llm()
    calls: list[str] = []

    class Enforcing:
        supports_schema = True

        def complete(self, messages, **kw):
            calls.append(kw["schema"].name)
            return llm.complete(messages, **{k: v for k, v in kw.items() if k != "schema"})

        async def acomplete(self, messages, **kw):
            return self.complete(messages, **kw)

        def record_reply(self, step, valid, constrained):
            seen.append((step, valid and constrained))

    g, stats = build(llm=Enforcing())
    assert stats.fallback_chunks == 0 and len(g.entity_ids) == 6
    assert calls.count("llm_extract_ner") == 3 and calls.count("llm_extract_re") == 3
    assert sorted(seen) == [("ner", True)] * 3 + [("re", True)] * 3  # chunks run on worker threads

    ner_rx, re_rx = llm_extract.NER_SCHEMA.to_regex(), llm_extract.RE_SCHEMA.to_regex()
    for reply in NER_REPLIES.values():
        assert re.fullmatch(ner_rx, reply), reply
    for reply in RE_REPLIES.values():
        assert re.fullmatch(re_rx, reply), reply
    assert not re.fullmatch(ner_rx, ner(ent("A", aliases=["b", "c", "d", "e", "f"])))
    assert not re.fullmatch(ner_rx, ner(ent("A", etype="DATE")))
    assert not re.fullmatch(re_rx, rel(["a", "b"]))


def test_a_backend_without_schemas_gets_no_schema_argument():
    kwargs: list[dict] = []
    llm = make_llm()

    class Plain:
        def complete(self, messages, **kw):
            kwargs.append(kw)
            return llm.complete(messages, **kw)

        async def acomplete(self, messages, **kw):
            return self.complete(messages, **kw)

    build(llm=Plain())
    assert kwargs and all("schema" not in kw and kw["max_tokens"] == 2048 for kw in kwargs)
