"""Index-directory files: the manifest (read and validated), atomic text writes, derived arrays.

See docs/design.md, "The index directory". Every damaged file or field raises
:class:`~.errors.IndexCorruptError` with a one-line message naming it and the fix.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..config import INDEX_FORMAT_VERSION, env
from .errors import IndexCorruptError, IndexMismatchError
from .lock import read_json

MANIFEST = "manifest.json"
_GEN_RE = re.compile(r"gen-[0-9a-f]{6,64}")
#: The fix every corruption message ends with.
FIX = "rebuild the index with `kgrag index` (or restore it from a backup)"
log = logging.getLogger(__name__)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``path`` via a fsynced temp file and ``os.replace``; no temp file is left on failure."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of an index directory, with a clear error when it is not one."""
    p = Path(path) / MANIFEST
    if not p.is_file():
        raise FileNotFoundError(f"{Path(path)} is not a kgrag index (no {MANIFEST}); build one with `kgrag index`")
    try:
        manifest = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IndexCorruptError(f"{p} is corrupt (not JSON: {e}); {FIX}") from None
    _check_manifest(p, manifest)
    return manifest


def _check_manifest(p: Path, m: Any) -> None:
    """The fields ``open`` relies on, each with a one-line error naming it."""
    if not isinstance(m, dict):
        raise IndexCorruptError(f"{p} is corrupt: expected a JSON object, found {type(m).__name__}; {FIX}")
    if not isinstance(m.get("format_version"), int):
        raise IndexCorruptError(f"{p} is corrupt: field 'format_version' is missing or not an integer; {FIX}")
    if m["format_version"] != INDEX_FORMAT_VERSION:
        return  # another format: ``open`` says so (IndexMismatchError)
    problems = []
    emb = m.get("embedder")
    if not (isinstance(emb, dict) and isinstance(emb.get("name"), str) and isinstance(emb.get("dim"), int)):
        problems.append('field \'embedder\' must be {"name": str, "dim": int}')
    if not (isinstance(m.get("generation"), str) and _GEN_RE.fullmatch(m["generation"])):
        problems.append(f"field 'generation' must name a gen-<hex> directory, found {m.get('generation')!r}")
    ch = m.get("chroma")
    if not (isinstance(ch, dict) and ch.get("mode") in ("embedded", "http") and isinstance(ch.get("collection"), str)):
        problems.append('field \'chroma\' must be {"mode": "embedded"|"http", "collection": str}')
    if problems:
        raise IndexCorruptError(f"{p} is corrupt: {problems[0]}; {FIX}")


def _drop_http_collection(info: dict[str, Any]) -> None:
    from .passages import chroma_client

    try:
        chroma_client(url=info.get("url") or env("CHROMA_URL")).delete_collection(info["collection"])
    except Exception:  # server gone or collection already removed: nothing to clean
        pass


def peek_generation(root: Path) -> str | None:
    """The generation ``manifest.json`` names now, or ``None`` if it cannot be read."""
    m = read_json(root / MANIFEST)
    gen = m.get("generation") if m else None
    return gen if isinstance(gen, str) else None


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def load_optional(path: Path, rows: int) -> np.ndarray | None:
    """A stored derived array; a damaged or stale one is ignored (it is recomputed on use)."""
    if not path.is_file():
        return None
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        log.warning("ignoring damaged %s (%s); it will be recomputed", path, one_line(e))
        return None
    if arr.ndim != 2 or len(arr) != rows or not np.issubdtype(arr.dtype, np.floating):
        log.warning("ignoring %s: shape %s %s for %d items; it will be recomputed", path, arr.shape, arr.dtype, rows)
        return None
    return arr


def drop_generation_collection(gdir: Path) -> None:
    """Before a generation is deleted: drop its Chroma server collection (server mode)."""
    info = read_json(gdir / "chroma.json")
    if info and info.get("mode") == "http":
        _drop_http_collection(info)


def counts(store: Any, graph: Any, parsekg: Any = None) -> dict[str, int]:
    """The manifest's ``counts``: passages, entities, triples, relations (+ ParseKG's sentences
    and hyperrelations)."""
    out = {
        "passages": len(store),
        "entities": graph.num_entities,
        "triples": graph.num_triples,
        "relations": len(graph.relations),
    }
    if parsekg is not None:
        out["sentences"] = parsekg.num_sentences
        out["hyperrelations"] = parsekg.num_hyperrelations
    return out


def check_version(root: Path, manifest: dict[str, Any]) -> None:
    """Refuse an index written in another format version (``IndexMismatchError`` with the fix)."""
    version = manifest.get("format_version")
    if version != INDEX_FORMAT_VERSION:
        raise IndexMismatchError(
            f"{root} has index format version {version}, this kgrag-plugins reads version "
            f"{INDEX_FORMAT_VERSION}; rebuild it with `kgrag index`"
        )


def manifest_embedder(root: Path, manifest: dict[str, Any], default: Any = None) -> Any:
    """The embedder an index was built with, by the name its manifest records: a bundled MiniLM
    variant (torch / ONNX / ONNX int8, :func:`~kgrag_plugins.models.embed.embedder_for_name`), or
    ``default()`` (the caller's default-embedder factory) when that has the name; else
    ``IndexMismatchError`` (a custom embedder must be passed again)."""
    from ..models.embed import embedder_for_name

    check_version(root, manifest)
    name = str((manifest.get("embedder") or {}).get("name"))
    found = embedder_for_name(name)
    if found is None and default is not None and default().name == name:  # e.g. a custom default
        found = default()
    if found is None:
        raise IndexMismatchError(
            f"{root} was built with embedder {name!r}, not a bundled MiniLM variant; "
            "open it with embedder= the embedder it was built with"
        )
    return found


def check_compatible(root: Path, manifest: dict[str, Any], embedder: Any) -> None:
    """Refuse opening with an embedder other than the manifest's (name and dimension)."""
    check_version(root, manifest)
    want = manifest.get("embedder", {})
    if want.get("name") != embedder.name or int(want.get("dim", -1)) != int(embedder.dim):
        raise IndexMismatchError(
            f"{root} was built with embedder {want.get('name')!r} (dim {want.get('dim')}), "
            f"but {embedder.name!r} (dim {embedder.dim}) was given; open it with the same "
            "embedder or rebuild the index"
        )
