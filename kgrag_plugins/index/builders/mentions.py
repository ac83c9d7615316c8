"""LLM-free entity graph from passage titles and spaCy mentions (``builder="mentions"``).

The graph the LLM-free spreading-activation (docs/methods.md §1(e), §4(e)) and hop-aware plug-ins
run on:

* **Entities**: one per passage title and one per distinct NER mention, merged by
  :func:`~kgrag_plugins.index.builders.linking.name_key`. Inside a titled passage, mentions of the
  title, of its undisambiguated form and of its last word ("Snow" in "Hank Snow") are the title
  entity. Numeric/date NER types (``NUMERIC_TYPES``) are not made nodes: they would be hubs that
  join unrelated passages ("1990"); they stay visible in relation texts.
* **Descriptions**: the first sentence of the passage titled by the entity, else the sentence
  of its first mention.
* **Links**: entity <-> every passage that mentions it (title entities <-> their passage).
* **Triples**: entities co-occurring in a sentence, ``earlier -> later``, relation text = the
  words between them when there are 1..``max_between`` of them, else the sentence with the
  mentions masked as ``##``; pairs are taken among mentions at most ``window`` apart (lists of
  names would otherwise give quadratically many edges). A sentence that starts with a pronoun
  ("He was born in ...") counts as mentioning the passage's title entity (cheap coreference).
  The title entity also gets an edge to every other entity of its passage, relation text = the
  masked sentence of that entity's first mention, so each passage is a connected star.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

from ...models.prompting import is_instruction
from ...types import Entity, Passage
from ..graph import KnowledgeGraph
from .linking import NameIndex, name_key, title_base, title_keys, usable_key
from .nlp import ParsedPassage, parse_passages

NUMERIC_TYPES = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})
_MAX_RELATION_WORDS = 40
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+(?=\S{3})")


@dataclass
class GraphBuildStats:
    """Counts and timings of one builder run."""

    builder: str
    passages: int = 0
    entities: int = 0
    triples: int = 0
    links: int = 0
    hyperrelations: int = 0
    sentences: int = 0
    spacy_s: float = 0.0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def timed(parsed: Iterator[ParsedPassage], stats: GraphBuildStats) -> Iterator[ParsedPassage]:
    """Pass parsed passages through, adding the time spent waiting for spaCy to ``stats.spacy_s``."""
    while True:
        t = time.perf_counter()
        item = next(parsed, None)
        stats.spacy_s += time.perf_counter() - t
        if item is None:
            return
        yield item


class _Resolver:
    """Creates or finds entities while a builder walks the corpus."""

    def __init__(self, graph: KnowledgeGraph):
        self.graph = graph
        self.names = NameIndex.from_graph(graph, aliases=False)
        # ids of entities named by a passage title (their description is that passage's first
        # sentence); kept in graph.meta so extending a saved graph knows them too
        self.titled: set[str] = set(graph.meta.get("title_entities", ()))

    def _new_id(self, key: str) -> str:
        eid, n = key, 2
        while eid in self.graph:
            eid, n = f"{key}#{n}", n + 1
        return eid

    def title_entity(self, title: str, description: str) -> str:
        key = name_key(title)
        eid = self.names.get(key)
        if eid is None:
            eid = self._new_id(key)
            self.graph.add_entity(Entity(eid, title.strip(), description=description))
            self.names.add(key, eid)
        # "Brand (play)" / "WILM (AM)" / "Edsa Shangri-La, Manila": the short form is an alias,
        # used to link questions ("the author of Brand") when no entity has it as its name.
        # It is not added to the builder's own name index: the word "Brand" in some other
        # passage should not silently become the play.
        base = title_base(title)
        short = [base] if base != title.strip() else []
        if "," in base:
            short.append(base.split(",")[0].strip())
        short = [a for a in short if usable_key(name_key(a)) and name_key(a) != key]
        if short:
            self.graph.add_entity(Entity(eid, title.strip(), aliases=short))
        elif eid not in self.titled:
            # first seen as a mention ("the University of Paris"): the title names it now
            self.graph.set_name(eid, title.strip())
            if description:
                self.graph.set_description(eid, description)
        if eid not in self.titled:
            self.titled.add(eid)
            self.graph.meta.setdefault("title_entities", []).append(eid)
        return eid

    def passage_title(self, parsed: ParsedPassage) -> tuple[str | None, set[str]]:
        """The passage's title entity (created if needed) and the keys that name it inside the
        passage; ``(None, set())`` for an untitled passage."""
        p = parsed.passage
        if not p.title.strip() or not usable_key(name_key(p.title)):
            return None, set()
        first = parsed.sentence_text(0).strip() if parsed.sentences else p.text[:300]
        return self.title_entity(p.title, first), title_keys(p.title, parsed.title_is_person)

    def mention_entity(self, text: str, label: str, sentence: str) -> str | None:
        key = name_key(text)
        if not usable_key(key):
            return None
        eid = self.names.get(key)
        if eid is None:
            eid = self._new_id(key)
            name = _LEADING_ARTICLE.sub("", text.strip())  # "the University of Paris" -> "University of Paris"
            self.graph.add_entity(Entity(eid, name, description=sentence.strip(), type=label))
            self.names.add(key, eid)
        return eid


def _mask(text: str, spans: list[tuple[int, int]], offset: int) -> str:
    out, pos = [], 0
    for a, b in sorted(spans):
        a, b = a - offset, b - offset
        if a < pos:
            continue
        out.append(text[pos:a])
        out.append("##")
        pos = b
    out.append(text[pos:])
    words = " ".join("".join(out).split()).split(" ")
    return " ".join(words[:_MAX_RELATION_WORDS])


def _between(text: str, max_words: int) -> str | None:
    words = text.strip(" ,;:()\"'\u2013-").split()
    if 1 <= len(words) <= max_words:
        return " ".join(words)
    return None


def add_mentions(
    parsed: ParsedPassage,
    res: _Resolver,
    stats: GraphBuildStats,
    *,
    max_between: int = 10,
    window: int = 3,
) -> None:
    """Add one parsed passage's entities, links and co-occurrence triples to ``res.graph``."""
    g, p = res.graph, parsed.passage
    text = p.text
    tid, local = res.passage_title(parsed)
    per_sent: dict[int, list[tuple[int, int, str]]] = {}
    for m in parsed.mentions:
        if m.label in NUMERIC_TYPES:
            continue
        eid = tid if tid and name_key(m.text) in local else None
        if eid is None:
            eid = res.mention_entity(m.text, m.label, parsed.sentence_text(m.sent))
        if eid is None:
            continue
        per_sent.setdefault(m.sent, []).append((m.start, m.end, eid))
    if tid:
        g.link(tid, p.id)
        stats.links += 1
        for s, (a, b) in parsed.leading_pronouns.items():
            ents = per_sent.setdefault(s, [])
            if all(e != tid for _, _, e in ents):
                ents.append((a, b, tid))
    linked = {tid} if tid else set()
    with_title: set[str] = set()
    for s in sorted(per_sent):
        ents = sorted(per_sent[s])
        sa, sb = parsed.sentences[s]
        sent = text[sa:sb]
        masked = None
        for i, (a1, b1, e1) in enumerate(ents):
            if e1 not in linked:
                g.link(e1, p.id)
                linked.add(e1)
                stats.links += 1
            for a2, b2, e2 in ents[i + 1 : i + 1 + window]:
                if e1 == e2:
                    continue
                rel = _between(text[b1:a2], max_between)
                if rel is None:
                    masked = masked or _mask(sent, [(a, b) for a, b, _ in ents], sa)
                    rel = masked
                if is_instruction(rel):  # an injected instruction is not a relation
                    continue
                g.add_triple(e1, rel, e2, [p.id])
                if tid in (e1, e2):
                    with_title.add(e2 if e1 == tid else e1)
        if tid:
            for a, b, e in ents:
                if e != tid and e not in with_title and not is_instruction(sent):
                    with_title.add(e)
                    g.add_triple(tid, _mask(sent, [(a, b)], sa), e, [p.id])


def build_mentions_graph(
    passages: Sequence[Passage],
    *,
    graph: KnowledgeGraph | None = None,
    progress: bool = True,
    n_process: int | None = None,
    on_start: Callable[[], None] | None = None,
    max_between: int = 10,
    window: int = 3,
) -> tuple[KnowledgeGraph, GraphBuildStats]:
    """Build (or extend ``graph`` with) the mentions graph of ``passages``; see the module doc."""
    t0 = time.perf_counter()
    graph = graph if graph is not None else KnowledgeGraph()
    stats = GraphBuildStats("mentions", passages=len(passages))
    res = _Resolver(graph)
    n_ent, n_tri = graph.num_entities, graph.num_triples
    it = parse_passages(passages, parse=False, progress=progress, n_process=n_process, on_start=on_start)
    for parsed in timed(it, stats):
        stats.sentences += len(parsed.sentences)
        add_mentions(parsed, res, stats, max_between=max_between, window=window)
    stats.entities = graph.num_entities - n_ent
    stats.triples = graph.num_triples - n_tri
    stats.seconds = time.perf_counter() - t0
    return graph, stats
