"""Know³ KG completion on KGQA (issue 15 item 6): ``--kb-keep`` and ``know3:frag``.

A synthetic one-way movie KB (MetaQA's ``kb.txt`` layout) with strong regularities a KG
embedding can learn: every film is written by its director and stars two of the director's
regular actors. Removing a film's ``directed_by`` triple leaves a fact the KGE can recover
(from ``written_by`` and the cast), which is what the completion tests check.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from conftest import HashEmbedder, graph_from_triples
from movie_kg import movie_triples

from kgrag_plugins.cli import main
from kgrag_plugins.eval.kgqa import run_kgqa_bench
from kgrag_plugins.eval.kgqa_know3 import keep_kb, kge_for_kb, split_kb
from kgrag_plugins.index.graph import KnowledgeGraph

DIRECTORS = [f"Director {c}" for c in "ABCDEFGH"]
GENRES = ["Drama", "Comedy", "Action", "Thriller"]


def _movies() -> list[tuple]:
    out = []
    for d, director in enumerate(DIRECTORS):
        cast = [f"Actor {d}{i}" for i in range(3)]
        for f in range(3):
            film = f"Film {d}{f}"
            actors = [cast[f], cast[(f + 1) % 3]]
            out.append((film, director, actors, [director], str(1960 + 3 * d + f), [GENRES[d % 4]], "English"))
    return out


MOVIES = _movies()
TRIPLES = movie_triples(MOVIES)
FILMS = [m[0] for m in MOVIES]
ACTORS = sorted({a for m in MOVIES for a in m[2]})


def _set(graph: KnowledgeGraph) -> set[tuple[str, str, str]]:
    return {(t.head, t.relation, t.tail) for t in graph.triples()}


# --------------------------------------------------------------------------- the kept KB


def test_split_is_deterministic_disjoint_and_complete():
    kept, removed = split_kb(1001, 0.5, seed=0)
    kept2, removed2 = split_kb(1001, 0.5, seed=0)
    assert np.array_equal(kept, kept2) and np.array_equal(removed, removed2)
    assert len(kept) == 500 and len(removed) == 501  # round(500.5) = 500 (banker's rounding)
    assert not np.intersect1d(kept, removed).size
    assert np.array_equal(np.sort(np.concatenate([kept, removed])), np.arange(1001))
    other, _ = split_kb(1001, 0.5, seed=1)
    assert not np.array_equal(kept, other)
    assert len(split_kb(10, 1.0)[0]) == 10 and not len(split_kb(10, 1.0)[1])
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="kb_keep"):
            split_kb(10, bad)


def test_kept_graph_has_no_removed_triple_and_keeps_every_entity():
    full = graph_from_triples(TRIPLES)
    kept, report = keep_kb(full, 0.5, seed=3)
    again, _ = keep_kb(full, 0.5, seed=3)
    assert _set(kept) == _set(again)
    rows_kept, rows_removed = split_kb(full.num_triples, 0.5, seed=3)
    all_triples = [(t.head, t.relation, t.tail) for t in full.triples()]
    removed = {all_triples[i] for i in rows_removed}
    assert _set(kept) == {all_triples[i] for i in rows_kept}
    assert not _set(kept) & removed and _set(kept) | removed == set(all_triples)
    assert report["triples_kept"] == kept.num_triples == len(rows_kept)
    assert report["triples_removed"] == len(removed) and report["triples_full"] == len(TRIPLES)
    assert kept.entity_ids == full.entity_ids and kept.relations == full.relations
    h, _, t = kept.triple_arrays()
    deg = np.bincount(np.concatenate([h, t]), minlength=kept.num_entities)
    assert report["isolated_entities"] == int((deg == 0).sum()) > 0
    same, rep1 = keep_kb(full, 1.0)
    assert same is full and rep1["triples_removed"] == 0


# --------------------------------------------------------------------------- the KGE for the kept KB

KGE_FAST = {
    "model": "complex",
    "dim": 32,
    "epochs": 15,
    "patience": 100,
    "batch_size": 64,
    "negatives": 32,
    "valid_fraction": 0.0,
}


@pytest.fixture(scope="module")
def toy_kge(tmp_path_factory):
    """A KGE trained (through the bench's cache) on the KB without two directors' facts:
    ``Film 00 directed_by Director A`` and every ``directed_by`` of Director H."""
    missing = {("Film 00", "directed_by", "Director A")} | {
        (f, "directed_by", "Director H") for f in ("Film 70", "Film 71", "Film 72")
    }
    graph = graph_from_triples([t for t in TRIPLES if t not in missing])
    for e in {x for tr in missing for x in (tr[0], tr[2])}:
        assert e in graph
    cache = tmp_path_factory.mktemp("kge-cache")
    seen: list = []
    from kgrag_plugins.models import kge as kge_module

    real = kge_module.train_kge

    def recording(triples, **kw):
        seen.append(list(triples))
        return real(triples, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kge_module, "train_kge", recording)
        model, report = kge_for_kb(
            graph, dataset="toy", kb_keep=0.9, cache_dir=cache, train_kwargs={**KGE_FAST, "seed": 0}, progress=False
        )
        report["calls"] = len(seen)  # train_kge may call itself (e.g. to set torch threads)
        again, report2 = kge_for_kb(
            graph, dataset="toy", kb_keep=0.9, cache_dir=cache, train_kwargs={**KGE_FAST, "seed": 0}, progress=False
        )
    return graph, missing, model, report, again, report2, seen


def test_kge_is_trained_on_the_kept_triples_only_and_cached(toy_kge):
    graph, missing, model, report, again, report2, seen = toy_kge
    assert len(seen) == report["calls"] >= 1, "the second call must load the cached model, not train again"
    assert all(set(s) == _set(graph) and not set(s) & missing for s in seen)
    assert report["loaded_from_cache"] is False and report2["loaded_from_cache"] is True
    assert report["train_triples"] == graph.num_triples and report["train_seconds"] > 0
    assert report2["train_seconds"] == report["train_seconds"] and report2["path"] == report["path"]
    assert "toy-keep0.9-seed0-complex" in report["path"]
    tr = ("Film 10", "directed_by", "Director B")
    assert again.score(*tr) == pytest.approx(model.score(*tr), abs=1e-6)


def test_completion_recovers_the_missing_director(toy_kge):
    from kgrag_plugins.methods.know3.completion import ChainCompleter
    from kgrag_plugins.methods.know3.scoring import TripleVerifier

    graph, _, model, _, _, _, _ = toy_kge
    completer = ChainCompleter(graph, model, TripleVerifier(model, graph), top_k=3)
    # a tail the KB lacks: predicted, typed (a director), verified
    comps = completer.walk("Film 00", ["directed_by"])
    assert comps and comps[0].answer == "Director A" and comps[0].predicted == [True]
    assert all(c.answer in DIRECTORS for c in comps) and len(comps) == 3
    assert comps[0].verifier is not None
    # heads the KB lacks (inverse step): Director H's films
    films = completer.walk("Director H", ["~directed_by"])
    assert {c.answer for c in films} == {"Film 70", "Film 71", "Film 72"}
    assert all(c.predicted == [True] for c in films)
    # where the KB has the edge, no prediction is made
    kb = completer.walk("Film 10", ["directed_by"])
    assert [(c.answer, c.predicted) for c in kb] == [("Director B", [False])]
    # two hops, the first predicted: the years of Director H's films
    years = completer.walk("Director H", ["~directed_by", "release_year"])
    assert {c.answer for c in years} == {"1981", "1982", "1983"}
    assert all(c.predicted == [True, False] for c in years)
    # unknown relation / entity: nothing
    assert completer.walk("Film 00", ["no_such_relation"]) == [] and completer.walk("Nobody", ["directed_by"]) == []


def test_prior_and_local_candidates_reorder_predictions(toy_kge):
    from kgrag_plugins.methods.know3.completion import ChainCompleter

    graph, _, model, _, _, _, _ = toy_kge
    completer = ChainCompleter(graph, model, top_k=40)
    row = graph.index_of("Film 00")
    plain = completer.predict(row, "directed_by")
    # every director is a candidate, the log-scores are a distribution over them
    assert {graph.entity_ids[w] for w, _ in plain} == set(DIRECTORS)
    assert sum(np.exp(lp) for _, lp in plain) == pytest.approx(1.0, abs=1e-6)
    # a huge local bonus puts the film's KB neighbours of that type first: its writer
    local = completer.predict(row, "directed_by", local_bonus=100.0)
    assert graph.entity_ids[local[0][0]] == "Director A"
    # the prior follows KB frequency: "English" (every film) beats any other language
    lang = completer.predict(graph.index_of("Film 10"), "in_language", prior_weight=100.0)
    assert graph.entity_ids[lang[0][0]] == "English"


def test_mined_rules_steer_predictions_of_an_untrained_kge(toy_kge):
    """``path_rules`` (docs/kge.md "Mined rules"): every toy film is written by its director, so the
    rule ``directed_by(x,y) <= written_by(x,y)`` recovers the missing edge even when the KGE is
    random; with ``rule_weight`` 0 the rules are not used."""
    from kgrag_plugins.methods.know3.completion import ChainCompleter
    from kgrag_plugins.models.kge import KGEModel
    from kgrag_plugins.models.kge_rules import PathRules

    graph = toy_kge[0]
    rng = np.random.default_rng(3)
    rels = list(graph.relations)
    noise = KGEModel(
        "complex", list(graph.entity_ids), rels,
        rng.normal(size=(graph.num_entities, 16)), rng.normal(size=(2 * len(rels), 16)),
    )  # fmt: skip
    rules = PathRules.from_graph(graph, min_support=3)
    d, w = rels.index("directed_by"), rels.index("written_by")
    assert any(r.body == (w,) for r in rules.rules_for(d))
    completer = ChainCompleter(graph, noise, top_k=8, path_rules=rules)
    row = graph.index_of("Film 00")
    ruled = completer.predict(row, "directed_by", rule_weight=1000.0)
    assert graph.entity_ids[ruled[0][0]] == "Director A" and np.exp(ruled[0][1]) > 0.99
    plain = completer.predict(row, "directed_by")
    assert np.exp(plain[0][1]) < 0.99 and plain != ruled
    # the walk passes the weight through: Director H's films from their writer edges
    films = completer.walk("Director H", ["~directed_by"], rule_weight=1000.0)
    assert {c.answer for c in films[:3]} == {"Film 70", "Film 71", "Film 72"}
    # rules mined from another graph are refused
    other = PathRules.mine(np.array([0]), np.array([0]), np.array([1]), num_entities=2, num_relations=1)
    with pytest.raises(ValueError, match="PathRules.from_graph"):
        ChainCompleter(graph, noise, path_rules=other)


def test_know3_frag_retriever_merges_completions_kb_first(toy_kge):
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.frag import FRAGRetriever
    from kgrag_plugins.methods.frag.path_ranker import PathRanker
    from kgrag_plugins.methods.know3.completion import ChainCompleter, Know3FRAGRetriever, MergeRule
    from kgrag_plugins.methods.know3.scoring import TripleVerifier

    graph, _, model, _, _, _, _ = toy_kge
    emb = HashEmbedder()
    index = KnowledgeIndex.build([], graph=graph, embedder=emb, progress=False)
    ranker = PathRanker(emb).fit(
        ["who directed it", "who wrote it", "when was it released", "which films did it direct"],
        [("directed_by",), ("written_by",), ("release_year",), ("~directed_by",)],
    )
    frag = FRAGRetriever(index, mode="simple", path_ranker=ranker)
    completer = ChainCompleter(graph, model, TripleVerifier(model, graph))
    k3 = Know3FRAGRetriever(frag, completer, rules={1: MergeRule(0.0, 0.0, None)})
    # the KB lacks the asked relation: the completion answers, before FRAG's own answers
    ev = k3.retrieve("who directed [Film 00]", 5)
    assert ev.trace["predicted_chain"] == ["directed_by"] and ev.trace["chain_in_kb"] is False
    assert ev.trace["answer_source"] == "completion" and ev.trace["answers"][0] == "Director A"
    frag_answers = frag.retrieve("who directed [Film 00]", 5).trace["answers"]
    completed = [c["answer"] for c in ev.trace["completions"]]
    assert len(completed) == 3 and ev.trace["answers"] == list(dict.fromkeys(completed + frag_answers))
    assert ev.facts[0].kind == "completion" and ev.facts[0].data["predicted"] == [True]
    assert "Director A" in ev.facts[0].text and ev.trace["completions"][0]["answer"] == "Director A"
    # the KB has it: FRAG's answers, untouched
    ev = k3.retrieve("who directed [Film 10]", 5)
    assert ev.trace["chain_in_kb"] is True and ev.trace["answer_source"] == "paths"
    assert ev.trace["answers"] == frag.retrieve("who directed [Film 10]", 5).trace["answers"]
    # a gate that rejects everything, or no rule for the chain length: FRAG's answers
    k3.rules = {1: MergeRule(0.0, 0.0, -1.0)}
    ev = k3.retrieve("who directed [Film 00]", 5)
    assert ev.trace["answer_source"] == "paths" and "rejected" in ev.trace["completion"]
    assert ev.trace["answers"] == frag_answers and all(f.kind == "path" for f in ev.facts)
    k3.rules = {1: MergeRule(0.0, 0.0, None, min_chain_prob=1.01)}
    ev = k3.retrieve("who directed [Film 00]", 5)
    assert ev.trace["answer_source"] == "paths" and "chain probability below" in ev.trace["completion"]
    k3.rules = {}
    ev = k3.retrieve("who directed [Film 00]", 5)
    assert ev.trace["answer_source"] == "paths" and "no merge rule" in ev.trace["completion"]


def test_know3_frag_relaxed_rule_bridges_a_missing_inner_hop(toy_kge):
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.frag import FRAGRetriever
    from kgrag_plugins.methods.frag.path_ranker import PathRanker
    from kgrag_plugins.methods.know3.completion import ChainCompleter, Know3FRAGRetriever, MergeRule
    from kgrag_plugins.methods.know3.relaxed import RelaxedWalker

    graph, _, model, _, _, _, _ = toy_kge
    emb = HashEmbedder()
    index = KnowledgeIndex.build([], graph=graph, embedder=emb, progress=False)
    ranker = PathRanker(emb).fit(
        ["who directed it", "what genres are the films directed by it", "which films did it direct"],
        [("directed_by",), ("~directed_by", "has_genre"), ("~directed_by",)],
    )
    frag = FRAGRetriever(index, mode="simple", path_ranker=ranker)
    rule = MergeRule(0.0, 0.0, None, relax_eps=0.1)
    assert rule.relaxed and "relaxed walk" in rule.name and rule.to_dict()["relax_eps"] == 0.1
    k3 = Know3FRAGRetriever(frag, ChainCompleter(graph, model), rules={2: rule})
    # Director H lost every directed_by triple but wrote his three films (all Thriller): the
    # relaxed walk follows written_by at the inner hop; the last hop stays has_genre
    q = "what genres are the films directed by [Director H]"
    ev = k3.retrieve(q, 5)
    assert ev.trace["predicted_chain"] == ["~directed_by", "has_genre"] and ev.trace["chain_in_kb"] is False
    assert ev.trace["answer_source"] == "relaxed" and ev.trace["relaxed_answers"] == ["Thriller"]
    frag_answers = frag.retrieve(q, 5).trace["answers"]
    assert ev.trace["answers"] == list(dict.fromkeys(["Thriller", *frag_answers]))
    assert k3.relaxed.graph is frag.graph  # built on first use
    # the KB has the chain: FRAG's answers stand
    ev = k3.retrieve("what genres are the films directed by [Director B]", 5)
    assert ev.trace["chain_in_kb"] is True and ev.trace["answer_source"] == "paths"
    # a walker over another graph is refused
    with pytest.raises(ValueError, match="another graph"):
        Know3FRAGRetriever(frag, ChainCompleter(graph, model), relaxed=RelaxedWalker(graph_from_triples(TRIPLES)))


def test_completer_rebased_on_a_new_graph(toy_kge):
    """``ChainCompleter.rebased``: the same KGE and settings over the updated KB; the verifier and
    the mined rules are rebuilt from it (same method, same mining options)."""
    from kgrag_plugins.methods.know3.completion import ChainCompleter
    from kgrag_plugins.methods.know3.scoring import TripleVerifier
    from kgrag_plugins.models.kge_rules import PathRules

    graph, _, model, _, _, _, _ = toy_kge
    rules = PathRules.from_graph(graph, min_support=2, pseudo_count=1.0)
    assert rules.options["min_support"] == 2 and rules.options["pseudo_count"] == 1.0
    verifier = TripleVerifier(model, graph, method="relative")
    old = ChainCompleter(graph, model, verifier, top_k=2, beam=4, path_rules=rules)
    assert not old.kb_walk("Film 00", ["directed_by"])
    full = graph_from_triples(TRIPLES)  # the KB after the lost facts came back
    new = old.rebased(full)
    assert new.graph is full and new.kge is model and (new.top_k, new.beam) == (2, 4)
    assert new.kb_walk("Film 00", ["directed_by"])
    assert new.verifier is not verifier and new.verifier.method == "relative"
    assert new.path_rules is not rules and new.path_rules.options == rules.options
    assert new.path_rules.num_entities == full.num_entities
    # walked over the new KB edge: nothing predicted
    comps = new.walk("Film 00", ["directed_by"])
    assert comps and comps[0].n_predicted == 0 and full.name_of(comps[0].answer) == "Director A"


def test_know3_frag_follows_index_updates(toy_kge):
    """After ``add_passages`` the index holds a new graph: FRAG, the completer and the relaxed
    walker all move to it (no answer mixes the old KB with the new one), and answers stand."""
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.frag import FRAGRetriever
    from kgrag_plugins.methods.frag.path_ranker import PathRanker
    from kgrag_plugins.methods.know3.completion import ChainCompleter, Know3FRAGRetriever, MergeRule
    from kgrag_plugins.types import Passage

    graph, _, model, _, _, _, _ = toy_kge
    emb = HashEmbedder()
    index = KnowledgeIndex.build([], graph=copy.deepcopy(graph), embedder=emb, progress=False)
    ranker = PathRanker(emb).fit(
        ["who directed it", "what genres are the films directed by it", "which films did it direct"],
        [("directed_by",), ("~directed_by", "has_genre"), ("~directed_by",)],
    )
    frag = FRAGRetriever(index, mode="simple", path_ranker=ranker)
    rules = {1: MergeRule(0.0, 0.0, None), 2: MergeRule(0.0, 0.0, None, relax_eps=0.1)}
    k3 = Know3FRAGRetriever(frag, ChainCompleter(index.graph, model), rules=rules)
    qs = ["who directed [Film 00]", "what genres are the films directed by [Director H]"]
    before = [k3.retrieve(q, 5).trace for q in qs]
    assert [t["answer_source"] for t in before] == ["completion", "relaxed"]
    old_graph = index.graph
    index.add_passages([Passage("p-new", "A note on Film 00.", "note")], progress=False)
    assert index.graph is not old_graph
    after = [k3.retrieve(q, 5).trace for q in qs]
    assert k3.completer.graph is index.graph and k3.relaxed.graph is index.graph and frag.graph is index.graph
    assert [(t["answer_source"], t["answers"]) for t in after] == [(t["answer_source"], t["answers"]) for t in before]
    with pytest.raises(ValueError, match="completer was built over another graph"):
        Know3FRAGRetriever(frag, ChainCompleter(old_graph, model))


# --------------------------------------------------------------------------- the bench

QUESTION_TEMPLATES = {
    1: [
        ("who directed [{}]", FILMS, ["directed_by"]),
        ("which movies did [{}] star in", ACTORS, ["~starred_actors"]),
        ("when was [{}] released", FILMS, ["release_year"]),
    ],
    2: [
        ("who directed the films starred by [{}]", ACTORS, ["~starred_actors", "directed_by"]),
        ("what genres are the films directed by [{}]", DIRECTORS, ["~directed_by", "has_genre"]),
    ],
    3: [
        (
            "the films that share directors with the film [{}] were released in which years",
            FILMS,
            ["directed_by", "~directed_by", "release_year"],
        ),
    ],
}


def _ends(topic: str, chain: list[str]) -> set[str]:
    nodes = {topic}
    for step in chain:
        inv, rel = step.startswith("~"), step.lstrip("~")
        nodes = {(h if inv else t) for h, r, t in TRIPLES if r == rel and (t if inv else h) in nodes} - {topic}
    return nodes


def _write_metaqa(root) -> None:
    d = root / "metaqa"
    d.mkdir(parents=True)
    (d / "kb.txt").write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in TRIPLES), encoding="utf-8")
    for hops, templates in QUESTION_TEMPLATES.items():
        rows = []
        for template, topics, chain in templates:
            for topic in topics:
                answers = _ends(topic, chain)
                if answers:
                    rows.append(
                        {
                            "id": f"metaqa-{hops}hop-{len(rows)}",
                            "question": template.format(topic),
                            "topic_entity": topic,
                            "answers": sorted(answers),
                            "hops": hops,
                            "answers_reachable_in_kb": 1.0,
                        }
                    )
        (d / f"questions_{hops}hop.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def metaqa_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("know3-kgqa")
    _write_metaqa(root)
    return root


def test_know3_frag_through_the_kgqa_bench(metaqa_root, tmp_path):
    from kgrag_plugins.datasets.loaders import load_dataset

    ds = load_dataset("metaqa", data_dir=metaqa_root)
    kw = dict(per_hop=4, train_per_hop=8, progress=False, kb_keep=0.7, cache_dir=tmp_path, tune_per_hop=4)
    report = run_kgqa_bench(ds, ["frag", "know3:frag"], kge_options={**KGE_FAST, "seed": 0}, **kw)
    assert report["kb_keep"]["kb_keep"] == 0.7
    assert report["kb_keep"]["triples_kept"] + report["kb_keep"]["triples_removed"] == len(TRIPLES)
    assert report["kg"]["triples"] == report["kb_keep"]["triples_kept"] == round(0.7 * len(TRIPLES))
    iso = report["kb_keep"]["isolated_topic_entities"]
    assert set(iso["evaluation_by_hops"]) == {"1", "2", "3"}
    assert sum(iso["evaluation_by_hops"].values()) == iso["evaluation"]
    assert set(report["results"]) == {"frag", "know3:frag"}
    for name, r in report["results"].items():
        assert r["n"] == 12 and set(r["by_hops"]) == {"1", "2", "3"}, name
        assert all(b["n"] == 4 for b in r["by_hops"].values()), name
    k3 = report["results"]["know3:frag"]
    assert sum(k3["answer_sources"].values()) == 12 and set(k3["answer_sources"]) <= {"paths", "completion", "relaxed"}
    assert sum(b["answer_sources"].get("completion", 0) for b in k3["by_hops"].values()) == k3["answer_sources"].get(
        "completion", 0
    )
    assert "Know³ KG completion" in k3["retriever_config"]["additions"]
    know3 = report["know3"]
    assert know3["kge"]["loaded_from_cache"] is False and know3["kge"]["train_seconds"] > 0
    assert know3["kge"]["train_triples"] == report["kg"]["triples"]
    tuning = know3["merge_tuning"]
    assert tuning["questions"] == 12
    assert tuning["chain_in_kb"] + tuning["chain_missing"] + tuning["no_chain"] == 12
    for length, block in tuning["by_chain_length"].items():
        table = block["hits@1"]
        better = [n for n, v in block["vs_frag"].items() if v["significant"] and table[n] > table["frag alone"]]
        if block["chosen"] == "frag alone":
            assert not better
        else:
            assert block["vs_frag"][block["chosen"]]["significant"]
            assert table[block["chosen"]] == max(table[n] for n in better)
        assert (length in tuning["rules"]) == (block["chosen"] != "frag alone")
    # the KGE was cached under the bench's cache dir (reuse: test_kge_is_trained_on_the_kept_...)
    assert know3["kge"]["path"].startswith(str(tmp_path / "kge" / "metaqa-keep0.7-seed0-complex-"))
    # rules were mined from the kept KB, and the grid tried them (every length's table has a rules row)
    assert know3["path_rules"]["rules"] >= 1 and know3["path_rules"]["readable"]
    for block in tuning["by_chain_length"].values():
        assert any(", rules 1000," in name for name in block["hits@1"])
        # and the relaxed walks, both normalisations and both weights
        relaxed = [n for n in block["hits@1"] if n.startswith("relaxed walk")]
        assert len(relaxed) == 4 * 2 * 3 and any("path counts" in n for n in relaxed)
        assert any(n.startswith("relaxed walk (rules x5,") for n in relaxed)
    assert know3["relaxed_walk"]["linking_relations"] and know3["relaxed_walk"]["max_fan"] == 10.0


def test_the_bench_kge_defaults_to_the_half_kb_setting(monkeypatch):
    """Without ``kge_options`` the bench trains :data:`KB_KGE_OPTIONS` (chosen on validation
    triples, docs/kge.md); given options win."""
    from kgrag_plugins.eval import kgqa_know3

    seen = []

    class Stop(Exception):
        pass

    def fake(graph, **kw):
        seen.append(kw["train_kwargs"])
        raise Stop

    monkeypatch.setattr(kgqa_know3, "kge_for_kb", fake)
    for opts in (None, {"epochs": 1}):
        with pytest.raises(Stop):
            kgqa_know3.build_know3_frag(None, None, [], dataset="x", kb_keep=0.5, kge_options=opts)
    assert seen == [kgqa_know3.KB_KGE_OPTIONS, {"epochs": 1}]
    assert kgqa_know3.KB_KGE_OPTIONS == {"reg": 0.1, "epochs": 200, "patience": 3}


def test_merge_rule_needs_a_significant_win():
    from kgrag_plugins.eval.kgqa_know3 import _significant

    assert _significant(10, 0) and _significant(30, 10)
    assert not _significant(10, 8) and not _significant(0, 0) and not _significant(2, 0)


def test_kb_keep_evaluates_the_same_questions(metaqa_root):
    from kgrag_plugins.datasets.loaders import load_dataset
    from kgrag_plugins.eval import kgqa

    ds = load_dataset("metaqa", data_dir=metaqa_root)
    seen: dict[float, list[str]] = {}
    evaluate = kgqa.evaluate_kgqa
    for keep in (1.0, 0.5):

        def recording(retriever, questions, _keep=keep, **kw):
            seen[_keep] = [q.id for q in questions]
            return evaluate(retriever, questions, **kw)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(kgqa, "evaluate_kgqa", recording)
            report = run_kgqa_bench(
                ds, ["frag-zeroshot-simple"], per_hop=3, train_per_hop=0, progress=False, kb_keep=keep
            )
        assert report["kb_keep"]["kb_keep"] == keep and report["n_questions"] == 9
    assert len(seen[1.0]) == 9 and seen[1.0] == seen[0.5]


def test_cli_kb_keep(metaqa_root, tmp_path, capsys):
    out = tmp_path / "half.json"
    argv = ["bench", "--dataset", "metaqa", "--data-dir", str(metaqa_root), "--retrievers", "frag-zeroshot-simple"]
    assert (
        main(argv + ["--per-hop", "3", "--train-per-hop", "0", "--kb-keep", "0.5", "--quiet", "--out", str(out)]) == 0
    )
    assert "removed" in capsys.readouterr().out
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["kb_keep"]["kb_keep"] == 0.5 and report["kg"]["triples"] == round(0.5 * len(TRIPLES))
    by_hops = report["results"]["frag-zeroshot-simple"]["by_hops"]
    assert set(by_hops) == {"1", "2", "3"} and all(b["n"] == 3 for b in by_hops.values())
    assert main(argv + ["--kb-keep", "1.5", "--quiet"]) == 2
    assert "kb_keep" in capsys.readouterr().err
    # --kb-seed picks another half: the seed is reported and other triples are kept
    other = tmp_path / "half-seed1.json"
    common = ["--per-hop", "3", "--train-per-hop", "0", "--kb-keep", "0.5", "--quiet"]
    assert main(argv + common + ["--kb-seed", "1", "--out", str(other)]) == 0
    seed1 = json.loads(other.read_text(encoding="utf-8"))
    assert report["kb_keep"]["seed"] == 0 and seed1["kb_keep"]["seed"] == 1
    assert seed1["kg"]["triples"] == report["kg"]["triples"]
    assert not np.array_equal(split_kb(len(TRIPLES), 0.5, 0)[0], split_kb(len(TRIPLES), 0.5, 1)[0])
    # --tune-per-hop reaches the KGQA bench (None: the library default)
    from kgrag_plugins.eval import kgqa

    seen = []
    real = kgqa.run_kgqa_bench
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kgqa, "run_kgqa_bench", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
        assert main(argv + common + ["--tune-per-hop", "7"]) == 0
        assert main(argv + common) == 0
    assert [kw["tune_per_hop"] for kw in seen] == [7, None] and seen[0]["kb_seed"] == 0
