"""The README is an executable tutorial: every ``python`` and ``bash`` block runs as written, in
order, offline, in one temporary directory (Python blocks share one interpreter, like a notebook;
shell blocks run through ``bash -e``). A block whose fence carries ``notest`` (``\u0060\u0060\u0060bash notest``)
needs what the suite does not start (a server, a GPU, the benchmark data, a long run) and is skipped
here; the test checks each such block says why on its fence line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
_FENCE = re.compile(r"^```(\S*)(.*)$")
RUNNABLE = {"python", "bash", "sh"}


@dataclass(frozen=True)
class Block:
    lang: str
    info: str  # the rest of the fence line
    line: int  # 1-based line of the opening fence
    code: str

    @property
    def skipped(self) -> bool:
        return "notest" in self.info.split()


def readme_blocks(text: str) -> list[Block]:
    """Fenced blocks of ``text`` in order (unclosed fence: ``ValueError``)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not lines[i].startswith("```"):
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"README.md:{start + 1}: unclosed code fence")
        blocks.append(Block(m.group(1).lower(), m.group(2).strip(), start + 1, "\n".join(body) + "\n"))
        i += 1
    return blocks


def test_block_parser_reads_fences_and_notest() -> None:
    text = "a\n```python\nx = 1\n```\n```bash notest (needs a server)\nvllm serve\n```\n```\nplain\n```\n"
    got = readme_blocks(text)
    assert [(b.lang, b.line, b.skipped) for b in got] == [("python", 2, False), ("bash", 5, True), ("", 8, False)]
    assert got[0].code == "x = 1\n"
    with pytest.raises(ValueError, match="unclosed"):
        readme_blocks("```python\nx = 1\n")


def test_skipped_blocks_say_why() -> None:
    for b in readme_blocks(README.read_text()):
        if b.skipped:
            reason = b.info.replace("notest", "").strip()
            assert reason.startswith("(") and len(reason) > 8, f"README.md:{b.line}: say why after notest"


#: The driver: runs the blocks in order; a failing block exits 3 naming its README line.
_DRIVER = textwrap.dedent(
    """
    import json, subprocess, sys, time, traceback
    blocks = json.load(open(sys.argv[1]))
    ns = {"__name__": "__readme__"}
    t0 = time.perf_counter()
    for b in blocks:
        print(f"=== README.md:{b['line']} ({b['lang']}) at {time.perf_counter() - t0:.1f} s", flush=True)
        if b["lang"] == "python":
            try:
                exec(compile(b["code"], f"README.md:{b['line']}", "exec"), ns)
            except BaseException:
                traceback.print_exc()
                print(f"README block at line {b['line']} failed", flush=True)
                sys.exit(3)
        else:
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", b["code"]])
            if r.returncode:
                print(f"README block at line {b['line']} failed: exit {r.returncode}", flush=True)
                sys.exit(3)
    print("=== all blocks ran", flush=True)
    """
)


def test_every_readme_block_runs_as_written(tmp_path: Path) -> None:
    """Every runnable README block, in order, in an empty temp dir with the venv's ``kgrag``."""
    import json

    blocks = [b for b in readme_blocks(README.read_text()) if b.lang in RUNNABLE and not b.skipped]
    assert len(blocks) >= 10, "the README lost its runnable examples"
    work = tmp_path / "work"
    work.mkdir()
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([{"lang": b.lang if b.lang == "python" else "bash", "line": b.line, "code": b.code}
                                for b in blocks]))  # fmt: skip
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("KGRAG_PROGRESS", "0")
    env.pop("KGRAG_LLM_BASE_URL", None)
    env["KGRAG_CACHE_DIR"] = str(tmp_path / "cache")
    env["MPLBACKEND"] = "Agg"
    r = subprocess.run(
        [sys.executable, str(driver), str(spec)], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "=== all blocks ran" in r.stdout, out[-6000:]
    assert not list(REPO_ROOT.glob("my_index*")), "a README block wrote into the checkout"
