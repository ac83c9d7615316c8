"""Structured outputs: each structured LLM step declares the shape of its reply, and the backend
that can enforce it does.

A step passes an :class:`OutputSchema` (a JSON schema, a regex, or a choice among strings) to
:func:`~kgrag_plugins.models.replies.complete_validated` as ``schema=``. The call forwards it to the
LLM only when the LLM says it can enforce it (``supports_schema`` is true), so every other LLM
(framework adapters, user objects) sees the plain call it always saw. The enforcement per backend:

* vLLM's OpenAI server: ``structured_outputs: {"json" | "regex" | "choice": ...}`` in the body
  (:meth:`OutputSchema.vllm_body`), and ``chat_template_kwargs: {"enable_thinking": false}``;
* any other OpenAI-compatible server (OpenAI, Ollama's ``/v1``, llama.cpp): ``response_format``
  with a strict ``json_schema`` (:meth:`OutputSchema.response_format`; a regex has no such form and
  is sent unconstrained, a choice becomes a one-field JSON enum only where the step asked for JSON);
* Ollama's native API (:class:`~kgrag_plugins.models.ollama.OllamaLLM`): a JSON schema as ``format``
  and ``think: false``; a regex or choice is sent unconstrained (``think: false`` still);
* the in-process transformers backend (:class:`~kgrag_plugins.models.local_llm.TransformersLLM`): a
  logits processor over the schema's regex (:meth:`OutputSchema.to_regex`, JSON schemas compiled
  with ``outlines_core``).

Validation of the reply stays the last line: a constrained reply is parsed and checked like any other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OutputSchema",
    "choice_schema",
    "json_schema",
    "literal_regex",
    "mentions_regex",
    "one_of_regex",
    "paragraph_regex",
    "phrase_regex",
    "regex_schema",
    "schema_enabled",
    "text_field",
]

#: Letters and digits a phrase may open with (ASCII, Latin-1 and Latin Extended-A letters: names
#: like "Zürich" or "Łódź"; other scripts are outside the constrained phrase, a documented limit).
WORD_CHARS = "A-Za-z0-9\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017f"
#: Characters of a one-line phrase after its first: word characters, space and ``,.'()&/%$?-``
#: (every one counts as a word character for :func:`~kgrag_plugins.models.replies.check_text`;
#: no ``:`` ``*`` ``#`` ``<`` ``"`` or newline, so a phrase can open no marker, tag or JSON).
PHRASE_CHARS = WORD_CHARS + " ,.'()&/%$?-"
#: Characters of free prose after its first (notes, summaries, rewritten passages): a phrase's,
#: plus ``:;!"`` quotes and dashes (:func:`prose_regex` adds the newline); still no ``<`` ``>``
#: backtick ``{`` ``}`` ``|`` or backslash, so a reply cannot turn into markup, code or JSON.
PROSE_CHARS = WORD_CHARS + " ,.'()&/%$?:;!\"\u2013\u2014\u2018\u2019\u201c\u201d-"
#: Characters a regex must escape to mean themselves (Python ``re`` and Rust regex alike).
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")

#: The whitespace a JSON-schema regex allows between tokens (one optional space: short, and
#: SmolLM2-sized models otherwise fill the budget with newlines).
JSON_WHITESPACE = r"[ ]?"


@dataclass(frozen=True)
class OutputSchema:
    """The shape a structured step's reply must have: exactly one of ``json``, ``regex``, ``choice``.

    ``name`` names the step's format (``response_format.json_schema.name`` on OpenAI servers).
    ``max_tokens`` is the budget that fits the shape (the step's call uses it when it gives none).
    """

    name: str
    json: Mapping[str, Any] | None = None
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    max_tokens: int | None = None
    _regex_cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        given = [k for k in ("json", "regex", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"OutputSchema {self.name!r} needs exactly one of json, regex, choice; got {given or 'none'}"
            )
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(f"OutputSchema name {self.name!r}: use 1-64 letters, digits, '_' or '-'")
        if self.choice is not None and (not self.choice or not all(isinstance(c, str) and c for c in self.choice)):
            raise ValueError(f"OutputSchema {self.name!r}: choice needs non-empty strings")
        if self.regex is not None:
            re.compile(self.regex)

    @property
    def kind(self) -> str:
        """``"json"``, ``"regex"`` or ``"choice"``."""
        return "json" if self.json is not None else "regex" if self.regex is not None else "choice"

    def to_regex(self) -> str:
        """A regex every valid reply matches in full (JSON schemas via ``outlines_core``)."""
        cached = self._regex_cache.get("rx")
        if cached is not None:
            return cached
        if self.regex is not None:
            rx = self.regex
        elif self.choice is not None:
            rx = "|".join(literal_regex(c) for c in self.choice)
        else:
            try:
                from outlines_core.json_schema import build_regex_from_schema
            except ImportError as exc:  # pragma: no cover - outlines_core comes with the local extra
                raise ImportError(
                    "enforcing a JSON schema in-process needs outlines_core: pip install 'kgrag-plugins[local]'"
                ) from exc
            rx = build_regex_from_schema(json.dumps(self.json), JSON_WHITESPACE)
        self._regex_cache["rx"] = rx
        return rx

    def vllm_body(self) -> dict[str, Any]:
        """Extra body fields for vLLM's OpenAI server (``structured_outputs``, vLLM >= 0.12).

        A JSON schema goes as :meth:`to_regex`, the compact grammar the in-process backend enforces
        (:data:`JSON_WHITESPACE` between tokens), so both backends accept the same replies. vLLM's own
        JSON grammar allows any whitespace there, and SmolLM2-135M spent its token budget on it
        (``"...",\n\n,\n\n"final_answer"``), cutting replies before the JSON closed. Without
        ``outlines_core`` (the ``local`` extra) the schema goes as JSON."""
        if self.json is not None:
            try:
                so: dict[str, Any] = {"regex": self.to_regex()}
            except ImportError:
                so = {"json": dict(self.json)}
        elif self.regex is not None:
            so = {"regex": self.regex}
        else:
            so = {"choice": list(self.choice or ())}
        return {"structured_outputs": so, "chat_template_kwargs": {"enable_thinking": False}}

    def response_format(self) -> dict[str, Any] | None:
        """OpenAI's ``response_format`` (strict ``json_schema``), or ``None`` for a regex / choice,
        which that API cannot express."""
        if self.json is None:
            return None
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": dict(self.json), "strict": True}}

    def matches(self, text: str) -> bool:
        """Whether ``text`` (stripped) has this shape: JSON parses and has the required keys; a regex
        or choice matches in full. A cheap check for tests and reports, not a full validator."""
        s = (text or "").strip()
        if self.choice is not None:
            return s in self.choice
        if self.regex is not None:
            return re.fullmatch(self.regex, s, flags=re.S) is not None
        try:
            value = json.loads(s)
        except ValueError:
            return False
        required = (self.json or {}).get("required", [])
        return isinstance(value, dict) and all(k in value for k in required) if required else True


def json_schema(name: str, schema: Mapping[str, Any], *, max_tokens: int | None = None) -> OutputSchema:
    """An :class:`OutputSchema` for a JSON reply."""
    return OutputSchema(name, json=schema, max_tokens=max_tokens)


def regex_schema(name: str, pattern: str, *, max_tokens: int | None = None) -> OutputSchema:
    """An :class:`OutputSchema` for a reply matching ``pattern`` in full."""
    return OutputSchema(name, regex=pattern, max_tokens=max_tokens)


def choice_schema(name: str, options: Sequence[str], *, max_tokens: int | None = None) -> OutputSchema:
    """An :class:`OutputSchema` for a reply that is exactly one of ``options``."""
    return OutputSchema(name, choice=tuple(options), max_tokens=max_tokens)


def literal_regex(text: str) -> str:
    """``text`` as a regex matching exactly itself (meta characters escaped; readable by Python's
    ``re``, ``outlines_core`` and vLLM's regex engines alike)."""
    return "".join("\\" + ch if ch in _REGEX_META else ch for ch in text)


def one_of_regex(options: Sequence[str], *, repeat: bool = False, sep: str = "\n") -> str:
    """A regex matching one of ``options`` literally (``repeat``: one or more, ``sep``-separated)."""
    alt = "(?:" + "|".join(literal_regex(o) for o in dict.fromkeys(options)) + ")"
    return f"{alt}(?:{literal_regex(sep)}{alt})*" if repeat else alt


def phrase_regex(max_chars: int | None = None, *, end: str = "") -> str:
    """A one-line phrase: opens with a letter or digit, then :data:`PHRASE_CHARS`; at most
    ``max_chars`` characters (``None``: unbounded, the call's ``max_tokens`` bounds it; a counted
    repetition costs ``outlines_core`` ~6 ms a character to compile), then ``end`` (a regex)."""
    if max_chars is not None and max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    reps = "*" if max_chars is None else f"{{0,{max_chars - 1}}}"
    return f"[{WORD_CHARS}][{PHRASE_CHARS}]{reps}{end}"


def prose_regex() -> str:
    """Free prose over one or more lines: opens with a letter or digit, then :data:`PROSE_CHARS`
    (unbounded; the call's ``max_tokens`` bounds it). SmolLM2-135M otherwise answers 7 % of its
    PopQA rewrites with ``<pre><code>`` repeated to the token budget."""
    return f"[{WORD_CHARS}][\\n{PROSE_CHARS}]*"


def paragraph_regex() -> str:
    """One paragraph of prose: :func:`prose_regex` without the newline. KG-Infused's note asks for
    "a coherent paragraph" (Table 11); with line breaks allowed SmolLM2-135M filled some of its notes
    with heading loops (``"The note is:\\n\\nThe note is:..."``)."""
    return f"[{WORD_CHARS}][{PROSE_CHARS}]*"


#: The characters of :data:`PROSE_CHARS` that are not word characters (a word boundary).
_NON_WORD = PROSE_CHARS.replace(WORD_CHARS, "", 1)
#: Stems shorter than this are whole words (``content_words`` cuts words to 6 characters).
_STEM_CHARS = 6


def mentions_regex(
    stems: Sequence[str],
    *,
    max_stems: int = 24,
    within_words: int | None = None,
    max_symbols: int | None = None,
) -> str | None:
    """One paragraph (:func:`paragraph_regex`) that contains at least one of ``stems`` as a word,
    in any letter case; ``None`` without stems.

    ``stems`` are :func:`~kgrag_plugins.models.replies.content_words` stems (lower case, 3+
    characters, cut to 6): a 6-character stem matches any word that starts with it, a shorter one
    the whole word only, so a reply this regex accepts always shares a content word with the text
    the stems came from. Stems with a letter outside :data:`WORD_CHARS` are dropped (no reply could
    hold them); the ``max_stems`` longest are kept (the regex stays small to compile).
    ``within_words``: the stem must come after at most that many words, each followed by 1-3
    non-word characters (``None``: anywhere). ``max_symbols``: after the stem, words are separated
    by at most that many non-word characters (``None``: any prose), so the reply cannot loop on
    quotes or punctuation."""
    word_only = re.compile(f"[{WORD_CHARS}]{{3,}}")
    kept = sorted({s for s in stems if word_only.fullmatch(s or "")}, key=lambda s: (-len(s), s))[:max_stems]
    if not kept:
        return None

    def caseless(stem: str) -> str:
        out = []
        for ch in stem:
            lo, up = ch.lower(), ch.upper()
            if lo != up and len(up) == 1:
                out.append(f"[{literal_regex(lo)}{literal_regex(up)}]")
            else:
                out.append(literal_regex(ch))
        return "".join(out)

    long_ = [caseless(s) for s in kept if len(s) >= _STEM_CHARS]
    short = [caseless(s) for s in kept if len(s) < _STEM_CHARS]
    keys = []
    if long_:
        keys.append(f"(?:{'|'.join(long_)})[{WORD_CHARS}]*")
    if short:
        keys.append(f"(?:{'|'.join(short)})")
    key = keys[0] if len(keys) == 1 else f"(?:{'|'.join(keys)})"
    word, non_word, prose = f"[{WORD_CHARS}]", f"[{_NON_WORD}]", f"[{PROSE_CHARS}]"
    if within_words is None:
        opening = f"(?:{word}{prose}*{non_word})?"
    else:
        opening = f"(?:{word}+{non_word}{{1,3}}){{0,{int(within_words)}}}"
    if max_symbols is None:
        rest = f"(?:{non_word}{prose}*)?"
    else:  # words separated by at most max_symbols non-word characters
        run = f"{non_word}{{1,{int(max_symbols)}}}"
        rest = f"(?:{run}{word}+)*{non_word}{{0,{int(max_symbols)}}}"
    return f"{opening}{key}{rest}"


def text_field(max_chars: int | None = None) -> dict[str, Any]:
    """A JSON-schema string holding one :func:`phrase_regex` phrase (a ``pattern``: vLLM, OpenAI
    strict mode and ``outlines_core`` all enforce it)."""
    return {"type": "string", "pattern": f"^{phrase_regex(max_chars)}$"}


def schema_enabled(llm: Any) -> bool:
    """Whether ``llm`` enforces an :class:`OutputSchema` passed as ``complete(..., schema=...)``."""
    try:
        return getattr(llm, "supports_schema", False) is True
    except Exception:  # a proxy whose attribute lookup fails: treat as no
        return False
