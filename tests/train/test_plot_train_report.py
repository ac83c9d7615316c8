"""benchmarks/plot_train_report.py: the loss curve (and a DPO run's reward accuracy) of a
``train_report.json`` as a PNG."""

from __future__ import annotations

import json

import pytest
from conftest import load_script


def _script():
    return load_script("benchmarks/plot_train_report.py")


def test_plots_loss_and_reward_accuracy(tmp_path):
    report = {
        "pairs": 4, "train_seconds": 90.0, "peak_rss_mb": 900, "base_model": "/m/smollm2",
        "loss_curve": [{"step": 1, "loss": 0.69}, {"step": 2, "loss": 0.61}],
        "reward_curve": [{"step": 1, "accuracy": 0.5, "margin": 0.01}, {"step": 2, "accuracy": 1.0, "margin": 0.2}],
    }  # fmt: skip
    path = tmp_path / "train_report.json"
    path.write_text(json.dumps(report))
    out = _script().plot(path, tmp_path / "img" / "loss.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_a_report_without_a_loss_curve_is_a_clear_error(tmp_path):
    path = tmp_path / "train_report.json"
    path.write_text(json.dumps({"pairs": 4}))
    with pytest.raises(ValueError, match="no loss_curve"):
        _script().plot(path, tmp_path / "x.png")
