"""A LangChain chat model as a kgrag :class:`~kgrag_plugins.models.llm.LLM` (``invoke`` / ``ainvoke``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ...models.llm import ChatAdapter, Message

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

__all__ = ["LangChainLLM", "langchain_text"]

_CLASSES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def langchain_text(result: Any) -> str:
    """Text of a LangChain ``invoke`` result (message, content blocks, or plain string)."""
    content = getattr(result, "content", result)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)


class LangChainLLM(ChatAdapter):
    """Adapter for a LangChain chat model (``BaseChatModel``).

    ``stop`` is passed to ``invoke`` and also applied to the output (some models ignore it).
    ``max_tokens`` / ``temperature`` are ignored: configure them on the chat model itself.
    """

    def __init__(self, chat_model: BaseChatModel) -> None:
        self.chat_model = chat_model

    def __repr__(self) -> str:
        return f"LangChainLLM({type(self.chat_model).__name__})"

    @staticmethod
    def _args(messages: list[Message], stop: list[str] | None) -> tuple[list[Any], dict[str, Any]]:
        return [_CLASSES[m["role"]](content=m["content"]) for m in messages], ({"stop": list(stop)} if stop else {})

    def _chat(self, messages: list[Message], stop: list[str] | None) -> str:
        lc_messages, kwargs = self._args(messages, stop)
        return langchain_text(self.chat_model.invoke(lc_messages, **kwargs))

    async def _achat(self, messages: list[Message], stop: list[str] | None) -> str:
        lc_messages, kwargs = self._args(messages, stop)
        return langchain_text(await self.chat_model.ainvoke(lc_messages, **kwargs))
