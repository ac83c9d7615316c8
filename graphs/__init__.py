"""LangGraph app entry points (``langgraph.json`` at the repository root; ``langgraph dev`` serves them).

One graph per module; each module exposes ``graph``, a factory LangGraph's server calls (and any
script can: ``graphs.frag.graph()`` returns the compiled graph). See ``docs/langgraph-apps.md``.
"""
