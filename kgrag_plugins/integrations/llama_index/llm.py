"""A LlamaIndex LLM as a kgrag :class:`~kgrag_plugins.models.llm.LLM` (``chat`` / ``achat``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.llms import ChatMessage, MessageRole

from ...models.llm import ChatAdapter, Message

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM as LlamaIndexBaseLLM

__all__ = ["LlamaIndexLLM"]


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
