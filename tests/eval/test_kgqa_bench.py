"""``kgrag bench`` on a KGQA dataset (MetaQA format) and ``kgrag train path-ranker``, end to end.

A tiny MetaQA-format data directory is written from a hand-made one-way movie KG (``kb.txt``,
``subject|relation|object``, entity id = name) with questions whose answers are computed from the
KG by following their relation chain (set semantics, the topic removed). Every film has its own
release year, so the 3-hop answers ("years of the films that share a director / an actor with
[F]") are all three undirected hops from the topic: FRAG's simple pipeline (paths of at most two
hops) cannot reach them, by construction (checked with networkx below).
"""

from __future__ import annotations

import json
import time
from collections import Counter

import networkx as nx
import numpy as np
import pytest
from movie_kg import movie_triples

from kgrag_plugins.cli import main
from kgrag_plugins.datasets.loaders import load_dataset
from kgrag_plugins.eval import kgqa
from kgrag_plugins.eval.bench import markdown_table, run_bench
from kgrag_plugins.eval.kgqa import KGQA_RETRIEVERS, split_questions
from kgrag_plugins.index.importers import load_kg
from kgrag_plugins.methods.frag.path_ranker import PathRanker

# film, director, actors, writers, year, genres, language
MOVIES = [
    ("Big", "Penny Marshall", ["Tom Hanks"], ["Gary Ross"], "1988", ["Comedy"], "English"),
    (
        "A League of Their Own",
        "Penny Marshall",
        ["Tom Hanks", "Geena Davis"],
        ["Lowell Ganz"],
        "1992",
        ["Comedy"],
        "English",
    ),
    ("Awakenings", "Penny Marshall", ["Robin Williams"], ["Steven Zaillian"], "1990", ["Drama"], "English"),
    ("Cast Away", "Robert Zemeckis", ["Tom Hanks"], ["William Broyles"], "2000", ["Drama"], "English"),
    ("Forrest Gump", "Robert Zemeckis", ["Tom Hanks", "Robin Wright"], ["Eric Roth"], "1994", ["Drama"], "English"),
    ("Back to the Future", "Robert Zemeckis", ["Michael J. Fox"], ["Bob Gale"], "1985", ["Science Fiction"], "English"),
    ("Contact", "Robert Zemeckis", ["Jodie Foster"], ["James V. Hart"], "1997", ["Drama"], "Navajo"),
    (
        "Beetlejuice",
        "Tim Burton",
        ["Geena Davis", "Michael Keaton"],
        ["Michael McDowell"],
        "1987",
        ["Comedy"],
        "English",
    ),
    ("Batman", "Tim Burton", ["Michael Keaton"], ["Sam Hamm"], "1989", ["Action"], "English"),
    ("Ed Wood", "Tim Burton", ["Johnny Depp"], ["Scott Alexander"], "1995", ["Drama"], "English"),
    ("Annie Hall", "Woody Allen", ["Diane Keaton"], ["Woody Allen"], "1977", ["Comedy"], "English"),
    ("Manhattan", "Woody Allen", ["Diane Keaton", "Mariel Hemingway"], ["Woody Allen"], "1979", ["Drama"], "English"),
    ("Jaws", "Steven Spielberg", ["Roy Scheider"], ["Peter Benchley"], "1975", ["Thriller"], "English"),
    ("Schindler's List", "Steven Spielberg", ["Liam Neeson"], ["Steven Zaillian"], "1993", ["Drama"], "German"),
]


def _triples() -> list[tuple[str, str, str]]:
    out = movie_triples(MOVIES)
    return out


TRIPLES = _triples()
FILMS = [m[0] for m in MOVIES]
ACTORS = sorted({a for m in MOVIES for a in m[2]})
DIRECTORS = sorted({m[1] for m in MOVIES})
WRITERS = sorted({w for m in MOVIES for w in m[3]})

# hops -> [(question template, topics, relation chain (~ = inverse), qtype)]
TEMPLATES = {
    1: [
        ("who directed [{}]", FILMS, ["directed_by"], "movie_to_director"),
        ("when was [{}] released", FILMS, ["release_year"], "movie_to_year"),
        ("what language is [{}] in", FILMS, ["in_language"], "movie_to_language"),
        ("which movies did [{}] star in", ACTORS, ["~starred_actors"], "actor_to_movie"),
    ],
    2: [
        ("who directed the films starred by [{}]", ACTORS, ["~starred_actors", "directed_by"], "actor_to_director"),
        ("what genres are the films directed by [{}]", DIRECTORS, ["~directed_by", "has_genre"], "director_to_genre"),
        (
            "who acted in the movies directed by [{}]",
            DIRECTORS,
            ["~directed_by", "starred_actors"],
            "director_to_actor",
        ),
        ("the films written by [{}] were released in which years", WRITERS, ["~written_by", "release_year"], "w_to_y"),
    ],
    3: [
        (
            "the films that share directors with the film [{}] were released in which years",
            FILMS,
            ["directed_by", "~directed_by", "release_year"],
            "movie_to_director_to_movie_to_year",
        ),
        (
            "the films that share actors with the film [{}] were released in which years",
            FILMS,
            ["starred_actors", "~starred_actors", "release_year"],
            "movie_to_actor_to_movie_to_year",
        ),
    ],
}
PER_HOP = 12


def _ends(topic: str, chain: list[str]) -> set[str]:
    """The end set of a relation chain from ``topic`` (set semantics, the topic removed)."""
    nodes = {topic}
    for step in chain:
        inv, rel = step.startswith("~"), step.lstrip("~")
        nodes = {(h if inv else t) for h, r, t in TRIPLES if r == rel and (t if inv else h) in nodes} - {topic}
    return nodes


def _distances(topic: str) -> dict[str, int]:
    g = nx.Graph()
    g.add_edges_from((h, t) for h, _, t in TRIPLES)
    return nx.single_source_shortest_path_length(g, topic)


def _questions(hops: int) -> list[dict]:
    """``PER_HOP`` questions, round-robin over the hop's templates; a 3-hop question is kept only
    when every answer is exactly three undirected hops from its topic."""
    pools = []
    for template, topics, chain, qtype in TEMPLATES[hops]:
        pool = []
        for topic in topics:
            answers = _ends(topic, chain)
            if not answers or (hops == 3 and min(_distances(topic)[a] for a in answers) < 3):
                continue
            pool.append(
                {
                    "id": f"metaqa-{hops}hop-{qtype}-{topic}",
                    "question": template.format(topic),
                    "topic_entity": topic,
                    "answers": sorted(answers),
                    "hops": hops,
                    "qtype": qtype,
                    "answers_reachable_in_kb": 1.0,
                }
            )
        pools.append(pool)
    out = []
    while len(out) < PER_HOP:
        progress = False
        for pool in pools:
            if pool and len(out) < PER_HOP:
                out.append(pool.pop(0))
                progress = True
        assert progress, f"not enough {hops}-hop questions in the hand-made KG"
    return out


def _write_metaqa(root) -> dict[int, list[dict]]:
    d = root / "metaqa"
    d.mkdir(parents=True)
    (d / "kb.txt").write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in TRIPLES), encoding="utf-8")
    rows = {h: _questions(h) for h in (1, 2, 3)}
    extra = {
        1: {  # excluded: half of its answers are not in the KB
            "id": "metaqa-1hop-unreachable",
            "question": "who directed [Jaws]",
            "topic_entity": "Jaws",
            "answers": ["Steven Spielberg", "Someone Not In The KB"],
            "hops": 1,
            "qtype": "movie_to_director",
            "answers_reachable_in_kb": 0.5,
        },
        2: {  # excluded: the topic entity is not in the KB
            "id": "metaqa-2hop-unknown-topic",
            "question": "who directed the films starred by [Meryl Streep]",
            "topic_entity": "Meryl Streep",
            "answers": ["Steven Spielberg"],
            "hops": 2,
            "qtype": "actor_to_director",
            "answers_reachable_in_kb": 1.0,
        },
    }
    for h, qs in rows.items():
        lines = [json.dumps(q) for q in qs + ([extra[h]] if h in extra else [])]
        (d / f"questions_{h}hop.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def metaqa_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("kgqa-data")
    rows = _write_metaqa(root)
    return root, rows


@pytest.fixture(scope="module")
def bench(metaqa_dir):
    """One ``run_bench`` of the four KGQA retrievers, recording which questions each model was
    trained on and which questions each retriever was evaluated on."""
    from kgrag_plugins.methods.frag.hop_classifier import HopClassifier
    from kgrag_plugins.train import path as train_path

    root, _ = metaqa_dir
    seen: dict = {"ranker": [], "classifier": [], "evaluated": {}}
    train_ranker, evaluate, fit = train_path.train_path_ranker, kgqa.evaluate_kgqa, HopClassifier.fit

    def recording_train(graph, questions, **kw):
        seen["ranker"].append([q.id for q in questions])
        return train_ranker(graph, questions, **kw)

    def recording_evaluate(retriever, questions, **kw):
        seen["evaluated"][retriever.name] = [q.id for q in questions]
        return evaluate(retriever, questions, **kw)

    def recording_fit(self, texts, labels, *a, **kw):
        seen["classifier"].append(list(texts))
        return fit(self, texts, labels, *a, **kw)

    out = root / "out" / "r.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_path, "train_path_ranker", recording_train)
        mp.setattr(kgqa, "evaluate_kgqa", recording_evaluate)
        mp.setattr(HopClassifier, "fit", recording_fit)
        t0 = time.perf_counter()
        report = run_bench(
            "metaqa",
            ["frag", "frag-zeroshot-simple", "frag-zeroshot-complex", "frag-zeroshot"],
            data_dir=root,
            per_hop=4,
            train_per_hop=8,
            progress=False,
            out=out,
        )
        seen["seconds"] = time.perf_counter() - t0
    return report, out, seen


# --------------------------------------------------------------------------- 6. the KGQA report


def test_dataset_is_what_the_loader_reads(metaqa_dir):
    root, rows = metaqa_dir
    ds = load_dataset("metaqa", data_dir=root)
    assert ds.corpus is None and ds.kb_path == root / "metaqa" / "kb.txt"
    assert Counter(q.hops for q in ds.questions) == {1: PER_HOP + 1, 2: PER_HOP + 1, 3: PER_HOP}
    graph, _ = load_kg(ds.kb_path, "metaqa", progress=False)
    assert graph.num_triples == len(TRIPLES)
    for h, qs in rows.items():  # answers are KG entities; 3-hop ones out of the simple pipeline's reach
        for q in qs:
            assert q["topic_entity"] in graph and all(a in graph for a in q["answers"])
            if h == 3:
                assert min(_distances(q["topic_entity"])[a] for a in q["answers"]) == 3


def test_kgqa_report_shape_and_metric_ranges(bench):
    report, _, _ = bench
    assert report["task"] == "kgqa" and report["dataset"] == "metaqa"
    assert report["excluded"] == {"answers_not_reachable_in_kb": 1, "topic_entity_not_in_kb": 1}
    assert report["n_questions"] == 12 and report["n_train"] == 24
    assert report["kg"]["triples"] == len(TRIPLES) and report["kg"]["relations"] == 6
    assert set(report["results"]) == {"frag", "frag-zeroshot-simple", "frag-zeroshot-complex", "frag-zeroshot"}
    assert report["path_ranker"]["questions"] == 24 and report["path_ranker"]["labelled"] >= 20
    assert report["hop_classifier"]["train"] == 24
    # every answer set here is a whole chain end set, so the KB's Hits@1 ceiling is 1 on every hop
    ceiling = report["hits@1_ceiling"]
    assert ceiling["by_hops"] == {"1": 1.0, "2": 1.0, "3": 1.0} and ceiling["overall"] == 1.0
    assert (ceiling["below_1"], ceiling["unlabelled"]) == (0, 0)
    for name, r in report["results"].items():
        assert r["n"] == 12, name
        for block in [r] + list(r["by_hops"].values()):
            for m in ("hits@1", "answer_coverage@32", "end_coverage@32"):
                assert 0.0 <= block[m] <= 1.0, (name, m)
            assert block["answer_coverage@32"] >= block["end_coverage@32"], name
        assert set(r["by_hops"]) == {"1", "2", "3"}, name
        assert all(b["n"] == 4 for b in r["by_hops"].values()), name
        assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p95"], name
        # overall figures are the mean of the (equal-sized) per-hop ones
        for m in ("hits@1", "answer_coverage@32"):
            assert r[m] == pytest.approx(np.mean([b[m] for b in r["by_hops"].values()]), abs=1e-3), (name, m)
    routed = {n for n, r in report["results"].items() if "routing_accuracy" in r}
    assert routed == {"frag", "frag-zeroshot"}
    for n in routed:
        assert 0.0 <= report["results"][n]["routing_accuracy"] <= 1.0
    assert report["results"]["frag-zeroshot-simple"]["routed_complex"] == 0.0
    assert report["results"]["frag-zeroshot-complex"]["routed_complex"] == 1.0


def test_simple_pipeline_cannot_reach_three_hop_answers(bench):
    report, _, _ = bench
    simple = report["results"]["frag-zeroshot-simple"]["by_hops"]["3"]
    assert simple["end_coverage@32"] == 0.0 and simple["answer_coverage@32"] == 0.0 and simple["hits@1"] == 0.0
    # the complex pipeline walks four hops and does reach them; one hop is in reach of everyone
    assert report["results"]["frag-zeroshot-complex"]["by_hops"]["3"]["answer_coverage@32"] > 0.0
    for name in ("frag-zeroshot-simple", "frag-zeroshot-complex"):
        assert report["results"][name]["by_hops"]["1"]["answer_coverage@32"] == 1.0, name


def test_training_and_evaluation_questions_are_disjoint(bench, metaqa_dir):
    report, _, seen = bench
    root, _ = metaqa_dir
    ds = load_dataset("metaqa", data_dir=root)
    graph, _ = load_kg(ds.kb_path, "metaqa", progress=False)
    evaluation, train, excluded = split_questions(ds, graph, per_hop=4, train_per_hop=8)
    eval_ids, train_ids = {q.id for q in evaluation}, {q.id for q in train}
    assert len(eval_ids) == 12 and len(train_ids) == 24 and not eval_ids & train_ids
    assert excluded == report["excluded"]
    assert Counter(q.hops for q in evaluation) == {1: 4, 2: 4, 3: 4}
    assert not {"metaqa-1hop-unreachable", "metaqa-2hop-unknown-topic"} & (eval_ids | train_ids)

    # what the bench did: every retriever saw the evaluation sample, the models only the rest
    assert set(seen["evaluated"]) == set(report["results"])
    assert all(set(ids) == eval_ids for ids in seen["evaluated"].values())
    assert len(seen["ranker"]) == 1 and set(seen["ranker"][0]) == train_ids
    assert len(seen["classifier"]) == 1
    by_text = {q.question.replace("[", "").replace("]", "") for q in train}
    assert set(seen["classifier"][0]) == by_text


def test_report_is_written_and_tabulated(bench):
    report, out, seen = bench
    assert json.loads(out.read_text(encoding="utf-8")) == report
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]
    table = markdown_table(report)
    for name in report["results"]:
        assert f"| {name} |" in table
    assert "1-hop" in table and "3-hop" in table
    assert table.count("\n| frag") == 4
    assert "Hits@1 ceiling of the KB" in table and "1.000 (1-hop 1.000, 2-hop 1.000, 3-hop 1.000)" in table
    print(f"tiny KGQA bench (4 retrievers, 12 questions, training included): {seen['seconds']:.1f}s")


def test_cli_trains_on_train_per_hop_questions_by_default():
    from kgrag_plugins.cli import build_parser

    args = build_parser().parse_args(["bench", "--dataset", "metaqa", "--retrievers", "frag"])
    assert args.train_per_hop == kgqa.TRAIN_PER_HOP == 3000


def test_unknown_kgqa_retriever_lists_the_available_ones(metaqa_dir):
    root, _ = metaqa_dir
    with pytest.raises(ValueError, match="telepathy") as e:
        run_bench("metaqa", ["frag", "telepathy"], data_dir=root, progress=False)
    for name in KGQA_RETRIEVERS:
        assert name in str(e.value)


# --------------------------------------------------------------------------- 7. CLI


def test_cli_bench_on_a_kgqa_dataset(metaqa_dir, tmp_path, capsys):
    root, _ = metaqa_dir
    out = tmp_path / "cli.json"
    argv = ["bench", "--dataset", "metaqa", "--data-dir", str(root), "--retrievers", "frag-zeroshot-simple"]
    code = main(argv + ["--per-hop", "3", "--train-per-hop", "6", "--quiet", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "| frag-zeroshot-simple |" in printed and "1-hop" in printed and "(KGQA)" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["task"] == "kgqa" and report["n_questions"] == 9 and report["n_train"] == 18
    assert set(report["results"]) == {"frag-zeroshot-simple"}

    assert main(argv[:-1] + ["nope", "--quiet"]) == 2
    assert "unknown KGQA retriever" in capsys.readouterr().err


def test_cli_train_path_ranker(metaqa_dir, tmp_path, capsys):
    from kgrag_plugins.models.embed import default_embedder

    root, _ = metaqa_dir
    out = tmp_path / "pr.npz"
    argv = ["train", "path-ranker", "--dataset", "metaqa", "--data-dir", str(root), "--out", str(out)]
    assert main(argv + ["--limit", "30"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert out.is_file() and report["out"] == str(out) and report["dataset"] == "metaqa"
    assert report["questions"] == 30 and report["labelled"] + report["no_topic"] + report["no_chain"] == 30
    assert report["train"] + report["held_out"] == report["labelled"]
    ranker = PathRanker.load(out, embedder=default_embedder())
    assert len(ranker) == report["chains"] >= 2
    relations = {r for _, r, _ in TRIPLES}
    assert all(1 <= len(c) <= 3 and {s.lstrip("~") for s in c} <= relations for c in ranker.chains)
    assert {len(c) for c in ranker.chains} == {1, 2, 3}  # the sample is balanced over hop counts
    three_hop = ("directed_by", "~directed_by", "release_year")
    assert three_hop in ranker
    assert ranker.predict(["the films that share directors with the film it were released in which years"]) == [
        three_hop
    ]

    # a dataset without a KG is refused with a clear message
    (root / "popqa").mkdir(exist_ok=True)
    (root / "popqa" / "questions.jsonl").write_text('{"id": "1", "question": "q", "answers": ["a"]}\n')
    (root / "popqa" / "corpus.jsonl").write_text('{"id": "p", "title": "t", "text": "x"}\n')
    assert main(["train", "path-ranker", "--dataset", "popqa", "--data-dir", str(root), "--out", str(out)]) == 2
    assert "no knowledge graph" in capsys.readouterr().err


# --------------------------------------------------------------------------- 8. the real MetaQA


def test_frag_complex_on_real_metaqa(data_dir):
    t0 = time.perf_counter()
    report = run_bench(
        "metaqa", ["frag-ranked-complex"], data_dir=data_dir, per_hop=20, train_per_hop=150, progress=False
    )
    seconds = time.perf_counter() - t0
    r = report["results"]["frag-ranked-complex"]
    print(f"real MetaQA frag-ranked-complex (60 questions, 450 training): {seconds:.1f}s; {json.dumps(r['by_hops'])}")
    assert report["n_questions"] == 60 and report["n_train"] == 450
    assert report["excluded"]["topic_entity_not_in_kb"] == 0
    assert report["path_ranker"]["labelled"] >= 400
    assert r["answer_coverage@32"] >= 0.8
    assert r["by_hops"]["1"]["answer_coverage@32"] >= 0.9
    assert all(r["by_hops"][h]["n"] == 20 for h in ("1", "2", "3"))
