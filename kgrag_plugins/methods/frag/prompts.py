"""FRAG's prompts (METHODS.md §2(c), ``utils/PromptTemplate.py`` of the released code)."""

from __future__ import annotations

from collections.abc import Sequence

PERSONA = (
    "You are an expert reasoner with a deep understanding of reasoning paths. Your task is to "
    "analyze the given reasoning paths and provide clear and accurate answers."
)

REASONING = (
    PERSONA + "\n\nBased on the reasoning paths, please answer the given question.\n\n"
    "Reasoning Paths:\n{paths}\n\nQuestion:\n{question}\n\n## Output:\n"
)

HOP_ESTIMATION = (
    PERSONA + "\n\nBased on the reasoning paths, please extract the correct reasoning path that answers the "
    "given question. Copy the path exactly as it is written. If none of the paths answers the "
    "question, reply NO.\n\nReasoning Paths:\n{paths}\n\nQuestion:\n{question}\n\n## Output:\n"
)

#: Decoding of the released code (``config.py``): first line of a near-greedy completion.
STOP = ["\n", "<|eot_id|>", "</s>"]
MAX_TOKENS = 256


def reasoning_prompt(question: str, paths: Sequence[str]) -> str:
    """The zero-shot reasoning prompt over the top paths, one per line."""
    return REASONING.format(paths="\n".join(paths), question=question)


def hop_estimation_prompt(question: str, paths: Sequence[str]) -> str:
    """FRAG-F's prompt: the LLM copies the path that answers the question (or says NO)."""
    return HOP_ESTIMATION.format(paths="\n".join(paths), question=question)
