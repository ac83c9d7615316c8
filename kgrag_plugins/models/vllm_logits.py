"""KG-Translator's constrained decoding as a vLLM V1 logits processor (paper §3.3, Eq. 4-6;
docs/methods.md §3(a) steps 3-4, §7).

Load it into a server with ``--logits-processors kgrag_plugins.models.vllm_logits:KGTranslatorLogitsProcessor``
(``VLLMServer(logits_processors=[FQCN])``) or offline with ``vllm.LLM(logits_processors=[FQCN])``
(:class:`~kgrag_plugins.models.vllm.VLLMEngine`). A request opts in through its per-request
arguments, ``SamplingParams(extra_args=...)`` offline or the OpenAI field ``vllm_xargs`` over HTTP:

* ``kgrag_index``: path of a *constraint file* (below); ``kgrag_stage``: ``"entity"`` or ``"relation"``;
  ``kgrag_entity``: the entity name (relation stage); ``kgrag_direction``: ``"forward"`` (default)
  or ``"reverse"``;
* ``kgrag_probe_token``: a token id that is then the only one allowed (how a client detects
  that the processor is loaded, :func:`~kgrag_plugins.methods.translator.vllm_backend.processor_loaded`).

Requests without these arguments are not touched. The masking is exactly
:func:`kgrag_plugins.methods.translator.decoding.allowed_tokens_fn` (the HF backend's): entity
stage = the trie over ``name + "@@" ids + [eos]``, relation stage = contiguous substrings of the
entity's hyperrelation token sequences, EOS allowed once non-empty and forced at 16 tokens;
after EOS, or when nothing is allowed, only EOS.

**Decision: a self-contained constraint file.** The vLLM process runs in its own virtualenv
(vLLM pins torch / transformers / numpy) without kgrag's core dependencies (spaCy, scipy,
sentence-transformers, chromadb), so it cannot load a ``KnowledgeIndex``. The main venv exports
the token ids once (:func:`~kgrag_plugins.methods.translator.vllm_backend.export_constraints`,
JSON, format ``kgrag-translator-constraints`` v1: ``eos_id``, ``separator_ids``,
``max_relation_tokens`` and per direction ``entities`` = ``[[name, ids], ...]`` and ``relations`` =
``{name: [ids of " " + hyperrelation, ...]}``); this module reads it with the stdlib only and
caches it per path (and modification time). It imports nothing but the stdlib, and torch / vLLM
when vLLM is installed (the processor class exists only then; the constraint logic is usable
without vLLM, which is how the main test suite checks it against ``allowed_tokens_fn``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("kgrag_plugins.models.vllm_logits")

__all__ = ["FORMAT", "FQCN", "RequestArgs", "TranslatorConstraints", "load_constraints", "request_args"]

FORMAT = "kgrag-translator-constraints"
VERSION = 1
#: What ``--logits-processors`` / ``LLM(logits_processors=...)`` take.
FQCN = "kgrag_plugins.models.vllm_logits:KGTranslatorLogitsProcessor"
_STAGES = ("entity", "relation")
_DIRECTIONS = ("forward", "reverse")


@dataclass(frozen=True)
class RequestArgs:
    """The ``kgrag_*`` arguments of one request (see the module doc)."""

    index: str = ""
    stage: str = ""
    entity: str | None = None
    direction: str = "forward"
    probe_token: int | None = None


def request_args(extra: Mapping[str, Any] | None) -> RequestArgs | None:
    """Parse a request's ``extra_args`` / ``vllm_xargs``; ``None`` when it has no ``kgrag_*`` key.
    Raises ``ValueError`` (vLLM turns it into HTTP 400) for an invalid combination."""
    if not extra or not any(str(k).startswith("kgrag_") for k in extra):
        return None
    probe = extra.get("kgrag_probe_token")
    if probe is not None:
        if isinstance(probe, bool) or not isinstance(probe, int) or probe < 0:
            raise ValueError(f"kgrag_probe_token must be a token id, got {probe!r}")
        return RequestArgs(probe_token=int(probe))
    index, stage = extra.get("kgrag_index"), extra.get("kgrag_stage")
    direction = extra.get("kgrag_direction") or "forward"
    entity = extra.get("kgrag_entity")
    if not isinstance(index, str) or not index:
        raise ValueError("kgrag_index must be the path of a kgrag constraint file")
    if stage not in _STAGES:
        raise ValueError(f"kgrag_stage must be one of {_STAGES}, got {stage!r}")
    if direction not in _DIRECTIONS:
        raise ValueError(f"kgrag_direction must be one of {_DIRECTIONS}, got {direction!r}")
    if stage == "relation" and (not isinstance(entity, str) or not entity.strip()):
        raise ValueError("kgrag_stage='relation' needs kgrag_entity (the entity name)")
    return RequestArgs(index, stage, entity.strip() if isinstance(entity, str) else None, direction)


class _Spans:
    """Contiguous-substring constraint over a few token sequences (``SpanIndex`` semantics)."""

    def __init__(self, seqs: Sequence[Sequence[int]], eos: int, max_len: int) -> None:
        self.seqs = [tuple(int(t) for t in s) for s in seqs]
        self.eos, self.max_len = eos, max_len
        self.pos: dict[int, list[tuple[int, int]]] = {}
        for i, s in enumerate(self.seqs):
            for j, t in enumerate(s):
                self.pos.setdefault(t, []).append((i, j))

    def allowed(self, prefix: Sequence[int]) -> set[int]:
        if not prefix:
            return set(self.pos) or {self.eos}
        if len(prefix) >= self.max_len:
            return {self.eos}
        n, out = len(prefix), {self.eos}
        pre = tuple(prefix)
        for i, j in self.pos.get(pre[0], ()):
            s = self.seqs[i]
            if j + n < len(s) and s[j : j + n] == pre:
                out.add(s[j + n])
        return out


class TranslatorConstraints:
    """The token-level constraints of one ParseKG for one tokenizer, read from a constraint file."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        if data.get("format") != FORMAT or int(data.get("version", 0)) != VERSION:
            raise ValueError(f"not a {FORMAT} v{VERSION} file (format={data.get('format')!r})")
        self.eos = int(data["eos_id"])
        self.sep = [int(t) for t in data["separator_ids"]]
        self.max_len = int(data.get("max_relation_tokens", 16))
        self._dirs: dict[str, Mapping[str, Any]] = dict(data.get("directions", {}))
        self._tries: dict[str, dict[int, Any]] = {}
        self._spans: dict[tuple[str, str], _Spans] = {}
        self._lock = threading.Lock()

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> TranslatorConstraints:
        with open(path, encoding="utf-8") as fh:
            return cls(json.load(fh))

    def names(self, direction: str = "forward") -> list[str]:
        """The entity names of ``direction`` (file order)."""
        return [name for name, _ids in self._dirs.get(direction, {}).get("entities", [])]

    def hyperrelation_ids(self, entity: str, direction: str = "forward") -> list[list[int]]:
        return [list(s) for s in self._dirs.get(direction, {}).get("relations", {}).get(entity, [])]

    def _trie(self, direction: str) -> dict[int, Any]:
        trie = self._tries.get(direction)
        if trie is None:
            trie = {}
            tail = [*self.sep, self.eos]
            for _name, ids in self._dirs.get(direction, {}).get("entities", []):
                if not ids:
                    continue
                node = trie
                for t in [*ids, *tail]:
                    node = node.setdefault(int(t), {})
            with self._lock:
                self._tries[direction] = trie
        return trie

    def _span(self, entity: str, direction: str) -> _Spans:
        key = (direction, entity)
        sp = self._spans.get(key)
        if sp is None:
            sp = _Spans(self.hyperrelation_ids(entity, direction), self.eos, self.max_len)
            with self._lock:
                self._spans[key] = sp
        return sp

    def entity_allowed(self, generated: Sequence[int], direction: str = "forward") -> list[int]:
        """Next ids that keep ``generated`` on the entity trie (``[eos]`` after EOS / off the trie)."""
        if self.eos in generated:
            return [self.eos]
        node: dict[int, Any] | None = self._trie(direction)
        for t in generated:
            node = node.get(int(t)) if node is not None else None
            if node is None:
                break
        return sorted(node) if node else [self.eos]

    def relation_allowed(self, entity: str, generated: Sequence[int], direction: str = "forward") -> list[int]:
        """Next ids that keep ``generated`` a substring of ``entity``'s hyperrelations (+ EOS once non-empty)."""
        if self.eos in generated:
            return [self.eos]
        return sorted(self._span(entity, direction).allowed(generated)) or [self.eos]

    def allowed_fn(self, args: RequestArgs) -> Callable[[Sequence[int]], list[int]]:
        """``generated ids -> allowed ids`` for one request (the processor's per-row function)."""
        if args.probe_token is not None:
            tok = [args.probe_token]
            return lambda _gen: tok
        if args.stage == "entity":
            return lambda gen: self.entity_allowed(gen, args.direction)
        entity = args.entity or ""
        return lambda gen: self.relation_allowed(entity, gen, args.direction)


_CACHE: dict[str, tuple[float, TranslatorConstraints]] = {}
_CACHE_LOCK = threading.Lock()


def load_constraints(path: str | os.PathLike[str]) -> TranslatorConstraints:
    """The constraint file at ``path``, read once per (path, modification time)."""
    key = os.path.abspath(path)
    mtime = os.path.getmtime(key)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    cons = TranslatorConstraints.read(key)
    with _CACHE_LOCK:
        _CACHE[key] = (mtime, cons)
    logger.info("kgrag constraint file loaded: %s", key)
    return cons


_PROBE_ONLY = TranslatorConstraints({"format": FORMAT, "version": VERSION, "eos_id": 0, "separator_ids": []})


def _row_fn(extra: Mapping[str, Any] | None) -> Callable[[Sequence[int]], list[int]] | None:
    args = request_args(extra)
    if args is None:
        return None
    if args.probe_token is not None:
        return _PROBE_ONLY.allowed_fn(args)
    return load_constraints(args.index).allowed_fn(args)


try:  # the processor class exists only where vLLM is installed (its own venv)
    import torch
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates
except ImportError:  # pragma: no cover - the main venv has no vLLM
    LogitsProcessor = None  # type: ignore[assignment,misc]

if LogitsProcessor is not None:

    class KGTranslatorLogitsProcessor(LogitsProcessor):  # type: ignore[misc,valid-type]
        """vLLM V1 logits processor: masks each opted-in row to the translator's allowed ids."""

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            args = request_args(getattr(sampling_params, "extra_args", None))
            if args is not None and args.probe_token is None and not os.path.isfile(args.index):
                raise ValueError(f"kgrag_index: no constraint file at {args.index!r}")

        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
            self.device = device
            self.rows: dict[int, tuple[Callable[[Sequence[int]], list[int]], list[int]]] = {}

        def is_argmax_invariant(self) -> bool:
            return False

        def _new(self, params: Any, _prompt: list[int] | None, output: list[int]) -> Any:
            fn = _row_fn(getattr(params, "extra_args", None))
            return None if fn is None else (fn, output)

        def update_state(self, batch_update: BatchUpdate | None) -> None:
            process_dict_updates(self.rows, batch_update, self._new)

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            if not self.rows:
                return logits
            vocab = logits.shape[-1]
            for row, (fn, output) in self.rows.items():
                allowed = [t for t in fn(output) if 0 <= t < vocab]
                keep = torch.tensor(allowed, dtype=torch.long, device=logits.device)
                masked = torch.full_like(logits[row], float("-inf"))
                masked[keep] = logits[row, keep]
                logits[row] = masked
            return logits

    __all__ += ["KGTranslatorLogitsProcessor"]
