"""Token and cost visibility (issue 37 item 5): LLM calls, tokens and seconds per step in
``Evidence.trace["llm_usage"]``, per-context meters, backends' per-call usage, estimates."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.models.llm import LLMError, ScriptedLLM
from kgrag_plugins.models.replies import InvalidReply, check_text, complete_validated
from kgrag_plugins.models.usage import (
    LLM_USAGE_KEY,
    add_usage,
    estimate_tokens,
    llm_call,
    metering_usage,
    report_usage,
    usage_line,
)
from kgrag_plugins.types import Evidence


class UsageLLM:
    """A scripted LLM that reports per-call usage like an OpenAI-compatible endpoint: each reply is
    ``(text, prompt_tokens, completion_tokens)``; an ``Exception`` item is raised."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.lock = threading.Lock()

    def complete(self, prompt: Any, **kwargs: Any) -> str:
        with self.lock:
            item = self.replies.pop(0)
        if isinstance(item, Exception):
            raise item
        text, p, c = item
        report_usage(p, c)
        return text


class TwoStepRetriever(Retriever):
    """Calls the LLM for a ``select`` step and then an ``answer`` step (both validated)."""

    name = "two-step"

    def __init__(self, llm: Any, barrier: threading.Barrier | None = None) -> None:
        self.llm, self.barrier = llm, barrier

    def _retrieve(self, query: str, k: int) -> Evidence:
        errors: list[dict[str, Any]] = []
        complete_validated(self.llm, f"select for {query}", check_text, step="select", errors=errors)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)  # both retrievals are in flight at once
        complete_validated(self.llm, f"answer {query}", check_text, step="answer", errors=errors)
        return Evidence(query=query, trace={"llm_error": errors} if errors else {})


class NoLLMRetriever(Retriever):
    name = "no-llm"

    def _retrieve(self, query: str, k: int) -> Evidence:
        return Evidence(query=query)


def test_trace_carries_the_backends_numbers_per_step():
    llm = UsageLLM([("the pick", 120, 7), ("!!!", 130, 2), ("Warsaw", 140, 3)])  # "!!!" is invalid: retried
    ev = TwoStepRetriever(llm).retrieve("Where was Marie Curie born?", 3)
    usage = ev.trace[LLM_USAGE_KEY]
    sel, ans = usage["steps"]["select"], usage["steps"]["answer"]
    assert (sel["calls"], sel["prompt_tokens"], sel["completion_tokens"]) == (1, 120, 7)
    assert (ans["calls"], ans["prompt_tokens"], ans["completion_tokens"]) == (2, 270, 5)
    assert "estimated" not in sel and "estimated" not in usage["total"]
    total = usage["total"]
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (3, 390, 12)
    assert total["seconds"] >= 0 and total["seconds"] == pytest.approx(sel["seconds"] + ans["seconds"], abs=1e-3)


def test_a_failed_call_counts_as_a_call_without_tokens():
    llm = UsageLLM([("the pick", 10, 1), LLMError("down")])
    ev = TwoStepRetriever(llm).retrieve("q", 3)
    ans = ev.trace[LLM_USAGE_KEY]["steps"]["answer"]
    assert (ans["calls"], ans["prompt_tokens"], ans["completion_tokens"]) == (1, 0, 0)
    assert ev.fallback  # the step's fallback is still reported


def test_an_llm_free_retriever_has_no_usage_key():
    ev = NoLLMRetriever().retrieve("q", 3)
    assert LLM_USAGE_KEY not in ev.trace


def test_estimates_when_the_backend_reports_nothing():
    ev = TwoStepRetriever(ScriptedLLM(["the pick", "Warsaw is the answer"])).retrieve("Marie Curie?", 3)
    ans = ev.trace[LLM_USAGE_KEY]["steps"]["answer"]
    assert ans["estimated"] is True and ev.trace[LLM_USAGE_KEY]["total"]["estimated"] is True
    assert ans["prompt_tokens"] == estimate_tokens("answer Marie Curie?")
    assert ans["completion_tokens"] == estimate_tokens("Warsaw is the answer") > 0


def test_reads_the_delta_of_a_cumulative_usage_dict():
    class Cumulative(ScriptedLLM):
        def __init__(self) -> None:
            super().__init__(lambda msgs: "a fine reply")
            self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

        def complete(self, prompt: Any, **kw: Any) -> str:
            self.usage["prompt_tokens"] += 50
            self.usage["completion_tokens"] += 4
            return super().complete(prompt, **kw)

    ev = TwoStepRetriever(Cumulative()).retrieve("q", 3)
    total = ev.trace[LLM_USAGE_KEY]["total"]
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (2, 100, 8)
    assert "estimated" not in total


def test_concurrent_retrievals_keep_separate_meters():
    barrier = threading.Barrier(2)
    results: dict[str, Evidence] = {}

    def run(name: str, p: int) -> None:
        llm = UsageLLM([("the pick", p, 1), ("the answer", p, 2)])
        results[name] = TwoStepRetriever(llm, barrier).retrieve(name, 3)

    threads = [threading.Thread(target=run, args=(n, p)) for n, p in (("a", 100), ("b", 1000))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    for name, p in (("a", 100), ("b", 1000)):
        total = results[name].trace[LLM_USAGE_KEY]["total"]
        assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (2, 2 * p, 3), name


def test_concurrent_aretrieve_and_an_outer_meter():
    async def both() -> list[Evidence]:
        r1 = TwoStepRetriever(UsageLLM([("the pick", 5, 1), ("the answer", 5, 1)]))
        r2 = TwoStepRetriever(UsageLLM([("the pick", 50, 1), ("the answer", 50, 1)]))
        return list(await asyncio.gather(r1.aretrieve("a", 3), r2.aretrieve("b", 3)))

    with metering_usage() as outer:
        a, b = asyncio.run(both())
    assert a.trace[LLM_USAGE_KEY]["total"]["prompt_tokens"] == 10
    assert b.trace[LLM_USAGE_KEY]["total"]["prompt_tokens"] == 100
    assert outer.total().prompt_tokens == 110 and outer.calls == 4  # nested meters see every call


def test_nested_calls_count_once_and_unattributed_reports():
    with metering_usage() as meter:
        with llm_call("outer", "p", always=True) as outer:
            with llm_call("inner", "p") as inner:
                report_usage(10, 2)
                inner.reply = "x"
            outer.reply = "x"
        report_usage(3, 1)  # outside any call: one call of step "llm"
    steps = meter.as_dict()["steps"]
    assert steps["outer"] == {
        "calls": 1,
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "seconds": steps["outer"]["seconds"],
    }
    assert "inner" not in steps
    assert steps["llm"]["calls"] == 1 and steps["llm"]["prompt_tokens"] == 3
    assert inner.usage().prompt_tokens == 10  # the inner call still knows its own numbers


def test_no_meter_no_cost():
    with llm_call("x", "prompt") as call:
        call.reply = "reply"
    assert not call.active and call.prompt_tokens == 0


def test_openai_client_reports_endpoint_usage_per_step(monkeypatch):
    from tests.models.test_llm import FakeOpenAIServer, make_llm

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    srv = FakeOpenAIServer()
    srv.thread.start()
    try:
        srv.script(("ok", "the pick"), ("ok", "Warsaw"))
        ev = TwoStepRetriever(make_llm(srv, structured="off")).retrieve("q", 3)
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
    steps = ev.trace[LLM_USAGE_KEY]["steps"]
    for step in ("select", "answer"):  # the fake endpoint's usage: 7 prompt, 3 completion tokens
        assert (steps[step]["calls"], steps[step]["prompt_tokens"], steps[step]["completion_tokens"]) == (1, 7, 3)
        assert steps[step]["seconds"] > 0 and "estimated" not in steps[step]


def test_add_usage_and_line():
    a = {"steps": {"s": {"calls": 1, "prompt_tokens": 2, "completion_tokens": 3, "seconds": 0.5}}, "total": {}}
    a["total"] = dict(a["steps"]["s"])
    both = add_usage(add_usage(None, a), a)
    assert both["steps"]["s"]["calls"] == 2 and both["total"]["prompt_tokens"] == 4
    assert add_usage(None, None) is None
    line = usage_line(both["total"])
    assert line == "LLM usage: 2 calls, 4 prompt tokens, 6 completion tokens, 1.0 s in LLM calls"


def test_invalid_reply_retry_is_two_calls_of_the_step():
    llm = UsageLLM([("{}", 9, 1), ("fine words", 9, 2)])

    def validate(reply: str) -> str:
        if reply.startswith("{"):
            raise InvalidReply("JSON")
        return reply

    with metering_usage() as meter:
        assert complete_validated(llm, "p", validate, step="note") == "fine words"
    assert meter.as_dict()["steps"]["note"]["calls"] == 2
    assert meter.total().completion_tokens == 3


def test_retrieval_bench_rows_carry_usage_totals_and_the_closing_line():
    from types import SimpleNamespace

    from kgrag_plugins.eval.bench import evaluate_retriever, llm_usage_summary

    qs = [
        SimpleNamespace(id=f"q{i}", question=f"question {i}", supporting_passage_ids=[], answers=[]) for i in range(3)
    ]
    llm = UsageLLM([("the pick", 10, 1), ("the answer", 20, 2)] * 4)  # warm-up + 3 questions
    row = evaluate_retriever(TwoStepRetriever(llm), SimpleNamespace(questions=qs), k=2, progress=False)
    usage = row[LLM_USAGE_KEY]  # the warm-up query is not counted
    assert usage["steps"]["select"]["calls"] == 3 and usage["steps"]["answer"]["prompt_tokens"] == 60
    assert (usage["total"]["calls"], usage["total"]["prompt_tokens"], usage["total"]["completion_tokens"]) == (6, 90, 9)
    free = evaluate_retriever(NoLLMRetriever(), SimpleNamespace(questions=qs), k=2, progress=False)
    assert LLM_USAGE_KEY not in free
    report = {"results": {"two-step": row, "no-llm": free}}
    assert llm_usage_summary(report).startswith("LLM usage: 6 calls, 90 prompt tokens, 9 completion tokens, ")
    assert llm_usage_summary({"results": {"no-llm": free}}) == ""
