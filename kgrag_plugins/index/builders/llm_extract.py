"""LLM entity/relation extraction into a :class:`KnowledgeGraph` (SA-RAG §5.3 indexing).

Implements docs/methods.md §4(a) "Indexing" steps 2-4 with the prompts of §4(c) (own wording, see
:mod:`.prompts`):

1. Word-window chunking: ``max_words`` words with stride ``max_words - overlap`` (paper run
   config 500 / 100; most MuSiQue / 2Wiki paragraphs are a single chunk).
2. Per chunk an NER call (JSON array of ``{name, type, aliases, entity_information}``), then an
   RE call (chunk text + ``named_entities: [...]`` -> ``{"triples": [[h, r, t], ...]}``, keeping
   only 3-element lists of non-empty strings).
3. Entity resolution: a new entity is merged into an existing one if the names are equal, the
   new name is one of its aliases, or one of the new aliases is its name (case-insensitive,
   whitespace-normalised); aliases are unioned. The first non-empty ``entity_information`` is
   the description; the first type is kept.
4. Each extracted entity is linked to the chunk's passage; each triple gets the passage id as
   its source.

Deviations from the paper code (``hajdul88/graph_rag``):

* **Triple endpoints are resolved through the same name/alias resolution** as entities (first
  the names and aliases extracted from this chunk, then all names/aliases in the graph). The
  paper code matches the *extracted* surface name against the stored canonical name, so when
  resolution had merged an entity into a node with a different name, its Document link and its
  RELATED_TO edges were silently dropped (docs/methods.md §4(d)). Here such triples are kept; triples
  whose endpoints do not resolve, and self-loops (both endpoints resolve to one entity), are
  dropped and counted in ``dropped_triples``.
* Output shape: both calls declare their JSON schema (:data:`NER_SCHEMA`, :data:`RE_SCHEMA`, as
  the paper's Ollama ``format``), enforced where the backend can (vLLM ``structured_outputs``,
  strict ``response_format``, the in-process logits processor; docs/structured.md). Replies are
  still parsed tolerantly (code fences, surrounding prose, a wrapping object, trailing commas,
  truncated arrays) for backends that cannot. Unparseable replies are logged and counted.
* No ``Description`` / ``Document`` nodes and no embeddings here: one description per entity on
  :class:`Entity`; chunk-to-entity links become passage-to-entity links (``graph.link``), and
  relation/description embeddings are computed by the retriever.
* The passage title (if any) is prepended to every chunk of the passage, so paragraphs that only
  say "he" / "the band" still name their subject. Types outside PERSON / ORGANIZATION / GPE /
  MISC are mapped to MISC. If the NER reply holds no entity, the RE call is skipped.
* Chunks are deduplicated by text within a run and cached on disk (``cache_dir``) so an
  interrupted build resumes without repeating LLM calls.
* Replies are validated (:func:`~kgrag_plugins.models.replies.complete_validated`): a valid NER
  reply holds a JSON list of entities (it may be empty), a valid RE reply a JSON list of triples.
  An invalid reply is asked once more; if it stays invalid the chunk *falls back*: no entities
  (NER) or no triples (RE; its entities are kept), a WARNING, a count in ``fallback_chunks``, and
  **no cache entry**, so a rebuild with a working LLM extracts it again. Cache files written with
  an unparsed reply (older versions did that) are ignored and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ...models.llm import LLMError, as_llm
from ...models.prompting import drop_instructions
from ...models.replies import InvalidReply, complete_validated
from ...models.structured import OutputSchema, json_schema
from ...types import Entity, Passage
from ..graph import KnowledgeGraph
from . import prompts
from .llm_replies import as_entity, as_triple, chunk_words, norm_name, parse_entities, parse_triples
from .prompts import PROMPT_VERSION

__all__ = ["ExtractionError", "ExtractionStats", "build_llm_graph", "chunk_words", "PROMPT_VERSION"]

logger = logging.getLogger("kgrag_plugins.build")

#: ``max_tokens`` passed with each extraction call (the HTTP client's default of 512 truncates
#: the NER output of dense chunks).
NER_MAX_TOKENS = 2048
RE_MAX_TOKENS = 2048

_NAME = {"type": "string", "minLength": 1}
#: The NER reply (prompts.NER_SYSTEM): a JSON array of entities with exactly the four keys.
NER_SCHEMA: OutputSchema = json_schema(
    "llm_extract_ner",
    {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": _NAME,
                "type": {"type": "string", "enum": list(prompts.ENTITY_TYPES)},
                "aliases": {"type": "array", "items": _NAME, "maxItems": 4},
                "entity_information": {"type": "string"},
            },
            "required": ["name", "type", "aliases", "entity_information"],
            "additionalProperties": False,
        },
    },
)
#: The RE reply (prompts.RE_SYSTEM): ``{"triples": [[head, relation, tail], ...]}``.
RE_SCHEMA: OutputSchema = json_schema(
    "llm_extract_re",
    {
        "type": "object",
        "properties": {
            "triples": {
                "type": "array",
                "items": {"type": "array", "items": _NAME, "minItems": 3, "maxItems": 3},
            }
        },
        "required": ["triples"],
        "additionalProperties": False,
    },
)


class ExtractionError(LLMError):
    """No chunk of an LLM extraction build produced a usable reply (unreachable LLM or invalid replies)."""


# --------------------------------------------------------------------------- stats


@dataclass
class ExtractionStats:
    """Counters of one :func:`build_llm_graph` run.

    ``failed`` counts passages with at least one chunk whose LLM call raised :class:`LLMError`
    (retries are the client's job); ``unparsed`` counts replies with no usable JSON (retries
    included); ``fallback_chunks`` counts distinct chunks whose NER or RE reply stayed invalid
    after one retry (they contribute nothing from that step and are not cached); ``cached``
    counts chunks answered without LLM calls (on-disk cache, or an identical chunk earlier in the
    same run). ``entities`` / ``triples`` are the entities and distinct triples *added* to the
    graph; ``dropped_triples`` are triples whose endpoints did not resolve to an entity (or
    resolved to the same one). Token counts use tiktoken ``cl100k_base`` over the message
    contents of calls actually made.
    """

    passages: int = 0
    llm_calls: int = 0
    cached: int = 0
    failed: int = 0
    unparsed: int = 0
    fallback_chunks: int = 0
    entities: int = 0
    triples: int = 0
    dropped_triples: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- tokens

_ENCODER: Any = None
_ENCODER_LOCK = threading.Lock()


def _fallback_count(text: str) -> int:
    return len(text.split()) * 4 // 3


def _token_counter() -> Callable[[str], int]:
    """tiktoken ``cl100k_base`` (offline cache) or, if it cannot load, ~4/3 tokens per word."""
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            try:
                from ...config import setup_offline_env

                setup_offline_env()
                import tiktoken

                enc = tiktoken.get_encoding("cl100k_base")
                _ENCODER = lambda text: len(enc.encode(text, disallowed_special=()))  # noqa: E731
            except Exception as exc:  # noqa: BLE001 - any failure means: approximate
                logger.warning("tiktoken cl100k_base unavailable (%s); approximating tokens as words*4/3", exc)
                _ENCODER = _fallback_count
        return _ENCODER


def _message_tokens(messages: list[dict[str, str]], count: Callable[[str], int]) -> int:
    return sum(count(m["content"]) for m in messages)


# --------------------------------------------------------------------------- per-chunk work


@dataclass
class _ChunkResult:
    entities: list[dict[str, Any]] = field(default_factory=list)
    triples: list[list[str]] = field(default_factory=list)
    failed: bool = False
    fallback: bool = False
    error: str = ""
    from_cache: bool = False
    calls: int = 0
    unparsed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _model_key(llm: Any) -> str:
    """Something that identifies the model behind ``llm`` (part of the cache key)."""
    for obj in (llm, getattr(llm, "chat_model", None), getattr(llm, "llm", None)):
        if obj is None:
            continue
        for attr in ("model", "model_name"):
            value = getattr(obj, attr, None)
            if isinstance(value, str) and value:
                return value
    return type(llm).__name__


def _cache_key(model_key: str, text: str) -> str:
    return hashlib.sha256(f"{PROMPT_VERSION}\x00{model_key}\x00{text}".encode()).hexdigest()[:24]


def _read_cache(path: Path) -> _ChunkResult | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("prompt_version") != PROMPT_VERSION:
            return None
        if data.get("ner_parsed") is False or data.get("re_parsed") is False:
            return None  # an invalid reply was cached by an older version: extract again
        ents = [e for e in (as_entity(x) for x in data["entities"]) if e is not None]
        triples = [t for t in (as_triple(x) for x in data["triples"]) if t is not None]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        logger.warning("ignoring unreadable extraction cache file %s (%s)", path, exc)
        return None
    return _ChunkResult(entities=ents, triples=triples, from_cache=True)


def _write_cache(path: Path, model_key: str, result: _ChunkResult, ner_ok: bool, re_ok: bool) -> None:
    data = {
        "prompt_version": PROMPT_VERSION,
        "model": model_key,
        "ner_parsed": ner_ok,
        "re_parsed": re_ok,
        "entities": result.entities,
        "triples": result.triples,
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _extract_chunk(llm: Any, text: str, key: str, model_key: str, cache_dir: Path | None) -> _ChunkResult:
    """NER then RE for one chunk (runs on a worker thread); writes the cache when done."""
    path = cache_dir / f"{key}.json" if cache_dir is not None else None
    if path is not None and path.exists():
        cached = _read_cache(path)
        if cached is not None:
            return cached
    count = _token_counter()
    res = _ChunkResult()
    errors: list[dict[str, Any]] = []

    class _Counted:
        """``llm`` with this chunk's call and token counting (and its schema support)."""

        supports_schema = getattr(llm, "supports_schema", False)
        record_reply = getattr(llm, "record_reply", None)

        @staticmethod
        def complete(messages: list[dict[str, str]], **kwargs: Any) -> str:
            res.calls += 1
            res.prompt_tokens += _message_tokens(messages, count)
            reply = llm.complete(messages, **kwargs)
            res.completion_tokens += count(reply)
            return reply

    def parsed(parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
        def validate(reply: str) -> Any:
            value = parse(reply)
            if value is None:
                res.unparsed += 1
                raise InvalidReply(f"no usable JSON {what} in the reply of chunk {key}: {reply[:200]!r}")
            return value

        return validate

    def step(
        name: str, messages: list[dict[str, str]], parse: Callable[[str], Any], what: str, n: int, schema: OutputSchema
    ) -> Any:
        out = complete_validated(
            _Counted,
            messages,
            parsed(parse, what),
            step=name,
            errors=errors,
            log=logger,
            schema=schema,
            max_tokens=n,
            temperature=0.0,
        )
        if out is None and errors and errors[-1]["kind"] == "llm_error":
            raise LLMError(errors[-1]["error"])
        return out

    try:
        entities = step("ner", prompts.ner_messages(text), parse_entities, "entity list", NER_MAX_TOKENS, NER_SCHEMA)
        if entities is None:
            res.fallback = True  # no LLM entities for this chunk; not cached
            entities = []
        res.entities = entities
        if entities:
            re_msgs = prompts.re_messages(text, [e["name"] for e in entities])
            triples = step("re", re_msgs, parse_triples, "triple list", RE_MAX_TOKENS, RE_SCHEMA)
            if triples is None:
                res.fallback = True  # entities kept, no triples; not cached
                triples = []
            res.triples = triples
    except (LLMError, TimeoutError) as exc:
        msg = str(exc) if isinstance(exc, LLMError) and errors else f"{type(exc).__name__}: {exc}"
        return _ChunkResult(
            failed=True,
            error=msg,
            calls=res.calls,
            unparsed=res.unparsed,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
        )
    if path is not None and not res.fallback:
        # Only valid results are cached: a chunk that fell back is extracted again next time.
        _write_cache(path, model_key, res, True, True)
    return res


# --------------------------------------------------------------------------- resolution


class _Resolver:
    """Name/alias resolution against the graph (docs/methods.md §4(a) step 4)."""

    def __init__(self, graph: KnowledgeGraph) -> None:
        self.graph = graph
        self.by_name: dict[str, str] = {}
        self.by_alias: dict[str, str] = {}
        for e in graph.entities():
            self._index(e.id, e.name, e.aliases)

    def _index(self, eid: str, name: str, aliases: Sequence[str]) -> None:
        self.by_name.setdefault(norm_name(name), eid)
        for a in aliases:
            self.by_alias.setdefault(norm_name(a), eid)

    def lookup(self, name: str) -> str | None:
        """An entity whose name or one of whose aliases is ``name``."""
        n = norm_name(name)
        return self.by_name.get(n) or self.by_alias.get(n)

    def find(self, name: str, aliases: Sequence[str]) -> str | None:
        """Same name, or new name among its aliases, or a new alias equal to its name."""
        eid = self.lookup(name)
        if eid is None:
            for a in aliases:
                eid = self.by_name.get(norm_name(a))
                if eid is not None:
                    break
        return eid

    def _slug(self, name: str) -> str:
        base = re.sub(r"[\W_]+", "_", name.casefold()).strip("_") or "entity"
        eid, i = base, 2
        while eid in self.graph:
            eid, i = f"{base}_{i}", i + 1
        return eid

    def add(self, ent: dict[str, Any]) -> str:
        """Merge ``ent`` into its resolved entity or create a new one; return the entity id."""
        name, aliases = ent["name"], ent["aliases"]
        eid = self.find(name, aliases)
        if eid is None:
            eid = self._slug(name)
            self.graph.add_entity(Entity(eid, name, list(aliases), ent["entity_information"], ent["type"]))
            self._index(eid, name, aliases)
            return eid
        old = self.graph.entity(eid)
        known = {norm_name(old.name), *(norm_name(a) for a in old.aliases)}
        new_aliases = []
        for a in (name, *aliases):
            if norm_name(a) not in known:
                known.add(norm_name(a))
                new_aliases.append(a)
        # add_entity merges: appends new aliases, keeps the first non-empty description and type.
        self.graph.add_entity(Entity(eid, old.name, new_aliases, ent["entity_information"], ent["type"]))
        self._index(eid, old.name, new_aliases)
        return eid


# --------------------------------------------------------------------------- build


@dataclass
class _Chunk:
    passage_id: str
    text: str
    key: str


def build_llm_graph(
    passages: Sequence[Passage],
    llm: Any,
    *,
    cache_dir: str | Path | None = None,
    concurrency: int = 4,
    progress: bool = True,
    graph: KnowledgeGraph | None = None,
    max_words: int = 500,
    overlap: int = 100,
) -> tuple[KnowledgeGraph, ExtractionStats]:
    """Build (or extend ``graph``) a knowledge graph by LLM NER + RE over ``passages``.

    Chunks are extracted by ``concurrency`` worker threads calling ``llm.complete``; results
    are applied to the graph in passage/chunk order on the calling thread, so the graph does
    not depend on ``concurrency`` or timing. With ``cache_dir`` each finished chunk's parsed
    NER + RE output is written atomically to ``cache_dir/<key>.json`` (key = sha256 of
    :data:`PROMPT_VERSION`, the model name and the chunk text), so a re-run after a crash makes
    no LLM calls for finished chunks. Replies that cannot be parsed are logged, counted in
    ``unparsed``; a chunk whose NER / RE reply stays invalid after one retry falls back (no
    entities / no triples from it), is counted in ``fallback_chunks`` and not cached; chunks
    whose LLM call raises :class:`LLMError` are logged, counted in ``failed`` and not cached. If
    every chunk fails or falls back, :class:`ExtractionError` (an ``LLMError``, so a ``RuntimeError``:
    nothing usable came from the LLM; ``kgrag index`` prints it as one line).

    Triple endpoints are resolved through the entity name/alias resolution (fixing the paper
    code's silent drop of edges whose endpoint was merged under another name, docs/methods.md §4(d));
    unresolved endpoints are counted in ``dropped_triples``.
    """
    llm = as_llm(llm)
    if llm is None:
        raise ValueError("build_llm_graph needs an LLM (got None)")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    chunk_words("", max_words, overlap)  # validate the window arguments up front
    t0 = time.perf_counter()
    graph = graph if graph is not None else KnowledgeGraph()
    cache = Path(cache_dir) if cache_dir is not None else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    model_key = _model_key(llm)
    stats = ExtractionStats(passages=len(passages))

    chunks: list[_Chunk] = []
    for p in passages:
        for window in chunk_words(p.text, max_words, overlap):
            text = f"{p.title}\n{window}" if p.title else window
            chunks.append(_Chunk(p.id, text, _cache_key(model_key, text)))
    jobs: dict[str, str] = {}  # key -> text, one job per distinct chunk text
    for c in chunks:
        jobs.setdefault(c.key, c.text)

    results: dict[str, _ChunkResult] = {}
    if jobs:
        from tqdm.auto import tqdm

        from ...config import progress_enabled

        bar = tqdm(total=len(jobs), desc="LLM extraction", unit="chunk", disable=not progress_enabled(progress))
        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kgrag-extract")
        futures: dict[Future, str] = {}
        try:
            for key, text in jobs.items():
                futures[pool.submit(_extract_chunk, llm, text, key, model_key, cache)] = key
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    results[futures[fut]] = fut.result()  # re-raises unexpected errors
                    bar.update(1)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # finished chunks are already cached
            raise
        finally:
            bar.close()
        pool.shutdown(wait=True)

    # Statistics: LLM work per distinct chunk, reuse per chunk occurrence.
    for res in results.values():
        stats.llm_calls += res.calls
        stats.unparsed += res.unparsed
        stats.prompt_tokens += res.prompt_tokens
        stats.completion_tokens += res.completion_tokens
    seen_keys: set[str] = set()
    failed_chunks = fallback_chunks = 0
    failed_passages: set[str] = set()
    last_error = ""
    for c in chunks:
        res = results[c.key]
        if res.from_cache or c.key in seen_keys:
            stats.cached += 1
        seen_keys.add(c.key)
        fallback_chunks += res.fallback
        if res.failed:
            failed_chunks += 1
            failed_passages.add(c.passage_id)
            last_error = res.error
    for key, res in results.items():
        if res.failed:
            logger.warning("LLM extraction failed for chunk %s: %s", key, res.error)
    stats.failed = len(failed_passages)
    stats.fallback_chunks = sum(res.fallback for res in results.values())
    if stats.fallback_chunks:
        logger.warning(
            "LLM extraction: %d of %d distinct chunk(s) fell back (reply invalid twice): they add no "
            "LLM entities/triples and are not cached, so a rebuild extracts them again",
            stats.fallback_chunks,
            len(results),
        )
    if chunks and failed_chunks + fallback_chunks == len(chunks) and fallback_chunks:
        raise ExtractionError(
            f"LLM extraction got no valid reply for any of the {len(chunks)} chunk(s) of {len(passages)} "
            f"passage(s) ({fallback_chunks} fell back after an invalid reply, {failed_chunks} failed) from "
            f"{_model_key(llm)}: check that KGRAG_LLM_MODEL is an instruction-following model; nothing was cached"
        )
    if chunks and failed_chunks == len(chunks):
        raise ExtractionError(
            f"LLM extraction failed for all {failed_chunks} chunk(s) of {len(passages)} passage(s): "
            f"the LLM could not be reached or kept failing ({_model_key(llm)}). Last error: {last_error}"
        )

    # Apply in passage / chunk order on this thread: deterministic regardless of concurrency.
    n_ent0, n_tri0 = graph.num_entities, graph.num_triples
    resolver = _Resolver(graph)
    for c in chunks:
        res = results[c.key]
        if res.failed:
            continue
        res.entities, res.triples = drop_instructions(res.entities, res.triples)  # injected instructions
        local: dict[str, str] = {}
        for ent in res.entities:
            eid = resolver.add(ent)
            graph.link(eid, c.passage_id)
            for n in (ent["name"], *ent["aliases"]):
                local.setdefault(norm_name(n), eid)
        for head, relation, tail in res.triples:
            hid = local.get(norm_name(head)) or resolver.lookup(head)
            tid = local.get(norm_name(tail)) or resolver.lookup(tail)
            if hid is None or tid is None or hid == tid:
                stats.dropped_triples += 1
                continue
            graph.add_triple(hid, relation, tid, [c.passage_id])
    stats.entities = graph.num_entities - n_ent0
    stats.triples = graph.num_triples - n_tri0
    stats.seconds = time.perf_counter() - t0
    logger.info("LLM graph extraction: %s", stats.to_dict())
    return graph, stats
