# ruff: noqa: E501  (prompt paragraphs are kept as single lines, as the model sees them)
"""Prompts of Know³-RAG (Liu et al., paper ``know3-rag``, App. D, Figs. 6-10; docs/methods.md §5(c)).

The instruction wording is the paper's. Ours (retrieved text is data): every slot that carries
references, answers, entity descriptions or a passage sits inside a data block
(:func:`~kgrag_plugins.models.prompting.data_block`, which escapes tag look-alikes) and each
prompt with such a slot carries :data:`~kgrag_plugins.models.prompting.DATA_NOTICE`.

- :func:`qa_prompt` (Fig. 6): 3-shot chain of thought; the paper does not print its three
  examples, the ones here (:data:`QA_SHOTS`) are ours. Reply parsed by :func:`parse_answer`
  (text after the last "The answer is").
- :func:`reference_prompt` (Fig. 7): a background paragraph for a question (optional related
  entities); :func:`parse_reference`.
- :func:`query_prompt` (Fig. 8): one new question; :func:`parse_query`.
- :func:`extraction_messages` (Fig. 9): system + the paper's 2 shots as chat turns;
  :func:`parse_triples` is the robust parser of docs/methods.md §5(c).
- :func:`relevance_messages` (Fig. 10): system + the paper's 2 printed shots (the released code
  reportedly has 4; only 2 are printed); :func:`parse_relevance`.

Every parser raises :class:`~kgrag_plugins.models.replies.InvalidReply` on a reply without the
asked-for shape, so ``complete_validated`` retries once and then takes the LLM-free path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ...models.llm import Message
from ...models.prompting import DATA_NOTICE, data_block
from ...models.replies import InvalidReply, check_text, first_line
from ...models.structured import PHRASE_CHARS, OutputSchema, phrase_regex, regex_schema

__all__ = [
    "ANSWER_SCHEMA",
    "EXTRACTION_SCHEMA",
    "MAX_TOKENS",
    "RELEVANCE_SCHEMA",
    "EXTRACTION_SHOTS",
    "EXTRACTION_SYSTEM",
    "GENERIC_TERMS",
    "QA",
    "QA_SHOTS",
    "QUERY_GENERATION",
    "REFERENCE_GENERATION",
    "RELEVANCE_SHOTS",
    "RELEVANCE_SYSTEM",
    "extraction_messages",
    "format_entities",
    "parse_answer",
    "parse_query",
    "parse_reference",
    "parse_relevance",
    "parse_triples",
    "qa_prompt",
    "query_prompt",
    "reference_prompt",
    "relevance_messages",
]

# --------------------------------------------------------------------------- Fig. 6: QA

QA = (
    "Given the following question, references (may or may not be available), explain your reasoning step-by-step based on the references and then provide your best possible answer. If there is no reference or you find the reference irrelevant, please provide an answer based on your knowledge.\n"
    + DATA_NOTICE
)
QA_END = 'Your response should end with "The answer is [your_answer_text]", where the [your_answer_text] should be yes, no, or a few words directly answering the question.\nLet\'s think step by step.'

#: Three worked examples (ours: the paper's are not printed), question -> reasoning.
QA_SHOTS: tuple[tuple[str, str], ...] = (
    (
        "Who was born first, Ada Lovelace or Charles Babbage?",
        "Ada Lovelace was born on 10 December 1815. Charles Babbage was born on 26 December 1791. 1791 is earlier than 1815, so Charles Babbage was born first. The answer is Charles Babbage.",
    ),
    (
        "What is the capital of the country where the Vistula river ends?",
        "The Vistula flows into the Baltic Sea in Poland. The capital of Poland is Warsaw. The answer is Warsaw.",
    ),
    (
        "Are Jaws and Jurassic Park directed by the same person?",
        "Jaws was directed by Steven Spielberg. Jurassic Park was directed by Steven Spielberg. Both have the same director. The answer is yes.",
    ),
)

_NO_REFERENCE = "No reference available."


def _references(references: Sequence[str]) -> str:
    if not references:
        return _NO_REFERENCE
    return "\n".join(f"Reference {i}: {r}" for i, r in enumerate(references, 1))


def _instruction(text: str | None, default: str) -> str:
    """A user's instruction text (``Know3Retriever.set_prompt``), with the data notice kept."""
    if text is None:
        return default
    return text if DATA_NOTICE in text else f"{text.rstrip()}\n{DATA_NOTICE}"


def qa_prompt(question: str, references: Sequence[str] = (), instruction: str | None = None) -> str:
    """Fig. 6 with the 3 shots; references (or "No reference available.") in a ``<references>`` block.
    ``instruction`` replaces :data:`QA` (the data blocks and the answer format stay)."""
    shots = "\n\n".join(f"Reference: {_NO_REFERENCE}\nQuestion: {q}\n{QA_END}\n{a}" for q, a in QA_SHOTS)
    return (
        f"{_instruction(instruction, QA)}\n\n{shots}\n\n"
        f"Reference:\n{data_block('references', _references(references))}\n"
        f"Question:\n{data_block('question', question)}\n{QA_END}\n"
    )


_ANSWER = re.compile(r"the\s+answer\s+is\s*[:：]?\s*", re.I)


def parse_answer(reply: str) -> str:
    """Fig. 6's reply -> the answer: the text after the last "The answer is" (up to the end of
    its line, brackets, quotes and a final period stripped). :class:`InvalidReply` without it."""
    text = reply or ""
    m = None
    for m in _ANSWER.finditer(text):
        pass
    if m is None:
        raise InvalidReply('no "The answer is" in the reply')
    ans = first_line(text[m.end() :])
    ans = ans.strip().strip("[]\"'`*").strip().rstrip(".").strip().strip("[]\"'`*").strip()
    return check_text(ans, single_line=True, max_chars=300)


# --------------------------------------------------------------------------- Fig. 7: reference generation

REFERENCE_GENERATION = (
    "I have a list of open-ended questions, and I'd like you to write a reference paragraph for each question. These paragraphs should provide sufficient background, key concepts, or context to guide the next person in answering the question effectively. You do not need to provide an answer directly, just enough information to help the next person frame their answer concisely and accurately.\n"
    "To make your reference passages more accurate, I'm going to provide you with some entities inside the question that you can refer to them, but they're not necessarily accurate.\n"
    + DATA_NOTICE
)
_REFERENCE_END = (
    'You should just output "[reference_paragraph]", where the [reference_paragraph] is the reference you write.'
)


def format_entities(entities: Iterable[tuple[str, str]]) -> str:
    """``"1. name: description"`` lines (the paper's "Related Entities: i. name: description")."""
    lines = [f"{i}. {n}: {d}" if d else f"{i}. {n}" for i, (n, d) in enumerate(entities, 1)]
    return "\n".join(lines) if lines else "None"


def reference_prompt(question: str, entities: Sequence[tuple[str, str]] = (), instruction: str | None = None) -> str:
    """Fig. 7: question and (optional) related entities ``(name, description)``, both delimited.
    ``instruction`` replaces :data:`REFERENCE_GENERATION`."""
    return (
        f"{_instruction(instruction, REFERENCE_GENERATION)}\n\nQuestion:\n{data_block('question', question)}\n"
        f"Related Entities:\n{data_block('entities', format_entities(entities))}\n{_REFERENCE_END}\n"
    )


def parse_reference(reply: str) -> str:
    """Fig. 7's reply: the paragraph (surrounding ``[...]`` removed), checked as text (≤ 3000 chars)."""
    text = (reply or "").strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return check_text(text, max_chars=3000, instructions=REFERENCE_GENERATION)


# --------------------------------------------------------------------------- Fig. 8: query generation

QUERY_GENERATION = (
    "You will be given references, a question, and an answer. The answer may be incomplete or incorrect. Identify the most critical missing or incorrect information in the references and the answer. Formulate one most important new question that will most effectively help retrieve the necessary information to answer the original question.\n"
    + DATA_NOTICE
)


def query_prompt(question: str, references: Sequence[str], answer: str, instruction: str | None = None) -> str:
    """Fig. 8: references, question and answer in data blocks; asks for one new question.
    ``instruction`` replaces :data:`QUERY_GENERATION`."""
    return (
        f"{_instruction(instruction, QUERY_GENERATION)}\n\nReference:\n{data_block('references', _references(references))}\n"
        f"Question:\n{data_block('question', question)}\nAnswer:\n{data_block('answer', answer or 'None')}\n"
        "Please directly output the new question:"
    )


_QUERY_PREFIX = re.compile(r"^\s*(?:new\s+question|question)\s*[:：]\s*", re.I)


def parse_query(reply: str) -> str:
    """Fig. 8's reply: its first line without a "New question:" prefix (≤ 400 chars, text checks)."""
    line = _QUERY_PREFIX.sub("", first_line(reply)).strip().strip("\"'`*").strip()
    return check_text(line, single_line=True, max_chars=400, instructions=QUERY_GENERATION)


# --------------------------------------------------------------------------- Fig. 9: triple extraction

EXTRACTION_SYSTEM = (
    "I have a task to extract relationships between entities from a given text.\n"
    "You will be provided with a list of possible entities as a reference. Your task is to extract triples representing relationships between entities in the text. Each triple should include a subject, predicate, and object directly from the text. The entities in the triples may or may not match the provided reference list, but use the list to guide your extraction process. If no meaningful relationships are found, return None.\n"
    "Instructions:\n"
    "- Extract the subject, predicate, and object exactly as they appear in the text.\n"
    "- If no valid relationships are found, return None.\n"
    "- Output only the extracted triples in the format: [list of triples].\n" + DATA_NOTICE
)

#: The paper's two shots: (text, entities, reply).
EXTRACTION_SHOTS: tuple[tuple[str, str, str], ...] = (
    (
        "Albert Einstein was born in Ulm, Germany in 1879.",
        "Albert Einstein, Ulm, Germany",
        '[{"subject": "Albert Einstein", "predicate": "was born in", "object": "Ulm"}, {"subject": "Albert Einstein", "predicate": "was born in", "object": "Germany"}]',
    ),
    ("She is a member of the organization.", "the organization", "None"),
)


def _extraction_user(text: str, entities: Sequence[str] | str) -> str:
    ents = entities if isinstance(entities, str) else ", ".join(entities)
    return f"Text:\n{data_block('text', text)}\nEntities:\n{data_block('entities', ents or 'None')}"


def extraction_messages(text: str, entities: Sequence[str] = ()) -> list[Message]:
    """Fig. 9 as chat: system, the 2 shots (user/assistant), then the text and entity hints."""
    msgs: list[Message] = [{"role": "system", "content": EXTRACTION_SYSTEM}]
    for shot_text, shot_ents, shot_reply in EXTRACTION_SHOTS:
        msgs.append({"role": "user", "content": _extraction_user(shot_text, shot_ents)})
        msgs.append({"role": "assistant", "content": shot_reply})
    msgs.append({"role": "user", "content": _extraction_user(text, entities)})
    return msgs


#: Subjects/objects dropped by :func:`parse_triples`: pronouns and generic nouns (docs/methods.md §5(c)).
GENERIC_TERMS = frozenset(
    "i me my mine we us our ours you your yours he him his she her hers it its they them their theirs "
    "this that these those who whom whose which what someone somebody something anyone anything everyone "
    "everything nobody nothing one none".split()
) | frozenset(
    f"{det} {noun}"
    for det in ("the", "a", "an", "this", "that")
    for noun in (
        "organization organisation company person man woman people group team film movie book song album "
        "city town country place state band show series work person's one thing"
    ).split()
)
_KEYS = ("subject", "predicate", "object")
_LIST = re.compile(r"\[.*\]", re.S)
_OBJ = re.compile(r"\{[^{}]*\}", re.S)
_NONE = re.compile(r"^[\s\"'`*\[\(]*none[\s\"'`*.\]\)]*$", re.I)


def _generic(s: str) -> bool:
    return " ".join(s.lower().split()) in GENERIC_TERMS


def _values(v: Any) -> list[str]:
    """A field's values: a string, or each string of a list (list-valued fields are expanded)."""
    items = v if isinstance(v, list) else [v]
    return [" ".join(str(x).split()) for x in items if isinstance(x, (str, int, float)) and not isinstance(x, bool)]


def _items(reply: str) -> list[Any] | None:
    """The reply's items: a leading ``[...]`` JSON list, else every ``{...}`` object that parses;
    ``None`` when no JSON structure is found at all."""
    m = _LIST.search(reply)
    if m:
        try:
            data = json.loads(m.group(0))
            if isinstance(data, list):
                return data
        except (json.JSONDecodeError, RecursionError):
            pass
    objs: list[Any] = []
    found = False
    for om in _OBJ.finditer(reply):
        found = True
        try:
            objs.append(json.loads(om.group(0)))
        except (json.JSONDecodeError, RecursionError):
            continue
    return objs if found else None


def parse_triples(reply: str | None) -> list[tuple[str, str, str]]:
    """Fig. 9's reply -> ``(subject, predicate, object)`` strings (docs/methods.md §5(c)).

    A leading ``[...]`` JSON list, else every ``{...}`` object; items missing a key or with an
    empty value are dropped; list-valued subject/object are expanded (one triple per value);
    pronoun/generic subjects and objects (:data:`GENERIC_TERMS`) are dropped; duplicates removed.
    ``None`` (or a reply that says None) is no triples. A reply with neither JSON nor None is
    :class:`InvalidReply`."""
    text = (reply or "").strip()
    if not text or _NONE.match(text):
        return []
    items = _items(text)
    if items is None:
        if re.search(r"\bnone\b", text, re.I) and len(text) < 200:
            return []
        raise InvalidReply(f"no JSON triples and no None in the reply: {text[:120]!r}")
    out: list[tuple[str, str, str]] = []
    for it in items:
        if not isinstance(it, dict) or not all(k in it for k in _KEYS):
            continue
        preds = _values(it["predicate"])
        if len(preds) != 1 or not preds[0]:
            continue
        for s in _values(it["subject"]):
            for o in _values(it["object"]):
                if s and o and not _generic(s) and not _generic(o):
                    out.append((s, preds[0], o))
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------- Fig. 10: relevance check

RELEVANCE_SYSTEM = (
    "I need your help determining the reliability of a passage in the context of its ability to answer a specific question. I might provide some entities to help you better understand the problem. Here are the key considerations:\n"
    "1. Passage Relevance: Check if the passage provides information relevant to answering the question. Even if the passage does not directly mention the entities, it should address the key concepts or ideas related to the question. If the passage does not contribute meaningfully to answering the question, it may be unreliable.\n"
    "2. Entity Accuracy: The entities provided are from the question and may not appear in the passage. These entities are meant to help you understand the context of the question. If the passage conflicts with the entities provided (e.g., incorrect descriptions or relationships), this could affect its reliability.\n"
    "3. Overall Reliability: Based on the relevance of the passage to the question and the accuracy of the entities, assess whether the passage is reliable for answering the question. If there are doubts or inconsistencies, provide a clear explanation.\n"
    + DATA_NOTICE
)
_RELEVANCE_ASK = 'Confirm that the article is reliable for the question. Provide your reasoning for the reliability decision, and end your response with: "The reliability of the passage is [yes or no]."'
RELEVANCE_MARK = "The reliability of the passage is"

#: The paper's printed shots: (question, entities, passage, reply).
RELEVANCE_SHOTS: tuple[tuple[str, str, str, str], ...] = (
    (
        "What is the nutritional value of an apple?",
        "Apple: A fruit known for its nutritional benefits, such as fiber and vitamins.",
        "An apple is a nutritious fruit rich in fiber, vitamins, and antioxidants.",
        'The passage provides relevant information about the nutritional value of an apple, aligning with the question. The entity "Apple" refers to the fruit, which matches the context of the question. The reliability of the passage is yes.',
    ),
    (
        "What is the CEO of Apple Inc.?",
        "1. Apple Inc.: A technology company, known for products like the iPhone and Mac computers.",
        "Apples are widely consumed fruits that come in different varieties, including Granny Smith and Red Delicious.",
        "The passage discusses apples as a fruit, which is unrelated to the question about the CEO of Apple Inc. The passage does not address the company or its leadership. The reliability of the passage is no.",
    ),
)


def _relevance_user(question: str, entities: str, passage: str) -> str:
    return (
        f"{_RELEVANCE_ASK}\nQuestion:\n{data_block('question', question)}\n"
        f"Entities:\n{data_block('entities', entities or 'None')}\nPassage:\n{data_block('passage', passage)}"
    )


def relevance_messages(question: str, passage: str, entities: Sequence[tuple[str, str]] = ()) -> list[Message]:
    """Fig. 10 as chat: system, the 2 printed shots, then question, entities and passage."""
    msgs: list[Message] = [{"role": "system", "content": RELEVANCE_SYSTEM}]
    for q, e, p, r in RELEVANCE_SHOTS:
        msgs.append({"role": "user", "content": _relevance_user(q, e, p)})
        msgs.append({"role": "assistant", "content": r})
    msgs.append({"role": "user", "content": _relevance_user(question, format_entities(entities), passage)})
    return msgs


_MARK = re.compile(r"the\s+reliability\s+of\s+the\s+passage\s+is", re.I)


def parse_relevance(reply: str) -> bool:
    """Fig. 10's reply -> ``True`` iff the substring from the last "The reliability of the passage
    is" contains "yes" (the paper's code). :class:`InvalidReply` when the mark is missing or the
    verdict is neither yes nor no."""
    m = None
    for m in _MARK.finditer(reply or ""):
        pass
    if m is None:
        raise InvalidReply(f'no "{RELEVANCE_MARK}" in the reply')
    tail = (reply or "")[m.end() :].lower()
    if "yes" in tail:
        return True
    if "no" in tail:
        return False
    raise InvalidReply("the reliability verdict is neither yes nor no")


# --------------------------------------------------------------------------- reply schemas and budgets

#: Token budget of each LLM step (free-text ones included).
MAX_TOKENS: dict[str, int] = {
    "answer": 192,
    "reference_generation": 256,
    "query_generation": 48,
    "triple_extraction": 256,
    "relevance_check": 160,
}


def _reasoning_then(tail: str) -> str:
    """Optional one-line reasoning (:data:`~kgrag_plugins.models.structured.PHRASE_CHARS`; its length
    is bounded by ``max_tokens``: a counted repetition before a literal tail makes the automaton
    explode) and a space, then ``tail``."""
    return f"(?:{phrase_regex()} )?{tail}"


#: Fig. 6's reply (:func:`parse_answer`): reasoning, then "The answer is <a few words>."
ANSWER_SCHEMA: OutputSchema = regex_schema(
    "know3_answer", _reasoning_then(f"The answer is {phrase_regex()}\\."), max_tokens=MAX_TOKENS["answer"]
)

#: Fig. 10's reply (:func:`parse_relevance`): reasoning, then "The reliability of the passage is yes|no."
RELEVANCE_SCHEMA: OutputSchema = regex_schema(
    "know3_relevance", _reasoning_then(f"{RELEVANCE_MARK} (?:yes|no)\\."), max_tokens=MAX_TOKENS["relevance_check"]
)

_FIELD = f'"{phrase_regex()}"'
_TRIPLE = f'\\{{"subject": {_FIELD}, "predicate": {_FIELD}, "object": {_FIELD}\\}}'
#: Fig. 9's reply (:func:`parse_triples`): ``None`` or a JSON list of subject/predicate/object
#: objects laid out as the paper's shots (a regex: OpenAI's strict JSON mode needs an object root;
#: field lengths are bounded by the call's ``max_tokens``, so the automaton stays small).
EXTRACTION_SCHEMA: OutputSchema = regex_schema(
    "know3_triples", f"None|\\[{_TRIPLE}(?:, {_TRIPLE})*\\]", max_tokens=MAX_TOKENS["triple_extraction"]
)
assert '"' not in PHRASE_CHARS  # a field's phrase can never close its JSON string
