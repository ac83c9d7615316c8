"""LlamaIndex-style entry points: an index from ``Document`` s / nodes, ``as_retriever``, ``as_query_engine``.

::

    from llama_index.core import Document
    from kgrag_plugins.integrations.llama_index import as_query_engine, as_retriever, build_index

    index = build_index([Document(text=..., metadata={"title": ...}), ...], "my_index")  # mentions graph
    retriever = as_retriever(index, method="activation", similarity_top_k=5)
    engine = as_query_engine(index, method="frag", llm=my_llama_index_llm)

The same as methods: ``KnowledgeIndex.from_documents(docs, path)``, ``index.as_retriever(...)``,
``index.as_query_engine(...)`` (they delegate here). ``Settings.embed_model`` / ``Settings.llm``
are used when nothing is passed *and* the user set them (``Settings._embed_model`` /
``Settings._llm`` not ``None``): LlamaIndex's unset defaults resolve to OpenAI, which this library
never reaches for offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from llama_index.core import Settings
from llama_index.core.schema import BaseNode, MetadataMode

from ...models.embed import as_embedder
from ...names import resolve_name
from ...types import Passage
from .._common import DEFAULT_MAX_FACTS, LLM_METHODS, METHODS, make_method, small_metadata
from .graph_store import graph_from_property_graph_store, passages_from_property_graph_store
from .retrievers import KGRetriever

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.query_engine import RetrieverQueryEngine

    from ...index.store import KnowledgeIndex

__all__ = ["as_query_engine", "as_retriever", "build_index", "nodes_to_passages"]

#: Metadata keys read as a passage title, in order.
_TITLE_KEYS = ("title", "file_name", "doc_title")


def nodes_to_passages(items: Sequence[Any]) -> list[Passage]:
    """LlamaIndex ``Document`` s / nodes (or our ``Passage`` s, or strings) as passages.

    Id = ``node_id``; text = the node's content without metadata; title = metadata ``title`` (or
    ``file_name``); the other flat metadata is kept.
    """
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Passage):
            out.append(item)
        elif isinstance(item, str):
            out.append(Passage(f"doc-{i}", item))
        elif isinstance(item, BaseNode):
            meta = small_metadata(dict(item.metadata or {}))
            title = next((str(meta.pop(k)) for k in _TITLE_KEYS if meta.get(k)), "")
            out.append(Passage(item.node_id, item.get_content(metadata_mode=MetadataMode.NONE), title, meta))
        else:
            raise TypeError(f"expected LlamaIndex Documents/nodes, Passages or strings, got {type(item).__name__}")
    return out


def settings_embed_model() -> Any:
    """``Settings.embed_model`` if the user set one, else ``None`` (never resolves the default)."""
    return Settings._embed_model  # noqa: SLF001 - the public property would resolve OpenAI


def settings_llm() -> Any:
    """``Settings.llm`` if the user set one, else ``None`` (never resolves the default)."""
    return Settings._llm  # noqa: SLF001


def build_index(
    documents: Sequence[Any] | None = None,
    path: str | Path | None = None,
    *,
    embedder: Any = None,
    builder: str | None = "mentions",
    graph_store: Any = None,
    transformations: Sequence[Any] | None = None,
    llm: Any = None,
    progress: bool = False,
    **build_options: Any,
) -> KnowledgeIndex:
    """A :class:`~kgrag_plugins.index.store.KnowledgeIndex` from LlamaIndex documents / nodes.

    Args:
        documents: ``Document`` s or nodes (one passage each; pass ``transformations``, e.g.
            ``[SentenceSplitter(chunk_size=256)]``, to chunk them first). ``None`` with a
            ``graph_store``: the store's ``ChunkNode`` s are the passages.
        embedder: ours, a LlamaIndex ``BaseEmbedding`` or a LangChain ``Embeddings``; default
            ``Settings.embed_model`` when the user set it, else the bundled MiniLM.
        builder: graph builder (``"mentions"`` / ``"parsekg"`` LLM-free, ``"llm"``); ignored with a
            ``graph_store``, whose triplets become the graph (:mod:`.graph_store`).
        llm: for ``builder="llm"`` (default ``Settings.llm`` when set).
        build_options: passed to :meth:`KnowledgeIndex.build` (``entity_vectors``, ``chroma_url``...).
    """
    from ...index.store import KnowledgeIndex

    items = list(documents or [])
    if transformations:
        from llama_index.core.ingestion import run_transformations

        items = run_transformations(items, list(transformations))
    passages = nodes_to_passages(items)
    graph = None
    if graph_store is not None:
        graph = graph_from_property_graph_store(graph_store)
        builder = None
        if not passages:
            passages = passages_from_property_graph_store(graph_store)
    if builder == "llm" and llm is None:
        llm = settings_llm()
    embed = embedder if embedder is not None else settings_embed_model()
    return KnowledgeIndex.build(
        passages,
        path,
        embedder=as_embedder(embed),
        graph=graph,
        builder=builder,
        llm=llm,
        progress=progress,
        **build_options,
    )


def as_retriever(
    index: KnowledgeIndex,
    method: str = "activation",
    *,
    llm: Any = None,
    similarity_top_k: int = 5,
    include_facts: bool = True,
    max_facts: int | None = DEFAULT_MAX_FACTS,
    score: str = "cosine",
    **method_options: Any,
) -> KGRetriever:
    """A LlamaIndex retriever over ``index`` running ``method`` (a key of
    :data:`~kgrag_plugins.integrations._common.METHODS`: ``"activation"``, ``"sa_rag"``,
    ``"kg_infused"``, ``"frag"``, ``"translator"``, ``"know3"``, ``"dense"`` ...).

    ``llm`` (default ``Settings.llm`` when set) goes to the methods that use one; FRAG gives a
    :class:`.HopAwareRetriever`, the translator a :class:`.ClueTranslationRetriever`.
    """
    key = resolve_name(method, METHODS)  # kg-infused -> kg_infused
    if llm is None and key in LLM_METHODS:
        llm = settings_llm()
    common = dict(max_facts=max_facts, score=score)
    if key == "frag":
        from .retrievers import HopAwareRetriever

        return HopAwareRetriever(index, llm=llm, k=similarity_top_k, **common, **method_options)
    if key == "translator":
        from .translator import ClueTranslationRetriever

        return ClueTranslationRetriever(
            index, llm=llm, similarity_top_k=similarity_top_k, include_facts=include_facts, **common, **method_options
        )
    return KGRetriever(
        make_method(index, key, llm=llm, **method_options),
        similarity_top_k=similarity_top_k,
        include_facts=include_facts,
        **common,
    )


def as_query_engine(
    index: KnowledgeIndex,
    method: str = "activation",
    *,
    llm: Any = None,
    node_postprocessors: Sequence[Any] | None = None,
    response_mode: str | None = None,
    **retriever_options: Any,
) -> RetrieverQueryEngine:
    """A ``RetrieverQueryEngine`` over :func:`as_retriever` (``retriever_options`` go there).

    ``llm``: a LlamaIndex LLM, or ours / a LangChain chat model (wrapped with
    :class:`~.llm.KGRAGLlamaLLM`); default ``Settings.llm`` when set. Without any LLM the engine
    is LLM-free: ``response_mode="no_text"`` (the response carries the source nodes only).
    The same LLM drives the method's LLM steps when it has some.
    """
    from llama_index.core.llms import LLM as LlamaLLM
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.response_synthesizers.no_text import NoText

    from .llm import KGRAGLlamaLLM

    llm = llm if llm is not None else settings_llm()
    key = method.replace("-", "_").lower()
    retriever = as_retriever(index, method, llm=llm if key in LLM_METHODS else None, **retriever_options)
    kwargs: dict[str, Any] = {"node_postprocessors": list(node_postprocessors or [])}
    if llm is None:
        if response_mode not in (None, "no_text"):
            raise ValueError(f"response_mode={response_mode!r} needs an llm (or Settings.llm)")
        # built here: LlamaIndex's factory would resolve Settings.llm (OpenAI) for NoText
        kwargs.update(llm=MockLLM(), response_synthesizer=NoText(llm=MockLLM()))
    else:
        kwargs["llm"] = llm if isinstance(llm, LlamaLLM) else KGRAGLlamaLLM(llm)
        if response_mode is not None:
            kwargs["response_mode"] = response_mode
    return RetrieverQueryEngine.from_args(retriever, **kwargs)
