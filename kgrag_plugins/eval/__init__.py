"""Evaluation: the benchmarks behind ``kgrag bench`` (``bench``: retrieval; ``qa``: end-to-end
answers with an LLM; ``kgqa``: KGQA over a KB), ``kgrag linking`` and ``kgrag bench-scale``.

Evaluation sits above training (``kgqa`` trains FRAG's hop classifier and path ranker before it
evaluates them); the loaders and metrics both use are in :mod:`kgrag_plugins.datasets`.
"""
