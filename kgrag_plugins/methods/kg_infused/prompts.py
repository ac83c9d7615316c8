# ruff: noqa: E501  (prompt paragraphs are kept as single lines, as the model sees them)
"""Prompts of KG-Infused RAG (Wu et al., arXiv 2506.09542, Appendix D.1, Tables 8-16).

The instruction texts follow the paper's appendix; the layout (blank lines between blocks) is
ours. Each prompt is one user turn (the chat template is applied by the serving stack).

Data delimiting (ours): every slot holding retrieved or derived content (passages,
triples, the triples summary, a note) sits inside an XML-like tag (``<passages>``, ``<triples>``,
``<previous_triples>``, ``<new_triples>``, ``<summary>``, ``<passage>``) and each prompt with such
a slot adds :data:`~kgrag_plugins.models.prompting.DATA_NOTICE` after the paper's instruction
paragraph. The templates are :class:`~kgrag_plugins.models.prompting.DataPrompt` strings, so
``.format`` escapes tag look-alikes in every field. Otherwise the wording is the paper's.

Triple format: the instructions say ``<subject, predicate, object>``, but the triples shown to
the model use `` | `` separators (``<head | relation | tail>``), as the official code does
(docs/methods.md §1(c) [DISCREPANCY]); the parser accepts both.

Keys (the official code's names in brackets):

- :data:`ANSWER_WITHOUT_RETRIEVAL` (``base_wo_retri``, Table 8)
- :data:`ANSWER_WITH_RETRIEVAL` (``base_retri``, Table 9) — the ``Passages:`` slot holds raw
  passages, a passage note, or a fact-enhanced note
- :data:`QUERY_EXPANSION_ONLY_QUERY` (``query_expansion_only_query``, Table 10, vanilla QE)
- :data:`WRITE_NOTE` (``write_note``, Table 11, Eq. 9)
- :data:`TRIPLES_SELECTION` (``triples_selection_before_retri``, Table 12, round 0)
- :data:`TRIPLES_UPDATE` (``triples_update_before_retri``, Table 13, rounds >= 1)
- :data:`TRIPLES_SUMMARY` (``triples_summary``, Table 14)
- :data:`QUERY_EXPANSION` (``query_expansion_query_and_triples_summary``, Table 15, Eq. 7)
- :data:`AUG_PASSAGE` (``aug_passage``, Table 16, Eq. 10)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ...models.prompting import DATA_NOTICE, DataPrompt, escape_data
from ...models.replies import content_words
from ...models.structured import (
    OutputSchema,
    mentions_regex,
    one_of_regex,
    paragraph_regex,
    phrase_regex,
    prose_regex,
    regex_schema,
)

__all__ = [
    "ANSWER_WITHOUT_RETRIEVAL",
    "ANSWER_WITH_RETRIEVAL",
    "AUG_PASSAGE",
    "PROMPTS",
    "QUERY_EXPANSION",
    "QUERY_EXPANSION_ONLY_QUERY",
    "TRIPLES_SELECTION",
    "TRIPLES_SUMMARY",
    "TRIPLES_UPDATE",
    "WRITE_NOTE",
    "format_candidate_groups",
    "format_passages",
    "format_triple",
    "note_schema",
    "format_triples",
    "postprocess",
    "MAX_TOKENS",
    "selection_schema",
]

#: Appended to the instruction paragraph of every prompt that carries retrieved content.
_NOTICE = DATA_NOTICE

ANSWER_WITHOUT_RETRIEVAL = DataPrompt(
    """### Instructions
Only give me the answer and do not output any other words.

Question: {question}
Answer:"""
)

ANSWER_WITH_RETRIEVAL = DataPrompt(
    """### Instructions
Answer the question based on the given passages. Only give me the answer and do not output any other words.
"""
    + _NOTICE
    + """

Passages:
<passages>
{passages}
</passages>

Question: {question}
Answer:"""
)

QUERY_EXPANSION_ONLY_QUERY = DataPrompt(
    """### Instructions
Generate a new short query that is distinct from but closely related to the original question. This new query should aim to retrieve additional passages that fill in gaps or provide complementary knowledge necessary to thoroughly address the original question. Ensure the new query is relevant, precise, and broadens the scope of information tied to the original question. Only give me the new short query and do not output any other words.

Original Question:
{question}

New Query:"""
)

WRITE_NOTE = DataPrompt(
    """### Instructions
Based on the provided document content, write a note. The note should integrate all relevant information from the original text that can help answer the specified question and form a coherent paragraph. Please ensure that the note includes all original text information useful for answering the question.
"""
    + _NOTICE
    + """

Question to be answered:
{question}

Document content:
<passages>
{passages}
</passages>

Note:"""
)

TRIPLES_SELECTION = DataPrompt(
    """### Instructions
Given a question and a set of retrieved entity triples, select only the triples that are relevant to the question.

### Information:
1. Each triple is in the form of <subject, predicate, object>.
2. The objects in the selected triples will be further explored in the next steps to gather additional relevant triples information.

### Rules:
1. Only select triples from the retrieved set. Do not generate new triples.
2. A triple is relevant if it contains information about entities or relationships that are important for answering the question, either directly or indirectly.
   - For example, if the question asks about a specific person, include triples about that person's name, occupation, relationships, etc.
   - If the question asks about an event or entity, include related background information that can help answer the question.
3. Output triples exactly as they appear in angle brackets (<...>).
"""
    + _NOTICE
    + """

Question:
{question}

Retrieved Entity Triples:
<triples>
{triples}
</triples>

Selected Triples:"""
)

TRIPLES_UPDATE = DataPrompt(
    """### Instructions
Given a question, a set of previously selected entity triples that are relevant to the question, and a new set of retrieved entity triples, select only the triples from the new set of retrieved entity triples that expand or enhance the information provided by the previously selected triples to help address the question.

### Information:
1. Each triple is in the form of <subject, predicate, object>.
2. The objects in the selected triples will be further explored in the next steps to gather additional relevant triples information.

### Rules:
1. Only select triples from the new set of retrieved entity triples. Do not include duplicates of the previously selected triples or generate new triples.
2. A triple is considered relevant if it:
   - Provides new information that complements or builds upon the entities, relationships, or concepts in the previously selected triples, and
   - Helps to better address or provide context for answering the question.
3. Do not include triples that are unrelated to the question or do not expand on the previously selected triples.
4. Output triples exactly as they appear in angle brackets (<...>).
"""
    + _NOTICE
    + """

Question:
{question}

Previously Selected Triples:
<previous_triples>
{previous_selected_triples}
</previous_triples>

New Retrieved Entity Triples:
<new_triples>
{new_retrieved_triples}
</new_triples>

Selected Triples:"""
)

TRIPLES_SUMMARY = DataPrompt(
    """### Instructions
Given a question and a set of retrieved entity triples, write a summary that captures the key information from the triples. If the triples do not provide enough information to directly answer the question, still summarize the information provided in the triples, even if it does not directly relate to the question. Focus on presenting all available details, regardless of their direct relevance to the query, in a concise and informative way.
"""
    + _NOTICE
    + """

Question:
{question}

Selected Triples:
<triples>
{selected_triples}
</triples>

Summary:"""
)

QUERY_EXPANSION = DataPrompt(
    """### Instructions
Generate a new short query that is distinct from but closely related to the original question. This new query should leverage both the original question and the provided paragraph to retrieve additional passages that fill in gaps or provide complementary knowledge necessary to thoroughly address the original question. Ensure the new query is relevant, precise, and broadens the scope of information tied to the original question. Only give me the new short query and do not output any other words.
"""
    + _NOTICE
    + """

Original Question:
{question}

Related Paragraph:
<summary>
{triples_summary}
</summary>

New Query:"""
)

AUG_PASSAGE = DataPrompt(
    """### Instructions
You are an expert in text enhancement and fact integration. Given a question, a retrieved passage, and relevant factual information, your task is to improve the passage by seamlessly incorporating useful details from the factual information. Ensure that the enhanced passage remains coherent, well-structured, and directly relevant to answering the question. Preserve the original meaning while making the passage more informative. Avoid introducing unrelated content.
"""
    + _NOTICE
    + """

Question:
{question}

Retrieved Passage:
<passage>
{passage}
</passage>

Relevant Factual Information:
<summary>
{triples_summary}
</summary>

Enhanced Passage:"""
)

#: All prompts by the official code's key.
PROMPTS: dict[str, DataPrompt] = {
    "base_wo_retri": ANSWER_WITHOUT_RETRIEVAL,
    "base_retri": ANSWER_WITH_RETRIEVAL,
    "query_expansion_only_query": QUERY_EXPANSION_ONLY_QUERY,
    "write_note": WRITE_NOTE,
    "triples_selection_before_retri": TRIPLES_SELECTION,
    "triples_update_before_retri": TRIPLES_UPDATE,
    "triples_summary": TRIPLES_SUMMARY,
    "query_expansion_query_and_triples_summary": QUERY_EXPANSION,
    "aug_passage": AUG_PASSAGE,
}


#: Token budget of each LLM step (the paper decodes up to 1,000 tokens everywhere; these fit the
#: outputs: a few copied triples, a summary / note paragraph, a short query, a short answer).
MAX_TOKENS: dict[str, int] = {
    "triple_selection": 256,
    "summary": 200,
    "query_expansion": 48,
    "write_note": 256,
    "augment": 320,
    "answer": 48,
}

#: What a selection reply may say to select nothing (read by the retriever as an explicit "none").
NONE_SELECTED = "None"


#: Tables 10/15's reply: one line of query text (opens with a letter or digit; SmolLM2-135M
#: otherwise opens 7 % of its PopQA expansions with ``<pre><code>``), bounded by the step's tokens.
QUERY_EXPANSION_SCHEMA: OutputSchema = regex_schema(
    "kg_infused_query", phrase_regex(), max_tokens=MAX_TOKENS["query_expansion"]
)


#: Tables 11/14/16's replies (note, triples summary, rewritten passage): prose that opens with a
#: letter or digit and holds no markup, code or JSON characters, bounded by each step's tokens. The
#: note is one paragraph (Table 11 asks for "a coherent paragraph"): with line breaks allowed,
#: SmolLM2-135M filled some notes with heading loops (``"Title:\n\nTitle:..."``); one-paragraph notes
#: are what docs/qa-smollm2.md measures on PopQA and MuSiQue.
PROSE_SCHEMAS: dict[str, OutputSchema] = {
    step: regex_schema(f"kg_infused_{step}", rx, max_tokens=MAX_TOKENS[step])
    for step, rx in (("summary", prose_regex()), ("write_note", paragraph_regex()), ("augment", prose_regex()))
}


#: How many words a note may open with before it names the question (:func:`note_schema`). 4 at
#: first: that stopped the preamble notes but bent ordinary openings ("The document contains
#: information about Edwin Wallock" became "The document contains information, Edwin Wallock, ...")
#: and cost PopQA answers (docs/qa-smollm2.md); 10 leaves such openings alone.
NOTE_MENTION_WITHIN = 10


def note_schema(question: str) -> OutputSchema:
    """Table 11's note as a regex: one paragraph (:data:`PROSE_SCHEMAS`) that names a content word
    of the question within its first :data:`NOTE_MENTION_WITHIN` words + 1
    (:func:`~kgrag_plugins.models.structured.mentions_regex`), so it opens on the question's
    subject. The note must be query-focused, and its validator rejects a note that shares no
    content word with the question and passages. SmolLM2-135M wrote 4 % of its MuSiQue notes as
    pure preamble ("The note contains all the original text information useful for answering the
    question:"); with the content word allowed anywhere it went on with more preamble until the
    token budget, so the opening is bounded; and words are separated by at most 4 non-word
    characters (it then looped on curly quotes, ``“Brand (play)”””””...``, 2 % of notes). Built
    per call; a question without content words gets the plain paragraph schema."""
    rx = mentions_regex(sorted(content_words(question)), within_words=NOTE_MENTION_WITHIN, max_symbols=4)
    if rx is None:
        return PROSE_SCHEMAS["write_note"]
    return regex_schema("kg_infused_write_note", rx, max_tokens=MAX_TOKENS["write_note"])


def selection_schema(candidates: Iterable[str]) -> OutputSchema:
    """Tables 12/13's reply as a regex: one or more candidate triples copied exactly as shown
    (:func:`format_triple`, one per line), or ``None``. Built per call from the shown candidates."""
    lines = list(dict.fromkeys(candidates))
    rx = f"(?:{one_of_regex(lines, repeat=True)}|{NONE_SELECTED})" if lines else NONE_SELECTED
    return regex_schema("kg_infused_selection", rx, max_tokens=MAX_TOKENS["triple_selection"])


# --------------------------------------------------------------------------- formatting


def format_triple(head: str, relation: str, tail: str) -> str:
    """``<head | relation | tail>`` — the form shown to (and copied back by) the LLM; angle
    brackets inside the fields become ``‹ ›`` so the triple stays one well-formed unit that no
    field can close or turn into a tag (see :func:`~kgrag_plugins.models.prompting.escape_data`)."""
    return f"<{_field(head)} | {_field(relation)} | {_field(tail)}>"


def _field(text: str) -> str:
    return escape_data(text).replace("<", "\u2039").replace(">", "\u203a")


def format_triples(triples: Iterable[tuple[str, str, str]]) -> str:
    """One ``<head | relation | tail>`` per line."""
    return "\n".join(format_triple(*t) for t in triples)


def format_candidate_groups(groups: Sequence[tuple[str, Sequence[tuple[str, str, str]]]]) -> str:
    """Candidates grouped by the entity they were retrieved for::

        [1] Marie Curie
        <Marie Curie | place of birth | Warsaw>
        ...
        [2] ...

    ``groups``: ``(entity name, its triples)`` in frontier order; empty groups are skipped
    (numbering stays consecutive).
    """
    blocks = []
    for name, triples in groups:
        if triples:
            blocks.append(f"[{len(blocks) + 1}] {name}\n{format_triples(triples)}")
    return "\n\n".join(blocks)


def format_passages(passages: Iterable[tuple[str, str]]) -> str:
    """``[i] title\\ntext`` blocks (i from 1) for the note and answer prompts; ``passages`` are
    ``(title, text)`` pairs (an empty title leaves just the text after ``[i] ``)."""
    out = []
    for i, (title, text) in enumerate(passages, 1):
        out.append(f"[{i}] {title}\n{text}" if title else f"[{i}] {text}")
    return "\n\n".join(out)


# --------------------------------------------------------------------------- post-processing

#: Leading markers stripped from LLM outputs (official code, docs/methods.md §1(c)); matched
#: case-insensitively, repeatedly, so "### Answer: x" -> "x".
_PREFIXES = (
    "### ",
    "note:\n",
    "summary:\n",
    "enhanced passage:\n",
    "new query:\n",
    "answer:\n",
    "answer: ",
)
#: Same markers followed by a space or nothing at all (models also write "Note: ..." inline).
_INLINE = re.compile(r"^(?:note|summary|enhanced passage|new query|answer|selected triples)\s*:\s*", re.I)


def postprocess(text: str) -> str:
    """Clean an LLM reply: drop ``</s>``, leading ``### `` / ``Note:`` / ``Summary:`` /
    ``Enhanced Passage:`` / ``New Query:`` / ``Answer:`` markers (with a newline or a space
    after the colon), and surrounding whitespace."""
    s = (text or "").replace("</s>", "")
    s = s.lstrip()
    changed = True
    while changed and s:
        changed = False
        low = s.lower()
        for p in _PREFIXES:
            if low.startswith(p):
                s = s[len(p) :].lstrip()
                changed = True
                break
        else:
            m = _INLINE.match(s)
            if m and m.end() < len(s):
                s = s[m.end() :].lstrip()
                changed = True
    return s.strip()
