"""Know³-RAG (docs/methods.md §5, paper ``know3-rag``) for LlamaIndex: a KGE verifier node
postprocessor and a query engine that runs the verify -> retrieve-again loop.

Example::

    from kgrag_plugins.integrations.llama_index import KGEVerifierPostprocessor, Know3QueryEngine

    post = KGEVerifierPostprocessor(index)                 # drop nodes the KG contradicts
    engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[post], llm=llm)
    engine = Know3QueryEngine(index, llm=llm)               # the whole loop (LLM-free without llm)
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from ...methods.know3.verify import KGVerifier
from ...models.llm import as_llm
from ...types import Passage
from .instrumentation import KGRAGStepEvent, dispatcher, emit_evidence
from .nodes import evidence_to_nodes

__all__ = ["KGEVerifierPostprocessor", "Know3QueryEngine"]

MODES = ("drop", "reorder")


class KGEVerifierPostprocessor(BaseNodePostprocessor):
    """Score each node's triples against the KG (Know³ Eq. 2; lower = more consistent) and
    drop (``mode="drop"``) or move back (``mode="reorder"``) the nodes the KG contradicts.

    A node is *contradicted* when its score is at or above θ (``threshold``, default the
    verifier's calibrated θ_0); nodes with nothing scorable (no linked triple) are kept in place
    -- the KG neither supports nor contradicts them. Every node gets ``metadata["kge_score"]``
    and ``metadata["kge_reason"]``. Build from a ``KnowledgeIndex`` (``opts`` go to
    :class:`~kgrag_plugins.methods.know3.verify.KGVerifier`) or pass ``verifier=``.
    """

    mode: str = "drop"
    threshold: float | None = None
    _verifier: KGVerifier = PrivateAttr()

    def __init__(
        self,
        index: Any = None,
        *,
        verifier: KGVerifier | None = None,
        mode: str = "drop",
        threshold: float | None = None,
        **opts: Any,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        super().__init__(mode=mode, threshold=threshold)
        if verifier is None:
            if index is None:
                raise TypeError("KGEVerifierPostprocessor needs a KnowledgeIndex or verifier=KGVerifier(...)")
            verifier = KGVerifier(index, **opts)
        elif opts:
            raise ValueError(f"pass {sorted(opts)} to KGVerifier(...) or give an index")
        self._verifier = verifier

    @classmethod
    def class_name(cls) -> str:
        return "KGEVerifierPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        theta = self.threshold if self.threshold is not None else self._verifier.threshold(0)
        passages = [
            Passage(n.node.node_id, n.node.get_content(), str(n.node.metadata.get("title") or "")) for n in nodes
        ]
        scores = self._verifier.score_passages(passages)
        for n, s in zip(nodes, scores):
            n.node.metadata["kge_score"] = s["score"]
            n.node.metadata["kge_reason"] = s["reason"]
        bad = [s["score"] is not None and s["score"] >= theta for s in scores]
        dispatcher.event(
            KGRAGStepEvent(
                method="kge-verifier",
                step="verify",
                count=len(nodes),
                data={"accepted": len(nodes) - sum(bad), "rejected": sum(bad), "mode": self.mode, "theta": theta},
            )
        )
        if self.mode == "drop":
            return [n for n, b in zip(nodes, bad) if not b]
        return [n for n, b in zip(nodes, bad) if not b] + [n for n, b in zip(nodes, bad) if b]


class Know3QueryEngine(BaseQueryEngine):
    """Know³-RAG's whole loop as a LlamaIndex query engine (:class:`~kgrag_plugins.methods.know3.Know3Retriever`).

    ``llm``: a LlamaIndex / LangChain / kgrag LLM (answers with Fig. 6, extracts with Fig. 9,
    filters with Fig. 10); without it the engine returns the KG-verified references and an empty
    answer. ``base``: the kgrag retriever the loop wraps (default activation); ``opts`` go to
    ``Know3Retriever``. ``response.metadata`` holds ``turn``, ``decision`` and the loop trace.
    """

    def __init__(
        self,
        index: Any,
        *,
        llm: Any = None,
        base: Any = None,
        k: int = 5,
        callback_manager: CallbackManager | None = None,
        **opts: Any,
    ) -> None:
        from ...methods.know3 import Know3Retriever

        self._loop = Know3Retriever(index, base, llm=as_llm(llm) if llm is not None else None, **opts)
        self._k = int(k)
        super().__init__(callback_manager=callback_manager or CallbackManager([]))

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _get_prompts(self) -> PromptDictType:
        """Know³'s LLM prompts (Figs. 6-8 instruction texts: ``qa``, ``reference_generation``,
        ``query_generation``) as ``PromptTemplate`` s."""
        from .prompt_mixin import method_prompts

        return method_prompts(self._loop)

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        from .prompt_mixin import update_method_prompts

        update_method_prompts(self._loop, prompts_dict)

    def _query(self, query_bundle: QueryBundle) -> Response:
        ans = self._loop.run(query_bundle.query_str, self._k)
        ev = ans.evidence
        if ev is not None:
            emit_evidence(ev, self._loop.name)  # base steps + verify (.instrumentation)
        nodes = evidence_to_nodes(ev, retriever=self._loop.name) if ev is not None else []
        meta = {**ans.metadata, "know3": (ev.trace.get("know3") if ev is not None else None)}
        return Response(response=ans.text, source_nodes=nodes, metadata=meta)

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        import asyncio

        return await asyncio.to_thread(self._query, query_bundle)
