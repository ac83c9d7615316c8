"""KG embeddings (models/kge.py): hand-set scores, save/load, evaluator, training, canonicalisation
(Know³-RAG §3.2; docs/kge.md). Index storage and invalidation: tests/index/test_index_kge.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import require_extra

from kgrag_plugins.models.kge import (
    POOLED_RELATION,
    KGEModel,
    canonical_relation,
    looks_free_text,
    relation_map,
    train_kge,
)
from kgrag_plugins.models.kge_eval import KnownTails, both_directions, filtered_ranks, roc_auc, split_holdout

ENTS = ["a", "b", "c", "d"]
RELS = ["likes", "knows"]


def _distmult(directions: str = "tail") -> KGEModel:
    """DistMult with hand-set 2-d vectors: s(h, r, t) = sum(h * r * t)."""
    E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]], dtype=np.float32)
    R = np.array([[1.0, 2.0], [0.5, 0.5], [3.0, 0.0], [0.0, 1.0]], dtype=np.float32)  # likes, knows, ~likes, ~knows
    return KGEModel("distmult", ENTS, RELS, E, R, directions=directions)


def test_hand_set_scores_tail_and_both_directions():
    m = _distmult()
    # a=(1,0) likes=(1,2) c=(1,1): 1*1*1 + 0 = 1
    assert m.score("a", "likes", "c") == pytest.approx(1.0)
    # d=(2,-1) likes=(1,2) b=(0,1): 0 + (-1)*2*1 = -2
    assert m.score("d", "likes", "b") == pytest.approx(-2.0)
    both = _distmult("both")
    # (s(a, likes, c) + s(c, ~likes, a)) / 2 = (1 + (1*3*1 + 0)) / 2 = 2
    assert both.score("a", "likes", "c") == pytest.approx(2.0)
    # "~likes" is the reciprocal relation row
    assert m.score("c", "~likes", "a") == pytest.approx(3.0)
    assert m.relation_row("~likes") == 2 and m.relation_row("~nothing") is None


def test_complex_matches_the_complex_formula():
    rng = np.random.default_rng(0)
    E = rng.normal(size=(3, 4)).astype(np.float32)
    R = rng.normal(size=(2, 4)).astype(np.float32)
    m = KGEModel("complex", ["x", "y", "z"], ["r"], E, R, directions="tail")
    c = lambda v: v[:2] + 1j * v[2:]  # noqa: E731
    want = np.real(np.sum(c(E[0]) * c(R[0]) * np.conj(c(E[2]))))
    assert m.score("x", "r", "z") == pytest.approx(float(want), rel=1e-5)
    # "both" adds Re(<z, r^-1, conj(x)>) with the reciprocal relation row
    both = KGEModel("complex", ["x", "y", "z"], ["r"], E, R, directions="both")
    rev = np.real(np.sum(c(E[2]) * c(R[1]) * np.conj(c(E[0]))))
    assert both.score("x", "r", "z") == pytest.approx(float((want + rev) / 2), rel=1e-5)


@pytest.mark.parametrize("name", ["complex", "rotate", "transe", "distmult"])
def test_score_paths_agree(name):
    """score, score_many, score_tails and score_rows give the same numbers for every model."""
    rng = np.random.default_rng(1)
    n, d = 7, 6
    E = rng.normal(size=(n, d)).astype(np.float32)
    R = rng.normal(size=(4, d // 2 if name == "rotate" else d)).astype(np.float32)
    ids = [f"e{i}" for i in range(n)]
    m = KGEModel(name, ids, ["r", "s"], E, R)
    tails = m.score_tails("e1", "s")
    many = m.score_many([("e1", "s", e) for e in ids])
    assert np.allclose(tails, many, atol=1e-5)
    assert m.score("e1", "s", "e4") == pytest.approx(float(many[4]), abs=1e-5)


@pytest.mark.parametrize("name", ["complex", "rotate", "transe", "distmult"])
def test_scores_match_pykeen_interactions(name):
    """Our scoring functions against PyKEEN's interaction modules (the ``kge`` extra), one direction."""
    modules = require_extra("pykeen.nn.modules", "kge")
    rng = np.random.default_rng(4)
    n, d = 5, 8
    E = rng.normal(size=(n, d)).astype(np.float32)
    R = rng.normal(size=(2, d // 2 if name == "rotate" else d)).astype(np.float32)
    m = KGEModel(name, [str(i) for i in range(n)], ["r"], E, R, directions="tail")
    h, t = torch.tensor(E[[0, 1, 2]]), torch.tensor(E[[3, 4, 0]])
    r = torch.tensor(R[[0, 0, 0]])
    if name in ("complex", "rotate"):
        c = lambda x: torch.complex(*x.chunk(2, -1))  # noqa: E731
        h, t = c(h), c(t)
        r = torch.polar(torch.ones_like(r), r) if name == "rotate" else c(r)
    inter = {
        "complex": modules.ComplExInteraction(),
        "distmult": modules.DistMultInteraction(),
        "rotate": modules.RotatEInteraction(p=2),
        "transe": modules.TransEInteraction(p=2),
    }[name]
    want = inter(h, r, t).detach().numpy()
    got = m.score_many([("0", "r", "3"), ("1", "r", "4"), ("2", "r", "0")])
    assert np.allclose(got, want, atol=1e-4)


def test_unknown_ids_give_none_and_nan():
    m = _distmult()
    assert m.score("zz", "likes", "a") is None and m.score("a", "hates", "b") is None
    assert m.score_tails("a", "hates") is None
    out = m.score_many([("a", "likes", "c"), ("zz", "likes", "a"), ("a", "nope", "b")])
    assert out.dtype == np.float32 and out[0] == pytest.approx(1.0) and np.isnan(out[1:]).all()
    assert not m.has_entity("zz") and m.has_entity("a") and m.has_relation("knows") and not m.has_relation("x")


def test_predict_tails_excludes_and_orders():
    m = _distmult()
    full = m.predict_tails("a", "likes", k=4)
    scores = [s for _, s in full]
    assert scores == sorted(scores, reverse=True)
    assert {e for e, _ in full} == set(ENTS)
    top = full[0][0]
    kept = m.predict_tails("a", "likes", k=4, exclude=[top])
    assert top not in {e for e, _ in kept} and len(kept) == 3
    assert m.predict_tails("zz", "likes") == []


def test_predict_relations_ranks_by_best_tail():
    m = _distmult()
    rel = m.predict_relations("d", k=2)
    best = {r: max(m.score("d", r, e) for e in ENTS) for r in RELS}
    assert [r for r, _ in rel] == sorted(best, key=best.get, reverse=True)
    assert rel[0][1] == pytest.approx(max(best.values()))


def test_save_load_round_trip_weights_only(tmp_path):
    m = _distmult("both")
    m.relation_map = {"Likes": "likes"}
    m.save(tmp_path / "kge")
    assert sorted(p.name for p in (tmp_path / "kge").iterdir()) == ["kge.json", "weights.pt"]
    # the weights file is plain tensors: it loads with weights_only=True
    raw = torch.load(tmp_path / "kge" / "weights.pt", weights_only=True)
    assert set(raw) == {"entity", "relation"} and isinstance(raw["entity"], torch.Tensor)
    meta = json.loads((tmp_path / "kge" / "kge.json").read_text())
    assert meta["entity_ids"] == ENTS and meta["relation_map"] == {"Likes": "likes"}
    back = KGEModel.load(tmp_path / "kge")
    triples = [(h, r, t) for h in ENTS for r in RELS for t in ENTS]
    assert np.array_equal(back.score_many(triples), m.score_many(triples))
    assert back.score("a", "Likes", "c") == m.score("a", "likes", "c")
    # saving again replaces atomically (no temp dirs left behind)
    back.save(tmp_path / "kge")
    assert [p.name for p in tmp_path.iterdir()] == ["kge"]
    with pytest.raises(FileNotFoundError, match="no KGE model"):
        KGEModel.load(tmp_path / "missing")
    (tmp_path / "kge" / "weights.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="corrupt"):
        KGEModel.load(tmp_path / "kge")


def _brute_ranks(m: KGEModel, queries, all_triples):
    known = {(h, r, t) for h, r, t in both_directions(all_triples, m.num_relations).tolist()}
    out = []
    for h, r, t in queries.tolist():
        sc = m.score_all_rows(torch.tensor([h]), torch.tensor([r]))[0].numpy()
        others = [e for e in range(m.num_entities) if e != t and (h, r, e) not in known]
        greater = sum(sc[e] > sc[t] for e in others) + 0.5 * sum(sc[e] == sc[t] for e in others)
        out.append(1 + greater)
    return np.array(out)


@pytest.mark.parametrize("chunk", [5, 1000])
def test_filtered_ranks_match_brute_force(chunk):
    rng = np.random.default_rng(2)
    n, nr = 23, 3
    E = rng.normal(size=(n, 8)).astype(np.float32)
    R = rng.normal(size=(2 * nr, 8)).astype(np.float32)
    m = KGEModel("complex", [str(i) for i in range(n)], ["p", "q", "s"], E, R)
    triples = np.unique(np.stack([rng.integers(0, n, 60), rng.integers(0, nr, 60), rng.integers(0, n, 60)], 1), axis=0)
    known = KnownTails(triples, n, nr)
    queries = both_directions(triples[:20], nr)
    got = filtered_ranks(m.score_all_rows, m._scorer.score_pairs, queries, known, batch_size=7, entity_chunk=chunk)
    assert np.allclose(got, _brute_ranks(m, queries, triples))


def test_roc_auc_matches_definition():
    pos, neg = [0.9, 0.8, 0.4, 0.4], [0.1, 0.4, 0.85]
    pairs = [(p > q) + 0.5 * (p == q) for p in pos for q in neg]
    assert roc_auc(pos, neg) == pytest.approx(np.mean(pairs))
    assert roc_auc([1.0, float("nan")], [0.0]) == 1.0
    assert np.isnan(roc_auc([], [0.0]))


def test_split_holdout_keeps_entities_covered():
    rng = np.random.default_rng(3)
    tr = np.unique(np.stack([rng.integers(0, 40, 300), rng.integers(0, 4, 300), rng.integers(0, 40, 300)], 1), axis=0)
    mask = split_holdout(tr, 0.2, seed=0)
    assert 0 < mask.sum() <= round(0.2 * len(tr))
    train_ents = set(tr[~mask][:, 0]) | set(tr[~mask][:, 2])
    assert set(tr[mask][:, 0]) <= train_ents and set(tr[mask][:, 2]) <= train_ents
    assert np.array_equal(mask, split_holdout(tr, 0.2, seed=0))
    assert split_holdout(tr, 0.2, seed=0, max_count=5).sum() == 5


def _toy_kg() -> list[tuple[str, str, str]]:
    """People born in cities, cities in countries, citizenship = the city's country."""
    tr = [(f"city{c}", "located_in", f"country{c % 4}") for c in range(16)]
    for p in range(160):
        c = (p * 7) % 16
        tr += [(f"person{p}", "born_in", f"city{c}"), (f"person{p}", "citizen_of", f"country{c % 4}")]
    return tr


def test_tiny_training_learns_a_structured_kg():
    tr = _toy_kg()
    test = [t for i, t in enumerate(tr) if t[1] == "citizen_of" and i % 5 == 0][:25]
    train = [t for t in tr if t not in set(test)]
    m, rep = train_kge(
        train, dim=16, epochs=25, batch_size=64, negatives=32, lr=0.1, progress=False,
        valid_fraction=0.0, threads=1, seed=0,
    )  # fmt: skip
    assert rep["epochs_run"] == 25 and rep["num_train_triples"] == len(set(train))
    # citizenship of held-out people: their country must rank near the top of all 180 entities
    rows = np.array([(m.entity_row(h), m.relation_row(r), m.entity_row(t)) for h, r, t in test])
    allrows = np.array([(m.entity_row(h), m.relation_row(r), m.entity_row(t)) for h, r, t in tr])
    res = m.evaluate(rows, KnownTails(allrows, m.num_entities, m.num_relations))
    assert res["mrr"] > 0.6, res  # chance is about 0.03 over 180 entities
    # deterministic with a seed
    m2, _ = train_kge(
        train, dim=16, epochs=3, batch_size=64, negatives=32, progress=False, valid_fraction=0.0, threads=1, seed=0
    )
    m3, _ = train_kge(
        train, dim=16, epochs=3, batch_size=64, negatives=32, progress=False, valid_fraction=0.0, threads=1, seed=0
    )
    assert np.array_equal(m2.score_many(test), m3.score_many(test))


def test_pooled_batches_learn_rare_relations():
    """Rare relations share mixed batches (``pool_below``): the run uses fewer batches than one
    per relation label and still learns the KG (per-row relation embeddings)."""
    tr = _toy_kg()
    # split born_in into 16 rare labels (one per city): 10 people each, below pool_below
    tr = [(h, f"born_in_{t}" if r == "born_in" else r, t) for h, r, t in tr]
    test = [t for i, t in enumerate(tr) if t[1] == "citizen_of" and i % 5 == 0][:25]
    train = [t for t in tr if t not in set(test)]
    kw = dict(dim=16, epochs=25, batch_size=64, negatives=32, lr=0.1, progress=False, valid_fraction=0.0,
              threads=1, seed=0, canonicalize=False)  # fmt: skip
    m, rep = train_kge(train, pool_below=32, **kw)
    assert m.config["pool_below"] == 32
    rows = np.array([(m.entity_row(h), m.relation_row(r), m.entity_row(t)) for h, r, t in test])
    allrows = np.array([(m.entity_row(h), m.relation_row(r), m.entity_row(t)) for h, r, t in tr])
    assert m.evaluate(rows, KnownTails(allrows, m.num_entities, m.num_relations))["mrr"] > 0.6
    m0, _ = train_kge(train, pool_below=0, **{**kw, "epochs": 1})
    assert "pool_below" not in m0.config  # curated default: one relation per batch, config unchanged


@pytest.mark.parametrize("name", ["complex", "distmult"])
def test_full_softmax_learns_with_dense_gradients(name):
    """``full_softmax``: every entity is a candidate (1-N, the ComplEx-N3 recipe); the embeddings
    train densely (no sampled negatives) and learn the toy KG; the option is in the model's config."""
    tr = _toy_kg()
    test = [t for i, t in enumerate(tr) if t[1] == "citizen_of" and i % 5 == 0][:25]
    train = [t for t in tr if t not in set(test)]
    m, rep = train_kge(
        train, model=name, dim=16, epochs=25, batch_size=64, lr=0.1, progress=False, valid_fraction=0.0,
        threads=1, seed=0, full_softmax=True,
    )  # fmt: skip
    assert m.config["full_softmax"] is True and rep["epochs_run"] == 25
    rows = np.array([(m.entity_row(h), m.relation_row(r), m.entity_row(t)) for h, r, t in test])
    allrows = np.array([(m.entity_row(h), m.relation_row(r), m.entity_row(t)) for h, r, t in tr])
    assert m.evaluate(rows, KnownTails(allrows, m.num_entities, m.num_relations))["mrr"] > 0.6


def test_training_with_validation_keeps_the_best_epoch():
    m, rep = train_kge(
        _toy_kg(), model="rotate", dim=8, epochs=4, batch_size=64, negatives=16, progress=False,
        valid_fraction=0.1, patience=10, threads=1,
    )  # fmt: skip
    assert rep["num_valid_triples"] > 0 and len(rep["history"]) == 4
    assert rep["valid_mrr"] == max(h["valid_mrr"] for h in rep["history"])
    assert m.model_name == "rotate" and m.dim == 8


def test_train_argument_errors():
    with pytest.raises(ValueError, match="unknown KGE model"):
        train_kge([("a", "r", "b")], model="tucker")
    with pytest.raises(ValueError, match="dim must be"):
        train_kge([("a", "r", "b")], dim=0)
    with pytest.raises(ValueError, match="no triples"):
        train_kge([])
    with pytest.raises(ValueError, match="even dim"):
        train_kge([("a", "r", "b")], model="complex", dim=5, progress=False, valid_fraction=0.0)


def test_canonical_relation_examples():
    assert canonical_relation("was born in") == "bear_in"
    assert canonical_relation("directed by") == "direct_by"
    assert canonical_relation("## toured with ## in 1955") == "tour_with"
    assert canonical_relation("is the capital of") == "capital_of"
    assert canonical_relation("and") == POOLED_RELATION
    m = relation_map(["was born in", "born in", "is born in", "and", "directed by"], [1, 1, 1, 5, 1])
    assert m["was born in"] == m["born in"] == m["is born in"] == "bear_in"  # pooled counts: 3 >= 3
    assert m["directed by"] == POOLED_RELATION  # rare canonical relation
    assert m["and"] == POOLED_RELATION


def test_looks_free_text():
    assert not looks_free_text(["directed_by", "starred_actors"] * 1 + [f"r{i}" for i in range(7)], 134_000)
    assert looks_free_text([f"relation phrase number {i}" for i in range(30)], 40)
    assert looks_free_text([f"r{i}" for i in range(30)], 100)


def test_canonicalised_model_maps_unseen_free_text():
    tr = [(f"p{i}", "was born in", f"c{i % 3}") for i in range(6)] + [(f"p{i}", "born in", "c0") for i in range(3)]
    tr += [(f"p{i}", "has visited", f"c{i % 2}") for i in range(2)]
    m, rep = train_kge(tr, dim=4, epochs=1, progress=False, valid_fraction=0.0, canonicalize=True, threads=1)
    assert rep["canonicalize"] and set(m.relation_ids) == {"bear_in", POOLED_RELATION}
    assert m.relation_row("was born in") == m.relation_row("is born in") == m.relation_ids.index("bear_in")
    assert m.relation_row("has visited") == m.relation_ids.index(POOLED_RELATION)
    assert m.relation_row("sailed across") == m.relation_ids.index(POOLED_RELATION)  # unseen: pooled
