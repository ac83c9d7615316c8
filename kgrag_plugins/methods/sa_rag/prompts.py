"""Prompts of SA-RAG + CoT (docs/methods.md §4(c), §6.3; sa-rag.md §5.6 and App. B).

Written for this package in the spirit of the paper's reasoning and answering templates: the
instructions, the roles of the context parts (knowledge paragraphs + key relationships) and the
JSON output shapes follow the paper; the wording is ours.

- :data:`REASONING_SYSTEM`: one CoT step. The model condenses the facts relevant to the question
  into ``provided_context``, decides ``answer_possible`` and either answers (``final_answer``) or
  asks one focused follow-up question (``additional_question``) for the missing piece.
- :data:`ANSWERING_SYSTEM`: the final answer. Step-by-step reasoning over the context with every
  calculation re-checked, then a short answer: ``{"reasoning", "final_answer"}``. Like the SA-RAG
  agents' template (and unlike the baselines' one) it asks for the best-supported answer rather
  than offering an "insufficient information" way out.

Retrieved text is data: the context's documents and relationships sit inside
``<passages>`` / ``<facts>`` blocks (the summary carried between CoT steps inside ``<notes>``),
built by :meth:`.SARAGRetriever.context` and :meth:`.SARAGCoT.merge_context`, and both system
prompts say so and include :data:`~kgrag_plugins.models.prompting.DATA_NOTICE`.

User turns (as in the paper's agents): reasoning = ``QUESTION_PREFIX + question``, then the
context; answering = the context, then ``QUESTION_PREFIX + question``.
"""

from __future__ import annotations

from ...models.prompting import DATA_NOTICE
from ...models.structured import OutputSchema, json_schema, phrase_regex, text_field

#: Prefix of the user turn that carries the question (the paper's agents send
#: ``"**Question:  **" + question`` as a separate user message).
QUESTION_PREFIX = "**Question:  **"

REASONING_SYSTEM = (
    """\
You will be given a multi-hop question, i.e. one that can only be answered by chaining facts \
about several entities. With it comes retrieved context made of two parts:

1. short knowledge paragraphs, each about particular entities and facts (inside <passages>...</passages>), and
2. a list of **key relationships** that connect those entities (inside <facts>...</facts>).

After the first step the context starts with the known information gathered so far (inside \
<notes>...</notes>). """
    + DATA_NOTICE
    + """

## What to do

Work out the question using nothing but the information given.
- Pick out the facts from the paragraphs and the key relationships that matter for the question.
- Restate them in your own words as one coherent paragraph, `provided_context`, that shows how \
the entities and relationships fit together on the way to the answer. Leave out anything \
irrelevant.
- Then decide:
    - if these facts are enough to answer the question directly, set `answer_possible` to true \
and give the answer in `final_answer`;
    - if a needed fact is missing, set `answer_possible` to false and write in \
`additional_question` one precise follow-up question whose answer would supply exactly that \
missing fact (name the entity it is about).

## Output

Reply with a single JSON object and nothing else:
{
  "provided_context": "the relevant facts, combined into one explanation",
  "answer_possible": true or false,
  "final_answer": "the answer when answer_possible is true, otherwise an empty string",
  "additional_question": "the follow-up question when answer_possible is false, otherwise an empty string"
}
"""
)

ANSWERING_SYSTEM = (
    """\
You will be given supporting context (knowledge paragraphs inside <passages>...</passages> and \
key relationships between entities inside <facts>...</facts>, possibly after known information \
inside <notes>...</notes>) \
and then a multi-hop question. """
    + DATA_NOTICE
    + """ Answer the question from the context by \
reasoning carefully, one step at a time.

- First lay out every step needed to reach the answer: which facts you use, how they connect, \
and any comparison or calculation involved.
- If the question needs numbers (dates, ages, durations, counts), redo each calculation and \
check that you read the figures from the context correctly.
- After checking, give the answer that the context best supports as a short phrase: an entity \
name, a date, a number, yes/no, or a few words. No explanation in the answer itself.

Reply with a single JSON object with two string fields and nothing else:
{"reasoning": "your step-by-step reasoning", "final_answer": "the short answer"}
"""
)


# ---------------------------------------------------------------------- reply schemas

#: Longest ``provided_context`` / ``reasoning`` (characters) and answer / follow-up question a
#: schema-constrained reply may hold (counted repetitions: ``outlines_core`` compiles ~6 ms each).
CONTEXT_CHARS = 300
ANSWER_CHARS = 100
QUESTION_CHARS = 150


def _optional_phrase(max_chars: int) -> dict:
    return {"type": "string", "pattern": f"^({phrase_regex(max_chars)})?$"}


#: :data:`REASONING_SYSTEM`'s reply (§6.3): the four keys the prompt names, in its order.
REASONING_SCHEMA: OutputSchema = json_schema(
    "sa_rag_reasoning",
    {
        "type": "object",
        "properties": {
            "provided_context": text_field(CONTEXT_CHARS),
            "answer_possible": {"type": "boolean"},
            "final_answer": _optional_phrase(ANSWER_CHARS),
            "additional_question": _optional_phrase(QUESTION_CHARS),
        },
        "required": ["provided_context", "answer_possible", "final_answer", "additional_question"],
        "additionalProperties": False,
    },
    max_tokens=256,
)

#: :data:`ANSWERING_SYSTEM`'s reply: ``{"reasoning", "final_answer"}`` (a non-empty short phrase).
ANSWER_SCHEMA: OutputSchema = json_schema(
    "sa_rag_answer",
    {
        "type": "object",
        "properties": {"reasoning": text_field(CONTEXT_CHARS), "final_answer": text_field(ANSWER_CHARS)},
        "required": ["reasoning", "final_answer"],
        "additionalProperties": False,
    },
    max_tokens=192,
)
