"""How well a graph links questions to their gold passages (an upper bound for graph retrieval).

For each question with gold passages: link the question's entities
(:func:`~kgrag_plugins.index.builders.linking.link_question`), take their ``hops``-hop
neighbourhood (both directions), and count the gold passages whose *title entity* lies in it.
Also reported, so a dense graph cannot look good by reaching everything: how many questions
link to any entity, and the median neighbourhood size as a fraction of all entities.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..config import progress_enabled
from ..datasets.loaders import Dataset
from ..datasets.metrics import mean
from ..index.builders.linking import NameIndex, link_question, name_key
from ..index.store import KnowledgeIndex


def linking_quality(index: KnowledgeIndex, dataset: Dataset, *, hops: int = 2, progress: bool = True) -> dict[str, Any]:
    """Gold-title reachability within ``hops`` of question entities; see the module doc."""
    g = index.graph
    if g.num_entities == 0:
        raise ValueError("the index has no knowledge graph; build it with builder='mentions' or 'parsekg'")
    names = NameIndex.from_graph(g)
    reach_frac: list[float] = []
    gold_linked: list[float] = []
    linked_any = 0
    sizes: list[int] = []
    scored = 0
    for q in tqdm(dataset.questions, desc="linking", disable=not progress_enabled(progress), leave=False):
        gold = [p for p in q.supporting_passage_ids if p in index.passages]
        if not gold:
            continue
        scored += 1
        seeds = link_question(g, q.question, names=names)
        hood = g.k_hop(seeds, hops) if seeds else {}
        linked_any += bool(seeds)
        sizes.append(len(hood))
        titles = [names.get(name_key(index.passages.get(p).title)) for p in gold]
        gold_linked.append(mean([t is not None for t in titles]))
        reach_frac.append(mean([t is not None and t in hood for t in titles]))
    return {
        "hops": hops,
        "n_questions": scored,
        "gold_title_reachable": round(mean(reach_frac), 4),
        "questions_with_linked_entity": round(linked_any / max(scored, 1), 4),
        "gold_title_has_entity": round(mean(gold_linked), 4),
        "median_neighbourhood_entities": int(np.median(sizes)) if sizes else 0,
        "median_neighbourhood_fraction": round(float(np.median(sizes)) / g.num_entities, 4) if sizes else 0.0,
        "entities": g.num_entities,
        "triples": g.num_triples,
    }
