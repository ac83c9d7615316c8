"""benchmarks/kge_rules_half_kb.py on a hand-made MetaQA-style KB: the rules are mined from the
KGE's training triples only, the weights are chosen on one half of the validation queries, and the
report's figures agree with each other (docs/kge.md "Mined rules")."""

from __future__ import annotations

import json

from conftest import load_script
from movie_kg import movie_triples

script = load_script("benchmarks/kge_rules_half_kb.py")


def _kb(path) -> None:
    movies = []
    for d in range(12):
        person = f"Person {d}"
        for f in range(4):
            film = f"Film {d}-{f}"
            movies.append(
                (film, person, [f"Actor {d}{f % 2}", f"Actor {d}2"], [person], str(1950 + d), ["Drama"], "English")
            )
    triples = movie_triples(movies)
    # tags naming the director in lower case, as MetaQA's do
    triples += [(m[0], "has_tags", m[1].lower()) for m in movies]
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples))


def test_report_chooses_on_one_half_and_rules_help(tmp_path, monkeypatch):
    kb = tmp_path / "kb.txt"
    _kb(kb)
    monkeypatch.setattr(script, "TRAIN", {"epochs": 3, "patience": 1, "dim": 16, "reg": 0.01, "valid_fraction": 0.2})
    monkeypatch.setattr(script, "GRID", [(0.0, 0.0), (1000.0, 0.0), (1000.0, 1.0)])
    out = tmp_path / "report.json"
    assert script.main(["--kb", str(kb), "--keep", "0.8", "--threads", "1", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    grid = rep["grid"]
    assert set(grid) == {"rules 0, prior 0", "rules 1000, prior 0", "rules 1000, prior 1"}
    # chosen = the best MRR on the choosing half; the KGE-alone row is the grid's base
    assert rep["chosen"] == max(grid, key=lambda k: grid[k]["mrr_choose_half"])
    assert rep["kge_alone"] == grid["rules 0, prior 0"] and rep["chosen_result"] == grid[rep["chosen"]]
    # mined from the training triples only, which exclude the validation split
    assert rep["train_triples"] + rep["valid_triples"] == rep["kept_triples"] and rep["valid_triples"] > 0
    assert rep["rules"]["rules"] > 0 and any("written_by(x,y)" in r for r in rep["rules"]["readable"])
    # a 3-epoch KGE on this KB is weak; the writer = director rule makes up for it
    assert grid["rules 1000, prior 0"]["mrr"] > grid["rules 0, prior 0"]["mrr"]
    assert sum(v["queries"] for v in rep["by_relation"].values()) == 2 * rep["valid_triples"]


def test_train_config_device_and_small_grid(tmp_path):
    """``--train-config`` replaces the trained settings (recorded with the device and the epoch
    history), ``--grid small`` scores the 6 rule x prior pairs (the lent-GPU runs of docs/kge.md)."""
    kb = tmp_path / "kb.txt"
    _kb(kb)
    out = tmp_path / "report.json"
    config = {"epochs": 2, "patience": 1, "dim": 16, "reg": 0.1, "full_softmax": True, "batch_size": 8}
    args = ["--kb", str(kb), "--keep", "0.8", "--threads", "1", "--device", "cpu", "--grid", "small"]
    assert script.main([*args, "--train-config", json.dumps(config), "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["kge"]["config"] == config and rep["kge"]["device"] == "cpu"
    assert rep["kge"]["epochs_run"] == len(rep["kge"]["history"]) <= 2
    assert {(v["rule_weight"], v["prior_weight"]) for v in rep["grid"].values()} == set(script.SMALL_GRID)
    assert len(script.SMALL_GRID) == 6 and rep["chosen"] in rep["grid"]
