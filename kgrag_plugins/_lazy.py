"""Lazy package exports (PEP 562): names imported from their submodule on first access, so
importing a package loads no framework, database driver or heavy dependency it does not need."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps a name to the (relative, e.g.
    ``".state"``) module it is imported from on first access; other names raise ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_dir(namespace: Mapping[str, Any]) -> Callable[[], list[str]]:
    """A module ``__dir__``: the module's globals plus its ``__all__`` (the lazy names included)."""

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __dir__
