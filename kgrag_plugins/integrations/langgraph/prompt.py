"""A user's answer prompt for :func:`~kgrag_plugins.integrations.langgraph.make_generate_node`:
a ``str`` with ``{question}`` / ``{context}`` or a LangChain ``ChatPromptTemplate`` (as in the
LangGraph RAG tutorials), turned into our chat messages.

``{context}`` receives the evidence inside ``<passages>`` / ``<facts>`` data blocks, escaped
(:func:`~kgrag_plugins.methods.answer.format_evidence`), and the system message always carries
:data:`~kgrag_plugins.models.prompting.DATA_NOTICE` (added to the prompt's own system message, or
as a first system message when it has none), so retrieved text stays data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...methods.answer import format_evidence
from ...models.llm import Message
from ...models.prompting import DATA_NOTICE
from ...types import Evidence

__all__ = ["prompt_builder"]

#: Fields a prompt may use; ``context`` is required (else the evidence never reaches the model).
FIELDS = ("question", "context")
#: A ``ChatPromptTemplate`` may also take the conversation (``MessagesPlaceholder("messages")``).
CHAT_FIELDS = (*FIELDS, "messages")

_ROLES = {"system": "system", "human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}

PromptBuilder = Callable[[str, Evidence, int, Any], "list[Message]"]


def _with_notice(messages: list[Message]) -> list[Message]:
    if messages and messages[0]["role"] == "system":
        if DATA_NOTICE not in messages[0]["content"]:
            messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n{DATA_NOTICE}"}
        return messages
    return [{"role": "system", "content": DATA_NOTICE}, *messages]


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    return str(content)


def _from_string(prompt: str) -> PromptBuilder:
    try:
        prompt.format(question="", context="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"a str prompt may use only {{question}} and {{context}} (write literal braces as {{{{ }}}}): {exc!r}"
        ) from None
    if "{context}" not in prompt:
        raise ValueError("the prompt needs a {context} field: the evidence goes there")

    def build(question: str, evidence: Evidence, max_passages: int, messages: Any) -> list[Message]:
        text = prompt.format(question=question, context=format_evidence(evidence, max_passages))
        return _with_notice([{"role": "user", "content": text}])

    return build


def _from_template(template: Any) -> PromptBuilder:
    variables = set(getattr(template, "input_variables", None) or ())
    extra = variables - set(CHAT_FIELDS)
    if extra:
        raise ValueError(f"the prompt template may use only {list(CHAT_FIELDS)}; it also asks for {sorted(extra)}")
    if "context" not in variables:
        raise ValueError("the prompt template needs a 'context' variable: the evidence goes there")

    def build(question: str, evidence: Evidence, max_passages: int, messages: Any) -> list[Message]:
        values: dict[str, Any] = {"question": question, "context": format_evidence(evidence, max_passages)}
        if "messages" in variables:
            values["messages"] = list(messages or [])
        out = [
            {"role": _ROLES.get(m.type, "user"), "content": _content(m.content)}
            for m in template.format_messages(**{k: v for k, v in values.items() if k in variables})
        ]
        return _with_notice(out)

    return build


def prompt_builder(prompt: Any) -> PromptBuilder | None:
    """``(question, evidence, max_passages, messages) -> chat messages`` for ``prompt`` (``None``:
    the house prompt). Raises ``ValueError`` for a prompt without ``{context}`` or with other
    fields, ``TypeError`` for anything but a ``str`` or a prompt template with ``format_messages``."""
    if prompt is None:
        return None
    if isinstance(prompt, str):
        return _from_string(prompt)
    if callable(getattr(prompt, "format_messages", None)):
        return _from_template(prompt)
    raise TypeError(
        f"prompt must be a str with {{question}}/{{context}} or a ChatPromptTemplate, got {type(prompt).__name__}"
    )
