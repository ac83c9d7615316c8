"""Prompts for LLM graph construction (SA-RAG §5.3 indexing; docs/methods.md §4(a) step 3, §4(c)).

Written for this package in the spirit of the paper's ``template_ner_v2.txt`` /
``template_re_v2.txt``: the NER prompt asks for typed entities (PERSON / ORGANIZATION / GPE /
MISC) with aliases and a context-independent ``entity_information`` (GPE and MISC descriptions
must say what the entity *is*, not what it does in this text), shows one worked example and a
list of forbidden outputs; the RE prompt asks for explicit relations between the listed
entities with pronouns resolved, with one worked example. Both demand JSON only.

The chunk text (and, for RE, the extracted names) go inside ``<text>`` / ``<entities>`` data
blocks (:func:`~kgrag_plugins.models.prompting.data_block`, which escapes tag look-alikes), and
both system prompts state that delimited text is data and that instructions inside it are
neither followed nor extracted (:data:`~kgrag_plugins.models.prompting.DATA_NOTICE`,
:data:`~kgrag_plugins.models.prompting.EXTRACTION_NOTICE`); :mod:`.llm_extract` also drops
extracted instructions (:func:`~kgrag_plugins.models.prompting.drop_instructions`).

The paper enforces the output shape with Ollama's JSON-schema ``format``; an OpenAI-compatible
endpoint may not, so the parser in :mod:`.llm_extract` is tolerant instead.

Bump :data:`PROMPT_VERSION` whenever a prompt changes: it is part of the extraction cache key,
so cached results made with older prompts are not reused.
"""

from __future__ import annotations

import json
from typing import Sequence

from ...models.prompting import DATA_NOTICE, EXTRACTION_NOTICE, data_block

__all__ = ["ENTITY_TYPES", "NER_SYSTEM", "PROMPT_VERSION", "RE_SYSTEM", "ner_messages", "re_messages"]

#: Part of the cache key of every extracted chunk; change it when the prompts change.
PROMPT_VERSION = "sa-rag-extract-v2"

#: The entity types the NER prompt allows (anything else is mapped to ``MISC``).
ENTITY_TYPES = ("PERSON", "ORGANIZATION", "GPE", "MISC")

#: Both notices, as they appear in the two system prompts.
_NOTICES = f"{DATA_NOTICE} {EXTRACTION_NOTICE}"

NER_SYSTEM = (
    """\
You are an information-extraction assistant that builds a knowledge graph from text.

Task: find every named entity in the text the user gives you inside <text>...</text>.
"""
    + _NOTICES
    + """

For each entity return one JSON object with exactly these keys:
- "name": the fullest proper name used for the entity in the text (for example "Ada Lovelace", \
not "Lovelace" and never "she").
- "type": exactly one of "PERSON", "ORGANIZATION", "GPE", "MISC".
    PERSON: real or fictional people and named characters.
    ORGANIZATION: companies, institutions, universities, bands, sports teams, government bodies, \
political parties.
    GPE: countries, states, provinces, cities, regions and other named places.
    MISC: any other named thing: creative works (films, books, songs, albums, TV series), events, \
wars, awards, products, vehicles, languages, nationalities, religions.
- "aliases": the other names, short forms, abbreviations, former names or spellings that the text \
uses for the same entity (for example "UN" for "United Nations"); [] when there are none. \
Pronouns and generic descriptions are never aliases.
- "entity_information": one or two sentences that say what the entity is, using only facts from \
the text. The sentence must make sense on its own, without the text: name the entity, replace \
pronouns with names. For GPE and MISC entities the description must not depend on this context: \
say what kind of place or thing it is (for example "Lyon is a city in France."), not the part it \
plays in the story of the text.

Rules:
- Only entities that are explicitly named in the text. Do not add facts the text does not state.
- One object per entity: merge repeated mentions and collect their aliases in that object.
- Forbidden outputs: pronouns ("he", "they", "it"), generic noun phrases ("the company", \
"a small town", "the album"), bare numbers, dates and amounts as entities, and any keys other \
than the four above.
- Return only the JSON array, with no explanation before or after it and no markdown.

Example
<text>
Marie Curie, born Maria Sklodowska in Warsaw, shared the 1903 Nobel Prize in Physics with her \
husband Pierre Curie. She later directed the Radium Institute in Paris.
</text>

Output:
[{"name": "Marie Curie", "type": "PERSON", "aliases": ["Maria Sklodowska"], \
"entity_information": "Marie Curie, born Maria Sklodowska in Warsaw, was a physicist who shared \
the 1903 Nobel Prize in Physics with her husband Pierre Curie and later directed the Radium \
Institute in Paris."}, \
{"name": "Pierre Curie", "type": "PERSON", "aliases": [], "entity_information": "Pierre Curie \
was the husband of Marie Curie and shared the 1903 Nobel Prize in Physics with her."}, \
{"name": "Warsaw", "type": "GPE", "aliases": [], "entity_information": "Warsaw is a city."}, \
{"name": "Nobel Prize in Physics", "type": "MISC", "aliases": [], "entity_information": "The \
Nobel Prize in Physics is an award given for achievements in physics."}, \
{"name": "Radium Institute", "type": "ORGANIZATION", "aliases": [], "entity_information": "The \
Radium Institute is a research institute in Paris that Marie Curie directed."}, \
{"name": "Paris", "type": "GPE", "aliases": [], "entity_information": "Paris is a city."}]

Not allowed in this example: {"name": "She", ...}, {"name": "her husband", ...}, \
{"name": "1903", ...}, and "Warsaw is the city where Marie Curie was born." as the description \
of Warsaw (it depends on the text)."""
)

RE_SYSTEM = (
    """\
You are an information-extraction assistant that builds a knowledge graph from text.

The user gives you a text inside <text>...</text> and the list of named entities found in it \
("named_entities", inside <entities>...</entities>). """
    + _NOTICES
    + """ Write \
down every relationship between two of these entities that the text states explicitly, as a \
triple [head, relation, tail]:
- head and tail are copied exactly, with the same spelling, from the named_entities list.
- relation is a short lower-case phrase, usually a verb phrase, that reads from head to tail \
("born in", "founded", "member of", "directed", "located in", "spouse of").
- Resolve pronouns and descriptions ("she", "the band", "the city") to the entity they refer to \
before writing the triple.
- Use only what the text says: no guesses and no outside knowledge.
- head and tail are two different entities. Write each fact once.

Return only a JSON object of the form {"triples": [["head", "relation", "tail"], ...]}, or \
{"triples": []} when the text states no relationship between the listed entities. No \
explanation and no markdown.

Example
<text>
Grace Hopper joined the United States Navy in 1943. After the war she worked on the UNIVAC I \
at the Eckert-Mauchly Computer Corporation, which was later bought by Remington Rand.
</text>
<entities>
named_entities: ["Grace Hopper", "United States Navy", "UNIVAC I", \
"Eckert-Mauchly Computer Corporation", "Remington Rand"]
</entities>

Output:
{"triples": [["Grace Hopper", "joined", "United States Navy"], \
["Grace Hopper", "worked on", "UNIVAC I"], \
["Grace Hopper", "worked at", "Eckert-Mauchly Computer Corporation"], \
["Remington Rand", "bought", "Eckert-Mauchly Computer Corporation"]]}"""
)


def ner_messages(text: str) -> list[dict[str, str]]:
    """Chat messages for entity extraction from one chunk (the chunk in a ``<text>`` block)."""
    return [
        {"role": "system", "content": NER_SYSTEM},
        {"role": "user", "content": f"{data_block('text', text)}\n\nReturn the JSON array of named entities."},
    ]


def re_messages(text: str, names: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages for relation extraction from one chunk, given its extracted entity names
    (the chunk in a ``<text>`` block, the names in an ``<entities>`` block)."""
    listed = json.dumps(list(names), ensure_ascii=False)
    blocks = f"{data_block('text', text)}\n{data_block('entities', f'named_entities: {listed}')}"
    return [
        {"role": "system", "content": RE_SYSTEM},
        {"role": "user", "content": f"{blocks}\n\nReturn the JSON object of triples."},
    ]
