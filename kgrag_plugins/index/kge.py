"""The KG embedding of an index generation (Know³-RAG §3.2; docs/kge.md "Storage").

:func:`kge_for_index` keeps one :class:`~kgrag_plugins.models.kge.KGEModel` in the index's live
generation (``gen-<id>/kge/``, :data:`KGE_DIR`), so a graph change (``add_passages``) invalidates
it. The model layer knows no index: this module hands it the graph (its entity ids, relation
labels and triple arrays) and decides, from the index manifest's builder, whether the relations
are free text.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from ..models.kge import KGEModel, graph_fingerprint, train_kge

log = logging.getLogger(__name__)

#: Subdirectory of an index generation holding its KGE (:func:`kge_for_index`).
KGE_DIR = "kge"
#: Index builders whose graphs have free-text relations (canonicalised for the KGE).
CORPUS_BUILDERS = ("mentions", "parsekg", "llm")
#: Corpus graphs (:data:`CORPUS_BUILDERS`): relations with fewer training queries than this share
#: mixed batches (``train_kge(pool_below=...)``; docs/kge.md "Corpus graphs").
CORPUS_POOL_BELOW = 256

_LOADED: "weakref.WeakKeyDictionary[Any, tuple[Any, KGEModel]]" = weakref.WeakKeyDictionary()


def kge_for_index(index: Any, *, train: bool = True, **train_kwargs: Any) -> KGEModel | None:
    """The KGE of ``index``'s live generation (``gen-<id>/kge/``), loaded lazily and cached per
    generation; stale (graph fingerprint differs) or missing -> trained on the index graph and
    saved there atomically when ``train`` (an INFO log), else ``None``. Corpus graphs (built by a
    ``mentions`` / ``parsekg`` / ``llm`` builder) get canonicalised relations."""
    graph = index.graph
    key = (index.manifest.get("generation"), id(graph), graph.num_triples)
    hit = _LOADED.get(index)
    if hit is not None and hit[0] == key:
        return hit[1]
    if not graph.num_triples:
        log.info("kge_for_index: the index graph has no triples; no KGE")
        return None
    fp = graph_fingerprint(graph)
    path = index.derived_path(KGE_DIR) if hasattr(index, "derived_path") else None
    model: KGEModel | None = None
    if path is not None and (path / "kge.json").is_file():
        try:
            m = KGEModel.load(path)
        except (ValueError, FileNotFoundError, KeyError) as e:
            log.warning("ignoring the KGE in %s: %s", path, e)
        else:
            if m.fingerprint == fp and m.valid_rows is not None:
                model = m
            elif m.fingerprint == fp:  # format 1: θ_0 calibration needs the held-out triples
                log.info("the KGE in %s predates stored held-out triples; training it again", path)
            else:
                log.info("the KGE in %s was trained on another graph (%s != %s)", path, m.fingerprint, fp)
    if model is None:
        if not train:
            log.info("no KGE for this index generation (train=False)")
            return None
        corpus = index.manifest.get("builder") in CORPUS_BUILDERS
        train_kwargs.setdefault("canonicalize", corpus)
        if corpus:  # thousands of rare free-text labels: pool them into mixed batches
            train_kwargs.setdefault("pool_below", CORPUS_POOL_BELOW)
        log.info(
            "training a KGE for the index graph (%d triples)%s", graph.num_triples, f" into {path}" if path else ""
        )
        model, _ = train_kge(graph, **train_kwargs)
        if path is not None:
            try:
                model.save(path)
            except OSError as e:
                log.warning("could not store the KGE in %s (%s); it is kept in memory only", path, e)
    _LOADED[index] = (key, model)
    return model
