"""LLM token usage across the framework adapters (issue 37 item 5): LangChain ``AIMessage.usage_metadata``
and LlamaIndex ``raw["usage"]`` (read by ``TokenCountingHandler``), both directions, and a retrieval's
usage totals on the first document / node."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler

from kgrag_plugins.integrations._common import usage_metadata
from kgrag_plugins.integrations.langchain import KGRAGChatModel, KGRAGLangChainRetriever, LangChainLLM
from kgrag_plugins.integrations.llama_index import LlamaIndexLLM, evidence_to_nodes
from kgrag_plugins.integrations.llama_index.llm import KGRAGLlamaLLM
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.models.replies import check_text, complete_validated
from kgrag_plugins.models.usage import LLM_USAGE_KEY, metering_usage, report_usage
from kgrag_plugins.types import Evidence, Passage, ScoredPassage


class UsageLLM:
    """Our LLM protocol, reporting ``(prompt_tokens, completion_tokens)`` per reply like an endpoint."""

    def __init__(self, reply: str = "Warsaw", prompt_tokens: int = 1234, completion_tokens: int = 56) -> None:
        self.reply, self.p, self.c = reply, prompt_tokens, completion_tokens
        self.prompts: list[Any] = []
        self._lock = threading.Lock()

    def complete(self, prompt: Any, **kwargs: Any) -> str:
        with self._lock:
            self.prompts.append(prompt)
        report_usage(self.p, self.c)
        return self.reply

    async def acomplete(self, prompt: Any, **kwargs: Any) -> str:
        return self.complete(prompt, **kwargs)


class UsageChatModel(BaseChatModel):
    """A LangChain chat model whose replies carry ``usage_metadata``."""

    @property
    def _llm_type(self) -> str:
        return "usage-fake"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        msg = AIMessage(content="Warsaw", usage_metadata={"input_tokens": 321, "output_tokens": 9, "total_tokens": 330})
        return ChatResult(generations=[ChatGeneration(message=msg)])


class LLMStepRetriever(Retriever):
    """One passage, after one validated LLM step."""

    name = "llm-step"

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def _retrieve(self, query: str, k: int) -> Evidence:
        complete_validated(self.llm, query, check_text, step="select")
        sp = ScoredPassage(Passage(id="p1", text="Warsaw is on the Vistula.", title="Warsaw"), 0.9)
        return Evidence(query=query, passages=[sp])


# --------------------------------------------------------------------------- LangChain


def test_chat_model_reports_usage_metadata():
    model = KGRAGChatModel(llm=UsageLLM())
    with get_usage_metadata_callback() as cb:
        msg = model.invoke([SystemMessage(content="Be brief."), HumanMessage(content="Where?")])
    assert msg.content == "Warsaw"
    assert msg.usage_metadata == {"input_tokens": 1234, "output_tokens": 56, "total_tokens": 1290}
    assert msg.response_metadata["token_usage"] == {
        "prompt_tokens": 1234,
        "completion_tokens": 56,
        "total_tokens": 1290,
    }
    assert "estimated_tokens" not in msg.response_metadata
    (usage,) = cb.usage_metadata.values()  # LangChain's own usage callback counts our tokens
    assert usage["input_tokens"] == 1234 and usage["output_tokens"] == 56
    assert model.llm.prompts[0] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where?"}]


def test_chat_model_async_and_estimated_tokens():
    model = KGRAGChatModel(llm=ScriptedLLM(["Warsaw is the answer"]))
    msg = asyncio.run(model.ainvoke("Where was Marie Curie born?"))
    assert msg.usage_metadata["output_tokens"] > 0 and msg.usage_metadata["input_tokens"] > 0
    assert msg.response_metadata["estimated_tokens"] is True


def test_langchain_llm_reports_the_models_usage_to_the_step():
    with metering_usage() as meter:
        assert complete_validated(LangChainLLM(UsageChatModel()), "Where?", check_text, step="answer") == "Warsaw"
    step = meter.as_dict()["steps"]["answer"]
    assert (step["calls"], step["prompt_tokens"], step["completion_tokens"]) == (1, 321, 9)
    assert "estimated" not in step


def test_langchain_retriever_puts_usage_on_the_first_document():
    lc = KGRAGLangChainRetriever(retriever=LLMStepRetriever(UsageLLM(prompt_tokens=77, completion_tokens=5)), k=1)
    docs = lc.invoke("Which river?")
    meta = docs[0].metadata
    assert (meta["llm_calls"], meta["llm_prompt_tokens"], meta["llm_completion_tokens"]) == (1, 77, 5)
    assert meta["llm_seconds"] >= 0
    assert lc.last_evidence().trace[LLM_USAGE_KEY]["steps"]["select"]["prompt_tokens"] == 77
    assert all("llm_calls" not in d.metadata for d in docs[1:])


# --------------------------------------------------------------------------- LlamaIndex


def test_token_counting_handler_sees_our_tokens():
    counter = TokenCountingHandler()
    llm = KGRAGLlamaLLM(UsageLLM(), callback_manager=CallbackManager([counter]))
    resp = llm.complete("Where was Marie Curie born?")
    assert resp.text == "Warsaw" and resp.raw["usage"]["total_tokens"] == 1290
    assert counter.prompt_llm_token_count == 1234 and counter.completion_llm_token_count == 56
    llm.chat([])  # LlamaIndex's chat path (via complete; it logs both events) carries raw too
    assert [e.prompt_token_count for e in counter.llm_token_counts][1:] and all(
        e.prompt_token_count == 1234 and e.completion_token_count == 56 for e in counter.llm_token_counts
    )


def test_llama_index_llm_reports_raw_usage_to_the_step():
    inner = KGRAGLlamaLLM(UsageLLM(prompt_tokens=400, completion_tokens=4))
    with metering_usage() as meter:
        assert complete_validated(LlamaIndexLLM(inner), "Where?", check_text, step="answer") == "Warsaw"
    step = meter.as_dict()["steps"]["answer"]
    assert (step["calls"], step["prompt_tokens"], step["completion_tokens"]) == (1, 400, 4)
    assert "llama_index" not in meter.as_dict()["steps"]  # the inner adapter call is counted once


def test_nodes_carry_the_retrievals_usage():
    ev = LLMStepRetriever(UsageLLM(prompt_tokens=10, completion_tokens=2)).retrieve("Which river?", 1)
    nodes = evidence_to_nodes(ev)
    assert nodes[0].node.metadata["llm_prompt_tokens"] == 10 and nodes[0].node.metadata["llm_calls"] == 1
    assert "llm_calls" in nodes[0].node.excluded_llm_metadata_keys  # not shown to the LLM
    assert usage_metadata(Evidence(query="q")) == {}


@pytest.mark.parametrize("estimated", [False, True])
def test_usage_metadata_flat(estimated):
    total = {"calls": 2, "prompt_tokens": 3, "completion_tokens": 4, "seconds": 0.5}
    if estimated:
        total["estimated"] = True
    meta = usage_metadata(Evidence(query="q", trace={LLM_USAGE_KEY: {"steps": {}, "total": total}}))
    assert all(isinstance(v, (int, float, bool)) for v in meta.values())
    assert meta.get("llm_tokens_estimated", False) is estimated
