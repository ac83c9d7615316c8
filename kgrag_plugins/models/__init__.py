"""Model back-ends behind small protocols: embedders and LLM clients (no framework imports; the
LangChain / LlamaIndex adapters are in :mod:`kgrag_plugins.integrations`)."""

from .embed import Embedder, OpenAICompatibleEmbedder, SentenceTransformerEmbedder, as_embedder, default_embedder
from .llm import (
    LLM,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
    OpenAICompatibleLLM,
    ScriptedLLM,
    as_llm,
)
from .ollama import OllamaLLM

__all__ = [
    "LLM",
    "Embedder",
    "LLMError",
    "LLMResponseError",
    "LLMTimeoutError",
    "LLMUnavailableError",
    "OpenAICompatibleEmbedder",
    "OllamaLLM",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "SentenceTransformerEmbedder",
    "as_embedder",
    "as_llm",
    "default_embedder",
]
