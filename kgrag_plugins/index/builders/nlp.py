"""The shared spaCy pass of the LLM-free builders: sentences, NER mentions, dependency roles.

One pass over the corpus produces, per passage, its sentences (character spans) and entity
mentions (label, span, sentence, syntactic role of the mention's root token). ``parse=False``
swaps the dependency parser for the (much cheaper) sentence recogniser, which is all the
``mentions`` builder needs; ``parsekg`` needs the parser for subject detection.

Long texts: spaCy refuses a text over ``nlp.max_length`` (1,000,000 characters, error E088)
and needs about 1 GB of temporary memory per 100,000 characters. A passage longer than
:data:`MAX_CHUNK_CHARS` is therefore parsed in chunks cut at paragraph, line, sentence or word
boundaries (:func:`split_long_text`) and the chunk docs are joined back into one ``Doc`` over
the unchanged text (one WARNING per call names the passages). A sentence is never longer than
a chunk.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator, Sequence

from ...types import Passage
from .names import name_key, title_base

#: Corpora at least this large are parsed with two worker processes.
_MULTIPROCESS_MIN = 400
#: Longer passage texts are parsed in chunks of at most this many characters ...
MAX_CHUNK_CHARS = 20_000
#: ... this many chunks per spaCy batch.
_LONG_BATCH = 4

logger = logging.getLogger(__name__)

PRONOUNS = frozenset({"he", "she", "it", "they", "his", "her", "its", "their"})


@dataclass
class Mention:
    text: str
    label: str
    start: int  # character offsets into the passage text
    end: int
    sent: int  # sentence index within the passage
    dep: str = ""  # dependency label of the span's root token ("" without the parser)


@dataclass
class ParsedPassage:
    passage: Passage
    sentences: list[tuple[int, int]]  # character spans into passage.text
    mentions: list[Mention]
    #: sentence index -> (start, end, dep) of a subject pronoun, when the parser ran
    pronoun_subjects: dict[int, tuple[int, int, str]] = field(default_factory=dict)
    #: sentence index -> (start, end) of a sentence-initial pronoun (cheap coreference cue)
    leading_pronouns: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: whether NER tags the passage's own title as a PERSON (enables surname matching)
    title_is_person: bool = False

    def sentence_text(self, i: int) -> str:
        a, b = self.sentences[i]
        return self.passage.text[a:b]


@lru_cache(maxsize=2)
def load_spacy(parse: bool):
    """The spaCy pipeline, loaded once per mode (clear error if the model is not installed)."""
    from ..._spacy import load_pipeline

    # Only what the builders read: the tagger (and lemmas) feed nothing we use, and in the
    # sm pipeline NER and the sentence recogniser have their own embedding layers, so the
    # shared tok2vec only serves the parser. Same entities/parses, measurably faster.
    if parse:
        return load_pipeline(exclude=["lemmatizer", "attribute_ruler", "tagger"])
    nlp = load_pipeline(exclude=["lemmatizer", "attribute_ruler", "tagger", "parser", "tok2vec"])
    nlp.enable_pipe("senter")
    return nlp


def parse_passages(
    passages: Sequence[Passage],
    *,
    parse: bool,
    progress: bool = True,
    n_process: int | None = None,
    on_start: Callable[[], None] | None = None,
) -> Iterator[ParsedPassage]:
    """Run spaCy over passage texts (in order), yielding one :class:`ParsedPassage` each.

    ``on_start`` is called once the worker processes exist (after the first document), so a
    caller can start threaded work without forking a process that has running threads.
    """
    from tqdm.auto import tqdm

    from ...config import progress_enabled

    nlp = load_spacy(parse)  # first: it imports spaCy the package's way (kgrag_plugins._spacy)
    from spacy.tokens import Doc

    if n_process is None:
        n_process = min(2, os.cpu_count() or 1) if len(passages) >= _MULTIPROCESS_MIN else 1
    limit = max(1, min(MAX_CHUNK_CHARS, nlp.max_length))
    chunks = {i: split_long_text(p.text, limit) for i, p in enumerate(passages) if len(p.text) > limit}
    if chunks:
        ids = [passages[i].id for i in chunks]
        logger.warning(
            "%d passage(s) longer than %d characters are parsed in chunks cut at paragraph/sentence "
            "boundaries (spaCy's per-text limit): %s",
            len(chunks),
            limit,
            ", ".join(repr(x) for x in ids[:3]) + (", ..." if len(ids) > 3 else ""),
        )

    # Long passages are parsed here, a few chunks per batch (spaCy's memory grows with the batch).
    docs = nlp.pipe((p.text for i, p in enumerate(passages) if i not in chunks), batch_size=64, n_process=n_process)
    bar = tqdm(total=len(passages), desc="spaCy", unit="passage", disable=not progress_enabled(progress))
    try:
        for i, p in enumerate(passages):
            if i in chunks:
                doc = Doc.from_docs(list(nlp.pipe(chunks[i], batch_size=_LONG_BATCH)), ensure_whitespace=False)
            else:
                doc = next(docs)
            if on_start is not None:
                on_start()
                on_start = None
            yield _convert(p, doc, parse)
            bar.update(1)
    finally:
        bar.close()


_BOUNDARIES = (re.compile(r"\n\s*\n\s*"), re.compile(r"\n\s*"), re.compile(r"[.!?][\"')\]]*\s+"), re.compile(r"\s+"))


def split_long_text(text: str, limit: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` characters whose concatenation is ``text``.

    Each cut is at the last paragraph break in the window, else the last line break, sentence
    end or whitespace (the separator stays with the left piece); a text with none is cut hard.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    pieces: list[str] = []
    start, n = 0, len(text)
    while n - start > limit:
        window = text[start : start + limit]
        cut = 0
        for pattern in _BOUNDARIES:
            ends = [m.end() for m in pattern.finditer(window)]
            if ends and ends[-1] > 0:
                cut = ends[-1]
                break
        if cut <= 0:
            cut = limit
        pieces.append(text[start : start + cut])
        start += cut
    if start < n or not pieces:
        pieces.append(text[start:])
    return pieces


def _title_forms(title: str, person: bool) -> list[str]:
    """Surface forms of a passage title that its own text uses (longest first)."""
    base = title_base(title)
    forms = {title.strip(), base}
    if "," in base:
        forms.add(base.split(",")[0].strip())
    words = base.split()
    if person and len(words) >= 2 and len(words[-1]) > 2 and words[-1][:1].isupper():
        forms.add(words[-1])
    return sorted((f for f in forms if len(f) > 1), key=len, reverse=True)


def title_is_person(title: str, mentions: list[Mention]) -> bool:
    """Whether the passage's NER tags its own title as a PERSON (enables surname matching)."""
    keys = {name_key(title), name_key(title_base(title))}
    return any(m.label == "PERSON" and name_key(m.text) in keys for m in mentions)


def _title_mentions(
    p: Passage, doc, mentions: list[Mention], sent_of_token: dict, parse: bool, person: bool
) -> list[Mention]:
    """Occurrences of the passage's own title that NER missed ("Bonetti was known for ...")."""
    if not p.title.strip():
        return []
    taken = bytearray(len(p.text))  # 1 = character inside a mention (linear, not pairwise, checks)
    for m in mentions:
        taken[m.start : m.end] = b"\x01" * (m.end - m.start)
    out: list[Mention] = []
    for form in _title_forms(p.title, person):
        for hit in re.finditer(r"(?<!\w)" + re.escape(form) + r"(?!\w)", p.text):
            a, b = hit.span()
            if taken.find(1, a, b) != -1:
                continue
            span = doc.char_span(a, b, alignment_mode="expand")
            if span is None:
                continue
            taken[a:b] = b"\x01" * (b - a)
            dep = span.root.dep_ if parse else ""
            out.append(Mention(p.text[a:b], "TITLE", a, b, sent_of_token.get(span.start, 0), dep))
    return out


def _convert(p: Passage, doc, parse: bool) -> ParsedPassage:
    sents = list(doc.sents)
    spans = [(s.start_char, s.end_char) for s in sents]
    sent_of_token = {}
    for i, s in enumerate(sents):
        for t in range(s.start, s.end):
            sent_of_token[t] = i
    mentions = []
    for ent in doc.ents:
        text = ent.text.strip()
        if not text:
            continue
        dep = ent.root.dep_ if parse else ""
        mentions.append(Mention(text, ent.label_, ent.start_char, ent.end_char, sent_of_token.get(ent.start, 0), dep))
    person = title_is_person(p.title, mentions)
    mentions.extend(_title_mentions(p, doc, mentions, sent_of_token, parse, person))
    mentions.sort(key=lambda m: m.start)
    out = ParsedPassage(p, spans, mentions, title_is_person=person)
    for i, s in enumerate(sents):
        first = next((t for t in s if not t.is_space and not t.is_punct), None)
        if first is not None and first.lower_ in PRONOUNS:
            out.leading_pronouns[i] = (first.idx, first.idx + len(first.text))
        if parse:
            for t in s:
                if t.dep_ in ("nsubj", "nsubjpass") and t.lower_ in PRONOUNS:
                    out.pronoun_subjects[i] = (t.idx, t.idx + len(t.text), t.dep_)
                    break
    return out
