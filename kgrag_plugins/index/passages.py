"""PassageStore: passages and their vectors in Chroma, plus a BM25 index (bm25s).

Chroma runs embedded (``PersistentClient`` in the index directory, or in memory) by
default, or against a Chroma server when ``KGRAG_CHROMA_URL`` is set (``HttpClient``).
Vectors always come from our own embedder: collections are created with
``embedding_function=None`` so Chroma never loads (or downloads) its default model.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

import numpy as np

from .._secrets import mask_url, redact, split_userinfo
from ..config import env
from ..types import Passage
from .errors import ChromaServerError, IndexCorruptError
from .windows import PassageWindows

log = logging.getLogger("kgrag_plugins.index.passages")

#: HNSW settings: ef_search well above k keeps Chroma's ANN search effectively exact at
#: corpus sizes of a few thousand to a few hundred thousand passages.
HNSW = {"space": "cosine", "ef_construction": 200, "ef_search": 200, "max_neighbors": 32}

#: Chroma keeps a copy of each passage's text as its document (nothing here reads it back:
#: ``passages.jsonl`` is the source of text). Longer texts are stored cut to this many characters,
#: with ``chars`` (the full length) and ``truncated`` in the metadata, so a shelf of whole books
#: does not bloat Chroma's SQLite and full-text tables or a server's request size.
CHROMA_DOC_CHARS = 65_536


def chroma_client(path: str | Path | None = None, url: str | None = None):
    """A Chroma client: ``HttpClient`` for ``url`` (or ``KGRAG_CHROMA_URL``), else embedded.

    Embedded clients persist under ``path`` or live in memory when ``path`` is None.
    """
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    url = url or env("CHROMA_URL")
    if url:
        u = urlparse(url if "://" in url else f"http://{url}")
        host, port = u.hostname or "127.0.0.1", u.port or 8000
        try:
            return chromadb.HttpClient(host=host, port=port, ssl=u.scheme == "https", settings=settings)
        except Exception as e:
            if not _connection_failure(e):
                raise
            where = f"{'https' if u.scheme == 'https' else 'http'}://{host}:{port}"
            raise ChromaServerError(
                f"cannot reach the Chroma server at {where} (from {mask_url(url)!r}): {_root_cause(e)}. Start it "
                "(chroma run --path DIR --host HOST --port PORT) or unset KGRAG_CHROMA_URL / chroma_url "
                "to keep the vectors embedded in the index directory"
            ) from e
    if path is None:
        return chromadb.EphemeralClient(settings=settings)
    return chromadb.PersistentClient(path=str(path), settings=settings)


def _causes(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _connection_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failed connection (Chroma wraps httpx's errors
    in a bare ``ValueError("Could not connect to a Chroma server...")``)."""
    import httpx

    return any(isinstance(e, (httpx.TransportError, ConnectionError)) for e in _causes(exc))


def _root_cause(exc: BaseException) -> str:
    last = list(_causes(exc))[-1]
    return f"{type(last).__name__}: {redact(last)}"


def _lost_server(url: str, exc: BaseException, doing: str, note: str = "") -> ChromaServerError:
    """One line for a Chroma server that went away (killed, restarted) while ``doing`` something:
    its address, the cause and what to do (docs/reliability.md §9)."""
    u = urlparse(url if "://" in url else f"http://{url}")
    where = f"{'https' if u.scheme == 'https' else 'http'}://{u.hostname or '127.0.0.1'}:{u.port or 8000}"
    return ChromaServerError(
        f"lost the Chroma server at {where} while {doing} ({' '.join(_root_cause(exc).split())[:160]}); start it "
        f"again at the same address with the same --path and retry: the index reconnects by itself{note}"
    )


def _stemmer():
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:  # PyStemmer is optional for bm25s
        return None


class PassageStore:
    """Passages + vectors (numpy and Chroma) + BM25 over ``title + text``.

    Build one with :meth:`create`; reopen a saved one with :meth:`load`.
    """

    def __init__(
        self,
        passages: list[Passage],
        vectors: np.ndarray,
        collection: Any,
        bm25: Any,
        chroma_info: dict[str, Any],
        directory: Path | None = None,
        windows: PassageWindows | None = None,
    ) -> None:
        self._passages = passages
        self._pos = {p.id: i for i, p in enumerate(passages)}
        self.vectors = vectors
        #: Window vectors of the passages longer than the embedder's input (:mod:`.windows`).
        self.windows = windows if windows is not None and len(windows) else None
        self._win_rows: tuple[np.ndarray, np.ndarray] | None = None
        self._collection = collection
        self._bm25 = bm25
        self.chroma_info = chroma_info
        #: The directory holding ``chroma/`` in embedded mode (None in memory or server mode).
        self.directory = directory
        self._stem = _stemmer()
        #: Seconds spent building the Chroma collection and the BM25 index (set by ``create``).
        self.build_timings: dict[str, float] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        passages: Sequence[Passage],
        vectors: np.ndarray,
        directory: str | Path | None = None,
        *,
        chroma_url: str | None = None,
        collection_name: str | None = None,
        progress: bool = False,
        reuse: "PassageStore | None" = None,
        windows: PassageWindows | None = None,
    ) -> "PassageStore":
        """Index ``passages`` with precomputed ``vectors`` (rows aligned with passages) and the
        window vectors of the long ones (``windows``, :mod:`.windows`).

        In embedded mode the Chroma database lives in ``directory/chroma`` (in memory when
        ``directory`` is None); in server mode a new collection is created on the server.

        ``reuse``: a saved embedded store whose vector for every id it shares with ``passages``
        is the one given here (an incremental add or delete). Its Chroma directory is copied
        (files, not re-inserted: the HNSW graph is kept) and only the difference is applied, so
        an add costs the new vectors, not the corpus. Any other case, or a copy whose count does
        not check out, inserts everything. BM25 is always re-indexed (every score depends on
        the corpus statistics; about 5 s at 100k passages).
        """
        passages = list(passages)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(passages) != len(vectors):
            raise ValueError(f"{len(passages)} passages but {len(vectors)} vectors")
        ids = [p.id for p in passages]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"duplicate passage id {dup!r}")
        url = chroma_url or env("CHROMA_URL")
        name = collection_name or f"kgrag-{uuid.uuid4().hex[:16]}"
        chroma_dir = Path(directory) / "chroma" if directory is not None and not url else None
        t0 = time.perf_counter()
        copied = _copy_chroma(reuse, chroma_dir, passages, vectors, progress) if chroma_dir is not None else None
        if copied is not None:
            client, collection, name = copied
        else:
            client = chroma_client(chroma_dir, url)
            try:
                collection = client.create_collection(
                    name=name, configuration={"hnsw": dict(HNSW)}, embedding_function=None
                )
                _add_batched(client, collection, passages, vectors, progress)
            except Exception as e:
                if not url or not _connection_failure(e):
                    raise
                raise _lost_server(url, e, f"filling a new collection {name!r}", _dropped(client, name)) from e
        t1 = time.perf_counter()
        bm25 = _build_bm25(passages) if passages else None  # a KG-only index has no passages
        info = {"mode": "http" if url else ("embedded" if chroma_dir else "memory"), "collection": name}
        if url:
            info["url"] = split_userinfo(url)[0]  # the manifest keeps no password (HttpClient uses host:port)
        if windows is not None and len(windows) and not set(windows.owners) <= set(ids):
            raise ValueError("windows name passage ids that are not among the passages")
        directory_ = chroma_dir.parent if chroma_dir is not None else None
        store = cls(passages, vectors, collection, bm25, info, directory_, windows)
        store.build_timings = {"chroma_s": t1 - t0, "bm25_s": time.perf_counter() - t1}
        if copied is not None:
            store.build_timings["chroma_reused"] = 1.0
        if directory is not None:
            store._write_files(Path(directory))
        return store

    def _write_files(self, d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "passages.jsonl", "w", encoding="utf-8") as f:
            for p in self._passages:
                f.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
        np.save(d / "vectors.npy", self.vectors)
        if self.windows is not None:
            self.windows.save(d)
        if self._bm25 is not None:
            self._bm25.save(str(d / "bm25"))

    @classmethod
    def load(cls, directory: str | Path, chroma_info: dict[str, Any]) -> "PassageStore":
        """Reopen a store written by :meth:`create` with a ``directory``.

        A damaged or inconsistent file raises :class:`~.errors.IndexCorruptError` naming it.
        """
        bm25s = _bm25s()

        d = Path(directory)
        fix = "rebuild the index with `kgrag index` (or restore it from a backup)"
        passages = _read_passages(d / "passages.jsonl", fix)
        vpath = d / "vectors.npy"
        try:
            vectors = np.load(vpath, allow_pickle=False)
        except FileNotFoundError:
            raise IndexCorruptError(f"{vpath} is missing; {fix}") from None
        except (OSError, ValueError, EOFError) as e:
            raise IndexCorruptError(f"{vpath} is not a valid .npy array ({_short(e)}); {fix}") from None
        if vectors.ndim != 2 or len(vectors) != len(passages) or not np.issubdtype(vectors.dtype, np.floating):
            raise IndexCorruptError(
                f"{vpath} has shape {vectors.shape} ({vectors.dtype}) but {d / 'passages.jsonl'} holds "
                f"{len(passages)} passages (expected {len(passages)} float rows); {fix}"
            )
        mode = chroma_info.get("mode")
        if mode not in ("http", "embedded"):
            raise ValueError(f"cannot reopen a passage store with Chroma mode {mode!r}")
        where = chroma_info.get("url") if mode == "http" else d / "chroma" / "chroma.sqlite3"
        if mode == "embedded" and not (d / "chroma" / "chroma.sqlite3").is_file():
            raise IndexCorruptError(f"{where} is missing; {fix}")
        try:
            client = chroma_client(url=chroma_info["url"]) if mode == "http" else chroma_client(d / "chroma")
            collection = client.get_collection(chroma_info["collection"], embedding_function=None)
            count = collection.count()
        except Exception as e:  # chromadb raises NotFoundError / ValueError / InternalError
            if isinstance(e, ChromaServerError):
                raise
            if mode == "http" and _connection_failure(e):
                raise _lost_server(str(where), e, "opening the index") from e
            if mode == "http" and not _is_not_found(e):
                raise ValueError(f"cannot reach the Chroma server at {where}: {_short(e)}") from e
            if _is_not_found(e):
                why = f"Chroma collection {chroma_info['collection']!r} not found in {where}"
            else:
                why = f"{where} is not a readable Chroma database"
            raise IndexCorruptError(f"{why} ({_short(e)}); {fix}") from None
        if count != len(passages):
            raise IndexCorruptError(
                f"Chroma collection {chroma_info['collection']!r} in {where} holds {count} vectors "
                f"but the index has {len(passages)} passages; {fix}"
            )
        bm25 = None
        if passages:
            try:
                bm25 = bm25s.BM25.load(str(d / "bm25"))
            except Exception as e:  # missing or truncated bm25s files
                raise IndexCorruptError(f"{d / 'bm25'} cannot be loaded ({_short(e)}); {fix}") from None
        windows = PassageWindows.load(d, vectors.shape[1], {p.id for p in passages}, fix)
        return cls(passages, vectors, collection, bm25, dict(chroma_info), d if mode == "embedded" else None, windows)

    def drop_collection(self) -> None:
        """Delete this store's Chroma collection (used when an index generation is replaced)."""
        try:
            self._collection._client.delete_collection(self._collection.name)
        except Exception:  # already gone
            pass

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self._passages)

    def __iter__(self):
        return iter(self._passages)

    def __contains__(self, pid: object) -> bool:
        return pid in self._pos

    def get(self, pid: str) -> Passage:
        try:
            return self._passages[self._pos[pid]]
        except KeyError:
            raise KeyError(f"unknown passage id {pid!r}") from None

    def at(self, position: int) -> Passage:
        """The passage at a row of ``vectors``."""
        return self._passages[position]

    def position(self, pid: str) -> int:
        """Row of a passage in ``vectors``."""
        return self._pos[pid]

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self._passages]

    # ------------------------------------------------------------------ search
    def dense_search(self, query_vector: np.ndarray, k: int) -> list[tuple[Passage, float]]:
        """Top-``k`` passages by cosine similarity, searched in Chroma; a long passage scores its
        best window's cosine when that is higher (:meth:`dense_scores`)."""
        k = min(k, len(self._passages))
        if k <= 0:
            return []
        try:
            res = self._collection.query(
                query_embeddings=[np.asarray(query_vector, dtype=np.float32).ravel().tolist()],
                n_results=k,
                include=["distances"],
            )
        except Exception as e:
            if self.chroma_info.get("mode") != "http" or not _connection_failure(e):
                raise
            raise _lost_server(self.chroma_info.get("url", ""), e, "searching") from e
        hits = {pid: 1.0 - float(dist) for pid, dist in zip(res["ids"][0], res["distances"][0])}
        if self.windows is not None:  # windows are few: scored exactly, merged into Chroma's top-k
            pos, best = self._window_best(query_vector)
            for i, sc in zip(pos.tolist(), best.tolist()):
                pid = self._passages[i].id
                if sc > hits.get(pid, -np.inf):
                    hits[pid] = sc
            top = sorted(hits.items(), key=lambda x: -x[1])[:k]
            return [(self.get(pid), sc) for pid, sc in top]
        return [(self.get(pid), sc) for pid, sc in hits.items()]

    def dense_scores(self, query_vector: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Cosine of every passage (or of the passages at ``rows``) to the query: the passage
        vector's, or the best of its windows' when higher (max pooling, :mod:`.windows`)."""
        q = np.asarray(query_vector, dtype=self.vectors.dtype).ravel()
        if rows is None:
            out = self.vectors @ q
            if self.windows is not None:
                pos, best = self._window_best(q)
                out[pos] = np.maximum(out[pos], best)
            return out
        rows = np.asarray(rows, dtype=np.int64)
        out = self.vectors[rows] @ q if len(rows) else np.zeros(0, dtype=np.float32)
        if self.windows is not None and len(rows):
            pos, best = self._window_best(q)
            at = np.searchsorted(pos, rows)
            hit = at < len(pos)
            hit[hit] = pos[at[hit]] == rows[hit]
            out[hit] = np.maximum(out[hit], best[at[hit]])
        return out

    def _window_best(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sorted positions of the passages with windows, and each one's best window cosine."""
        if self._win_rows is None:
            owner_pos = np.array([self._pos[pid] for pid in self.windows.owners], dtype=np.int64)
            uniq, inv = np.unique(owner_pos, return_inverse=True)
            self._win_rows = (uniq, inv)
        uniq, inv = self._win_rows
        sims = self.windows.vectors @ np.asarray(q, dtype=np.float32).ravel()
        best = np.full(len(uniq), -np.inf, dtype=np.float32)
        np.maximum.at(best, inv, sims)
        return uniq, best

    def exact_dense_search(self, query_vector: np.ndarray, k: int) -> list[tuple[Passage, float]]:
        """Exact top-``k`` by brute-force cosine over the numpy vectors (reference for Chroma)."""
        scores = self.dense_scores(query_vector)
        k = min(k, len(scores))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self._passages[i], float(scores[i])) for i in top]

    def bm25_search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """Top-``k`` passages by BM25 (Lucene variant, English stopwords and Snowball stemming)."""
        bm25s = _bm25s()

        k = min(k, len(self._passages))
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self._stem, show_progress=False)
        if k <= 0 or not tokens.vocab or self._bm25 is None:
            return []
        docs, scores = self._bm25.retrieve(tokens, k=k, show_progress=False, n_threads=0)  # 0: no thread pool per call
        return [(self._passages[int(i)], float(s)) for i, s in zip(docs[0], scores[0]) if s > 0]


def _bm25s() -> Any:
    """``bm25s``, its logger back under the application's logging config (bm25s sets it to DEBUG
    on import, so any root handler printed its "Building index" lines)."""
    import bm25s

    log = logging.getLogger("bm25s")
    if log.level == logging.DEBUG:
        log.setLevel(logging.NOTSET)
    return bm25s


def _build_bm25(passages: Sequence[Passage]):
    bm25s = _bm25s()

    texts = [f"{p.title}\n{p.text}" if p.title else p.text for p in passages]
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), show_progress=False)
    bm25 = bm25s.BM25()
    bm25.index(tokens, show_progress=False)
    return bm25


def _copy_chroma(
    base: "PassageStore | None", chroma_dir: Path, passages: list[Passage], vectors: np.ndarray, progress: bool
) -> tuple[Any, Any, str] | None:
    """``base``'s embedded Chroma copied to ``chroma_dir`` with the difference applied, or None."""
    src = base.directory / "chroma" if base is not None and base.directory is not None else None
    if src is None or not (src / "chroma.sqlite3").is_file() or chroma_dir.exists():
        return None
    name = base.chroma_info["collection"]
    pos = {p.id: i for i, p in enumerate(passages)}
    gone = [pid for pid in base.ids if pid not in pos]
    new = [i for i, p in enumerate(passages) if p.id not in base]
    try:
        shutil.copytree(src, chroma_dir)  # the source generation is sealed: nothing writes to it
    except OSError as e:
        log.warning("could not copy the Chroma database %s (%s); inserting every vector", src, _short(e))
        shutil.rmtree(chroma_dir, ignore_errors=True)
        return None
    client = chroma_client(chroma_dir)
    try:
        collection = client.get_collection(name, embedding_function=None)
        if collection.count() != len(base):
            raise ValueError(f"copied collection holds {collection.count()} vectors, expected {len(base)}")
        for i in range(0, len(gone), 5000):
            collection.delete(ids=gone[i : i + 5000])
        _add_batched(client, collection, [passages[i] for i in new], vectors[new], progress)
        if collection.count() != len(passages):
            raise ValueError(f"collection holds {collection.count()} vectors after the update, not {len(passages)}")
    except Exception as e:  # fall back to a full insert into a fresh collection (same client)
        log.warning("could not reuse the Chroma collection of %s (%s); inserting every vector", src, _short(e))
        try:
            client.delete_collection(name)
        except Exception:  # not there
            pass
        return None
    return client, collection, name


def _add_batched(client: Any, collection: Any, passages: list[Passage], vectors: np.ndarray, progress: bool) -> None:
    from tqdm.auto import tqdm

    from ..config import progress_enabled

    try:
        batch = int(client.get_max_batch_size())
    except Exception:
        batch = 1000
    batch = max(1, min(batch, 2000))
    for i in tqdm(
        range(0, len(passages), batch),
        disable=not progress_enabled(progress and len(passages) > batch),
        desc="chroma add",
    ):
        chunk = passages[i : i + batch]
        collection.add(
            ids=[p.id for p in chunk],
            embeddings=vectors[i : i + batch],
            documents=[p.text[:CHROMA_DOC_CHARS] for p in chunk],
            metadatas=[_chroma_meta(p) for p in chunk],
        )


def _chroma_meta(p: Passage) -> dict[str, Any]:
    meta: dict[str, Any] = {"title": p.title or ""}
    if len(p.text) > CHROMA_DOC_CHARS:
        meta.update(chars=len(p.text), truncated=True)
    return meta


def _dropped(client: Any, name: str) -> str:
    """Drop a half-filled server collection; what the error should say about it."""
    try:
        client.delete_collection(name)
        return ""
    except Exception:  # the server is gone: the collection stays until it is deleted by hand
        return f" (no index uses the half-filled collection {name!r}: delete it from the server once it is back)"


def _short(e: BaseException) -> str:
    """An exception as one short line."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _is_not_found(e: BaseException) -> bool:
    return "NotFound" in type(e).__name__ or "does not exist" in str(e)


def _read_passages(path: Path, fix: str) -> list[Passage]:
    """``passages.jsonl``, with a one-line error naming the file and line when damaged."""
    passages = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    passages.append(Passage.from_dict(json.loads(line)))
                except (ValueError, TypeError, KeyError, AttributeError) as e:
                    raise IndexCorruptError(f"{path} line {n} is not a passage record ({_short(e)}); {fix}") from None
    except FileNotFoundError:
        raise IndexCorruptError(f"{path} is missing; {fix}") from None
    except UnicodeDecodeError as e:
        raise IndexCorruptError(f"{path} is not UTF-8 text ({_short(e)}); {fix}") from None
    return passages
