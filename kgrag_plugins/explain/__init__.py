"""Explain a retrieval: neighbourhood and activation pictures (PNG / self-contained HTML).

Pictures and traces explain what a retriever did; they read the index but are not part of it.
"""

from .draw import draw_activation, draw_neighbourhood, find_entity, neighbourhood, relation_label

__all__ = ["draw_activation", "draw_neighbourhood", "find_entity", "neighbourhood", "relation_label"]
