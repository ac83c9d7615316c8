"""Token-level constraint indexes for KG-Translator's constrained decoding (paper §3.3, Eq. 4-6;
docs/methods.md §3(a) steps 3-4 and §7).

* :class:`TokenTrie` -- the entity constraint ``C_H`` (Eq. 4): a dict-of-dicts trie over the
  token ids of head-entity names. ``allowed_next(prefix)`` is the set of tokens that keep the
  prefix a prefix of some stored sequence.
* :class:`SpanIndex` -- the relation constraint ``F_R`` (Eq. 6): token sequences of one
  entity's hyperrelations (R+ forward, R- reverse); ``allowed_next(prefix)`` is the set of
  tokens ``t`` such that ``prefix + [t]`` is a contiguous substring of one of them (any start
  position), plus the end-of-relation id (always allowed once the span is non-empty, and the
  only choice at the length cap of 16 tokens).
* :class:`ConstraintIndex` -- both, built from a :class:`~kgrag_plugins.index.parsekg.ParseKG`
  and a tokenizer, with the tokenisation conventions the decoders use.

Decisions (docs/methods.md §3(d) / §7), also in ``docs/translator.md``:

* **Dict trie, not marisa-trie** (not installed; a dict trie is exact, needs no build step and
  its build time / memory are measured in the docs).
* **Linear scan, not an FM-index / suffix array.** A head entity has a handful of
  hyperrelations (Table 5: about 3-4), so the per-entity index is a token -> positions map over
  the concatenated sequences and a lookup scans only the occurrences of the prefix's first token.
  Per-entity indexes are built lazily on first use and cached (LRU, ``cache_size`` entities);
  nothing is persisted, so the index directory and ``store.py`` are untouched.
* **Tokenisation.** Entity names are tokenised bare (they start the answer). Hyperrelations are
  tokenised once each as ``RELATION_PREFIX + text`` (a leading space): after the ``@@``
  separator the model writes `` was born in``, and every word inside a sentence carries its
  leading space in byte-level BPE, so a span starting at any word has the same ids as in the
  full hyperrelation. Training targets must use :func:`format_clue` (``"ENTITY@@ RELATION"``)
  so the model learns the same ids. Spans may start at any token (also inside a word; the
  paper leaves word boundaries open): a decoded span is always a substring of the hyperrelation.
* **Reverse direction** uses the entities that are tails of some hyperrelation and their R-.
"""

from __future__ import annotations

import logging
import time
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_RELATION_TOKENS",
    "RELATION_PREFIX",
    "SEPARATOR",
    "ConstraintIndex",
    "SpanIndex",
    "TokenTrie",
    "format_clue",
    "graph_names",
    "make_encoder",
    "parse_clue",
]

#: The clue separator of prompt ❶ (App. M): ``ENTITY@@RELATION``.
SEPARATOR = "@@"
#: Prepended to every hyperrelation before tokenising (the leading-space convention after ``@@``).
RELATION_PREFIX = " "
#: Relation spans are at most this many tokens (paper §4, App. F.3).
MAX_RELATION_TOKENS = 16

Direction = Literal["forward", "reverse"]


def format_clue(entity: str, relation: str) -> str:
    """The decoded / training form of a clue: ``ENTITY@@ RELATION`` (see the module doc)."""
    return f"{entity.strip()}{SEPARATOR}{RELATION_PREFIX}{relation.strip()}"


def parse_clue(text: str) -> tuple[str, str] | None:
    """``(entity, relation)`` from ``"ENTITY@@RELATION"`` (either spacing), ``None`` without ``@@``."""
    if SEPARATOR not in text:
        return None
    ent, _, rel = text.partition(SEPARATOR)
    ent, rel = ent.strip(), rel.strip()
    return (ent, rel) if ent else None


def make_encoder(tokenizer: Any) -> Callable[[str], list[int]]:
    """``text -> token ids`` without special tokens, for a transformers tokenizer or a
    ``tokenizers.Tokenizer``; a plain callable is used as is."""
    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "get_vocab") and hasattr(tokenizer, "decoder"):
        enc = tokenizer.encode  # tokenizers.Tokenizer: .encode(...).ids
        probe = enc("a", add_special_tokens=False)
        if hasattr(probe, "ids"):
            return lambda text: list(enc(text, add_special_tokens=False).ids)
    if hasattr(tokenizer, "encode"):
        return lambda text: list(tokenizer.encode(text, add_special_tokens=False))
    if callable(tokenizer):
        return lambda text: list(tokenizer(text))
    raise TypeError(f"tokenizer must have .encode(text) or be callable, got {type(tokenizer).__name__}")


def graph_names(graph: Any) -> Callable[[str], str]:
    """``entity id -> name`` from a :class:`~kgrag_plugins.index.graph.KnowledgeGraph` (the id
    itself for an id the graph does not know)."""

    def name_of(eid: str) -> str:
        try:
            return graph.name_of(eid)
        except KeyError:
            return eid

    return name_of


class TokenTrie:
    """A dict-of-dicts trie over token-id sequences; each complete sequence maps to a value.

    ``allowed_next(prefix)`` = ``{s[len(prefix)] for s in sequences if s starts with prefix and
    is longer}`` (the empty set when nothing continues).
    """

    _END = -1  # key holding the values of a complete sequence (token ids are >= 0)

    def __init__(self, items: Iterable[tuple[Sequence[int], Any]] = ()) -> None:
        self.root: dict[int, Any] = {}
        self.size = 0
        for ids, value in items:
            self.add(ids, value)

    def add(self, ids: Sequence[int], value: Any = None) -> None:
        node = self.root
        for t in ids:
            node = node.setdefault(int(t), {})
        vals = node.setdefault(self._END, [])
        if not vals:
            self.size += 1
        if value not in vals:
            vals.append(value)

    def _node(self, prefix: Sequence[int]) -> dict[int, Any] | None:
        node = self.root
        for t in prefix:
            node = node.get(int(t))
            if node is None:
                return None
        return node

    def allowed_next(self, prefix: Sequence[int]) -> set[int]:
        node = self._node(prefix)
        return set() if node is None else {t for t in node if t != self._END}

    def values(self, ids: Sequence[int]) -> list[Any]:
        """Values stored for exactly ``ids`` (``[]`` when it is not a complete sequence)."""
        node = self._node(ids)
        return list(node.get(self._END, [])) if node is not None else []

    def __contains__(self, ids: object) -> bool:
        return isinstance(ids, (list, tuple)) and bool(self.values(ids))

    def __len__(self) -> int:
        return self.size


class SpanIndex:
    """Substring constraint over a few token sequences (one entity's hyperrelations).

    ``allowed_next(prefix)`` is every token that extends ``prefix`` to a contiguous substring of
    some sequence, plus ``end_id`` (when given) once ``prefix`` is non-empty; at ``max_len``
    tokens only ``end_id`` is allowed. With no sequences the empty prefix allows only ``end_id``.
    """

    def __init__(self, sequences: Sequence[Sequence[int]], *, end_id: int | None = None, max_len: int = 16) -> None:
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.sequences = [tuple(int(t) for t in s) for s in sequences]
        self.end_id, self.max_len = end_id, max_len
        self._pos: dict[int, list[tuple[int, int]]] = {}
        for i, s in enumerate(self.sequences):
            for j, t in enumerate(s):
                self._pos.setdefault(t, []).append((i, j))
        self._first = set(self._pos)
        self._memo: dict[tuple[int, ...], frozenset[int]] = {}

    def _extensions(self, prefix: tuple[int, ...]) -> frozenset[int]:
        hit = self._memo.get(prefix)
        if hit is not None:
            return hit
        n, out = len(prefix), set()
        for i, j in self._pos.get(prefix[0], ()):
            s = self.sequences[i]
            if j + n < len(s) and s[j : j + n] == prefix:
                out.add(s[j + n])
        res = frozenset(out)
        if len(self._memo) < 65536:
            self._memo[prefix] = res
        return res

    def contains(self, span: Sequence[int]) -> bool:
        """``True`` when ``span`` (non-empty) is a contiguous substring of some sequence."""
        span = tuple(int(t) for t in span)
        if not span:
            return False
        n = len(span)
        return any(self.sequences[i][j : j + n] == span for i, j in self._pos.get(span[0], ()))

    def allowed_next(self, prefix: Sequence[int]) -> set[int]:
        prefix = tuple(int(t) for t in prefix)
        end = set() if self.end_id is None else {self.end_id}
        if not prefix:
            return set(self._first) if self._first else end
        if len(prefix) >= self.max_len:
            return end
        return set(self._extensions(prefix)) | end

    def __len__(self) -> int:
        return len(self.sequences)


class ConstraintIndex:
    """Entity tries and per-entity relation span indexes of one ParseKG for one tokenizer.

    ``names`` maps a ParseKG entity id to its surface name (``index.graph.name_of``); without
    it the ids are the names. ``end_id`` is the id that ends a relation span (default: the
    tokenizer's ``eos_token_id``). Use :meth:`from_index` for a
    :class:`~kgrag_plugins.index.store.KnowledgeIndex` built with ``builder="parsekg"``.
    """

    def __init__(
        self,
        parsekg: Any,
        tokenizer: Any,
        *,
        names: Mapping[str, str] | Callable[[str], str] | None = None,
        end_id: int | None = None,
        max_relation_tokens: int = MAX_RELATION_TOKENS,
        cache_size: int = 4096,
    ) -> None:
        if parsekg is None:
            raise ValueError("ConstraintIndex needs a ParseKG: build the index with builder='parsekg'")
        self.parsekg = parsekg
        self.tokenizer = tokenizer
        self.encode = make_encoder(tokenizer)
        self.end_id = getattr(tokenizer, "eos_token_id", None) if end_id is None else end_id
        self.max_relation_tokens = int(max_relation_tokens)
        self.cache_size = int(cache_size)
        if names is None:
            self._name: Callable[[str], str] = str
        elif callable(names):
            self._name = names
        else:
            self._name = lambda e, m=names: m.get(e, e)
        self._tries: dict[tuple[str, tuple[int, ...]], TokenTrie] = {}
        self._by_name: dict[str, dict[str, list[str]]] = {}
        self._hyper_ids: dict[int, tuple[int, ...]] = {}
        self._spans: OrderedDict[tuple[str, str], SpanIndex] = OrderedDict()
        self.stats: dict[str, float] = {}

    @classmethod
    def from_index(cls, index: Any, tokenizer: Any, **kwargs: Any) -> "ConstraintIndex":
        """Build over ``index.parsekg`` with entity names from ``index.graph``."""
        pkg = getattr(index, "parsekg", None)
        if pkg is None:
            raise ValueError("this index has no ParseKG: build it with KnowledgeIndex.build(..., builder='parsekg')")
        return cls(pkg, tokenizer, names=graph_names(index.graph), **kwargs)

    # ------------------------------------------------------------------ entities
    def _entity_ids(self, direction: Direction) -> list[str]:
        if direction == "forward":
            return self.parsekg.head_entities()
        if direction == "reverse":
            kg = self.parsekg
            return kg.tail_entities()  # entities with an R-
        raise ValueError(f"direction must be 'forward' or 'reverse', got {direction!r}")

    def names_by_entity(self, direction: Direction = "forward") -> dict[str, list[str]]:
        """``name -> [entity ids]`` for the entities usable in ``direction`` (heads / tails)."""
        out = self._by_name.get(direction)
        if out is None:
            out = {}
            for eid in self._entity_ids(direction):
                name = (self._name(eid) or "").strip()
                if name:
                    out.setdefault(name, []).append(eid)
            self._by_name[direction] = out
        return out

    def entity_trie(self, direction: Direction = "forward", terminator: Sequence[int] = ()) -> TokenTrie:
        """Trie over ``encode(name) + terminator`` for every entity name of ``direction``
        (``terminator`` = the separator ids and EOS for the decoders); built once, cached.
        ``stats`` records the build seconds and the traced memory in bytes."""
        key = (direction, tuple(int(t) for t in terminator))
        trie = self._tries.get(key)
        if trie is None:
            t0 = time.perf_counter()
            tracing = not tracemalloc.is_tracing()
            if tracing:
                tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            trie = TokenTrie()
            for name in self.names_by_entity(direction):
                ids = self.encode(name)
                if ids:
                    trie.add(list(ids) + list(key[1]), name)
            mem = tracemalloc.get_traced_memory()[0] - before
            if tracing:
                tracemalloc.stop()
            self.stats[f"trie_{direction}_seconds"] = time.perf_counter() - t0
            self.stats[f"trie_{direction}_bytes"] = float(mem)
            self.stats[f"trie_{direction}_names"] = float(len(trie))
            logger.info("entity trie (%s): %d names in %.3fs", direction, len(trie), time.perf_counter() - t0)
            self._tries[key] = trie
        return trie

    def entity_allowed_next(self, prefix: Sequence[int], direction: Direction = "forward") -> set[int]:
        """Tokens that keep ``prefix`` a prefix of some entity name's ids (Eq. 4)."""
        return self.entity_trie(direction).allowed_next(prefix)

    # ------------------------------------------------------------------ relations
    def hyperrelations(self, entity: str, direction: Direction = "forward") -> list[str]:
        """R+ (forward) or R- (reverse) texts of the entities called ``entity`` (a name; an
        unknown name gives ``[]``), corpus order, no duplicates."""
        return [self.parsekg.hyperrelation(h) for h in self._hyper_ids_of(entity, direction)]

    def _hyper_ids_of(self, entity: str, direction: Direction) -> list[int]:
        ids = self.names_by_entity(direction).get(entity.strip(), [])
        get = self.parsekg.out_hyperrelations if direction == "forward" else self.parsekg.in_hyperrelations
        return list(dict.fromkeys(h for e in ids for h in get(e)))

    def relation_tokens(self, hyper_id: int) -> tuple[int, ...]:
        """Token ids of ``RELATION_PREFIX + hyperrelation`` (tokenised once per hyperrelation)."""
        ids = self._hyper_ids.get(hyper_id)
        if ids is None:
            ids = self._hyper_ids[hyper_id] = tuple(self.encode(RELATION_PREFIX + self.parsekg.hyperrelation(hyper_id)))
        return ids

    def relation_index(self, entity: str, direction: Direction = "forward") -> SpanIndex:
        """The span index over ``entity``'s hyperrelations (built lazily, LRU-cached)."""
        key = (direction, entity.strip())
        idx = self._spans.get(key)
        if idx is not None:
            self._spans.move_to_end(key)
            return idx
        seqs = [self.relation_tokens(h) for h in self._hyper_ids_of(entity, direction)]
        idx = SpanIndex(seqs, end_id=self.end_id, max_len=self.max_relation_tokens)
        self._spans[key] = idx
        if len(self._spans) > self.cache_size:
            self._spans.popitem(last=False)
        return idx

    def relation_allowed_next(self, entity: str, prefix: Sequence[int], direction: Direction = "forward") -> set[int]:
        """Tokens that keep ``prefix`` a substring of one of ``entity``'s hyperrelations (Eq. 6),
        plus the end id once non-empty."""
        return self.relation_index(entity, direction).allowed_next(prefix)

    def is_valid(self, entity: str, relation: str, direction: Direction = "forward") -> bool:
        """``True`` when ``entity`` is a name of ``direction`` and ``relation`` (stripped) is a
        non-empty substring of one of its hyperrelations (the guarantee of constrained decoding)."""
        rel = relation.strip()
        return bool(rel) and any(rel in h for h in self.hyperrelations(entity, direction))
