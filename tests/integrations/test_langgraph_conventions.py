"""Issue 37 item 2: LangGraph conventions.

Nodes that call an LLM or the index are added with a ``RetryPolicy`` whose ``retry_on`` retries our
retryable errors (timeouts, unavailable servers, replies that stayed invalid) and nothing else
(invalid input); run-time settings (``k``, ...) come through the graph's context schema; the
graphs stream progress events with ``stream_mode="custom"``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from kgrag_plugins.datasets.loaders import CorpusFormatError
from kgrag_plugins.errors import RetryableError, is_retryable
from kgrag_plugins.index.errors import ChromaServerError, GraphDBServerError, IndexCorruptError
from kgrag_plugins.integrations.langgraph import (
    KGRAGContext,
    KGRAGState,
    activation_graph,
    default_retry_policy,
    kg_infused_graph,
    make_generate_node,
    make_hop_router,
    make_retrieve_node,
    make_sa_reason_node,
    retry_on,
    sa_rag_graph,
)
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.methods.baselines import DenseRetriever
from kgrag_plugins.methods.sa_rag import SARAGCoT, SARAGRetriever
from kgrag_plugins.methods.sa_rag.prompts import REASONING_SYSTEM
from kgrag_plugins.models.llm import LLMError, LLMResponseError, LLMTimeoutError, LLMUnavailableError, ScriptedLLM
from kgrag_plugins.models.replies import InvalidReply, RepliesStayedInvalid, step_error
from kgrag_plugins.types import Evidence, Passage, ScoredPassage

Q = "Which river flows through the city where Marie Curie was born?"

#: the default policy without waiting: no backoff, no jitter
FAST = default_retry_policy(initial_interval=0.0, jitter=False)


def _run(graph: Any, state: dict[str, Any], **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The final state and the custom events of one streamed run."""
    events, final = [], {}
    for mode, chunk in graph.stream(state, stream_mode=["custom", "values"], **kw):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    return final, events


# --------------------------------------------------------------------------- the error split


@pytest.mark.parametrize(
    "exc",
    [
        LLMTimeoutError("slow"),
        LLMUnavailableError("breaker open"),
        RepliesStayedInvalid("reasoning: invalid reply: unparseable reply"),
        GraphDBServerError("FalkorDB at redis://localhost:6379 was lost"),
        ChromaServerError("Chroma at http://localhost:8000 cannot be reached"),
        TimeoutError("read timed out"),
        ConnectionError("refused"),
    ],
)
def test_retryable_errors(exc):
    assert retry_on(exc) and is_retryable(exc)


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("k must be >= 1"),
        TypeError("documents must be ..."),
        KeyError("x"),
        InvalidReply("no JSON"),
        IndexCorruptError("vectors.npy is damaged"),
        CorpusFormatError("line 3: not JSON"),
        LLMResponseError("HTTP 400"),
        LLMError("some failure"),
    ],
)
def test_invalid_input_is_not_retryable(exc):
    assert not retry_on(exc) and not is_retryable(exc)


def test_retryable_marker_keeps_the_old_except_clauses():
    from langgraph._internal._retry import default_retry_on

    # the marker derives from Exception only: every class is still caught where it was
    assert issubclass(LLMTimeoutError, LLMError) and issubclass(LLMTimeoutError, RuntimeError)
    assert issubclass(RepliesStayedInvalid, LLMError) and not issubclass(RepliesStayedInvalid, ValueError)
    assert issubclass(GraphDBServerError, ConnectionError) and issubclass(GraphDBServerError, ValueError)
    assert issubclass(ChromaServerError, ConnectionError) and issubclass(ChromaServerError, ValueError)
    assert RetryableError.__bases__ == (Exception,)
    # why our own predicate: LangGraph's default would not retry an LLM timeout or an invalid reply
    assert not default_retry_on(LLMTimeoutError("slow")) and not default_retry_on(RepliesStayedInvalid("x"))
    policy = default_retry_policy()
    assert isinstance(policy, RetryPolicy) and policy.max_attempts == 3 and policy.retry_on is retry_on


def test_step_error_maps_trace_entries():
    assert isinstance(step_error({"step": "s", "kind": "invalid_reply", "error": "x"}), RepliesStayedInvalid)
    assert isinstance(step_error({"kind": "llm_error", "type": "LLMTimeoutError", "error": "x"}), LLMTimeoutError)
    assert isinstance(step_error({"kind": "llm_error", "type": "ConnectError", "error": "x"}), LLMUnavailableError)
    plain = step_error({"kind": "llm_error", "type": "LLMResponseError", "error": "HTTP 400"})
    assert type(plain) is LLMError and not is_retryable(plain)


# --------------------------------------------------------------------------- node retries


def _retrieve_generate(retriever: Any, llm: Any, policy: RetryPolicy | None) -> Any:
    g = StateGraph(KGRAGState, context_schema=KGRAGContext)
    g.add_node("retrieve", make_retrieve_node(retriever, 2), retry_policy=policy)
    g.add_node("generate", make_generate_node(llm, retry_policy=policy), retry_policy=policy)
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", "generate")
    g.add_edge("generate", END)
    return g.compile()


def test_llm_timeout_once_is_retried_and_succeeds(dense):
    llm = ScriptedLLM([LLMTimeoutError("LLM did not answer in 30 s"), "Vistula"])
    out, events = _run(_retrieve_generate(dense, llm, FAST), {"question": Q})
    assert len(llm.calls) == 2 and out["generation"] == "Vistula"
    assert "llm_error" not in out["trace"] and len(out["documents"]) == 2
    retries = [e for e in events if e["event"] == "retry"]
    assert retries == [
        {"event": "retry", "attempt": 1, "max_attempts": 3, "error": "LLMTimeoutError", "node": "generate"}
    ]
    generate = [e for e in events if e["event"] == "generate"]
    assert len(generate) == 1 and generate[0]["fallback"] is False and generate[0]["ms"] >= 0


def test_fallback_comes_on_the_last_attempt_only(dense):
    llm = ScriptedLLM([LLMTimeoutError("a"), LLMTimeoutError("b"), LLMTimeoutError("c")])
    out = _retrieve_generate(dense, llm, FAST).invoke({"question": Q})
    assert len(llm.calls) == 3 and out["generation"] == ""  # the LLM-free answer after 3 attempts
    assert [e["step"] for e in out["trace"]["llm_error"]] == ["answer"]
    # without a policy: today's behaviour, one call then the fallback
    llm = ScriptedLLM([LLMTimeoutError("a"), "never asked"])
    out = _retrieve_generate(dense, llm, None).invoke({"question": Q})
    assert len(llm.calls) == 1 and out["generation"] == "" and out["trace"]["llm_error"]
    # a node invoked on its own (no graph run) falls back at once too
    llm = ScriptedLLM([LLMTimeoutError("a"), "never asked"])
    alone = make_generate_node(llm, retry_policy=FAST).invoke(
        {"question": Q, "documents": ["Warsaw is on the Vistula."]}
    )
    assert len(llm.calls) == 1 and alone["generation"] == ""


def test_a_non_retryable_llm_error_is_not_retried(dense):
    llm = ScriptedLLM([LLMResponseError("HTTP 400 (not retried)"), "never asked"])
    out = _retrieve_generate(dense, llm, FAST).invoke({"question": Q})
    assert len(llm.calls) == 1 and out["generation"] == "" and out["trace"]["llm_error"]


class _Flaky(Retriever):
    """Raises the scripted errors on its first calls, then returns one passage per call."""

    name = "flaky"

    def __init__(self, errors: list[Exception]):
        self.errors, self.calls = list(errors), 0

    def _retrieve(self, query: str, k: int) -> Evidence:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        p = Passage("p-1", "Warsaw lies on the Vistula.", "Warsaw")
        return Evidence(query, [ScoredPassage(p, 1.0)])


def test_database_outage_is_retried_and_invalid_input_is_not():
    flaky = _Flaky([GraphDBServerError("FalkorDB at redis://localhost:6379 was lost: start it again")])
    out = _retrieve_generate(flaky, None, FAST).invoke({"question": Q})
    assert flaky.calls == 2 and [d.id for d in out["documents"]] == ["p-1"]

    bad = _Flaky([ValueError("bad query"), ValueError("bad query")])
    with pytest.raises(ValueError, match="bad query"):
        _retrieve_generate(bad, None, FAST).invoke({"question": Q})
    assert bad.calls == 1  # ValueError: invalid input, never retried

    # malformed state (invalid input): raised at once, the retriever is never called
    untouched = _Flaky([])
    with pytest.raises(ValueError, match="question"):
        _retrieve_generate(untouched, None, FAST).invoke({"question": ""})
    assert untouched.calls == 0

    # an outage that lasts: the policy's 3 attempts, then the error
    down = _Flaky([ChromaServerError("Chroma at http://localhost:8000 cannot be reached")] * 5)
    with pytest.raises(ChromaServerError):
        _retrieve_generate(down, None, FAST).invoke({"question": Q})
    assert down.calls == 3


def _reasoning(possible: bool, question: str | None = None, answer: str | None = None) -> str:
    return json.dumps(
        {
            "provided_context": "Marie Curie was born in Warsaw.",
            "answer_possible": possible,
            "final_answer": answer,
            "additional_question": question,
        }
    )


def test_json_invalid_reply_raises_the_retryable_type_after_our_own_retry(sample_index):
    # the CoT asks twice (its own retry); both replies are not JSON -> RepliesStayedInvalid -> the
    # node runs again and the third reply is valid
    llm = ScriptedLLM(["I think it is the Vistula.", "```not json```", _reasoning(True, answer="Vistula")])
    cot = SARAGCoT(SARAGRetriever(sample_index), llm)
    g = StateGraph(KGRAGState)
    g.add_node("reason", make_sa_reason_node(cot, retry_policy=FAST), retry_policy=FAST)
    g.add_edge(START, "reason")
    out, events = _run(g.compile(), {"question": Q, "context": "### Context\nWarsaw lies on the Vistula."})
    assert len(llm.calls) == 3 and out["reasoning"]["answer_possible"] is True and out["steps"] == 1
    assert [e["error"] for e in events if e["event"] == "retry"] == ["RepliesStayedInvalid"]

    # the raised type itself: a node run where LangGraph will retry raises RepliesStayedInvalid
    seen: list[BaseException] = []

    def spy(exc: Exception) -> bool:
        seen.append(exc)
        return retry_on(exc)

    spy_policy = RetryPolicy(initial_interval=0.0, jitter=False, max_attempts=2, retry_on=spy)
    llm = ScriptedLLM(["not json"] * 4)
    cot = SARAGCoT(SARAGRetriever(sample_index), llm)
    g = StateGraph(KGRAGState)
    g.add_node("reason", make_sa_reason_node(cot, retry_policy=spy_policy), retry_policy=spy_policy)
    g.add_edge(START, "reason")
    out = g.compile().invoke({"question": Q, "context": "### Context\nWarsaw lies on the Vistula."})
    assert len(llm.calls) == 4  # 2 attempts x (1 call + our own retry)
    assert seen and {type(e) for e in seen} == {RepliesStayedInvalid}  # asked by the node and by LangGraph
    assert isinstance(seen[0], RetryableError) and not isinstance(seen[0], ValueError)
    # the last attempt keeps today's fallback: a failed step, recorded in the trace
    assert out["reasoning"] is None and "invalid reply" in out["trace"]["reasoning"][0]["error"]


# --------------------------------------------------------------------------- custom stream


def test_prebuilt_graph_streams_progress_events(sample_index):
    graph = activation_graph(sample_index, k=3)
    events = list(graph.stream({"question": Q}, stream_mode="custom"))
    retrieve = [e for e in events if e["event"] == "retrieve"]
    assert len(retrieve) == 1
    ev = retrieve[0]
    assert ev["node"] == "retrieve" and ev["method"] == "activation" and ev["passages"] == 3
    assert isinstance(ev["ms"], float) and ev["ms"] >= 0 and len(ev["documents"]) == 3
    assert {"seeds", "activated"} <= {e["event"] for e in events}


def test_sa_rag_and_kg_infused_stream_counts(sample_index):
    _, events = _run(sa_rag_graph(sample_index, k=2), {"question": Q})
    (ev,) = [e for e in events if e["event"] == "retrieve"]
    assert ev["passages"] == len(ev["documents"]) <= 2 and ev["method"] and ev["ms"] >= 0
    out, events = _run(kg_infused_graph(sample_index, k_each=1), {"question": Q})
    (ev,) = [e for e in events if e["event"] == "retrieve"]
    assert ev["passages"] == len(out["documents"]) and ev["ms"] >= 0


def test_sa_rag_cot_graph_streams_reasoning_and_retrieve_events(sample_index):
    def script(messages: list[dict[str, str]]) -> str:
        if messages[0]["content"] == REASONING_SYSTEM:
            return _reasoning(False, question="Which river flows through Warsaw?")
        return json.dumps({"reasoning": "Warsaw is on the Vistula.", "final_answer": "Vistula"})

    llm = ScriptedLLM(script)
    graph = sa_rag_graph(sample_index, llm, max_steps=3, k=2)
    out, events = _run(graph, {"question": Q}, context={"max_steps": 1})
    assert out["steps"] == 1 and out["generation"] == "Vistula"  # context max_steps=1 beats the built 3
    assert [e["event"] for e in events if e["event"] in ("retrieve", "reasoning")] == [
        "retrieve",
        "reasoning",
        "retrieve",
    ]


# --------------------------------------------------------------------------- context schema


def test_context_k_changes_the_number_of_passages(sample_index):
    graph = activation_graph(sample_index, k=5)
    assert graph.builder.context_schema is KGRAGContext
    assert "k" in graph.get_context_jsonschema()["properties"]
    assert len(graph.invoke({"question": Q})["documents"]) == 5
    assert len(graph.invoke({"question": Q}, context={"k": 2})["documents"]) == 2
    _, events = _run(graph, {"question": Q}, context={"k": 2})
    assert [e["passages"] for e in events if e["event"] == "retrieve"] == [2]
    with pytest.raises(ValueError, match="context 'k' must be an int >= 1"):
        graph.invoke({"question": Q}, context={"k": 0})


def test_context_k_each_and_route(sample_index, dense):
    graph = kg_infused_graph(sample_index, k_each=3)
    wide = graph.invoke({"question": Q})["documents"]
    narrow = graph.invoke({"question": Q}, context={"k_each": 1})["documents"]
    assert 1 <= len(narrow) <= 2 < len(wide)

    router = make_hop_router(dense, DenseRetriever(sample_index), k=3)
    out = router.invoke({"question": Q}, context={"route": "complex", "k": 1})
    assert out["route"] == "complex" and out["trace"]["route"]["by"] == "context" and len(out["documents"]) == 1
    with pytest.raises(ValueError, match="route"):
        router.invoke({"question": Q}, context={"route": "sideways"})


def test_every_prebuilt_graph_has_the_context_schema_and_retry_policies(sample_index):
    from kgrag_plugins.integrations.langgraph import frag_graph, know3_graph, translator_graph

    graphs = {
        "activation": activation_graph(sample_index, ScriptedLLM(["x"])),
        "kg_infused": kg_infused_graph(sample_index),
        "sa_rag": sa_rag_graph(sample_index),
        "frag": frag_graph(sample_index),
        "translator": translator_graph(DenseRetriever(sample_index)),  # any Retriever as the translate node
        "know3": know3_graph(sample_index),
    }
    for name, graph in graphs.items():
        assert graph.builder.context_schema is KGRAGContext, name
        policies = {n: spec.retry_policy for n, spec in graph.builder.nodes.items()}
        assert any(p is not None and p.retry_on is retry_on for p in policies.values()), (name, policies)
    # the router is LLM-free: no retries; retry_policy=None turns them all off
    assert graphs["frag"].builder.nodes["router"].retry_policy is None
    off = activation_graph(sample_index, ScriptedLLM(["x"]), retry_policy=None)
    assert all(spec.retry_policy is None for spec in off.builder.nodes.values())
    with pytest.raises(TypeError, match="RetryPolicy"):
        activation_graph(sample_index, retry_policy=3)
