"""Chain-of-thought iterative retrieval with any retriever (SA-RAG §6.3 generalised; docs/methods.md §6.3).

The loop of :class:`~kgrag_plugins.methods.sa_rag.cot.SARAGCoT`, with a pluggable retrieve step:

1. context ``C`` = retrieval for the question. With an ``SARAGRetriever`` as the step (SA-RAG +
   CoT, ``"sa-rag+cot"``) its ``acquire`` (all passages over the thresholds, no top-k) and its
   ``context`` string are used; with any other retriever the top-``k`` passages and facts are laid
   out the same way (:func:`~.prompts.format_context`: ``"### Context "``, passages, ``**Key
   relationships**``).
2. Up to ``max_steps`` (3) reasoning calls (SA-RAG's reasoning prompt; JSON ``{provided_context,
   answer_possible, final_answer, additional_question}``). ``answer_possible`` ends the loop;
   otherwise the follow-up question *alone* is retrieved and ``C`` becomes ``"# Known
   information" + summary + "# Additional facts" + new context`` (``merge="summary"``, SA-RAG's
   agent) or ``new context + "\\n\\n" + summary`` (``merge="baseline"``: the CoT-RAG baseline,
   ``baseline_cot.py``). An unusable reasoning reply (no JSON object with a readable
   ``answer_possible``), asked once more, skips the step (the paper's agent skips a failed
   step), with a WARNING and a ``trace["llm_error"]`` entry; a reply with no follow-up ends the loop.
3. The answering call on ``C`` (JSON ``{reasoning, final_answer}``) gives ``generation``; an
   invalid reply is asked once more, then ``generation`` is ``""`` (recorded in ``llm_error``).

At most ``1 + max_steps`` retrievals. **LLM-free**: one retrieval for the question and its
context (``state["context"]``); ``generation`` is ``""``.

``"cot-rag"`` (:func:`cot_rag_graph`) is the baseline: top-``k`` vector search (k = 5; the paper
also reports 10) with the baseline merge. SA-RAG's baseline prompts (which allow "Insufficient
Information") are not reproduced: every variant uses the SA-RAG agent prompts, so the comparison
isolates the retriever.
"""

from __future__ import annotations

import logging
from typing import Any

from ..integrations._extras import require

require("langgraph", "langgraph", "langchain_core", feature="kgrag_plugins.agents")

from langgraph.graph import END, START, StateGraph  # noqa: E402

from ..methods.sa_rag.cot import SARAGCoT, parse_reasoning  # noqa: E402
from ..methods.sa_rag.prompts import QUESTION_PREFIX, REASONING_SCHEMA, REASONING_SYSTEM  # noqa: E402
from ..models.prompting import data_block  # noqa: E402
from ..models.replies import complete_validated  # noqa: E402
from .common import context_retrieval, evidence_record, json_answer, llm_of, resolve_step  # noqa: E402
from .state import AgentState, add_evidence, add_llm_errors, agent_question, final_update  # noqa: E402

__all__ = ["cot_graph", "cot_rag_graph", "parse_reasoning", "sa_rag_cot_graph"]

logger = logging.getLogger("kgrag_plugins.agents.cot")

#: Extra retrievals (reasoning steps), SA-RAG's ``ReasoningConfig``.
MAX_STEPS = 3


def cot_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    k: int = 6,
    max_steps: int = MAX_STEPS,
    merge: str = "summary",
    name: str = "cot",
    checkpointer: Any = None,
) -> Any:
    """CoT iterative retrieval (SA-RAG §6.3) over any retrieve step (``k`` passages per retrieval;
    an ``SARAGRetriever`` uses its own ``acquire``). ``merge``: ``"summary"`` (SA-RAG's "# Known
    information / # Additional facts") or ``"baseline"`` (CoT-RAG: new context + summary)."""
    if merge not in ("summary", "baseline"):
        raise ValueError(f"merge must be 'summary' or 'baseline', got {merge!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
        raise ValueError(f"max_steps must be a non-negative int, got {max_steps!r}")
    step = resolve_step(retrieve, k)
    llm = llm_of(llm)
    acquire = context_retrieval(step)

    def merged(summary: str, new_context: str) -> str:
        if merge == "summary":
            return SARAGCoT.merge_context(summary, new_context)
        return f"{new_context}\n\n{data_block('notes', summary)}" if summary else new_context

    def retrieve_node(state: dict[str, Any]) -> dict[str, Any]:
        question = agent_question(state)
        follow = state.get("follow_up") or ""
        query = follow or question
        ev, ctx = acquire(query)
        context = merged(state.get("summary") or "", ctx) if follow else ctx
        steps = list(state.get("steps") or [])
        steps.append({"kind": "retrieve", **evidence_record(ev)})
        return {**add_evidence(state, ev, retriever=step.name), "context": context, "steps": steps, "follow_up": ""}

    def reason(state: dict[str, Any]) -> dict[str, Any]:
        n = sum(1 for s in state.get("steps") or [] if s.get("kind") == "reason") + 1
        messages = [
            {"role": "system", "content": REASONING_SYSTEM},
            {"role": "user", "content": QUESTION_PREFIX + state["question"]},
            {"role": "user", "content": state.get("context") or ""},
        ]
        errors: list[dict[str, Any]] = []
        parsed = complete_validated(
            llm,
            messages,
            parse_reasoning,
            step="reasoning",
            errors=errors,
            log=logger,
            schema=REASONING_SCHEMA,
            temperature=0.0,
        )
        steps = list(state.get("steps") or [])
        rec: dict[str, Any] = {"kind": "reason", "step": n}
        upd: dict[str, Any] = {"steps": steps, "trace": add_llm_errors(state, errors), "follow_up": ""}
        if parsed is None:
            rec.update(skipped=True, error=errors[-1]["error"] if errors else "no reply")
            upd["finished"] = n >= max_steps
        else:
            follow = parsed["additional_question"]
            rec.update(answer_possible=parsed["answer_possible"], follow_up=follow)
            if parsed["answer_possible"] or not follow:
                upd["finished"] = True
                rec["stop"] = "answer_possible" if parsed["answer_possible"] else "no_follow_up"
            else:
                upd.update(follow_up=follow, summary=parsed["provided_context"], finished=False)
        steps.append(rec)
        return upd

    def after_reason(state: dict[str, Any]) -> str:
        if state.get("finished"):
            return "answer"
        if state.get("follow_up"):
            return "retrieve"
        return "reason"  # a skipped step with steps left: reason again on the same context

    def after_retrieve(state: dict[str, Any]) -> str:
        n = sum(1 for s in state.get("steps") or [] if s.get("kind") == "reason")
        return "reason" if n < max_steps else "answer"

    def answer(state: dict[str, Any]) -> dict[str, Any]:
        errors: list[dict[str, Any]] = []
        gen = json_answer(llm, state["question"], state.get("context") or "", errors)
        reasons = sum(1 for s in state.get("steps") or [] if s.get("kind") == "reason")
        out = final_update(state, gen, agent=name, mode="llm", reasoning_steps=reasons)
        out["trace"] = add_llm_errors({"trace": out["trace"]}, errors)
        out["context"] = state.get("context") or ""
        return out

    def llm_free_finish(state: dict[str, Any]) -> dict[str, Any]:
        return final_update(state, "", agent=name, mode="llm-free")

    g = StateGraph(AgentState)
    g.add_node("retrieve", retrieve_node)
    g.add_edge(START, "retrieve")
    if llm is None:
        g.add_node("finish", llm_free_finish)
        g.add_edge("retrieve", "finish")
        g.add_edge("finish", END)
    else:
        g.add_node("reason", reason)
        g.add_node("answer", answer)
        g.add_conditional_edges("retrieve", after_retrieve, {"reason": "reason", "answer": "answer"})
        g.add_conditional_edges(
            "reason", after_reason, {"answer": "answer", "retrieve": "retrieve", "reason": "reason"}
        )
        g.add_edge("answer", END)
    return g.compile(checkpointer=checkpointer, name=name)


def cot_rag_graph(retrieve: Any, llm: Any = None, *, k: int = 5, max_steps: int = MAX_STEPS, **opts: Any) -> Any:
    """The CoT-RAG baseline (SA-RAG ``baseline_cot.py``): top-``k`` vector search (k = 5; pass a
    ``KnowledgeIndex`` for its dense retriever, or any retriever) with the baseline context merge."""
    return cot_graph(retrieve, llm, k=k, max_steps=max_steps, merge="baseline", name="cot_rag", **opts)


def sa_rag_cot_graph(retrieve: Any, llm: Any = None, *, max_steps: int = MAX_STEPS, **opts: Any) -> Any:
    """SA-RAG + CoT (docs/methods.md §6.3): ``retrieve`` is an ``SARAGRetriever`` or a ``KnowledgeIndex``
    with a graph (an ``SARAGRetriever`` is built on it with ``sa_options``)."""
    from ..index.store import KnowledgeIndex
    from ..methods.sa_rag import SARAGRetriever

    sa_options = opts.pop("sa_options", None) or {}
    if isinstance(retrieve, KnowledgeIndex):
        retrieve = SARAGRetriever(retrieve, **sa_options)
    if not isinstance(retrieve, SARAGRetriever):
        raise TypeError(
            f"sa-rag+cot needs an SARAGRetriever or a KnowledgeIndex, got {type(retrieve).__name__}; "
            "use the 'cot' agent for other retrievers"
        )
    return cot_graph(retrieve, llm, max_steps=max_steps, merge="summary", name="sa_rag_cot", **opts)
