"""Keep secrets out of logs, traces, reports, exception messages and reprs (issue 34 item 5).

Standard library only (the vLLM stub package of :func:`~kgrag_plugins.models.vllm.vllm_pythonpath`
may import it).

* :func:`split_userinfo` -- ``https://user:pw@host/v1`` -> ``("https://host/v1", ("user", "pw"))``:
  clients keep the credentials apart (sent as a header), so the URL they log and name in errors is
  clean; the password is registered as a known secret.
* :func:`mask_url` -- a URL with its userinfo and secret-looking query values masked (``***``).
* :func:`redact` -- any text with URL userinfo, ``Bearer`` tokens, ``Authorization:`` values,
  ``password=...``-style pairs and every *known secret* masked. Known secrets: values passed to
  :func:`register_secret` (API keys, passwords handed to our clients) and the values of
  environment variables named ``*_API_KEY``, ``*_PASSWORD``, ``*_TOKEN``, ``*_SECRET``,
  ``*_CREDENTIALS`` (``KGRAG_LLM_API_KEY``, ``OPENAI_API_KEY``, ``CHROMA_CLIENT_AUTH_CREDENTIALS``...).
* :func:`redact_argv` -- a command line with the values of ``--api-key`` / ``--password`` /
  ``--requirepass`` / ``--token`` ... masked (for logging it).
* :class:`RedactingFilter` -- a ``logging.Filter`` that redacts each record (message, arguments,
  traceback); the CLI puts it on the stderr handler it installs.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "RedactingFilter",
    "known_secrets",
    "mask_url",
    "redact",
    "redact_argv",
    "register_secret",
    "split_userinfo",
]

MASK = "***"
#: Shortest value treated as a known secret: shorter ones (``ollama``, ``dummy``) would mask
#: ordinary words in messages; a short password inside a URL is still masked as URL userinfo.
_MIN_SECRET = 8

_SECRET_ENV = re.compile(r"(?:^|_)(?:API_?KEY|PASSWORD|PASSWD|TOKEN|SECRET(?:_KEY)?|CREDENTIALS)$", re.I)
_NOT_SECRETS = frozenset({"EMPTY", "None", "none", "null", "false", "true"})

# scheme://USERINFO@host: greedy up to the last "@" before the path (a raw "@" inside a password)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#'\"<>@]*(?:@[^\s/?#'\"<>@]*)*@")
_SECRET_QUERY = re.compile(
    r"([?&;](?:api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|token|password|passwd|pwd|secret|sig|"
    r"signature|auth)=)[^&;#\s'\"]+",
    re.I,
)
_BEARER = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=\-]+", re.I)
_AUTH_HEADER = re.compile(r"(\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\n,}]+", re.I)
_PAIR = re.compile(
    r"(\b(?:password|passwd|pwd|api[_-]?key|apikey|secret|access[_-]?token|auth[_-]?token|requirepass)"
    r"['\"]?\s*[:=]\s*['\"]?)(?!\*\*\*|None\b)[^\s'\",;&)}]+",
    re.I,
)
_FLAG_VALUE = re.compile(
    r"(--?(?:api[_-]?key|password|passwd|requirepass|masterauth|token|secret)(?:\s+|=))(?!\*\*\*)[^\s'\",]+", re.I
)
#: Command-line options whose value is a secret (``--api-key KEY`` or ``--api-key=KEY``).
_SECRET_FLAGS = re.compile(r"^--?(?:api[_-]?key|password|passwd|requirepass|masterauth|token|auth|secret)$", re.I)

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember ``value`` (an API key or password given to a client) so :func:`redact` masks it."""
    if isinstance(value, str) and len(value) >= _MIN_SECRET and value not in _NOT_SECRETS:
        with _lock:
            _registered.add(value)


def _env_secrets() -> set[str]:
    return {
        v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= _MIN_SECRET and v not in _NOT_SECRETS
    }


def known_secrets() -> list[str]:
    """The registered and environment secrets, longest first (what :func:`redact` replaces)."""
    with _lock:
        values = set(_registered)
    return sorted(values | _env_secrets(), key=len, reverse=True)


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``(url without its userinfo, (user, password) or None)``; the password (the user name when
    there is none: a token as user name) is registered as a secret."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    secret = password or user
    register_secret(secret)
    register_secret(unquote(secret))
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


def mask_url(url: str | None) -> str:
    """``url`` with its userinfo (``user:pw@``) and secret query values masked; ``""`` for ``None``."""
    if not url:
        return ""
    return _SECRET_QUERY.sub(rf"\1{MASK}", _USERINFO.sub(rf"\1{MASK}@", str(url)))


def redact(text: object, extra: Iterable[str] = ()) -> str:
    """``str(text)`` with URL userinfo, bearer tokens, authorization values, ``password=``-style
    pairs and every known secret (plus ``extra``) masked as ``***``."""
    out = mask_url(str(text))
    out = _AUTH_HEADER.sub(rf"\1{MASK}", _BEARER.sub(rf"\1{MASK}", out))
    out = _FLAG_VALUE.sub(rf"\1{MASK}", _PAIR.sub(rf"\1{MASK}", out))
    for secret in sorted({*known_secrets(), *(e for e in extra if e)}, key=len, reverse=True):
        if secret in out:
            out = out.replace(secret, MASK)
    return out


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret options (``--api-key K``, ``--password=P``) masked
    and every argument :func:`redact` ed."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        name, eq, _ = arg.partition("=")
        if hide_next:
            out.append(MASK)
        elif eq and _SECRET_FLAGS.match(name):
            out.append(f"{name}={MASK}")
        else:
            out.append(redact(arg))
        hide_next = not hide_next and not eq and bool(_SECRET_FLAGS.match(arg))
    return out


class RedactingFilter(logging.Filter):
    """Redacts each record's message and traceback (:func:`redact`); never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
