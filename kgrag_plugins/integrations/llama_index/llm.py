"""A LlamaIndex LLM as a kgrag :class:`~kgrag_plugins.models.llm.LLM` (``chat`` / ``achat``), and back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import ChatMessage, CustomLLM, MessageRole
from llama_index.core.llms.callbacks import llm_completion_callback

from ...models.llm import ChatAdapter, Message

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM as LlamaIndexBaseLLM

__all__ = ["KGRAGLlamaLLM", "LlamaIndexLLM"]


def _messages(messages: list[Message]) -> list[Any]:
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]


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
        return self.llm.chat(_messages(messages)).message.content or ""

    async def _achat(self, messages: list[Message], stop: list[str] | None) -> str:
        return (await self.llm.achat(_messages(messages))).message.content or ""


class KGRAGLlamaLLM(CustomLLM):
    """Our LLM (or a LangChain chat model, via :func:`~kgrag_plugins.models.llm.as_llm`) as a LlamaIndex
    LLM, for a LlamaIndex response synthesizer (``as_query_engine(index, llm=ours)``)."""

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
        return CompletionResponse(text=self._llm.complete(prompt))

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=await self._llm.acomplete(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self._llm.complete(prompt)
        yield CompletionResponse(text=text, delta=text)
