"""Plot the loss curve of a ``kgrag train`` run (its ``train_report.json``) as a PNG.

    python benchmarks/plot_train_report.py RUN_DIR/train_report.json docs/img/translator-smollm2-cpu-loss.png

The curve is the trainer's logged training loss per optimizer step (``loss_curve`` in the report,
written by ``kgrag train translator`` / ``generator-dpo``; a DPO report's ``reward_curve`` adds
TRL's reward accuracy on the right axis); the title carries the run's wall time
and peak RSS from the same report. Needs matplotlib (the ``explain`` or ``notebooks`` extra).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

logger = logging.getLogger("plot_train_report")


def plot(report_path: Path, out: Path, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = json.loads(report_path.read_text(encoding="utf-8"))
    curve = report.get("loss_curve") or []
    if not curve:
        raise ValueError(f"{report_path} has no loss_curve (a run before the curve was recorded, or not trained)")
    steps, loss = [p["step"] for p in curve], [p["loss"] for p in curve]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ax.plot(steps, loss, marker=".", linewidth=1)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    minutes = (report.get("train_seconds") or 0) / 60
    ax.set_title(
        title
        or f"{Path(str(report.get('base_model', ''))).name}: {report.get('examples', report.get('pairs'))} examples, "
        f"{minutes:.0f} min, {report.get('peak_rss_mb', 0):.0f} MB peak",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    rewards = report.get("reward_curve") or []
    if rewards:  # DPO: TRL's implicit-reward accuracy on the training pairs, right axis
        right = ax.twinx()
        right.plot([r["step"] for r in rewards], [r["accuracy"] for r in rewards], color="tab:orange",
                   marker=".", linewidth=1, label="reward accuracy")  # fmt: skip
        right.set_ylabel("reward accuracy", color="tab:orange")
        right.set_ylim(-0.05, 1.05)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger.info("wrote %s", plot(args.report, args.out, args.title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
