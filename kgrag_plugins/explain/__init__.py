"""Explain a retrieval: neighbourhood, activation, clue, FRAG path and Know³ verifier pictures
(PNG / self-contained HTML).

Pictures and traces explain what a retriever did; they read the index but are not part of it.
"""

from .clues import clue_subgraph, draw_clues, draw_evidence, draw_trace
from .draw import draw_activation, draw_neighbourhood, find_entity, neighbourhood, relation_label
from .paths import draw_paths, draw_verification, path_subgraph, verification_subgraph

__all__ = [
    "clue_subgraph",
    "draw_activation",
    "draw_clues",
    "draw_neighbourhood",
    "draw_paths",
    "draw_verification",
    "draw_evidence",
    "draw_trace",
    "find_entity",
    "neighbourhood",
    "path_subgraph",
    "relation_label",
    "verification_subgraph",
]
