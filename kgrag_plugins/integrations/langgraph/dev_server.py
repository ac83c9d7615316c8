"""The ``langgraph dev`` server of ``kgrag bench-load --graphs-dev`` (:mod:`kgrag_plugins.eval.bench_load`,
runner in :mod:`.load`): started on a free port from a copy of the checkout's ``langgraph.json`` and
``graphs/``, stopped by its process group, and the resident set of its process tree sampled (psutil,
else ``/proc``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_rss_mb(pid: int) -> float:
    """Resident set of ``pid`` and its descendants, in MB (psutil, else Linux ``/proc``)."""
    try:
        import psutil
    except ImportError:
        return _proc_tree_rss_mb(pid)
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def _proc_tree_rss_mb(pid: int) -> float:
    """:func:`tree_rss_mb` from ``/proc/*/stat`` (parent ids) and ``/proc/*/status`` (``VmRSS``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    todo, kb = [pid], 0
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            kb += next(
                int(x.split()[1]) for x in Path(f"/proc/{p}/status").read_text().splitlines() if x.startswith("VmRSS:")
            )
        except (OSError, StopIteration, ValueError):
            pass
    return kb / 1024


class RSSSampler(threading.Thread):
    """Samples a process tree's RSS every ``every`` s; ``peak`` is the largest sum seen."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        super().__init__(daemon=True, name="bench-load-rss")
        self.pid, self.every, self.peak, self._halt = pid, every, 0.0, threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, tree_rss_mb(self.pid))
            self._halt.wait(self.every)

    def close(self) -> float:
        self._halt.set()
        self.join(timeout=5)
        return round(self.peak, 1)


def start_server(work: Path, index_dir: Path, clients: int, follow: bool = True) -> tuple[subprocess.Popen, str, Path]:
    """``langgraph dev`` on a free port serving a copy of langgraph.json + graphs/ (its
    ``.langgraph_api`` state stays in ``work``; ``KGRAG_INDEX_FOLLOW`` = ``follow``); returns the
    process, its URL and its log."""
    exe = Path(sys.executable).with_name("langgraph")
    config = REPO / "langgraph.json"
    if not exe.is_file() or not config.is_file():
        raise FileNotFoundError(f"--graphs-dev needs the langgraph CLI ({exe}) and the checkout's {config}")
    served = work / "served"
    served.mkdir()
    shutil.copy2(config, served / config.name)
    shutil.copytree(REPO / "graphs", served / "graphs", ignore=shutil.ignore_patterns("__pycache__"))
    port = free_port()
    env = dict(os.environ, KGRAG_INDEX_DIR=str(index_dir), KGRAG_CACHE_DIR=str(work / "cache"))
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false")
    env.update(PYTHONDONTWRITEBYTECODE="1", KGRAG_INDEX_FOLLOW="1" if follow else "0")
    env.pop("KGRAG_LLM_BASE_URL", None)
    cmd = [str(exe), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload",
           "--n-jobs-per-worker", str(max(10, clients))]  # fmt: skip
    logfile = work / "langgraph-dev.log"
    with logfile.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=served, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}", logfile


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (started with a new session), SIGKILL after 20 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def wait_ready(proc: subprocess.Popen, url: str, logfile: Path, timeout: float = 180.0) -> None:
    """Poll ``{url}/ok`` until the server answers 200; raise if it exits or ``timeout`` s pass."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while True:
            if proc.poll() is not None:
                tail = logfile.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"langgraph dev exited with {proc.returncode}:\n{tail}")
            try:
                if (await http.get(f"{url}/ok", timeout=2)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"langgraph dev did not answer {url}/ok in {timeout:.0f} s (log: {logfile})")
            await asyncio.sleep(0.5)
