"""Training presets (``--preset cpu``) and the fingerprinted SFT data cache (issue 32 items 1, 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgrag_plugins.cli import build_parser
from kgrag_plugins.cli_train import _tuning_options
from kgrag_plugins.train.presets import PRESETS, apply_preset
from kgrag_plugins.train.sft_cache import BUILD_VERSION, cached_sft_data, sft_fingerprint


def _options(argv: list[str], recipe: str) -> dict:
    return _tuning_options(build_parser().parse_args(argv), recipe)


def test_cpu_preset_fills_unset_options_and_explicit_ones_win():
    opts = _options(["train", "translator", "--out", "o", "--preset", "cpu"], "translator")
    cpu = PRESETS["translator"]["cpu"]
    assert opts["lora"] is True and opts["merge"] is True and opts["qlora"] is False
    for key in ("learning_rate", "batch_size", "per_device_batch_size", "max_length", "save_steps", "epochs"):
        assert opts[key] == cpu[key], key
    assert opts["logging_steps"] == 1  # goes to SFTConfig through **trainer_args (the loss curve)
    mine = _options(
        ["train", "translator", "--out", "o", "--preset", "cpu", "--learning-rate", "1e-4", "--lora-r", "8",
         "--max-steps", "3"],
        "translator",
    )  # fmt: skip
    assert mine["learning_rate"] == 1e-4 and mine["lora_r"] == 8 and mine["max_steps"] == 3
    assert mine["batch_size"] == cpu["batch_size"]  # the rest still from the preset


def test_no_preset_passes_only_what_was_given():
    opts = _options(["train", "generator-dpo", "--out", "o", "--lora"], "generator-dpo")
    assert opts == {"lora": True, "qlora": False, "merge": False, "resume": False, "progress": True}
    dpo = _options(["train", "generator-dpo", "--out", "o", "--preset", "cpu"], "generator-dpo")
    assert dpo["learning_rate"] == PRESETS["generator-dpo"]["cpu"]["learning_rate"] and dpo["lora"] is True


def test_epochs_flag_wins_over_the_preset():
    opts = _options(["train", "translator", "--out", "o", "--preset", "cpu", "--epochs", "3"], "translator")
    assert opts["epochs"] == 3.0 and opts["lora"] is True
    dpo = _options(["train", "generator-dpo", "--out", "o", "--epochs", "0.5"], "generator-dpo")
    assert dpo["epochs"] == 0.5


def test_sft_data_file_round_trips_and_bad_lines_are_named(tmp_path):
    from kgrag_plugins.train.sft_pairs import load_sft_data
    from kgrag_plugins.train.translator import SFTExample, save_sft_data

    pairs = [
        SFTExample("q1", "A@@ born in", "Who?", "A", "born in", "B", "w", "p1", "musique:1"),
        SFTExample("q2", "C@@ capital of", "Where?", "C", "capital of", "D", "w2", "p2"),
    ]
    path = save_sft_data(pairs, tmp_path / "sft.jsonl")
    assert load_sft_data(path) == pairs
    minimal = tmp_path / "minimal.jsonl"  # only the two fields the trainer reads, plus an unknown one
    minimal.write_text(json.dumps({"prompt": "p", "completion": "c", "extra": 1}) + "\n\n")
    (ex,) = load_sft_data(minimal)
    assert (ex.prompt, ex.completion, ex.head) == ("p", "c", "")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "completion": "c"}) + "\n" + json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: an SFT pair needs"):
        load_sft_data(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"broken.jsonl:1: not JSON"):
        load_sft_data(broken)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no SFT pairs"):
        load_sft_data(empty)


def test_cli_sft_data_error_is_one_line(tmp_path, capsys):
    from kgrag_plugins.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text("[]\n")
    assert main(["train", "translator", "--out", str(tmp_path / "o"), "--sft-data", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.jsonl:1" in err[0]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown preset 'gpu' for translator; available: cpu"):
        apply_preset("translator", "gpu", {})
    with pytest.raises(SystemExit):  # argparse refuses it before anything runs
        build_parser().parse_args(["train", "translator", "--preset", "gpu"])


def test_train_tasks_are_sub_commands_with_their_own_options(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    out = capsys.readouterr().out
    for task in ("hop-classifier", "path-ranker", "translator", "generator-dpo", "kge", "export-merged"):
        assert task in out
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "translator", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "--preset {cpu}" in help_text and "(default: musique,2wikimultihopqa)" in help_text
    assert "(default: None)" not in help_text
    assert "issue" not in help_text.lower()
    with pytest.raises(SystemExit):  # a kge option is not a translator option
        build_parser().parse_args(["train", "translator", "--dim", "8"])


class _Example:
    def __init__(self, i: int) -> None:
        self.i = i

    def to_record(self) -> dict:
        return {"prompt": f"p{self.i}", "completion": f"c{self.i}"}


class _Stats:
    steps, duplicates, skipped = 5, 1, {"no head entity": 1}


def _files(tmp_path: Path, text: str = "a") -> list[Path]:
    q, c = tmp_path / "questions.jsonl", tmp_path / "corpus.jsonl"
    q.write_text(text)
    c.write_text("corpus")
    return [q, c]


def test_sft_cache_builds_once_per_fingerprint(tmp_path):
    calls: list[int] = []

    def build():
        calls.append(1)
        return [_Example(0), _Example(1)], _Stats()

    files, root, settings = _files(tmp_path), tmp_path / "cache", {"limit": None}
    records, stats, reused = cached_sft_data(files, settings, build, root=root)
    assert not reused and len(calls) == 1
    assert records == [{"prompt": "p0", "completion": "c0"}, {"prompt": "p1", "completion": "c1"}]
    assert stats["examples"] == 2 and stats["skipped"] == {"no head entity": 1}
    again, stats2, reused = cached_sft_data(files, settings, build, root=root)
    assert reused and len(calls) == 1 and again == records and stats2["fingerprint"] == stats["fingerprint"]
    # a changed input or setting is another fingerprint: rebuilt
    cached_sft_data(files, {"limit": 5}, build, root=root)
    assert len(calls) == 2
    files[0].write_text("b")
    cached_sft_data(files, settings, build, root=root)
    assert len(calls) == 3
    assert not list(root.glob(".*.tmp"))  # atomic writes leave no temp files


def test_sft_cache_rebuilds_an_incomplete_entry(tmp_path, caplog):
    files, root = _files(tmp_path), tmp_path / "cache"
    build = lambda: ([_Example(0), _Example(1)], _Stats())  # noqa: E731
    cached_sft_data(files, {}, build, root=root)
    key = sft_fingerprint(files, {})
    data = root / f"translator-{key}.jsonl"
    data.write_text(data.read_text().splitlines()[0] + "\n")  # a truncated data file
    records, _, reused = cached_sft_data(files, {}, build, root=root)
    assert not reused and len(records) == 2 and "incomplete" in caplog.text
    assert json.loads((root / f"translator-{key}.json").read_text())["examples"] == 2


def test_fingerprint_covers_the_build_version(tmp_path, monkeypatch):
    files = _files(tmp_path)
    before = sft_fingerprint(files, {})
    monkeypatch.setattr("kgrag_plugins.train.sft_cache.BUILD_VERSION", BUILD_VERSION + 1)
    assert sft_fingerprint(files, {}) != before


def test_train_translator_reuses_the_cached_build(data_dir, tmp_path, monkeypatch):
    """Through the recipe: the second build-only run of the same sources reads the cache, and the
    pairs are the same as a direct build's."""
    from kgrag_plugins.train import translator as T

    monkeypatch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "cache"))
    built: list[int] = []
    real = T.build_sft_data

    def counting(*a, **kw):
        built.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(T, "build_sft_data", counting)

    def run(out):
        T.train_translator(None, None, out, data_dir=data_dir, limit=3, build_only=True)
        return json.loads((out / "train_report.json").read_text())

    first, second = run(tmp_path / "a"), run(tmp_path / "b")
    assert len(built) == 1
    assert first["data_cache"]["reused"] is False and second["data_cache"]["reused"] is True
    assert first["examples"] == second["examples"] > 0 and first["skipped"] == second["skipped"]
    assert (tmp_path / "a" / "sft_data.jsonl").read_text() == (tmp_path / "b" / "sft_data.jsonl").read_text()
