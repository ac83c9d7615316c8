"""Execute the notebooks offline and store them with their outputs (``make notebooks``).

    python notebooks/execute.py                 # all four, in place
    python notebooks/execute.py 02_langgraph_agent.ipynb

Each notebook runs with nbclient in ``notebooks/`` (03 reads ``docs/benchmarks`` from there), its
``tempfile`` work directories under a temporary ``TMPDIR`` that is removed afterwards, and is written
back with outputs, plots and execution counts but without per-cell timing metadata, so a re-run of
unchanged code changes only what the code prints. ``tests/test_notebooks.py`` re-executes them and
compares the text outputs with the stored ones through :func:`normalise`.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
#: Seconds a notebook may take (nbclient's per-cell timeout).
TIMEOUT = 900

log = logging.getLogger("notebooks.execute")

_TMP = re.compile(r"(/[\w.-]+)*/kgrag-nb-[\w.-]+(/[\w.-]+)*")
_ADDR = re.compile(r" at 0x[0-9a-f]+")
_TIME = re.compile(r"\d+(\.\d+)?\s?(ms|s|sec|seconds|MB|GB|MiB|it/s)\b")
_NUM = re.compile(r"(?<![\w.])-?\d+\.\d+")


def _round(m: re.Match) -> str:
    """A decimal number with its last digit dropped (machine noise in the 3rd/4th decimal)."""
    text = m.group(0)
    whole, frac = text.split(".")
    return f"{whole}.{frac[:-1]}" if len(frac) > 1 else f"{whole}."


def normalise(text: str) -> str:
    """Text output with what legitimately varies between runs masked: temp paths, object
    addresses, timings and sizes, and each decimal's last digit."""
    text = _TMP.sub("<tmp>", text)
    text = _ADDR.sub(" at 0x…", text)
    text = _TIME.sub("<measured>", text)
    return _NUM.sub(_round, text)


def text_outputs(book: Any) -> list[str]:
    """Per code cell, its normalised text output (streams, text/plain results and errors, joined:
    how consecutive stream chunks are split differs between a live run and a stored file)."""
    cells = []
    for cell in book["cells"]:
        if cell["cell_type"] != "code":
            continue
        texts = []
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                texts.append(normalise("".join(out["text"]) if isinstance(out["text"], list) else out["text"]))
            elif out["output_type"] in ("execute_result", "display_data"):
                plain = out.get("data", {}).get("text/plain")
                if plain is not None and "image/png" not in out.get("data", {}):
                    texts.append(normalise("".join(plain) if isinstance(plain, list) else plain))
            elif out["output_type"] == "error":
                texts.append(f"ERROR {out.get('ename')}: {out.get('evalue')}")
        cells.append("".join(texts))
    return cells


def execute(path: Path, kernel_tmp: Path) -> Any:
    """``path`` executed (nbformat v4 node), its temp files under ``kernel_tmp``."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(kernel_tmp)
    try:
        NotebookClient(
            book, timeout=TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
    for cell in book.cells:
        cell.get("metadata", {}).pop("execution", None)
    return book


def main(argv: list[str] | None = None) -> int:
    import nbformat

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = (argv if argv is not None else sys.argv[1:]) or [p.name for p in NOTEBOOKS]
    for name in names:
        path = HERE / Path(name).name
        if not path.is_file():
            log.error("no notebook %s", path)
            return 2
        with tempfile.TemporaryDirectory(prefix="kgrag-nbrun-") as tmp:
            book = execute(path, Path(tmp))
        errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        if errors:
            log.error("%s: a cell failed: %s", path.name, errors[0].get("evalue"))
            return 1
        tmp_path = path.with_suffix(".ipynb.tmp")
        nbformat.write(book, tmp_path)
        tmp_path.replace(path)  # atomic: a failed run never leaves a half-written notebook
        log.info("executed %s", path.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
