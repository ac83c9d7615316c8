"""Import guard for the optional framework extras (``pip install 'kgrag-plugins[EXTRA]'``)."""

from __future__ import annotations

import importlib


def require(extra: str, *modules: str, feature: str) -> None:
    """Import ``modules`` or raise an ``ImportError`` that names the extra to install.

    ``feature`` is what the user tried to use (``"kgrag_plugins.integrations.langgraph"``).
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(
                f"{feature} needs the optional dependency {name!r}, which is not installed: "
                f"pip install 'kgrag-plugins[{extra}]'  (or 'kgrag-plugins[all]')"
            ) from exc
