"""Core value types shared by every method and adapter (DESIGN.md principle 5).

All types are small dataclasses with ``to_dict``/``from_dict`` for a JSON round trip.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")

#: ``Evidence.trace`` key of a retriever's fallback(s): ``{"to": "dense", "reason": "no entity
#: found"}``; a second fallback of the same call goes into that dict's ``"also"`` list
#: (:func:`note_fallback`, read back by :attr:`Evidence.fallback`).
FALLBACK_KEY = "fallback"
#: ``Evidence.trace`` key naming what the passage scores are (``"cosine"``, ``"BM25"``, ...).
SCORE_KIND_KEY = "score_kind"
#: The entity-slot mask of masked relation texts (ParseKG hyperrelations, ``mentions`` relations).
MASK = "##"
#: KG-Translator's entity / relation separator in clues (``ENTITY@@ RELATION``).
CLUE_SEP = "@@"
_MASK_RE = re.compile(r"(?<!#)(?:##)+(?!#)")
_SEP_RE = re.compile(r"\s*(?<!@)@@(?!@)\s*")


def readable_text(text: str) -> str:
    """``text`` for people and LLMs: each ``##`` entity mask shown as ``…`` and the clue separator
    ``@@`` as ``": "`` (what is left when the masked names cannot be filled back in)."""
    if MASK not in text and CLUE_SEP not in text:
        return text
    return " ".join(_SEP_RE.sub(": ", _MASK_RE.sub("…", text)).split())


def note_fallback(trace: dict[str, Any], to: str, reason: str) -> None:
    """Record in ``trace`` that the retriever fell back to ``to`` (``"dense"``, ``"the LLM-free
    path"``, ...) because of ``reason`` (``"no entity found"``); see :attr:`Evidence.fallback`.
    A second, different fallback is appended to ``trace["fallback"]["also"]``."""
    entry = {"to": str(to), "reason": str(reason)}
    have = trace.get(FALLBACK_KEY)
    if not isinstance(have, dict):
        trace[FALLBACK_KEY] = entry
    elif entry not in fallbacks_of(trace):
        have.setdefault("also", []).append(entry)


def fallbacks_of(trace: dict[str, Any]) -> list[dict[str, str]]:
    """Every fallback recorded in ``trace`` as ``{"to", "reason"}`` dicts, first first (a bare
    string value, as older traces wrote it, reads as ``{"to": value, "reason": ""}``)."""
    have = trace.get(FALLBACK_KEY)
    if not have:
        return []
    if not isinstance(have, dict):
        return [{"to": str(have), "reason": ""}]
    first = {"to": str(have.get("to", "")), "reason": str(have.get("reason", ""))}
    return [first] + [{"to": str(a.get("to", "")), "reason": str(a.get("reason", ""))} for a in have.get("also", [])]


class _JSONMixin:
    """``to_dict`` / ``from_dict`` for flat dataclasses of JSON-able fields."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
        return cls(**data)


@dataclass
class Passage(_JSONMixin):
    """A unit of text in the corpus. ``id`` is unique within an index."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def embed_text(self) -> str:
        """Text that gets embedded: ``title + "\\n" + text`` (title omitted if empty)."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass
class Entity(_JSONMixin):
    """A knowledge-graph node."""

    id: str
    name: str
    aliases: list[str] = field(default_factory=list)
    description: str = ""
    type: str = ""


@dataclass
class Triple(_JSONMixin):
    """A directed fact ``head -[relation]-> tail`` between entity ids.

    ``source_ids`` are the passages the fact was read from (empty for curated KGs).
    """

    head: str
    relation: str
    tail: str
    source_ids: list[str] = field(default_factory=list)

    def verbalize(self, names: dict[str, str] | None = None) -> str:
        """``"head relation tail"`` using entity names when given."""
        n = names or {}
        return f"{n.get(self.head, self.head)} {self.relation} {n.get(self.tail, self.tail)}"


@dataclass
class Path(_JSONMixin):
    """A reasoning path ``e0 -r1-> e1 -r2-> ... -> en`` (``len(relations) == len(nodes) - 1``).

    ``inverse[i]`` marks an edge walked against its triple's direction (the triple is
    ``nodes[i+1] relations[i] nodes[i]``); such steps verbalise as ``e0 <- r1 <- e1``.
    """

    nodes: list[str]
    relations: list[str]
    score: float = 0.0
    inverse: list[bool] | None = None

    def __post_init__(self) -> None:
        if self.nodes and len(self.relations) != len(self.nodes) - 1:
            raise ValueError(
                f"Path needs len(relations) == len(nodes) - 1, got {len(self.relations)} "
                f"relations for {len(self.nodes)} nodes"
            )
        if self.inverse is not None and len(self.inverse) != len(self.relations):
            raise ValueError(f"Path.inverse needs one flag per relation, got {len(self.inverse)}")

    def verbalize(self, names: dict[str, str] | None = None) -> str:
        """FRAG-style verbalisation ``e0 -> r1 -> e1 -> ...`` (``<- r <-`` for inverse steps)."""
        n = names or {}
        out = n.get(self.nodes[0], self.nodes[0]) if self.nodes else ""
        inv = self.inverse or [False] * len(self.relations)
        for rel, back, node in zip(self.relations, inv, self.nodes[1:]):
            arrow = "<-" if back else "->"
            out += f" {arrow} {rel} {arrow} {n.get(node, node)}"
        return out


@dataclass
class ScoredPassage(_JSONMixin):
    """A retrieved passage with its retriever score (higher is better)."""

    passage: Passage
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"passage": self.passage.to_dict(), "score": self.score}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ScoredPassage":
        return cls(passage=Passage.from_dict(data["passage"]), score=float(data["score"]))


@dataclass
class Fact(_JSONMixin):
    """A verbalised piece of structured evidence: a triple, a path or a clue.

    Retrievers write ``text`` with entity names (the ``##`` masks of masked relation texts filled
    back in, :mod:`kgrag_plugins.methods.facts`); the raw masked text, when there was one, is kept
    in ``data["masked"]``. :attr:`display` is the form to show people and LLMs.
    """

    text: str
    kind: str = "fact"  # "fact" | "path" | "clue"
    score: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def display(self) -> str:
        """``text`` with any ``##`` mask left shown as ``…`` and ``@@`` as ``": "`` (never raw
        masks; for the facts retrievers return this is ``text`` itself)."""
        return readable_text(self.text)


@dataclass
class Evidence:
    """What every retriever returns: scored passages, facts, and an explainable trace.

    Two trace keys every retriever sets, readable as properties (they survive ``to_dict``):

    - ``trace["score_kind"]`` -> :attr:`score_kind`: what the passage scores are (``"cosine"``,
      ``"BM25"``, ``"fusion rank (RRF)"``, ``"PPR mass"``, ...); higher is always better.
    - ``trace["fallback"]`` -> :attr:`fallback`: set only when the retriever did not run as
      designed and took a simpler path, ``{"to": "dense", "reason": "no entity found"}``
      (:func:`note_fallback`); :attr:`fallback` reads ``"fell back to dense: no entity found"``.
    """

    query: str
    passages: list[ScoredPassage] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def passage_ids(self) -> list[str]:
        return [sp.passage.id for sp in self.passages]

    @property
    def score_kind(self) -> str | None:
        """What the passage scores are (``trace["score_kind"]``; higher is better), or ``None``."""
        kind = self.trace.get(SCORE_KIND_KEY)
        return str(kind) if kind else None

    @property
    def fallbacks(self) -> list[dict[str, str]]:
        """Every fallback of this retrieval as ``{"to", "reason"}`` dicts (empty: none)."""
        return fallbacks_of(self.trace)

    @property
    def fallback(self) -> str | None:
        """``None`` when the retriever ran as designed, else why it did not, for people:
        ``"fell back to dense: no entity found"`` (several joined by ``"; "``)."""
        parts = [f"fell back to {f['to']}" + (f": {f['reason']}" if f["reason"] else "") for f in self.fallbacks]
        return "; ".join(parts) or None

    def top(self, k: int) -> "Evidence":
        """A copy keeping only the first ``k`` passages."""
        return Evidence(self.query, self.passages[:k], list(self.facts), dict(self.trace))

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "passages": [sp.to_dict() for sp in self.passages],
            "facts": [f.to_dict() for f in self.facts],
            "trace": self.trace,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Evidence":
        return cls(
            query=data["query"],
            passages=[ScoredPassage.from_dict(d) for d in data.get("passages", [])],
            facts=[Fact.from_dict(d) for d in data.get("facts", [])],
            trace=dict(data.get("trace", {})),
        )


@dataclass
class Answer:
    """A generated (or LLM-free extracted) answer with the evidence it rests on."""

    question: str
    text: str
    evidence: Evidence | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "text": self.text,
            "evidence": self.evidence.to_dict() if self.evidence else None,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Answer":
        ev = data.get("evidence")
        return cls(
            question=data["question"],
            text=data["text"],
            evidence=Evidence.from_dict(ev) if ev else None,
            metadata=dict(data.get("metadata", {})),
        )
