"""LangChain chat models and kgrag LLMs across the boundary, with token usage both ways.

* :class:`LangChainLLM`: a LangChain chat model as a kgrag :class:`~kgrag_plugins.models.llm.LLM`
  (``invoke`` / ``ainvoke``); the reply's ``usage_metadata`` (or ``response_metadata["token_usage"]``)
  goes to the running step's meter (:func:`~kgrag_plugins.models.usage.report_usage`).
* :class:`KGRAGChatModel`: a kgrag LLM as a LangChain chat model; each ``AIMessage`` carries the
  call's tokens in ``usage_metadata`` (``input_tokens`` / ``output_tokens`` / ``total_tokens``, so
  LangChain's ``get_usage_metadata_callback`` and LangSmith count them) and
  ``response_metadata["token_usage"]`` (OpenAI-style), with ``estimated_tokens`` when the backend
  reported none (:mod:`kgrag_plugins.models.usage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, field_validator

from ...models.llm import ChatAdapter, Message
from ...models.usage import LLMCall, llm_call, report_usage

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun

__all__ = ["KGRAGChatModel", "LangChainLLM", "langchain_text", "report_langchain_usage"]

_CLASSES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


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


def report_langchain_usage(result: Any) -> None:
    """Report a LangChain reply's tokens (``usage_metadata``, else ``response_metadata["token_usage"]``)
    to the running step's meter; nothing when the reply has neither."""
    um = getattr(result, "usage_metadata", None)
    if isinstance(um, dict) and ("input_tokens" in um or "output_tokens" in um):
        report_usage(um.get("input_tokens"), um.get("output_tokens"), if_unreported=True)
        return
    tu = (getattr(result, "response_metadata", None) or {}).get("token_usage")
    if isinstance(tu, dict) and ("prompt_tokens" in tu or "completion_tokens" in tu):
        report_usage(tu.get("prompt_tokens"), tu.get("completion_tokens"), if_unreported=True)


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
        result = self.chat_model.invoke(lc_messages, **kwargs)
        report_langchain_usage(result)
        return langchain_text(result)

    async def _achat(self, messages: list[Message], stop: list[str] | None) -> str:
        lc_messages, kwargs = self._args(messages, stop)
        result = await self.chat_model.ainvoke(lc_messages, **kwargs)
        report_langchain_usage(result)
        return langchain_text(result)


def _ours(messages: list[BaseMessage]) -> list[Message]:
    return [{"role": _ROLES.get(m.type, "user"), "content": langchain_text(m)} for m in messages]


class KGRAGChatModel(BaseChatModel):
    """A kgrag LLM (:class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM`, ``OllamaLLM``,
    ``LocalLLM``, ``ScriptedLLM`` ...) as a LangChain chat model (``invoke`` / ``ainvoke`` / ``batch``).

    Messages map by role (system / human / ai; others are sent as user turns); ``stop`` is passed
    on. The ``AIMessage`` reports the call's tokens (module docstring). A call made inside a
    :func:`~kgrag_plugins.models.usage.metering_usage` block also counts there, as step
    ``"chat_model"``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Any

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: Any) -> Any:
        from ...models.llm import as_llm

        llm = as_llm(value)
        if llm is None:
            raise TypeError(f"expected a kgrag LLM with complete(prompt), got {type(value).__name__}")
        return llm

    @property
    def _llm_type(self) -> str:
        return "kgrag"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"llm": repr(self.llm)}

    def _result(self, call: LLMCall) -> ChatResult:
        u = call.usage()
        prompt, completion = u.prompt_tokens, u.completion_tokens
        token_usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        meta: dict[str, Any] = {"token_usage": token_usage, "model_name": repr(self.llm), "llm_seconds": u.seconds}
        if u.estimated:
            meta["estimated_tokens"] = True
        message = AIMessage(
            content=call.reply or "",
            usage_metadata={"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion},
            response_metadata=meta,
        )
        return ChatResult(generations=[ChatGeneration(message=message)], llm_output={"token_usage": token_usage})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = _ours(messages)
        with llm_call("chat_model", prompt, llm=self.llm, always=True) as call:
            call.reply = self.llm.complete(prompt, stop=stop)
        return self._result(call)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = _ours(messages)
        with llm_call("chat_model", prompt, llm=self.llm, always=True) as call:
            call.reply = await self.llm.acomplete(prompt, stop=stop)
        return self._result(call)
