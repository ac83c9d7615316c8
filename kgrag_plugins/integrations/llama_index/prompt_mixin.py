"""LlamaIndex ``PromptMixin`` support: the LLM prompts of a wrapped kgrag method.

``retriever.get_prompts()`` returns the method's prompts as ``PromptTemplate`` s and
``retriever.update_prompts({key: PromptTemplate(...)})`` replaces them on the method object, which
then formats the new template with the same (data-escaped) fields. Methods with overridable prompts
have ``prompts`` (their overrides), ``set_prompt(key, template)`` and a table of defaults:

- KG-Infused RAG (App. D.1, Tables 8-16): the keys of
  :data:`kgrag_plugins.methods.kg_infused.prompts.PROMPTS` (``triples_selection_before_retri``, ...).
- FRAG (App. A.5): ``reasoning`` (used by ``retriever.retriever.answer(question)``) and
  ``hop_estimation`` (FRAG-F feedback); fields ``{paths}``, ``{question}``.
- KG-Translator (App. M): ``decomposition`` -- prompt ❸'s instruction text (no fields: the question,
  passages and used queries follow in data blocks).
- Know³-RAG (App. D, Figs. 6-8): ``qa``, ``reference_generation``, ``query_generation`` -- the
  instruction texts (no fields; the question, references and answer follow in data blocks).

LLM-free methods and methods without an override hook expose no prompts (``{}``). Keys a method
does not know are ignored (LlamaIndex's convention; ``module:key`` keys go to sub-modules).
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType

__all__ = ["method_prompts", "update_method_prompts"]

logger = logging.getLogger("kgrag_plugins.integrations.llama_index")


def _defaults(method: Any) -> dict[str, str]:
    """Default templates of ``method`` by key ({} when it has no prompt hook)."""
    from ...methods.frag import FRAGRetriever
    from ...methods.kg_infused import KGInfusedRetriever
    from ...methods.translator import TranslatorRetriever

    if isinstance(method, KGInfusedRetriever):
        from ...methods.kg_infused.prompts import PROMPTS

        return {k: str(v) for k, v in PROMPTS.items()}
    if isinstance(method, FRAGRetriever):
        from ...methods.frag.prompts import HOP_ESTIMATION, REASONING

        return {"reasoning": REASONING, "hop_estimation": HOP_ESTIMATION}
    if isinstance(method, TranslatorRetriever):
        from ...methods.translator.prompts import DECOMPOSITION

        return {"decomposition": DECOMPOSITION}
    from ...methods.know3 import Know3Retriever

    if isinstance(method, Know3Retriever):
        from ...methods.know3.prompts import QA, QUERY_GENERATION, REFERENCE_GENERATION

        return {"qa": QA, "reference_generation": REFERENCE_GENERATION, "query_generation": QUERY_GENERATION}
    return {}


def method_prompts(method: Any) -> PromptDictType:
    """The prompts ``method`` uses now (defaults with the user's overrides) as ``PromptTemplate`` s."""
    defaults = _defaults(method)
    overrides = getattr(method, "prompts", None) or {}
    return {key: PromptTemplate(str(overrides.get(key, default))) for key, default in defaults.items()}


def _template_text(prompt: Any) -> str:
    get = getattr(prompt, "get_template", None)
    if callable(get):
        return str(get())
    if isinstance(prompt, str):
        return prompt
    raise TypeError(f"expected a LlamaIndex prompt template or a string, got {type(prompt).__name__}")


def update_method_prompts(method: Any, prompts: PromptDictType) -> None:
    """Set each known key of ``prompts`` on ``method`` (``method.set_prompt`` validates the fields)."""
    defaults = _defaults(method)
    for key, prompt in prompts.items():
        if key in defaults:
            method.set_prompt(key, _template_text(prompt))
        elif ":" not in key:
            logger.debug("%s has no prompt %r; ignored", type(method).__name__, key)
