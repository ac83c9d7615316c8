"""The knowledge index: passages, graph, vectors (DESIGN.md principle 2)."""
