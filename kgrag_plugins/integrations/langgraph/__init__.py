"""LangGraph adapters: node factories and compiled graphs around the framework-free methods.

Needs the ``langgraph`` extra (``pip install 'kgrag-plugins[langgraph]'``). One module per concern:
``state`` (the state schema), ``nodes`` (generic retrieve / generate nodes), ``activation``,
``kg_infused``, ``sa_rag``, ``frag``, ``translator``, ``know3`` (one per method: nodes + compiled graph), ``router``
(:func:`make_route_node`, :func:`make_hop_router`), ``prompt`` (a user's answer prompt), ``events``
(``stream_mode="custom"`` events), ``retry`` (:func:`retry_on`, :func:`default_retry_policy`).

State (:class:`KGRAGState`) uses the LangGraph RAG tutorials' keys plus ours (guide: ``docs/langgraph.md``):

- ``question`` (input) or ``messages`` (``add_messages`` reducer, as ``MessagesState``): every node
  that reads the question takes ``question``, else the last human message; a generate node then
  also appends its answer as an ``AIMessage``
- ``generation`` (answer text; absent/``None`` without an LLM)
- ``documents``: our nodes write LangChain ``Document`` s, ``id`` = passage id, ``metadata`` =
  ``{"id", "title", "score", "kind": "passage", "retriever"}`` (``make_retrieve_node(as_text=True)``:
  ``list[str]``); nodes read ``Document`` s, plain strings and dicts ``{"id", "text", "title", "score"}``
- ``facts`` (optional): verbalised facts / paths / clues (``list[str]``)
- ``trace``: dict, one entry per step (``retrieve``, ``activation``, ``retrievals``, ``reasoning``,
  ...), written per call into the returned state (never kept on a node or retriever)
- KG-Infused RAG: ``activation`` (a JSON-able snapshot of the activation memory), ``summary``,
  ``expanded_query``, ``note``; SA-RAG: ``query`` (current follow-up), ``context``, ``reasoning``, ``steps``
- FRAG / hop routing (docs/methods.md §2, paper ``frag``): ``route`` (``"simple"`` | ``"complex"``, written by
  the router node), ``answers`` (LLM-free candidate answers: end entities of the top paths, best
  first), ``topic_entities`` (optional input: entity ids that replace FRAG's question linking);
  ``facts`` then hold the verbalised paths (``"Tom Hanks <- starred_actors <- Big -> directed_by -> ..."``)

Handles (index, retriever, LLM) are captured by the node factories (closures) or, for
``make_retrieve_node()`` / ``make_generate_node()`` made without one, read from the graph's run-time
context (:class:`KGRAGContext`: ``StateGraph(S, context_schema=KGRAGContext)``, ``invoke(...,
context={...})``); never stored in state. Nodes emit per-step events for ``stream_mode="custom"``
(:mod:`.events`). Run-time settings (``k``, ``k_each``, ``max_steps``, ``route``) come through the same
context and override the builders' arguments. Every graph builder adds its LLM / index / database nodes
with ``retry_policy=`` (default :func:`default_retry_policy`: retryable errors only, see :mod:`.retry`).
Every node is a ``RunnableLambda`` (``invoke`` / ``ainvoke``; ``add_node(name,
node)``), and every compiled graph can be added as a subgraph node of a user's graph (shared keys flow
both ways). The graph builders take ``checkpointer=`` for standalone use (as a subgraph the parent's
applies); ``interrupt_before=["retrieve"]`` works at compile or call time with a checkpointer. Only
``messages`` has a reducer (``add_messages``), so a parent state may declare the other keys with plain
overwrite semantics.
"""

from .._extras import require

require("langgraph", "langgraph", "langchain_core", feature="kgrag_plugins.integrations.langgraph")

from .activation import activation_graph  # noqa: E402
from .frag import frag_graph  # noqa: E402
from .frag_nodes import make_frag_node  # noqa: E402
from .kg_infused import (  # noqa: E402
    kg_infused_graph,
    make_activation_node,
    make_augment_node,
    make_dual_retrieve_node,
    make_note_node,
    make_query_expansion_node,
)
from .know3 import Know3State, know3_graph, know3_wrap, make_kge_verifier_node  # noqa: E402
from .nodes import make_generate_node, make_retrieve_node  # noqa: E402
from .retry import RetryableError, default_retry_policy, retry_on  # noqa: E402
from .router import make_hop_router, make_route_node, route_by_hops  # noqa: E402
from .sa_rag import (  # noqa: E402
    make_sa_reason_node,
    make_sa_retrieve_node,
    sa_rag_graph,
    sa_route_after_reason,
    sa_route_after_retrieve,
)
from .state import (  # noqa: E402
    KGRAGContext,
    KGRAGState,
    documents_as_text,
    documents_to_passages,
    evidence_to_documents,
    passage_to_document,
    state_to_evidence,
)
from .translator import make_translator_node, translator_graph  # noqa: E402

__all__ = [
    "KGRAGContext",
    "KGRAGState",
    "Know3State",
    "RetryableError",
    "activation_graph",
    "documents_as_text",
    "documents_to_passages",
    "evidence_to_documents",
    "default_retry_policy",
    "frag_graph",
    "kg_infused_graph",
    "know3_graph",
    "know3_wrap",
    "make_activation_node",
    "make_augment_node",
    "make_dual_retrieve_node",
    "make_frag_node",
    "make_generate_node",
    "make_kge_verifier_node",
    "make_hop_router",
    "make_note_node",
    "make_query_expansion_node",
    "make_retrieve_node",
    "make_route_node",
    "make_sa_reason_node",
    "make_sa_retrieve_node",
    "make_translator_node",
    "passage_to_document",
    "retry_on",
    "route_by_hops",
    "sa_rag_graph",
    "sa_route_after_reason",
    "sa_route_after_retrieve",
    "state_to_evidence",
    "translator_graph",
]
