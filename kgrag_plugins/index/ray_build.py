"""Distributed index builds on Ray (``kgrag index --engine ray``; extra ``ray``).

:func:`build_index_ray` gives the same index as :meth:`KnowledgeIndex.build
<kgrag_plugins.index.store.KnowledgeIndex.build>` -- same entities, triples, passage ids and
order; passage vectors equal up to float rounding -- with the per-passage work spread over a
Ray cluster (a local one by default). The split follows the builders (docs/ray.md):

* **Per passage, on the workers** (Ray Data ``map_batches`` over ``partitions`` blocks, one
  actor per CPU that loads spaCy and the embedder once): the spaCy pass of the ``mentions`` /
  ``parsekg`` builders (:func:`~.builders.nlp.parse_passages`: sentences, NER mentions,
  dependency roles), the LLM NER + RE calls of the ``llm`` builder (SA-RAG §5.3 indexing; one
  result per distinct chunk), and the passage embeddings.
* **Global, on the driver, in corpus order**: entity resolution and ids (the first passage to
  name an entity claims its id), links, triples and ParseKG sentences -- the builders' own
  ``add_mentions`` / ``add_parsed`` / LLM resolution code run over the workers' results, which
  is why the graph is identical to a single-process build. Then the passage store (Chroma,
  BM25) and one atomic save: a new ``gen-<id>`` directory is written and ``manifest.json``
  switched under the writer lock, the path every :class:`KnowledgeIndex` save takes.

Ray is imported inside functions only; without it :class:`RayNotInstalledError` names the extra.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ..config import progress_enabled
from ..models.embed import Embedder, as_embedder, default_embedder
from ..types import Passage
from .graph import KnowledgeGraph
from .parsekg import ParseKG

if TYPE_CHECKING:
    from .store import KnowledgeIndex

log = logging.getLogger(__name__)

__all__ = ["RayNotInstalledError", "build_index_cli", "build_index_ray", "require_ray"]

#: Builders whose per-passage work runs on the workers.
RAY_BUILDERS = ("mentions", "parsekg", "llm")
#: Passages per ``map_batches`` call (one spaCy ``pipe`` + one embedding batch on a worker).
DEFAULT_BATCH_SIZE = 256
#: Environment variables forwarded to the workers (LLM endpoint, data and cache settings).
_FORWARD_ENV_PREFIXES = ("KGRAG_", "HF_", "TRANSFORMERS_", "OPENAI_")


class RayNotInstalledError(ImportError):
    """``ray[data]`` is not installed: ``pip install 'kgrag-plugins[ray]'``."""


def require_ray() -> Any:
    """Import and return ``ray`` (with Ray Data), or raise :class:`RayNotInstalledError`."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise RayNotInstalledError(
            f"the Ray engine needs the 'ray' extra (ray[data]): pip install 'kgrag-plugins[ray]' ({e})"
        ) from e
    return ray


# --------------------------------------------------------------------------- worker side


def _is_factory(obj: Any, method: str) -> bool:
    """A zero-argument factory rather than the object itself (which has ``method``)."""
    return callable(obj) and not hasattr(obj, method)


def _resolve_embedder(spec: Any) -> Embedder:
    """An embedder from a worker spec: None (default MiniLM), a name, a factory or an instance."""
    if spec is None:
        return default_embedder()
    if _is_factory(spec, "embed"):
        return as_embedder(spec())
    return as_embedder(spec)


class _PartitionWorker:
    """Ray Data callable class: per-passage work of one batch (spaCy / LLM, then embedding).

    One instance per actor, so spaCy, the embedder and the LLM client load once per worker.
    Input rows: ``i`` (corpus position), ``p`` (pickled :class:`Passage`). Output rows: ``i``,
    ``r`` (pickled builder result: a ``ParsedPassage`` without its passage, or the LLM chunk
    results of the passage), ``v`` (the passage vector), ``t`` (worker seconds: builder, embed).
    """

    def __init__(
        self,
        builder: str | None,
        embedder: Any,
        llm: Any = None,
        cached_keys: frozenset[str] = frozenset(),
        max_words: int = 500,
        overlap: int = 100,
        llm_concurrency: int = 4,
    ) -> None:
        from ..config import setup_offline_env

        setup_offline_env()
        self.builder = builder
        self.embedder = _resolve_embedder(embedder)
        self.cached_keys, self.max_words, self.overlap = cached_keys, max_words, overlap
        self.llm_concurrency = max(1, llm_concurrency)
        self.llm = None
        if builder == "llm":
            from ..models.llm import as_llm

            self.llm = as_llm(llm() if _is_factory(llm, "complete") else llm)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        passages = [pickle.loads(b) for b in batch["p"]]
        t0 = time.perf_counter()
        if self.builder in ("mentions", "parsekg"):
            from .builders.nlp import parse_passages

            results = []
            for parsed in parse_passages(passages, parse=self.builder == "parsekg", progress=False, n_process=1):
                parsed.passage = None  # the driver re-attaches its own Passage object
                results.append(pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL))
        elif self.builder == "llm":
            results = [pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL) for r in self._extract_all(passages)]
        else:
            results = [b""] * len(passages)
        t1 = time.perf_counter()
        vecs = np.asarray(self.embedder.embed([p.embed_text for p in passages], progress=False), dtype=np.float32)
        t2 = time.perf_counter()
        out = np.empty(len(results), dtype=object)
        out[:] = results
        times = np.zeros((len(passages), 2), dtype=np.float64)
        times[0] = (t1 - t0, t2 - t1)  # batch totals on the first row
        return {"i": np.asarray(batch["i"], dtype=np.int64), "r": out, "v": vecs, "t": times}

    def _extract_all(self, passages: list[Passage]) -> list[dict[str, Any]]:
        """LLM NER + RE of the batch's distinct chunks that the driver has not cached, ``concurrency``
        requests in flight (as :func:`~.builders.llm_extract.build_llm_graph`); per passage
        ``{chunk key: _ChunkResult}`` (a chunk repeated in the batch is extracted once, kept by its first passage)."""
        from concurrent.futures import ThreadPoolExecutor

        from .builders.llm_extract import _cache_key, _extract_chunk, _model_key, chunk_words

        model_key = _model_key(self.llm)
        jobs: dict[str, str] = {}
        owners: list[list[str]] = []
        for p in passages:
            keys = []
            for window in chunk_words(p.text, self.max_words, self.overlap):
                text = f"{p.title}\n{window}" if p.title else window
                key = _cache_key(model_key, text)
                if key not in self.cached_keys and key not in jobs:
                    jobs[key] = text
                    keys.append(key)
            owners.append(keys)
        with ThreadPoolExecutor(max_workers=self.llm_concurrency, thread_name_prefix="kgrag-ray-extract") as pool:
            done = dict(
                zip(jobs, pool.map(lambda kv: _extract_chunk(self.llm, kv[1], kv[0], model_key, None), jobs.items()))
            )
        return [{k: done[k] for k in keys} for keys in owners]


class _EmbedWorker:
    """Ray Data callable class embedding the ``text`` column (entity vectors)."""

    def __init__(self, embedder: Any) -> None:
        from ..config import setup_offline_env

        setup_offline_env()
        self.embedder = _resolve_embedder(embedder)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vecs = self.embedder.embed([str(t) for t in batch["text"]], progress=False)
        return {"i": np.asarray(batch["i"], dtype=np.int64), "v": np.asarray(vecs, dtype=np.float32)}


# --------------------------------------------------------------------------- driver side


def _shippable(ray: Any, obj: Any, what: str, method: str) -> None:
    """Raise a clear ``TypeError`` if ``obj`` cannot be sent to the workers (Ray cloudpickles it)."""
    try:
        ray.cloudpickle.dumps(obj)
    except Exception as e:  # noqa: BLE001 - any pickling failure means: cannot ship it
        hint = (
            "pass embedder=None (default MiniLM), 'onnx' / 'onnx-int8', or a zero-argument factory"
            if method == "embed"
            else "pass a zero-argument factory instead (e.g. OpenAICompatibleLLM.from_env)"
        )
        raise TypeError(
            f"the Ray engine ships the {what} to its workers, but {type(obj).__name__} cannot be pickled ({e}); {hint}"
        ) from e


def _worker_spec(ray: Any, embedder: Any) -> tuple[Any, Embedder]:
    """(what the workers get, the driver's embedder) for ``embedder``: None / a name / a
    zero-argument factory / an Embedder instance that pickles (else a clear ``TypeError``)."""
    if embedder is None or isinstance(embedder, str):
        return embedder, as_embedder(embedder)
    _shippable(ray, embedder, "embedder", "embed")
    return embedder, as_embedder(embedder() if _is_factory(embedder, "embed") else embedder)


def _llm_spec(ray: Any, llm: Any) -> Any:
    if llm is None:
        raise ValueError(
            "builder 'llm' needs an LLM: pass llm=... (a zero-argument factory such as "
            "OpenAICompatibleLLM.from_env, so each Ray worker opens its own client)"
        )
    _shippable(ray, llm, "LLM", "complete")
    return llm


def _start_ray(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Connect to ``address`` or start a local Ray; True when this call started it (and stops it)."""
    if ray.is_initialized():
        return False
    env_vars = {k: v for k, v in os.environ.items() if k.startswith(_FORWARD_ENV_PREFIXES)}
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "runtime_env": {"env_vars": env_vars} if env_vars else None,
    }
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, **kwargs)
    return True


def _in_order(batches: Iterator[dict[str, np.ndarray]], n: int) -> Iterator[tuple[int, bytes, np.ndarray, Any]]:
    """Rows ``(i, r, v, t)`` of the workers' output in corpus order (a reorder buffer: blocks may
    finish in any order), checking each position 0..n-1 arrives exactly once."""
    pending: dict[int, tuple[bytes, np.ndarray, Any]] = {}
    nxt = 0
    for batch in batches:
        for row, i in enumerate(batch["i"].tolist()):
            if i < nxt or i in pending:
                raise RuntimeError(f"Ray build: passage position {i} returned twice")
            pending[i] = (batch["r"][row], batch["v"][row], batch["t"][row])
        while nxt in pending:
            r, v, t = pending.pop(nxt)
            yield nxt, r, v, t
            nxt += 1
    if nxt != n or pending:
        raise RuntimeError(f"Ray build: got {nxt} of {n} passages back from the workers")


@contextlib.contextmanager
def _data_context(ray: Any, progress: bool) -> Iterator[None]:
    """Ray Data settings for the build (progress bars, ordered output), restored afterwards."""
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.enable_progress_bars, ctx.execution_options.preserve_order)
    ctx.enable_progress_bars = progress_enabled(progress)
    ctx.execution_options.preserve_order = True  # fewer rows held in the reorder buffer
    try:
        yield
    finally:
        ctx.enable_progress_bars, ctx.execution_options.preserve_order = saved


def build_index_ray(
    passages: Sequence[Passage],
    path: str | Path | None = None,
    *,
    builder: str | None = None,
    graph: KnowledgeGraph | None = None,
    embedder: Any = None,
    llm: Any = None,
    address: str | None = None,
    num_cpus: int | None = None,
    partitions: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    num_gpus: float = 0.0,
    entity_vectors: bool = False,
    settings: dict[str, Any] | None = None,
    progress: bool = True,
    chroma_url: str | None = None,
    builder_options: dict[str, Any] | None = None,
) -> "KnowledgeIndex":
    """Build a :class:`~kgrag_plugins.index.store.KnowledgeIndex` with Ray; see the module doc.

    Args:
        builder / graph: as for ``KnowledgeIndex.build`` (``mentions``, ``parsekg``, ``llm``, or
            a curated ``graph`` attached as is; then only embedding runs on the workers).
        embedder: ``None`` (bundled MiniLM), ``"onnx"`` / ``"onnx-int8"``, a zero-argument factory,
            or a picklable Embedder; every worker builds its own copy.
        llm: for ``builder="llm"``: a zero-argument factory (``OpenAICompatibleLLM.from_env``) or
            a picklable LLM. Results land in ``path/llm_cache`` as in a single-process build.
        address: a Ray cluster (``host:6379``, or ``"auto"`` on a cluster node); default: a
            local Ray with ``num_cpus`` CPUs (all when ``None``), stopped when the build ends.
            An already initialised Ray is used as is (and left running).
        partitions: Ray Data blocks (default: 2 x the cluster's CPUs, at least 1).
        batch_size: passages per ``map_batches`` call.
        num_gpus: GPUs per worker actor (with an embedder factory that puts the model on ``cuda``).
        builder_options: the builder's merge options (``mentions``: ``max_between``, ``window``;
            ``parsekg``: ``resolve_pronouns``; ``llm``: ``max_words``, ``overlap``).
    """
    from .embedding import entity_vectors as _entity_vectors
    from .store import KnowledgeIndex, _check_passages  # noqa: F811

    ray = require_ray()
    if builder is not None and builder not in RAY_BUILDERS:
        raise ValueError(f"unknown builder {builder!r}; choose one of {', '.join(RAY_BUILDERS)}")
    if builder is not None and graph is not None:
        raise ValueError("pass either builder= or graph=, not both")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if partitions is not None and partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    options = dict(builder_options or {})
    options.pop("n_process", None)
    options.pop("on_start", None)
    passages = _check_passages(passages, allow_empty=graph is not None and builder is None)
    spec, driver_embedder = _worker_spec(ray, embedder)
    llm_spec = _llm_spec(ray, llm) if builder == "llm" else None
    cache_dir: Path | None = None
    tmp_cache: str | None = None
    if builder == "llm":
        if path is not None:
            cache_dir = Path(path) / "llm_cache"
        else:
            tmp_cache = tempfile.mkdtemp(prefix="kgrag-ray-llm-")
            cache_dir = Path(tmp_cache)
        cache_dir.mkdir(parents=True, exist_ok=True)

    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    started = _start_ray(ray, address, num_cpus)
    try:
        timings["ray_start_s"] = time.perf_counter() - t_start
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        n_blocks = max(1, min(len(passages), partitions or 2 * cpus)) if passages else 1
        workers = max(1, min(cpus, n_blocks))
        if num_gpus:
            gpus = float(ray.cluster_resources().get("GPU", 0))
            if gpus < num_gpus:
                raise ValueError(f"num_gpus={num_gpus} per worker, but the Ray cluster has {gpus:g} GPU(s)")
            workers = max(1, min(workers, int(gpus // num_gpus)))
        t0 = time.perf_counter()
        vectors = np.zeros((len(passages), driver_embedder.dim), dtype=np.float32)
        with _data_context(ray, progress):
            graph, parsekg, build_stats, worker_s = _run_partitions(
                ray,
                passages,
                vectors,
                builder=builder,
                graph=graph,
                spec=spec,
                llm_spec=llm_spec,
                llm=llm,
                cache_dir=cache_dir,
                n_blocks=n_blocks,
                workers=workers,
                batch_size=batch_size,
                num_gpus=num_gpus,
                options=options,
                progress=progress,
            )
            timings["ray_map_and_merge_s"] = time.perf_counter() - t0
            timings["worker_builder_s"], timings["worker_embed_s"], timings["driver_merge_s"] = worker_s
            ent_vecs = None
            if entity_vectors and graph.num_entities:
                t1 = time.perf_counter()
                texts = _entity_texts(graph)
                ent_vecs = _ray_embed(ray, texts, spec, workers, batch_size, driver_embedder.dim, num_gpus)
                timings["embed_entities_s"] = time.perf_counter() - t1
            elif entity_vectors:
                ent_vecs = _entity_vectors(graph, driver_embedder, False, timings)
    finally:
        if started:
            ray.shutdown()
        if tmp_cache is not None:
            shutil.rmtree(tmp_cache, ignore_errors=True)
    log.info(
        "Ray build: %d passages, %d partitions, %d workers; %s",
        len(passages),
        n_blocks,
        workers,
        {k: round(v, 2) for k, v in timings.items()},
    )
    # long passages' window vectors (few): embedded in the driver, as KnowledgeIndex.build does
    from .embedding import embed_windows

    windows, win_t = embed_windows(driver_embedder, passages, False, driver_embedder.dim)
    timings.update(win_t)
    # the same manifest and writer-locked, atomic generation switch as KnowledgeIndex.build
    engine = {"name": "ray", "partitions": n_blocks, "workers": workers, "address": address or "local"}
    return KnowledgeIndex._from_built(
        path, passages, vectors, graph, driver_embedder, builder, build_stats, settings, timings, ent_vecs,
        chroma_url, progress, parsekg, extra={"engine": engine}, windows=windows,
    )  # fmt: skip


def _entity_texts(graph: KnowledgeGraph) -> list[str]:
    from .embedding import entity_text as _entity_text

    return [_entity_text(graph, i) for i in range(graph.num_entities)]


def _ray_embed(
    ray: Any, texts: list[str], spec: Any, workers: int, batch_size: int, dim: int, num_gpus: float
) -> np.ndarray:
    """Embed ``texts`` on the workers (rows in input order)."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    ds = ray.data.from_items(
        [{"i": i, "text": t} for i, t in enumerate(texts)], override_num_blocks=max(1, min(len(texts), 2 * workers))
    )
    ds = ds.map_batches(
        _EmbedWorker,
        fn_constructor_kwargs={"embedder": spec},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        num_gpus=num_gpus or None,
    )
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        out[batch["i"]] = batch["v"]
    return out


def _run_partitions(
    ray: Any,
    passages: list[Passage],
    vectors: np.ndarray,
    *,
    builder: str | None,
    graph: KnowledgeGraph | None,
    spec: Any,
    llm_spec: Any,
    llm: Any,
    cache_dir: Path | None,
    n_blocks: int,
    workers: int,
    batch_size: int,
    num_gpus: float,
    options: dict[str, Any],
    progress: bool,
) -> tuple[KnowledgeGraph, ParseKG | None, dict[str, Any] | None, tuple[float, float, float]]:
    """Map the per-passage work over ``n_blocks`` partitions; merge in corpus order on this process.

    Fills ``vectors``; returns (graph, parsekg, builder stats, (worker builder s, worker embed s, driver merge s))."""
    from tqdm.auto import tqdm

    cached: frozenset[str] = frozenset()
    if builder == "llm" and cache_dir is not None:
        cached = frozenset(f.stem for f in cache_dir.glob("*.json"))
    merge = _Merger(builder, graph, options, cache_dir)
    busy = np.zeros(2)
    if not passages:  # a curated KG without a corpus: nothing to map
        g, kg, stats = merge.finish(passages, llm)
        return g, kg, stats, (0.0, 0.0, 0.0)
    ds = ray.data.from_items(
        [{"i": i, "p": pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)} for i, p in enumerate(passages)],
        override_num_blocks=n_blocks,
    )
    kwargs = {"builder": builder, "embedder": spec, "llm": llm_spec, "cached_keys": cached}
    if builder == "llm":
        kwargs.update(
            max_words=int(options.get("max_words", 500)),
            overlap=int(options.get("overlap", 100)),
            llm_concurrency=int(options.get("concurrency", 4)),
        )
    ds = ds.map_batches(
        _PartitionWorker,
        fn_constructor_kwargs=kwargs,
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        num_gpus=num_gpus or None,
    )
    bar = tqdm(total=len(passages), desc="Ray merge", unit="passage", disable=not progress_enabled(progress))
    try:
        rows = _in_order(ds.iter_batches(batch_size=None, batch_format="numpy"), len(passages))
        for i, r, v, t in rows:
            vectors[i] = v
            busy += t
            tm = time.perf_counter()
            merge.add(passages[i], r)
            merge.add_s += time.perf_counter() - tm
            bar.update(1)
    finally:
        bar.close()
    g, kg, stats = merge.finish(passages, llm)
    return g, kg, stats, (float(busy[0]), float(busy[1]), merge.add_s)


class _Merger:
    """The global half of a builder, fed the workers' per-passage results in corpus order."""

    def __init__(
        self, builder: str | None, graph: KnowledgeGraph | None, options: dict[str, Any], cache_dir: Path | None
    ) -> None:
        from .builders.mentions import GraphBuildStats, _Resolver

        self.builder, self.options, self.cache_dir = builder, options, cache_dir
        self.t0 = time.perf_counter()
        self.graph = graph if graph is not None else KnowledgeGraph()
        self.parsekg = ParseKG() if builder == "parsekg" else None
        self.stats = GraphBuildStats(builder or "", passages=0)
        self.res = _Resolver(self.graph) if builder in ("mentions", "parsekg") else None
        self.llm_results: dict[str, Any] = {}
        #: seconds spent merging on the driver (unpickling + the builder's global half)
        self.add_s = 0.0

    def add(self, passage: Passage, blob: bytes) -> None:
        if self.builder == "mentions":
            from .builders.mentions import add_mentions

            parsed = pickle.loads(blob)
            parsed.passage = passage
            self.stats.sentences += len(parsed.sentences)
            add_mentions(
                parsed,
                self.res,
                self.stats,
                max_between=self.options.get("max_between", 10),
                window=self.options.get("window", 3),
            )
        elif self.builder == "parsekg":
            from .builders.parsekg import add_parsed

            parsed = pickle.loads(blob)
            parsed.passage = passage
            add_parsed(parsed, self.res, self.parsekg, self.stats, self.options.get("resolve_pronouns", True))
        elif self.builder == "llm":
            self.llm_results.update(pickle.loads(blob))

    def finish(self, passages: list[Passage], llm: Any) -> tuple[KnowledgeGraph, ParseKG | None, dict | None]:
        g, stats = self.graph, self.stats
        if self.builder in ("mentions", "parsekg"):
            stats.passages = len(passages)
            stats.entities, stats.triples = g.num_entities, g.num_triples
            if self.parsekg is not None:
                stats.sentences = self.parsekg.num_sentences
                stats.hyperrelations = self.parsekg.num_hyperrelations
            stats.seconds = time.perf_counter() - self.t0
            return g, self.parsekg, stats.to_dict()
        if self.builder == "llm":
            return self._finish_llm(passages, llm)
        return g, None, None

    def _finish_llm(self, passages: list[Passage], llm: Any) -> tuple[KnowledgeGraph, None, dict]:
        """Store the workers' valid chunk results in the extraction cache, then run the builder's
        own (sequential, order-deterministic) resolution over it: every worker-extracted chunk is
        a cache hit, so the graph is the single-process one. Chunks that failed or fell back on a
        worker are not cached and are asked once more from this process, as a rebuild would."""
        from .builders.llm_extract import _model_key, _write_cache, build_llm_graph

        assert self.cache_dir is not None
        driver_llm = llm() if _is_factory(llm, "complete") else llm
        model_key = _model_key(driver_llm)
        calls = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "unparsed": 0}
        for key, res in self.llm_results.items():
            for name in calls:
                calls[name] += getattr(res, name if name != "llm_calls" else "calls")
            if not (res.failed or res.fallback or res.from_cache):
                _write_cache(self.cache_dir / f"{key}.json", model_key, res, True, True)
        opts = {k: v for k, v in self.options.items() if k in ("max_words", "overlap", "concurrency")}
        g, stats = build_llm_graph(
            passages, driver_llm, cache_dir=self.cache_dir, graph=self.graph, progress=False, **opts
        )
        out = stats.to_dict()
        for name, n in calls.items():  # the LLM work done on the workers
            out[name] += n
        out["chunks_extracted_on_workers"] = len(self.llm_results)
        out["builder"] = "llm"
        return g, None, out


def build_index_cli(
    args: Any, passages: list[Passage], graph: KnowledgeGraph | None, use_llm: bool, settings: dict[str, Any]
) -> "KnowledgeIndex":
    """``kgrag index --engine ray``: :func:`build_index_ray` from the parsed arguments (a missing
    extra becomes a ``ValueError``, which the CLI prints as one line)."""
    from ..models.llm import OpenAICompatibleLLM

    try:
        return build_index_ray(
            passages,
            args.out,
            builder=args.builder,
            graph=graph,
            llm=OpenAICompatibleLLM.from_env if use_llm else None,  # each worker opens its own client
            address=args.address,
            num_cpus=args.num_cpus,
            partitions=args.partitions,
            entity_vectors=args.entity_vectors,
            settings=settings,
            progress=True,
        )
    except RayNotInstalledError as e:
        raise ValueError(str(e)) from e
