"""Write ``kgrag_plugins/data/benchmarks_summary.json``: the real-dataset numbers ``kgrag demo``
prints beside its sample's, copied from the committed reports in ``docs/benchmarks/*.json``.

The demo reads ``docs/benchmarks`` itself in a source checkout; this copy is what an installed
package (no ``docs/``) shows. The reports carry no date, so each file's entry records the date
of the git commit that last changed it (``committed``; ``null`` for a report with uncommitted
changes). Run after re-measuring and committing a report::

    python benchmarks/demo_summary.py          # writes the summary
    python benchmarks/demo_summary.py --check  # exit 1 when the summary is out of date
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from kgrag_plugins.demo import BENCHMARKS_SUMMARY, summarize_benchmark_dir

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "benchmarks"
TARGET = ROOT / "kgrag_plugins" / "data" / BENCHMARKS_SUMMARY


def _committed(path: Path) -> str | None:
    """``YYYY-MM-DD`` of the last commit touching ``path``; ``None`` if it has uncommitted changes."""
    rel = str(path.relative_to(ROOT))
    dirty = subprocess.run(["git", "status", "--porcelain", "--", rel], cwd=ROOT, capture_output=True, text=True)
    if dirty.returncode != 0 or dirty.stdout.strip():
        return None
    log = subprocess.run(["git", "log", "-1", "--format=%cs", "--", rel], cwd=ROOT, capture_output=True, text=True)
    return log.stdout.strip() or None


def build() -> dict:
    files = summarize_benchmark_dir(SOURCE)
    for name, summary in files.items():
        summary["committed"] = _committed(SOURCE / name)
    return {
        "about": "Numbers copied from docs/benchmarks/*.json by benchmarks/demo_summary.py for `kgrag demo`; "
        "committed = the date of the git commit that last changed the report.",
        "files": files,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when the summary is stale")
    args = ap.parse_args(argv)
    text = json.dumps(build(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.is_file() else ""
        if current != text:
            print(f"{TARGET} is out of date: run python benchmarks/demo_summary.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET} ({len(json.loads(text)['files'])} reports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
