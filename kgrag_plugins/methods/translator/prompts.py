"""KG-Translator prompts (paper App. M), with retrieved text inside escaped data blocks.

❶ clue translation (``ENTITY@@RELATION``; used by the constrained-decoding backends and the SFT
data, Parts B/C), ❷ QA (JSON ``{"Response": ...}``), ❸ question decomposition (chain of thought,
then ``So the next search query is <query>`` or ``None``). Questions and passages are wrapped
with :func:`~kgrag_plugins.models.prompting.data_block` and the prompt carries
:data:`~kgrag_plugins.models.prompting.DATA_NOTICE`; replies are validated by
:func:`parse_next_query` / :func:`parse_qa` through ``complete_validated``.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from ...models.prompting import DATA_NOTICE, data_block
from ...models.replies import InvalidReply
from ...models.structured import OutputSchema, phrase_regex, regex_schema

CLUE_TRANSLATION = (
    "Given a query, your task is to provide evidence in a pair format to help answer the query. "
    'A pair consists of an entity and a relation, which are connected by "@@" and follows the '
    'format of "ENTITY@@RELATION".'
)

QA = (
    "Given a question and its evidence, your task is to answer the question based on the evidence. "
    "You must give ONLY the direct answer in the most concise way possible.\n"
    'Generate a JSON with a single key "Response" and a value that is a short phrase or a few words. '
    "In JSON, put every value as a string always, not float. Format your response as follows: "
    '{ "Response": "ANSWER_HERE" }'
)

DECOMPOSITION = (
    "Given a question and its evidence, your task is to generate next search query different from the "
    "used queries to obtain additional evidence. First conduct step-by-step thinking, then start with "
    '"So the next search query is" and generate a concise search query that can supplement this missing content.\n'
    "1. If the evidence is insufficient to answer the question: Identify the missing information based on "
    "the key information extracted, and generate a concise search query that can supplement this missing content.\n"
    "2. If the evidence is sufficient to fully answer the question: Clearly state the final answer to the "
    'original question in the thinking process, and generate "None" as the next search query.'
)

NEXT_QUERY_MARK = "So the next search query is"
#: Prompt ❸'s reply (:func:`parse_next_query`) under constraints: the marker first, then the next
#: query or ``None``. The prompt's optional thinking is left out of the constrained shape: bounded,
#: it makes the token automaton explode (a counted repetition before the marker); unbounded, a small
#: model (SmolLM2-135M) thinks until ``max_tokens`` and never reaches the marker. The query is at
#: most 150 characters (the parser refuses over 400; after the fixed marker the count is cheap). Unconstrained
#: backends still get the thinking the prompt invites, and the parser accepts both.
NEXT_QUERY_SCHEMA: OutputSchema = regex_schema(
    "translator_next_query",
    f"{NEXT_QUERY_MARK}: (?:None|{phrase_regex(150)})",
    max_tokens=160,
)
#: Prompt ❶'s budget (a few ``ENTITY@@RELATION`` lines; free text, checked by the clue parser).
CLUE_MAX_TOKENS = 96
_NEXT = re.compile(r"so\s+the\s+next\s+search\s+query\s+is\s*[:：]?\s*(.*)", re.I | re.S)
_NONE = re.compile(r"^[\"'`*\s]*none[\"'`*.\s]*$", re.I)


def clue_translation_prompt(question: str) -> str:
    """Prompt ❶ (the question in a ``<query>`` block)."""
    return f"{CLUE_TRANSLATION}\n{DATA_NOTICE}\n{data_block('query', question)}"


def qa_prompt(question: str, passages: Sequence[str]) -> str:
    """Prompt ❷ over the evidence passages."""
    return (
        f"{QA}\n{DATA_NOTICE}\n{data_block('question', question)}\n{data_block('passages', passages, sep=chr(10) * 2)}"
    )


def decomposition_prompt(
    question: str, passages: Sequence[str], used_queries: Sequence[str], instruction: str | None = None
) -> str:
    """Prompt ❸: question, evidence and the queries already used (``instruction``: a user's
    replacement of :data:`DECOMPOSITION`; the data blocks and the notice stay)."""
    head = DECOMPOSITION if instruction is None else instruction
    return (
        f"{head}\n{DATA_NOTICE}\n{data_block('question', question)}\n"
        f"{data_block('passages', passages, sep=chr(10) * 2)}\n{data_block('used_queries', used_queries)}"
    )


def parse_next_query(reply: str) -> str | None:
    """Prompt ❸'s reply -> the next query, or ``None`` when the model says the evidence suffices.

    Raises :class:`InvalidReply` when the reply has no ``So the next search query is`` line (the
    caller then takes the LLM-free path)."""
    m = None
    for m in _NEXT.finditer(reply or ""):
        pass
    if m is None:
        raise InvalidReply(f'no "{NEXT_QUERY_MARK}" in the reply')
    q = m.group(1).strip().splitlines()[0].strip() if m.group(1).strip() else ""
    q = q.strip().strip("\"'`*").strip()
    if not q or _NONE.match(q):
        return None
    if len(q) > 400 or not re.search(r"\w", q):
        raise InvalidReply("next search query is empty or too long")
    return q


def parse_qa(reply: str) -> str:
    """Prompt ❷'s reply -> the answer string (``{"Response": ...}``)."""
    m = re.search(r"\{.*\}", reply or "", re.S)
    if not m:
        raise InvalidReply("no JSON object in the reply")
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError as e:
        raise InvalidReply(f"invalid JSON: {e}") from e
    ans = obj.get("Response") if isinstance(obj, dict) else None
    if ans is None or not str(ans).strip():
        raise InvalidReply('no "Response" value')
    return str(ans).strip()
