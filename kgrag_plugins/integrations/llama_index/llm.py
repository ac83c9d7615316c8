"""A LlamaIndex LLM as a kgrag :class:`~kgrag_plugins.models.llm.LLM` (``chat`` / ``achat``), and back.

Token usage crosses both ways: :class:`LlamaIndexLLM` reports a reply's ``raw["usage"]`` (or
``additional_kwargs``) tokens to the running step's meter
(:func:`~kgrag_plugins.models.usage.report_usage`); :class:`KGRAGLlamaLLM` puts the call's tokens
into ``CompletionResponse.raw["usage"]`` (OpenAI-style ``prompt_tokens`` / ``completion_tokens`` /
``total_tokens``, plus ``estimated`` when the backend reported none), which LlamaIndex's
``TokenCountingHandler`` reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import ChatMessage, CustomLLM, MessageRole
from llama_index.core.llms.callbacks import llm_completion_callback

from ...models.llm import ChatAdapter, Message
from ...models.usage import LLMCall, llm_call, report_usage

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM as LlamaIndexBaseLLM

__all__ = ["KGRAGLlamaLLM", "LlamaIndexLLM"]


def _messages(messages: list[Message]) -> list[Any]:
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]


def report_llama_usage(response: Any) -> None:
    """Report a LlamaIndex response's tokens (``raw["usage"]`` / ``raw["usage_metadata"]``, else
    ``additional_kwargs``) to the running step's meter; nothing when it has none."""
    raw = getattr(response, "raw", None)
    usage = raw.get("usage", raw.get("usage_metadata")) if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is None:
        usage = getattr(response, "additional_kwargs", None)
    if usage is not None and not isinstance(usage, dict):
        dump = getattr(usage, "model_dump", None)
        usage = dump() if callable(dump) else vars(usage) if hasattr(usage, "__dict__") else None
    if not isinstance(usage, dict):
        return
    prompt = next((usage[k] for k in ("prompt_tokens", "input_tokens") if k in usage), None)
    completion = next((usage[k] for k in ("completion_tokens", "output_tokens") if k in usage), None)
    if prompt is not None or completion is not None:
        report_usage(prompt, completion, if_unreported=True)  # ours inside: counted once


def _raw(call: LLMCall) -> dict[str, Any]:
    u = call.usage()
    usage: dict[str, Any] = {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }
    if u.estimated:
        usage["estimated"] = True
    return {"usage": usage, "llm_seconds": round(u.seconds, 4)}


class LlamaIndexLLM(ChatAdapter):
    """Adapter for a LlamaIndex ``llama_index.core.llms.LLM`` (uses ``chat`` / ``achat``).

    ``stop`` is applied by truncating the reply at the first stop string.
    ``max_tokens`` / ``temperature`` are ignored: configure them on the LlamaIndex LLM itself.
    """

    def __init__(self, llm: LlamaIndexBaseLLM) -> None:
        self.llm = llm

    def __repr__(self) -> str:
        return f"LlamaIndexLLM({type(self.llm).__name__})"

    def _chat(self, messages: list[Message], stop: list[str] | None) -> str:
        response = self.llm.chat(_messages(messages))
        report_llama_usage(response)
        return response.message.content or ""

    async def _achat(self, messages: list[Message], stop: list[str] | None) -> str:
        response = await self.llm.achat(_messages(messages))
        report_llama_usage(response)
        return response.message.content or ""


class KGRAGLlamaLLM(CustomLLM):
    """Our LLM (or a LangChain chat model, via :func:`~kgrag_plugins.models.llm.as_llm`) as a LlamaIndex
    LLM, for a LlamaIndex response synthesizer (``as_query_engine(index, llm=ours)``). Each response's
    ``raw["usage"]`` holds the call's tokens (module docstring); a call inside a
    :func:`~kgrag_plugins.models.usage.metering_usage` block also counts there, as step ``"llama_index"``."""

    context_window: int = 8192
    num_output: int = 512
    _llm: Any = PrivateAttr()

    def __init__(self, llm: Any, **kwargs: Any) -> None:
        from ...models.llm import as_llm

        super().__init__(**kwargs)
        self._llm = as_llm(llm)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self.context_window, num_output=self.num_output, model_name=repr(self._llm))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        with llm_call("llama_index", prompt, llm=self._llm, always=True) as call:
            call.reply = self._llm.complete(prompt)
        return CompletionResponse(text=call.reply, raw=_raw(call))

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        with llm_call("llama_index", prompt, llm=self._llm, always=True) as call:
            call.reply = await self._llm.acomplete(prompt)
        return CompletionResponse(text=call.reply, raw=_raw(call))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        with llm_call("llama_index", prompt, llm=self._llm, always=True) as call:
            call.reply = self._llm.complete(prompt)
        yield CompletionResponse(text=call.reply, delta=call.reply, raw=_raw(call))
