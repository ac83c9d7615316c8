"""Writer lock, reader leases and generation clean-up for an index directory.

Protocol (see docs/design.md, "The index directory", *Concurrency*):

* **Writers** (``build``/``save``/``add_passages``/``delete_passages`` with a path) hold an
  exclusive ``fcntl.flock`` on ``DIR/.lock`` from reading the live state to switching
  ``manifest.json``. The lock is re-entrant inside one thread, serialises threads of one
  process (a per-directory ``RLock``) and processes (the flock); the kernel releases it when
  the holder dies, even by SIGKILL. A writer that waits longer than ``KGRAG_LOCK_TIMEOUT``
  seconds (default 600) gets :class:`IndexLockedError`.
* **Readers** hold a shared flock on ``DIR/gen-<id>/.lease`` for as long as the opened index
  lives (:meth:`Lease.close`, or when the object is garbage collected or the process exits).
  A lease is valid only if, after locking, the path still names the locked file; otherwise
  the generation vanished meanwhile and the reader re-reads the manifest.
* **Clean-up** (:func:`collect_generations`, run by a writer under the writer lock after the
  manifest switch) removes every ``gen-*`` that is not live: it takes the lease file
  exclusively without waiting (a generation a reader holds is skipped and removed by a later
  write), renames the directory to ``.trash-*`` (readers can no longer lease it) and deletes
  it. Debris of killed builds and clean-ups goes the same way.

``fcntl`` is POSIX only: on Windows the locks are no-ops (logged once), so concurrent writers
there are not serialised — run one writer at a time. Network file systems must support
``flock`` for the guarantees to hold.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

from ..config import env
from .errors import IndexLockedError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
LEASE_FILE = ".lease"
TRASH_PREFIX = ".trash-"
#: Polling interval while waiting for the writer lock.
_POLL_S = 0.02


_warned = False


def _no_fcntl() -> bool:
    global _warned
    if fcntl is None and not _warned:
        _warned = True
        log.warning("fcntl is unavailable on this platform: index writers are not serialised; run one at a time")
    return fcntl is None


def lock_timeout() -> float:
    """Seconds a writer waits for the lock: ``KGRAG_LOCK_TIMEOUT`` (default 600)."""
    try:
        return float(env("LOCK_TIMEOUT", "600"))
    except ValueError:
        raise ValueError(f"KGRAG_LOCK_TIMEOUT={env('LOCK_TIMEOUT')!r} is not a number of seconds") from None


class _DirLock:
    """One directory's writer lock in this process: an RLock plus the flock, with a depth."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rlock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_LOCKS: dict[str, _DirLock] = {}
_LOCKS_GUARD = threading.Lock()


class WriterLock:
    """Exclusive, re-entrant writer lock of an index directory (a context manager)."""

    def __init__(self, root: str | Path, timeout: float | None = None) -> None:
        self.root = Path(root)
        self.timeout = lock_timeout() if timeout is None else timeout
        key = os.path.realpath(self.root)
        with _LOCKS_GUARD:
            self._lock = _LOCKS.setdefault(key, _DirLock(self.root / LOCK_FILE))

    def __enter__(self) -> "WriterLock":
        lk = self._lock
        deadline = time.monotonic() + self.timeout
        if not lk.rlock.acquire(timeout=max(self.timeout, 0.0)):
            raise self._locked_error()
        try:
            if lk.depth == 0 and not _no_fcntl():
                self.root.mkdir(parents=True, exist_ok=True)
                fd = os.open(lk.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    while True:
                        try:
                            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                            break
                        except BlockingIOError:
                            if time.monotonic() >= deadline:
                                raise self._locked_error(fd) from None
                            time.sleep(_POLL_S)
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, str(os.getpid()).encode(), 0)
                except BaseException:
                    os.close(fd)
                    raise
                lk.fd = fd
            lk.depth += 1
        except BaseException:
            lk.rlock.release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        lk = self._lock
        lk.depth -= 1
        if lk.depth == 0 and lk.fd is not None:
            fd, lk.fd = lk.fd, None
            os.close(fd)  # closing the only descriptor releases the flock
        lk.rlock.release()

    def _locked_error(self, fd: int | None = None) -> IndexLockedError:
        holder = ""
        if fd is not None:
            try:
                pid = os.pread(fd, 32, 0).decode().strip()
                holder = f" (held by process {pid})" if pid else ""
            except OSError:
                pass
        return IndexLockedError(
            f"index {self.root} is being written by another writer{holder}; waited {self.timeout:g} s for "
            f"{self.root / LOCK_FILE}. Retry later or raise KGRAG_LOCK_TIMEOUT (the lock is released "
            "when that writer finishes or exits)"
        )


class Lease:
    """A reader's shared hold on one generation directory; keeps it from being deleted."""

    def __init__(self, fd: int | None, gdir: Path) -> None:
        self._fd = fd
        self.gdir = gdir

    @classmethod
    def acquire(cls, gdir: Path) -> "Lease | None":
        """Lease ``gdir``; ``None`` when it vanished (deleted or renamed by a clean-up)."""
        if _no_fcntl():
            return cls(None, gdir) if gdir.is_dir() else None
        path = gdir / LEASE_FILE
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            if not gdir.is_dir():
                return None
            try:  # an index written before leases existed: create the lease file
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                return None
            except OSError:  # read-only index directory: nobody can delete it either
                return cls(None, gdir)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError(path)
        except FileNotFoundError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, gdir)

    def close(self) -> None:
        """Release the lease (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass

    def __del__(self) -> None:
        self.close()


def create_lease_file(gdir: Path) -> None:
    """Create ``gdir/.lease`` (a writer does this for each generation it writes)."""
    gdir.mkdir(parents=True, exist_ok=True)
    (gdir / LEASE_FILE).touch()


def collect_generations(root: Path, live: str, on_delete: Callable[[Path], None] | None = None) -> list[str]:
    """Delete every generation of ``root`` except ``live`` and those a reader leases.

    Call only while holding the :class:`WriterLock`. ``on_delete(gdir)`` runs before a
    generation is deleted (e.g. to drop its Chroma server collection). Returns the names of
    leased generations that were kept.
    """
    kept = []
    for gdir in sorted(root.glob("gen-*")):
        if gdir.name == live or not gdir.is_dir():
            continue
        fd = None
        if not _no_fcntl():
            try:
                fd = os.open(gdir / LEASE_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                fd = None
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    kept.append(gdir.name)
                    continue
        try:
            trash = root / f"{TRASH_PREFIX}{gdir.name}-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(gdir, trash)
            except OSError:
                continue
        finally:
            if fd is not None:
                os.close(fd)
        if on_delete is not None:
            try:
                on_delete(trash)
            except Exception as e:  # clean-up must never fail a committed write
                log.warning("could not clean up generation %s: %s", gdir.name, e)
        shutil.rmtree(trash, ignore_errors=True)
    for trash in root.glob(f"{TRASH_PREFIX}*"):  # left by a clean-up that was killed
        shutil.rmtree(trash, ignore_errors=True)
    if kept:
        log.debug("kept generations still open by readers: %s", kept)
    return kept


def read_json(path: Path) -> dict[str, Any] | None:
    """A small JSON object file, or ``None`` when missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class SwapGuard:
    """Readers-writer lock of one in-memory index object (threads of one process).

    A **read** (one retrieval, :meth:`KnowledgeIndex.reading`) sees one generation throughout: the
    in-place **swap** of an update (``add_passages`` / ``delete_passages`` / ``follow``) waits for
    the reads in flight, and reads that start meanwhile wait for the swap (a waiting swap blocks new
    reads: no writer starvation). Reads nest within a thread; a swap from a thread that is reading
    raises ``RuntimeError`` instead of waiting for itself.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._swapping = False
        self._waiting = 0
        self._local = threading.local()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if not depth:
            with self._cond:
                while self._swapping or self._waiting:
                    self._cond.wait()
                self._readers += 1
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if not depth:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()

    @contextlib.contextmanager
    def swapping(self) -> Iterator[None]:
        if getattr(self._local, "depth", 0):
            raise RuntimeError("an index cannot be updated from inside a retrieval on it")
        with self._cond:
            self._waiting += 1
            try:
                while self._swapping or self._readers:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._swapping = True
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()
