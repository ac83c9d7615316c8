"""Explain a retrieval: neighbourhood, activation and clue pictures (PNG / self-contained HTML).

Pictures and traces explain what a retriever did; they read the index but are not part of it.
"""

from .clues import clue_subgraph, draw_clues, draw_trace
from .draw import draw_activation, draw_neighbourhood, find_entity, neighbourhood, relation_label

__all__ = [
    "clue_subgraph",
    "draw_activation",
    "draw_clues",
    "draw_neighbourhood",
    "draw_trace",
    "find_entity",
    "neighbourhood",
    "relation_label",
]
