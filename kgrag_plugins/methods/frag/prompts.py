"""FRAG's prompts (paper App. A.5; docs/methods.md §2(c)).

The persona and task sentences are the paper's wording (App. A.5, "Prompts"):

- :data:`REASONING` (reasoning module): :data:`PERSONA` + "Based on the reasoning paths, please
  answer the given question." + the paths + the question. The released code's
  ``utils/PromptTemplate.py`` ends it with a ``## Output:`` line, which the appendix omits
  (docs/methods.md §2(c)); we keep that line.
- :data:`HOP_ESTIMATION` (reasoning-aware module, FRAG-F): :data:`PERSONA_HOP` + "Based on the
  reasoning paths, please extract the correct reasoning path. If NO correct reasoning path,
  please just reply NO." + the paths + the question + ``Correct reasoning path:``.

Our changes (retrieved text is data): the paths sit inside a ``<paths>`` block whose
content is escaped (:func:`~kgrag_plugins.models.prompting.data_block`), the
:data:`~kgrag_plugins.models.prompting.DATA_NOTICE` sentence follows the task sentence, and the
``Reasoning Paths:`` / ``Question:`` labels are on their own lines (the appendix runs them
together on one line). The reply is read as before: the first line (``STOP`` ends at the
first newline); FRAG-F counts the ``->`` of that line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...models.prompting import DATA_NOTICE, data_block, escape_data
from ...models.replies import InvalidReply, first_line
from ...models.structured import OutputSchema, choice_schema

#: The reasoning module's persona (paper App. A.5, verbatim).
PERSONA = (
    "You are an expert reasoner with a deep understanding of logical connections and relationships. "
    "Your task is to analyze the given reasoning paths and provide clear and accurate answers to the "
    "questions based on these paths."
)

#: The reasoning-aware module's (hop estimation) persona (paper App. A.5, verbatim).
PERSONA_HOP = (
    "You are an expert reasoner with a deep understanding of logical connections and relationships. "
    "Your task is to analyze the given reasoning paths and provide accurate reasoning path to the "
    "questions based on these paths."
)

REASONING = (
    PERSONA + " Based on the reasoning paths, please answer the given question.\n" + DATA_NOTICE + "\n\n"
    "Reasoning Paths:\n{paths}\n\nQuestion:\n{question}\n\n## Output:\n"
)

HOP_ESTIMATION = (
    PERSONA_HOP + " Based on the reasoning paths, please extract the correct reasoning path. If NO correct "
    "reasoning path, please just reply NO.\n" + DATA_NOTICE + "\n\n"
    "Reasoning Paths:\n{paths}\n\nQuestion:\n{question}\n\nCorrect reasoning path:"
)

#: Decoding of the released code (``config.py``): first line of a near-greedy completion.
STOP = ["\n", "<|eot_id|>", "</s>"]
MAX_TOKENS = 256
#: Our budgets (the released code's 256 everywhere): a one-line answer; a copied path of <= 4 hops.
ANSWER_MAX_TOKENS = 64
HOP_MAX_TOKENS = 128
#: Hops a hop-estimation path may have (FRAG-F labels 1..4-hop questions).
MAX_HOPS = 4
#: The hop-estimation reply that says no path answers the question.
NO_PATH = "NO"


def reasoning_prompt(question: str, paths: Sequence[str], template: str | None = None) -> str:
    """The zero-shot reasoning prompt over the top paths, one per line in a ``<paths>`` block
    (``template``: a user's replacement of :data:`REASONING`, same fields)."""
    return (template or REASONING).format(paths=data_block("paths", paths), question=escape_data(question))


def hop_estimation_prompt(question: str, paths: Sequence[str], template: str | None = None) -> str:
    """FRAG-F's prompt: the LLM copies the path that answers the question (or says NO)
    (``template``: a user's replacement of :data:`HOP_ESTIMATION`, same fields)."""
    return (template or HOP_ESTIMATION).format(paths=data_block("paths", paths), question=escape_data(question))


def hop_schema(paths: Sequence[str]) -> OutputSchema:
    """FRAG-F's reply as a choice: one of the shown paths (escaped as in the prompt, single-line,
    1..:data:`MAX_HOPS` hops) copied exactly, or :data:`NO_PATH`."""
    from .hop_classifier import count_hops

    shown = [escape_data(p).strip() for p in paths]
    ok = [p for p in shown if p and "\n" not in p and 1 <= count_hops(p) <= MAX_HOPS]
    return choice_schema("frag_hop_estimation", [*dict.fromkeys(ok), NO_PATH], max_tokens=HOP_MAX_TOKENS)


def parse_hop_estimate(reply: str) -> int:
    """FRAG-F's hop-estimation reply: ``NO`` -> 0, else the hops (1..:data:`MAX_HOPS`) of the path on its first
    line; anything else raises :class:`InvalidReply` (asked once more, then unlabelled)."""
    from .hop_classifier import count_hops

    line = first_line(reply)
    if re.match(r"^\W*no\b", line, re.I):
        return 0
    hops = count_hops(line)
    if not 1 <= hops <= MAX_HOPS:
        raise InvalidReply(f"no path of 1..{MAX_HOPS} hops in {line[:200]!r}")
    return hops
