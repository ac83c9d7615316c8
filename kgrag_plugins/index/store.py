"""KnowledgeIndex: one directory holding the passage store, the graph and their vectors.

Layout of an index directory::

    DIR/manifest.json        format version, embedder, counts, settings, current generation
    DIR/gen-<id>/passages/   passages.jsonl, vectors.npy, bm25/, chroma/ (embedded mode),
                             windows.npy + window_ids.json (long passages' windows, :mod:`.windows`)
    DIR/gen-<id>/graph/      KnowledgeGraph files
    DIR/gen-<id>/parsekg/    ParseKG tables (``parsekg`` builder only)
    DIR/gen-<id>/*_vectors*.npy, relation_rows.<fp>.npz  derived vectors (:mod:`.vector_cache`)
    DIR/llm_cache/           LLM extraction cache (``llm`` builder), kept across builds

Saving writes a complete new generation next to the old one and then atomically replaces
``manifest.json`` (``os.replace``); only then is the old generation removed. A build that
fails or is killed midway therefore never touches the index a reader opens; one that runs out
of disk space raises :class:`IndexWriteError` and leaves no debris.

Concurrency (protocol in :mod:`.lock`): writers hold ``DIR/.lock`` (``fcntl.flock``) from
reading the live state to the manifest switch, so they serialise and none loses another's
work: ``add_passages``/``delete_passages`` on an index opened earlier first reload the newest
generation under the lock and apply the change to it (the object then shows the merged
state), while ``build``/``save`` replace the whole index (last writer wins). A reader leases
the generation it opened (shared flock on ``gen-<id>/.lease``) until :meth:`KnowledgeIndex.close`
or garbage collection; writers delete only unleased old generations, and ``open`` retries
when the generation its manifest named vanished before it could lease it. Damaged files raise
:class:`IndexCorruptError` naming the file and the fix.

Graph vectors are lazy: entity (``"name: description"``) and triple vectors cost as much as
embedding the corpus again for a mentions graph, so they are computed on first use (or at build
with ``precompute=``) and stored in the live generation, fingerprinted (:mod:`.vector_cache`).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from .._version import __version__
from ..adapters import require_hook
from ..config import INDEX_FORMAT_VERSION
from ..models.embed import Embedder, as_embedder, default_embedder
from ..types import Passage
from . import vector_cache as _vc
from .builders import run_builder
from .embedding import embed_passages
from .embedding import entity_vectors as _entity_vectors
from .errors import IndexCorruptError, IndexLockedError, IndexMismatchError, IndexWriteError, is_disk_full
from .graph import KnowledgeGraph
from .lock import Lease, SwapGuard, WriterLock, collect_generations, create_lease_file, read_json
from .manifest import FIX as _FIX
from .manifest import MANIFEST, check_compatible, manifest_embedder, read_manifest
from .manifest import atomic_write_text as _atomic_write_text
from .manifest import counts as _counts
from .manifest import drop_generation_collection as _drop_generation_collection
from .manifest import load_optional as _load_optional
from .manifest import one_line as _one_line
from .manifest import peek_generation as _peek_generation
from .parsekg import ParseKG
from .passages import PassageStore
from .windows import PassageWindows

#: ``open`` re-reads the manifest at most this many times when its generation vanishes.
OPEN_ATTEMPTS = 50
log = logging.getLogger(__name__)
#: Serialises the first computation of an index's entity / relation / triple vectors: without it,
#: threads that ask at once (a QA run's concurrent questions) each embed the whole graph.
_DERIVED_LOCK = threading.RLock()

__all__ = [
    "IndexCorruptError",
    "IndexLockedError",
    "IndexMismatchError",
    "IndexWriteError",
    "KnowledgeIndex",
    "corpus_hash",
    "read_manifest",
]


def corpus_hash(passages: Iterable[Passage]) -> str:
    """Stable hash of a corpus (ids, titles, texts; order-independent), 16 hex chars."""
    h = hashlib.sha256()
    for p in sorted(passages, key=lambda p: p.id):
        h.update(f"{p.id}\x1f{p.title}\x1f{p.text}\x1e".encode("utf-8"))
    return h.hexdigest()[:16]


class KnowledgeIndex:
    """Passages, knowledge graph and vectors every method reads (DESIGN.md principle 2); create one
    with :meth:`build` (optionally persisting it to a directory) or :meth:`open`."""

    def __init__(
        self,
        passages: PassageStore,
        graph: KnowledgeGraph,
        embedder: Embedder,
        manifest: dict[str, Any],
        path: Path | None = None,
        entity_vectors: np.ndarray | None = None,
        relation_vectors: np.ndarray | None = None,
        parsekg: ParseKG | None = None,
    ) -> None:
        self.passages = passages
        self.graph = graph
        self.embedder = embedder
        self.manifest = manifest
        self.path = path
        self._entity_vectors = entity_vectors
        self._relation_vectors = relation_vectors
        self._triple_vectors: np.ndarray | None = None
        self.parsekg = parsekg
        self._lease: Lease | None = None  # reader's hold on its generation (see .lock)
        #: Change counter: +1 each time the in-memory index changes (``add_passages``,
        #: ``delete_passages``); retrievers compare it to rebuild derived state (``methods/base.py``).
        self.revision = 0

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        path: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        graph: KnowledgeGraph | None = None,
        builder: str | None = None,
        llm: Any = None,
        parsekg: ParseKG | None = None,
        entity_vectors: bool = False,
        precompute: Sequence[str] = (),
        settings: dict[str, Any] | None = None,
        progress: bool = True,
        chroma_url: str | None = None,
        builder_options: dict[str, Any] | None = None,
        vectors: np.ndarray | None = None,
        overlap: bool = True,
        windows: PassageWindows | None = None,
    ) -> "KnowledgeIndex":
        """Embed ``passages``, index them (Chroma + BM25), build or attach a graph; save to ``path``.

        Args:
            builder: ``"mentions"`` / ``"parsekg"`` (LLM-free, spaCy) or ``"llm"`` (needs ``llm``)
                builds the graph from the passages; otherwise ``graph`` (e.g. an imported
                curated KG, see :mod:`kgrag_plugins.index.importers`) is attached as is.
            entity_vectors: compute entity vectors now instead of on first use.
            precompute: vectors to compute and store now rather than on a first query (kinds of
                :data:`.vector_cache.KINDS`: ``"entities"``, ``"triples"``, ``"translator"``).
            vectors: precomputed passage vectors from this ``embedder`` (rows aligned with
                ``passages``), e.g. to add a graph to an existing index without re-embedding.
                Window vectors of long passages come with them in ``windows`` (e.g. another
                index's ``passages.windows``); without, a passage longer than the embedder's
                input is dense-searched by its given vector only (:mod:`.windows`).
            overlap: run passage embedding concurrently with a spaCy builder (faster on
                multi-core machines; ``embed_passages_s`` is then the overlapped wall time).
            path: with a path the index is written atomically (an existing index there is
                replaced only once the new one is complete).
        """
        passages = _check_passages(passages, allow_empty=graph is not None and builder is None)
        _vc.check_kinds(precompute)
        # ours, a LangChain Embeddings or a LlamaIndex BaseEmbedding
        embedder = as_embedder(embedder) if embedder is not None else default_embedder()
        timings: dict[str, float] = {}
        build_stats: dict[str, Any] | None = None
        embedding: list = []
        options = dict(builder_options or {})
        if vectors is None and builder in ("mentions", "parsekg") and overlap:
            # Embed in a thread while spaCy's worker processes parse: torch releases the GIL,
            # and the two jobs fill each other's idle time on the cores. The thread starts once
            # the workers are forked (never fork a process with a running torch thread).
            job = (embed_passages, embedder, passages, False)
            options["on_start"] = lambda: embedding.append(_EMBED_POOL.submit(*job))
        if builder is not None:
            if graph is not None:
                raise ValueError("pass either builder= or graph=, not both")
            cache = Path(path) / "llm_cache" if path is not None and builder == "llm" else None
            t0 = time.perf_counter()
            try:
                graph, parsekg, build_stats = run_builder(
                    builder, passages, llm=llm, cache_dir=cache, progress=progress, **options
                )
            except BaseException:
                for job in embedding:
                    job.cancel()
                raise
            timings["graph_s"] = time.perf_counter() - t0
        graph = graph or KnowledgeGraph()
        if embedding:
            vectors, windows, embed_t = embedding[0].result()
            timings.update(embed_t, overlapped_embed_and_graph=1.0)
        elif vectors is None:
            vectors, windows, embed_t = embed_passages(embedder, passages, progress)
            timings.update(embed_t)
        elif len(vectors) != len(passages) or (len(vectors) and vectors.shape[1] != embedder.dim):
            raise ValueError(f"vectors have shape {vectors.shape}, expected ({len(passages)}, {embedder.dim})")
        elif windows is not None:
            windows = windows.select({p.id for p in passages})
        elif getattr(passages, "long_ids", None):
            log.warning(
                "vectors given without windows: dense search sees only the start of %d long passage(s)",
                len(passages.long_ids),
            )
        ent_vecs = _entity_vectors(graph, embedder, progress, timings) if entity_vectors else None
        index = cls._from_built(path, passages, vectors, graph, embedder, builder, build_stats, settings, timings,
                                ent_vecs, chroma_url, progress, parsekg, windows=windows)  # fmt: skip
        index.manifest["timings"].update({f"precompute_{k}_s": v for k, v in _vc.precompute(index, precompute).items()})
        return index

    @classmethod
    def _from_built(
        cls, path: str | Path | None, passages: list[Passage], vectors: np.ndarray, graph: KnowledgeGraph,
        embedder: Embedder, builder: str | None, build_stats: Any, settings: dict[str, Any] | None,
        timings: dict[str, float], ent_vecs: np.ndarray | None, chroma_url: str | None, progress: bool,
        parsekg: ParseKG | None, extra: dict[str, Any] | None = None, windows: PassageWindows | None = None,
    ) -> "KnowledgeIndex":  # fmt: skip
        """A finished build's manifest, then the in-memory index or :meth:`_write_generation` (Ray too)."""
        manifest = {
            "format_version": INDEX_FORMAT_VERSION,
            "kgrag_version": __version__,
            "embedder": {"name": embedder.name, "dim": int(embedder.dim)},
            "corpus_hash": corpus_hash(passages),
            "builder": builder,
            "build_stats": build_stats,
            "passage_stats": passages.stats() if hasattr(passages, "stats") else {},
            "windows": len(windows) if windows is not None else 0,
            "settings": dict(settings or {}),
            "timings": timings,
            **(extra or {}),
        }
        if path is None:
            store = PassageStore.create(
                passages, vectors, None, chroma_url=chroma_url, progress=progress, windows=windows
            )
            timings.update(store.build_timings)
            manifest.update(counts=_counts(store, graph, parsekg), chroma=store.chroma_info)
            return cls(store, graph, embedder, manifest, None, ent_vecs, None, parsekg)
        return cls._write_generation(
            Path(path), passages, vectors, graph, embedder, manifest, ent_vecs, None, chroma_url, progress, parsekg,
            windows=windows,
        )  # fmt: skip

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
        parsekg: ParseKG | None = None,
        collect: bool = True,
        reuse: PassageStore | None = None,
        windows: PassageWindows | None = None,
    ) -> "KnowledgeIndex":
        """Write a complete generation under the writer lock, switch the manifest to it, and
        (with ``collect``) delete the generations no reader holds. Disk full -> IndexWriteError.
        ``reuse``: the live store, whose Chroma files an add/delete copies (``PassageStore.create``)."""
        root.mkdir(parents=True, exist_ok=True)
        with WriterLock(root):
            old = read_json(root / MANIFEST)  # record the live generation's Chroma for its clean-up
            if old and isinstance(old.get("chroma"), dict) and isinstance(old.get("generation"), str):
                odir = root / old["generation"]
                if odir.is_dir() and not (odir / "chroma.json").exists():
                    _atomic_write_text(odir / "chroma.json", json.dumps(old["chroma"]))
            gen = f"gen-{uuid.uuid4().hex[:12]}"
            gdir = root / gen
            try:
                create_lease_file(gdir)
                store = PassageStore.create(
                    passages, vectors, gdir / "passages", chroma_url=chroma_url, progress=progress, reuse=reuse,
                    windows=windows,
                )  # fmt: skip
                manifest["timings"].update(store.build_timings)
                _atomic_write_text(gdir / "chroma.json", json.dumps(store.chroma_info))
                graph.save(gdir / "graph")
                if parsekg is not None:
                    parsekg.save(gdir / "parsekg")
                if ent_vecs is not None:
                    _vc.save_for(gdir, _vc.ENTITIES, graph, embedder, ent_vecs)
                if rel_vecs is not None:
                    np.save(gdir / "relation_vectors.npy", rel_vecs)
                manifest.update(
                    generation=gen,
                    counts=_counts(store, graph, parsekg),
                    chroma=store.chroma_info,
                    created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                )
                lease = Lease.acquire(gdir)
                _atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2))
            except BaseException as e:
                if "store" in locals() and store.chroma_info.get("mode") == "http":
                    store.drop_collection()
                shutil.rmtree(gdir, ignore_errors=True)
                if isinstance(e, Exception) and is_disk_full(e):
                    raise IndexWriteError(
                        errno.ENOSPC,
                        f"no space left on the device of {root} while writing a new generation "
                        f"({type(e).__name__}: {' '.join(str(e).split())[:160]}); free disk space and retry. "
                        "The previous index is unchanged and still opens",
                    ) from e
                raise
            new = cls(store, graph, embedder, manifest, root, ent_vecs, rel_vecs, parsekg)
            new._lease = lease
            if collect:  # the new generation is live: remove old ones no reader holds, and debris
                collect_generations(root, gen, _drop_generation_collection)
        return new

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
            self._entity_vectors,
            self._relation_vectors,
            self.passages.chroma_info.get("url"),
            False,
            self.parsekg,
            windows=self.passages.windows,
        )

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, path: str | Path, *, embedder: Embedder | None = None) -> "KnowledgeIndex":
        """Open a saved index; fail clearly if it was built with another embedder or format.

        Without ``embedder`` the index's own is used: the bundled MiniLM variant its manifest names
        (torch, ONNX fp32 or ONNX int8), whatever today's default for new indexes is. An index built
        with a custom embedder needs it passed again (``IndexMismatchError`` says so)."""
        root = Path(path)
        given = embedder
        for attempt in range(OPEN_ATTEMPTS):
            manifest = read_manifest(root)
            embedder = as_embedder(given) if given is not None else manifest_embedder(root, manifest, default_embedder)
            check_compatible(root, manifest, embedder)
            gdir = root / manifest["generation"]
            lease = Lease.acquire(gdir)
            if lease is None:  # deleted by a writer after we read the manifest, or damaged
                again = _peek_generation(root)
                if again == manifest["generation"]:
                    raise IndexCorruptError(
                        f"{root} is damaged: generation directory {gdir.name} named by {MANIFEST} is missing; {_FIX}"
                    )
                time.sleep(min(0.001 * 2**attempt, 0.05))
                continue
            try:
                index = cls._load(root, gdir, manifest, embedder)
            except BaseException:
                lease.close()
                raise
            index._lease = lease
            return index
        raise IndexCorruptError(  # pragma: no cover - needs a writer switching generations non-stop
            f"{root}: {MANIFEST} named a vanished generation {OPEN_ATTEMPTS} times in a row; retry the open"
        )

    @classmethod
    def _load(cls, root: Path, gdir: Path, manifest: dict[str, Any], embedder: Embedder) -> "KnowledgeIndex":
        """Read one (leased) generation; a damaged file raises IndexCorruptError naming it."""
        store = PassageStore.load(gdir / "passages", manifest["chroma"])
        if store.vectors.shape[1] != embedder.dim:
            raise IndexCorruptError(
                f"{gdir / 'passages' / 'vectors.npy'} has {store.vectors.shape[1]} columns but the "
                f"embedder {embedder.name!r} has dim {embedder.dim}; {_FIX}"
            )
        try:
            graph = KnowledgeGraph.load(gdir / "graph")
        except IndexCorruptError:
            raise
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            why = _one_line(e) if str(gdir / "graph") in str(e) else f"{gdir / 'graph'} cannot be read ({_one_line(e)})"
            raise IndexCorruptError(f"{why}; {_FIX}") from None
        ent = _vc.load_for(gdir, _vc.ENTITIES, graph, embedder)
        rel = _load_optional(gdir / "relation_vectors.npy", len(graph.relations))
        try:
            pkg = ParseKG.load(gdir / "parsekg") if (gdir / "parsekg").is_dir() else None
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            raise IndexCorruptError(
                f"ParseKG tables in {gdir / 'parsekg'} cannot be read ({_one_line(e)}); {_FIX}"
            ) from None
        return cls(store, graph, embedder, manifest, root, ent, rel, pkg)

    def close(self) -> None:
        """Release this object's hold on its generation so writers may delete it once
        superseded (also done when the object is garbage collected). The object stays usable
        for in-memory data, but dense search may fail once its generation is deleted."""
        lease = self.__dict__.get("_lease")
        if lease is not None:
            lease.close()

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Hold this object's generation for one read (``Retriever.retrieve`` does): an update of
        this object waits for the reads in flight and new reads wait for it (:class:`.lock.SwapGuard`)."""
        return self.__dict__.setdefault("_swap_guard", SwapGuard()).reading()

    def __enter__(self) -> "KnowledgeIndex":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ framework entry points
    @classmethod
    def from_documents(
        cls, documents: Sequence[Any], path: str | Path | None = None, **options: Any
    ) -> "KnowledgeIndex":
        """Build from LlamaIndex ``Document`` s / nodes (needs the ``llama-index`` extra); see
        :func:`kgrag_plugins.integrations.build_index` for ``options``."""
        return require_hook("build_index", "KnowledgeIndex.from_documents")(documents, path, **options)

    def as_retriever(self, method: str = "activation", **options: Any) -> Any:
        """A LlamaIndex retriever running ``method`` over this index
        (:func:`kgrag_plugins.integrations.as_retriever`; needs the LlamaIndex extra)."""
        return require_hook("as_retriever", "KnowledgeIndex.as_retriever")(self, method, **options)

    def as_query_engine(self, method: str = "activation", **options: Any) -> Any:
        """A LlamaIndex ``RetrieverQueryEngine`` running ``method`` over this index
        (:func:`kgrag_plugins.integrations.as_query_engine`; needs the LlamaIndex extra)."""
        return require_hook("as_query_engine", "KnowledgeIndex.as_query_engine")(self, method, **options)

    # ------------------------------------------------------------------ helpers
    def embed_query(self, text: str) -> np.ndarray:
        """One L2-normalised query vector."""
        return self.embedder.embed([text], progress=False)[0]

    def graph_passage_positions(self) -> np.ndarray:
        """Row in ``passages.vectors`` of each of ``graph.passage_ids`` (``link_matrix`` column
        order); -1 for a passage the graph knows but the store does not."""
        store = self.passages
        return np.array([store.position(p) if p in store else -1 for p in self.graph.passage_ids], dtype=np.int64)

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.passages, self.graph, self.parsekg)

    @property
    def entity_vectors(self) -> np.ndarray | None:
        """Entity vectors (rows = ``graph.index_of``) of ``"name: description"``; computed on
        first use and stored in the index directory. ``None`` for a graph without entities."""
        if self._entity_vectors is None and self.graph.num_entities:
            with _DERIVED_LOCK:  # threads asking at once: one computes, the others wait and read it
                if self._entity_vectors is None:
                    self._entity_vectors = _vc.graph_vectors(self, _vc.ENTITIES)  # a bar for 1,000+ texts
        return self._entity_vectors

    @property
    def has_entity_vectors(self) -> bool:
        """Whether entity vectors are computed (reading :attr:`entity_vectors` is then free)."""
        return self._entity_vectors is not None

    @property
    def has_relation_vectors(self) -> bool:
        """Whether relation vectors are loaded (reading :attr:`relation_vectors` is then free)."""
        return self._relation_vectors is not None

    @property
    def relation_vectors(self) -> np.ndarray | None:
        """Vectors of the relation vocabulary (``graph.relations``); computed on first use."""
        if self._relation_vectors is None and self.graph.relations:
            with _DERIVED_LOCK:
                if self._relation_vectors is None:
                    vecs = self.embedder.embed(self.graph.relations, progress=None)
                    self.save_derived("relation_vectors.npy", vecs)
                    self._relation_vectors = vecs
        return self._relation_vectors

    def relation_vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """Vectors of relations ``rows``: the loaded table's, else embedded on demand and persisted
        after use (:class:`.vector_cache.RowVectors`), stored as the table once all are embedded."""
        with _DERIVED_LOCK:
            if self._relation_vectors is not None:
                return self._relation_vectors[rows]
            graph, rv = getattr(self, "_relation_rows", (None, None))
            if graph is not self.graph:  # first use, or the graph changed
                self._relation_rows = (self.graph, rv := _vc.RowVectors(self, "relation_rows", self.graph.relations))
            out, full = rv.get(rows), rv.complete()
            if full is not None:
                self.save_derived("relation_vectors.npy", full)
                self._relation_vectors = full
                rv.drop()
            return out

    @property
    def triple_vectors(self) -> np.ndarray | None:
        """Vectors of every triple verbalised ``"head relation tail"`` with entity names (rows =
        triple index): SA-RAG's ``RELATED_TO.embedding``, computed at ingestion in the paper.
        Computed on first use (a progress bar only for 1,000+ triples) and stored in the index
        directory; ``None`` for a graph without triples."""
        if self._triple_vectors is None and self.graph.num_triples:
            with _DERIVED_LOCK:
                if self._triple_vectors is None:
                    self._triple_vectors = _vc.graph_vectors(self, _vc.TRIPLES)
        return self._triple_vectors

    def _gen_dir(self) -> Path | None:
        """The live generation directory, or ``None`` for an unsaved index."""
        if self.path is None or "generation" not in self.manifest:
            return None
        gdir = self.path / self.manifest["generation"]
        return gdir if gdir.is_dir() else None

    def derived_path(self, name: str) -> Path | None:
        """Where a derived file or directory ``name`` lives in the live generation (so a new
        generation drops it); ``None`` for an unsaved index. Writers must replace it atomically."""
        gdir = self._gen_dir()
        return gdir / name if gdir is not None else None

    def load_derived(self, name: str, rows: int) -> np.ndarray | None:
        """A derived array (vectors computed from this generation's data) stored by
        :meth:`save_derived`, or ``None`` when absent, damaged (a WARNING) or not ``rows`` long."""
        gdir = self._gen_dir()
        return _load_optional(gdir / name, rows) if gdir is not None else None

    def save_derived(self, name: str, arr: np.ndarray) -> None:
        """Add a derived array to the live generation (atomic rename; readers never see a partial file).
        A no-op for an unsaved index; a failed write is logged and the array stays in memory only."""
        gdir = self._gen_dir()
        if gdir is None:
            return
        tmp = gdir / f".{name}.{uuid.uuid4().hex[:8]}.tmp.npy"
        try:
            np.save(tmp, arr)
            os.replace(tmp, gdir / name)
        except OSError as e:  # a cache only: keep the array in memory and go on
            tmp.unlink(missing_ok=True)
            level = logging.DEBUG if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else logging.WARNING
            log.log(level, "could not store %s in %s (%s); it is kept in memory only", name, gdir, e)

    # ------------------------------------------------------------------ incremental updates
    def add_passages(self, passages: Sequence[Passage], *, llm: Any = None, progress: bool = True) -> dict[str, Any]:
        """Add passages: embed them, extend the graph with the index's builder, re-index.

        The graph is extended with the builder the index was built with (none for a curated
        KG: new passages are then only searchable as text). With a path the result is written
        as a new generation atomically, under the writer lock and on top of the newest
        generation on disk (this object is first reloaded if another writer saved since).
        Returns counts of what was added.
        """
        new = _check_passages(passages)
        with self._writing():
            return self._add(new, llm, progress)

    def _add(self, new: list[Passage], llm: Any, progress: bool) -> dict[str, Any]:
        clash = sorted({p.id for p in new} & set(self.passages.ids))
        if clash:
            raise ValueError(f"passage id(s) already in the index: {clash[:5]}{' ...' if len(clash) > 5 else ''}")
        graph, parsekg = copy.deepcopy(self.graph), copy.deepcopy(self.parsekg)
        before = (graph.num_entities, graph.num_triples)
        builder = self.manifest.get("builder")
        if builder:
            cache = self.path / "llm_cache" if self.path is not None and builder == "llm" else None
            graph, parsekg, _ = run_builder(
                builder, new, graph=graph, parsekg=parsekg, llm=llm, cache_dir=cache, progress=progress
            )
        vecs, new_windows, _ = embed_passages(self.embedder, new, progress)
        all_passages = list(self.passages) + new
        vectors = np.concatenate([self.passages.vectors, vecs])
        old = self.passages.windows
        windows = old.concat(new_windows) if old is not None else new_windows
        # entity and triple vectors: new entities, and old ones whose description changed (e.g.
        # their own passage arrived), are embedded by _replace (vector_cache.carry)
        self._replace(all_passages, vectors, graph, parsekg, progress, windows)
        return {
            "passages": len(new),
            "entities": graph.num_entities - before[0],
            "triples": graph.num_triples - before[1],
        }

    def delete_passages(self, ids: Sequence[str], *, progress: bool = False) -> dict[str, Any]:
        """Delete passages by id with everything read only from them.

        Links go; triples whose every source passage is deleted go; entities no remaining
        passage mentions go (with their triples and vectors). Unknown ids raise ``KeyError``.
        Like :meth:`add_passages`, applied under the writer lock to the newest generation.
        """
        with self._writing():
            return self._delete(list(dict.fromkeys(ids)), progress)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the writer lock and bring this object up to the newest generation on disk."""
        if self.path is None:
            yield
            return
        with WriterLock(self.path):
            self.follow()
            yield

    def follow(self) -> bool:
        """Adopt the newest generation on disk when another process (or index object) committed
        one since this object opened or wrote: ``revision`` + 1, so retrievers refresh, and the old
        generation's lease is released. ``False`` when already current or unsaved. Writers call it
        under the lock; a long-lived reader (a server) calls it before each request."""
        current = _peek_generation(self.path) if self.path is not None else None
        if current is None or current == self.manifest.get("generation"):
            return False
        log.info("%s: generation %s was replaced by %s; reloading", self.path, self.manifest.get("generation"), current)
        latest = KnowledgeIndex.open(self.path, embedder=self.embedder)
        rev = self.__dict__.get("revision")
        if isinstance(rev, int):
            latest.revision = rev + 1  # swapped in with the data: no read sees one without the other
        self._adopt(latest)
        return True

    def _adopt(self, other: "KnowledgeIndex") -> None:
        """Become ``other`` in one swap no read sees half done (:meth:`reading`), releasing this
        object's old generation lease."""
        old = self.__dict__.get("_lease")
        with self.__dict__.setdefault("_swap_guard", SwapGuard()).swapping():
            self.__dict__.update({k: v for k, v in other.__dict__.items() if k != "_swap_guard"})
        if old is not None and old is not self._lease:
            old.close()

    def _delete(self, ids: list[str], progress: bool) -> dict[str, Any]:
        known = set(self.passages.ids)
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise KeyError(f"unknown passage id(s): {unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
        gone = set(ids)
        if len(gone) == len(known):
            raise ValueError("cannot delete every passage of an index; build a new one instead")
        graph, parsekg = copy.deepcopy(self.graph), copy.deepcopy(self.parsekg)
        before = (graph.num_entities, graph.num_triples)
        removal = graph.remove_passages(ids)
        if parsekg is not None:
            parsekg.remove_passages(ids, removal.removed_entities)
        keep = [i for i, p in enumerate(self.passages) if p.id not in gone]
        all_passages = list(self.passages)
        kept = [all_passages[i] for i in keep]
        windows = self.passages.windows.select({p.id for p in kept}) if self.passages.windows is not None else None
        self._replace(kept, self.passages.vectors[keep], graph, parsekg, progress, windows)
        return {
            "passages": len(ids),
            "entities": before[0] - graph.num_entities,
            "triples": before[1] - graph.num_triples,
        }

    def _replace(self, passages, vectors, graph, parsekg, progress: bool, windows=None) -> None:
        carried = _vc.carry(self, graph, progress)  # the old vectors of unchanged texts are reused
        ent = carried[_vc.ENTITIES]
        manifest = {k: v for k, v in self.manifest.items() if k not in ("generation", "chroma", "counts")}
        manifest["corpus_hash"] = corpus_hash(passages)
        manifest["windows"] = len(windows) if windows is not None else 0
        url = self.passages.chroma_info.get("url")
        if self.path is None:
            store = PassageStore.create(passages, vectors, None, chroma_url=url, progress=progress, windows=windows)
            if self.passages.chroma_info.get("mode") == "http":
                self.passages.drop_collection()
            manifest.update(counts=_counts(store, graph, parsekg), chroma=store.chroma_info)
            new = KnowledgeIndex(store, graph, self.embedder, manifest, None, ent, None, parsekg)
        else:
            with WriterLock(self.path):
                args = (self.path, passages, vectors, graph, self.embedder, manifest, ent, None, url, progress, parsekg)
                new = self._write_generation(*args, collect=False, reuse=self.passages, windows=windows)
                new.revision = self.revision + 1
                self._adopt(new)
                _vc.keep(self, carried)
                collect_generations(self.path, self.manifest["generation"], _drop_generation_collection)
            return
        new.revision = self.revision + 1
        self._adopt(new)
        _vc.keep(self, carried)

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path else ""
        return f"KnowledgeIndex({self.counts}{where})"


_EMBED_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgrag-embed")


def _check_passages(passages: Iterable[Passage], allow_empty: bool = False) -> list[Passage]:
    """The indexable passages (empty ones skipped with a WARNING); see :mod:`.validate`."""
    from .validate import validate_passages

    return validate_passages(passages, allow_empty=allow_empty)
