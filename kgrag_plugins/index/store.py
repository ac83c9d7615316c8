"""KnowledgeIndex: one directory holding the passage store, the graph and their vectors.

Layout of an index directory::

    DIR/manifest.json        format version, embedder, counts, settings, current generation
    DIR/gen-<id>/passages/   passages.jsonl, vectors.npy, bm25/, chroma/ (embedded mode)
    DIR/gen-<id>/graph/      KnowledgeGraph files
    DIR/gen-<id>/entity_vectors.npy, relation_vectors.npy

Saving writes a complete new generation next to the old one and then atomically replaces
``manifest.json`` (``os.replace``); only then is the old generation removed. A build that
fails or is killed midway therefore never touches the index a reader opens.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .. import __version__
from ..config import INDEX_FORMAT_VERSION, env
from ..models.embed import Embedder, default_embedder
from ..types import Passage
from .graph import KnowledgeGraph
from .passages import PassageStore

MANIFEST = "manifest.json"


class IndexMismatchError(ValueError):
    """The index on disk was built with another embedder or format version."""


def corpus_hash(passages: Iterable[Passage]) -> str:
    """Stable hash of a corpus (ids, titles, texts; order-independent), 16 hex chars."""
    h = hashlib.sha256()
    for p in sorted(passages, key=lambda p: p.id):
        h.update(f"{p.id}\x1f{p.title}\x1f{p.text}\x1e".encode("utf-8"))
    return h.hexdigest()[:16]


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of an index directory, with a clear error when it is not one."""
    p = Path(path) / MANIFEST
    if not p.is_file():
        raise FileNotFoundError(f"{Path(path)} is not a kgrag index (no {MANIFEST}); build one with `kgrag index`")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p} is corrupt: {e}") from e


class KnowledgeIndex:
    """Passages, knowledge graph and vectors that every method reads (DESIGN.md principle 2).

    Create with :meth:`build` (optionally persisting to a directory) or :meth:`open`.
    """

    def __init__(
        self,
        passages: PassageStore,
        graph: KnowledgeGraph,
        embedder: Embedder,
        manifest: dict[str, Any],
        path: Path | None = None,
        entity_vectors: np.ndarray | None = None,
        relation_vectors: np.ndarray | None = None,
    ) -> None:
        self.passages = passages
        self.graph = graph
        self.embedder = embedder
        self.manifest = manifest
        self.path = path
        self.entity_vectors = entity_vectors
        self.relation_vectors = relation_vectors

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        path: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        graph: KnowledgeGraph | None = None,
        settings: dict[str, Any] | None = None,
        progress: bool = True,
        chroma_url: str | None = None,
    ) -> "KnowledgeIndex":
        """Embed ``passages``, index them (Chroma + BM25), attach ``graph``; save to ``path``.

        Entity vectors (name + description) and relation vectors are computed for the graph.
        With ``path`` the index is written atomically (an existing index there is replaced
        only once the new one is complete).
        """
        passages = list(passages)
        if not passages:
            raise ValueError("cannot build an index from an empty corpus")
        embedder = embedder or default_embedder()
        graph = graph or KnowledgeGraph()
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        vectors = embedder.embed([p.embed_text for p in passages], progress=progress)
        timings["embed_passages_s"] = time.perf_counter() - t0
        ent_vecs, rel_vecs = _graph_vectors(graph, embedder, progress, timings)
        manifest = {
            "format_version": INDEX_FORMAT_VERSION,
            "kgrag_version": __version__,
            "embedder": {"name": embedder.name, "dim": int(embedder.dim)},
            "corpus_hash": corpus_hash(passages),
            "settings": dict(settings or {}),
            "timings": timings,
        }
        if path is None:
            store = PassageStore.create(passages, vectors, None, chroma_url=chroma_url, progress=progress)
            timings.update(store.build_timings)
            manifest.update(counts=_counts(store, graph), chroma=store.chroma_info)
            return cls(store, graph, embedder, manifest, None, ent_vecs, rel_vecs)
        return cls._write_generation(
            Path(path), passages, vectors, graph, embedder, manifest, ent_vecs, rel_vecs, chroma_url, progress
        )

    @classmethod
    def _write_generation(
        cls,
        root: Path,
        passages: list[Passage],
        vectors: np.ndarray,
        graph: KnowledgeGraph,
        embedder: Embedder,
        manifest: dict[str, Any],
        ent_vecs: np.ndarray | None,
        rel_vecs: np.ndarray | None,
        chroma_url: str | None,
        progress: bool,
    ) -> "KnowledgeIndex":
        root.mkdir(parents=True, exist_ok=True)
        old = read_manifest(root) if (root / MANIFEST).is_file() else None
        gen = f"gen-{uuid.uuid4().hex[:12]}"
        gdir = root / gen
        try:
            store = PassageStore.create(passages, vectors, gdir / "passages", chroma_url=chroma_url, progress=progress)
            manifest["timings"].update(store.build_timings)
            graph.save(gdir / "graph")
            if ent_vecs is not None:
                np.save(gdir / "entity_vectors.npy", ent_vecs)
            if rel_vecs is not None:
                np.save(gdir / "relation_vectors.npy", rel_vecs)
            manifest.update(
                generation=gen,
                counts=_counts(store, graph),
                chroma=store.chroma_info,
                created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            )
            _atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2))
        except BaseException:
            if "store" in locals() and store.chroma_info.get("mode") == "http":
                store.drop_collection()
            shutil.rmtree(gdir, ignore_errors=True)
            raise
        # The new generation is live; clear out the old one and any debris of killed builds.
        if old and old.get("chroma", {}).get("mode") == "http":
            _drop_http_collection(old["chroma"])
        for stale in root.glob("gen-*"):
            if stale.name != gen:
                shutil.rmtree(stale, ignore_errors=True)
        return cls(store, graph, embedder, manifest, root, ent_vecs, rel_vecs)

    def save(self, path: str | Path) -> "KnowledgeIndex":
        """Write this index to ``path`` atomically and return the saved index (reopened there)."""
        vectors = self.passages.vectors
        manifest = {k: v for k, v in self.manifest.items() if k not in ("generation", "chroma", "counts")}
        manifest["timings"] = dict(manifest.get("timings", {}))
        return self._write_generation(
            Path(path),
            list(self.passages),
            vectors,
            self.graph,
            self.embedder,
            manifest,
            self.entity_vectors,
            self.relation_vectors,
            self.passages.chroma_info.get("url"),
            False,
        )

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, path: str | Path, *, embedder: Embedder | None = None) -> "KnowledgeIndex":
        """Open a saved index; fail clearly if it was built with another embedder or format."""
        root = Path(path)
        manifest = read_manifest(root)
        version = manifest.get("format_version")
        if version != INDEX_FORMAT_VERSION:
            raise IndexMismatchError(
                f"{root} has index format version {version}, this kgrag-plugins reads version "
                f"{INDEX_FORMAT_VERSION}; rebuild it with `kgrag index`"
            )
        want = manifest.get("embedder", {})
        embedder = embedder or default_embedder()
        if want.get("name") != embedder.name or int(want.get("dim", -1)) != int(embedder.dim):
            raise IndexMismatchError(
                f"{root} was built with embedder {want.get('name')!r} (dim {want.get('dim')}), "
                f"but {embedder.name!r} (dim {embedder.dim}) was given; open it with the same "
                "embedder or rebuild the index"
            )
        gdir = root / manifest["generation"]
        if not gdir.is_dir():
            raise ValueError(f"{root} is damaged: generation directory {gdir.name} is missing")
        store = PassageStore.load(gdir / "passages", manifest["chroma"])
        graph = KnowledgeGraph.load(gdir / "graph")
        ent = np.load(gdir / "entity_vectors.npy") if (gdir / "entity_vectors.npy").is_file() else None
        rel = np.load(gdir / "relation_vectors.npy") if (gdir / "relation_vectors.npy").is_file() else None
        return cls(store, graph, embedder, manifest, root, ent, rel)

    # ------------------------------------------------------------------ helpers
    def embed_query(self, text: str) -> np.ndarray:
        """One L2-normalised query vector."""
        return self.embedder.embed([text], progress=False)[0]

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.passages, self.graph)

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path else ""
        return f"KnowledgeIndex({self.counts}{where})"


def _counts(store: PassageStore, graph: KnowledgeGraph) -> dict[str, int]:
    return {
        "passages": len(store),
        "entities": graph.num_entities,
        "triples": graph.num_triples,
        "relations": len(graph.relations),
    }


def _graph_vectors(
    graph: KnowledgeGraph, embedder: Embedder, progress: bool, timings: dict[str, float]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Entity vectors from ``name: description`` and relation vectors from relation text."""
    if graph.num_entities == 0:
        return None, None
    t0 = time.perf_counter()
    ent_texts = [f"{e.name}: {e.description}" if e.description else e.name for e in graph.entities()]
    ent = embedder.embed(ent_texts, progress=progress)
    rel = embedder.embed(graph.relations, progress=progress) if graph.relations else None
    timings["embed_graph_s"] = time.perf_counter() - t0
    return ent, rel


def _drop_http_collection(info: dict[str, Any]) -> None:
    from .passages import chroma_client

    try:
        chroma_client(url=info.get("url") or env("CHROMA_URL")).delete_collection(info["collection"])
    except Exception:  # server gone or collection already removed: nothing to clean
        pass
