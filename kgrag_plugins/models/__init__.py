"""Model back-ends behind small protocols: embedders and LLM clients/adapters."""

from .embed import Embedder, OpenAICompatibleEmbedder, SentenceTransformerEmbedder, default_embedder
from .llm import (
    LLM,
    LangChainLLM,
    LlamaIndexLLM,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    OpenAICompatibleLLM,
    ScriptedLLM,
    as_llm,
)

__all__ = [
    "LLM",
    "Embedder",
    "LLMError",
    "LLMResponseError",
    "LLMTimeoutError",
    "LangChainLLM",
    "LlamaIndexLLM",
    "OpenAICompatibleEmbedder",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "SentenceTransformerEmbedder",
    "as_llm",
    "default_embedder",
]
