"""Reading LLM extraction replies (SA-RAG §3.1 NER / RE steps): word chunking and tolerant JSON
parsing of the entity and triple lists small models write (fences, prose around the JSON, trailing
commas, truncated brackets), each item checked against the shape the prompt asks for."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Callable

from .prompts import ENTITY_TYPES

__all__ = ["as_entity", "as_triple", "chunk_words", "norm_name", "parse_entities", "parse_json", "parse_triples"]

logger = logging.getLogger("kgrag_plugins.build")

#: ``max_tokens`` passed with each extraction call (the HTTP client's default of 512 truncates
#: the NER output of dense chunks).

# --------------------------------------------------------------------------- chunking


def chunk_words(text: str, max_words: int = 500, overlap: int = 100) -> list[str]:
    """Split ``text`` into windows of ``max_words`` words with stride ``max_words - overlap``.

    The last window ends at the last word; an empty text gives no chunks.
    """
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    if not 0 <= overlap < max_words:
        raise ValueError(f"overlap must be in [0, max_words), got {overlap} with max_words={max_words}")
    words = text.split()
    stride = max_words - overlap
    out: list[str] = []
    start = 0
    while start < len(words):
        out.append(" ".join(words[start : start + max_words]))
        if start + max_words >= len(words):
            break
        start += stride
    return out


# --------------------------------------------------------------------------- JSON parsing

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_CLOSE = {"[": "]", "{": "}"}
_MAX_STARTS = 12


def _scan_repair(s: str) -> str | None:
    """Repair the JSON value starting at ``s[0]`` (``[`` or ``{``).

    Drops trailing commas, stops at the end of the top-level value (ignoring trailing prose),
    and, if the text ends before the value closes (truncated output), cuts back to the last
    complete element of an array and closes the open brackets. Returns None if nothing
    complete is left.
    """
    out: list[str] = []
    stack: list[str] = []
    in_str = esc = False
    cut: tuple[int, list[str]] | None = None
    for ch in s:
        if in_str:
            out.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
            out.append(ch)
        elif ch in "[{":
            stack.append(ch)
            out.append(ch)
        elif ch in "]}":
            if not stack or _CLOSE[stack[-1]] != ch:
                return None
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
            out.append(ch)
            stack.pop()
            if not stack:
                return "".join(out)
            if stack[-1] == "[":  # a complete element of an array ends here
                cut = (len(out), list(stack))
        else:
            out.append(ch)
    if cut is None:
        return None
    n, open_stack = cut
    return "".join(out[:n]) + "".join(_CLOSE[b] for b in reversed(open_stack))


def _candidates(text: str) -> list[str]:
    bodies = [m.group(1) for m in _FENCE.finditer(text)]
    bodies.append(text)
    return [b.strip() for b in bodies if b.strip()]


def parse_json(text: str, accept: Callable[[Any], bool] | None = None) -> Any | None:
    """Best-effort JSON value from an LLM reply; None if nothing acceptable parses.

    Tries, for the content of each code fence and then the whole reply: plain ``json.loads``;
    then, from each ``[`` / ``{`` (first few), a strict decode that ignores trailing prose; then
    a repaired decode (trailing commas removed, truncated arrays cut back to their complete
    elements). The first value for which ``accept`` holds (default: any list or dict) wins.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    ok = accept or (lambda v: isinstance(v, (list, dict)))
    decoder = json.JSONDecoder()
    for body in _candidates(text):
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: absurdly nested input
            pass
        else:
            if ok(value):
                return value
        starts = [i for i, ch in enumerate(body) if ch in "[{"][:_MAX_STARTS]
        for i in starts:
            try:
                value, _ = decoder.raw_decode(body, i)
            except (ValueError, RecursionError):
                repaired = _scan_repair(body[i:])
                if repaired is None:
                    continue
                try:
                    value = json.loads(repaired)
                except (ValueError, RecursionError):
                    continue
            if ok(value):
                return value
    return None


def norm_name(name: str) -> str:
    """Comparison key for names: whitespace-normalised, case-folded."""
    return " ".join(name.split()).casefold()


def _clean(name: Any) -> str:
    return " ".join(name.split()) if isinstance(name, str) else ""


def as_entity(item: Any) -> dict[str, Any] | None:
    """Validate one NER item; None if it has the wrong shape."""
    if not isinstance(item, dict):
        return None
    name = _clean(item.get("name"))
    if not name:
        return None
    etype = item.get("type")
    etype = etype.strip().upper() if isinstance(etype, str) else ""
    if etype not in ENTITY_TYPES:
        etype = "MISC"
    raw_aliases = item.get("aliases", [])
    if isinstance(raw_aliases, str):
        raw_aliases = [raw_aliases]
    aliases: list[str] = []
    seen = {norm_name(name)}
    if isinstance(raw_aliases, list):
        for a in raw_aliases:
            a = _clean(a)
            if a and norm_name(a) not in seen:
                seen.add(norm_name(a))
                aliases.append(a)
    info = item.get("entity_information", item.get("description", ""))
    info = info.strip() if isinstance(info, str) else ""
    return {"name": name, "type": etype, "aliases": aliases, "entity_information": info}


def as_triple(item: Any) -> list[str] | None:
    """Validate one RE item: a 3-element list of non-empty strings."""
    if not isinstance(item, (list, tuple)) or len(item) != 3:
        return None
    if not all(isinstance(x, str) and x.strip() for x in item):
        return None
    return [x.strip() for x in item]


def _entity_list(value: Any) -> list | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        if "name" in value:
            return [value]
        for key in ("entities", "named_entities", "result", "results", "data", "output"):
            if isinstance(value.get(key), list):
                return value[key]
        lists = [v for v in value.values() if isinstance(v, list)]
        if lists:
            return lists[0]
    return None


def _triple_list(value: Any) -> list | None:
    if isinstance(value, dict):
        if isinstance(value.get("triples"), list):
            return value["triples"]
        lists = [v for v in value.values() if isinstance(v, list)]
        return lists[0] if lists else None
    if isinstance(value, list):
        if len(value) == 3 and all(isinstance(x, str) for x in value):
            return [value]  # a single bare triple
        return value
    return None


def _looks_like(extract: Callable[[Any], list | None], item_type: type | tuple[type, ...]) -> Callable[[Any], bool]:
    """Accept a parsed value if ``extract`` finds a list in it that is empty or holds an ``item_type``."""

    def accept(value: Any) -> bool:
        items = extract(value)
        return items is not None and (not items or any(isinstance(x, item_type) for x in items))

    return accept


def _valid_items(items: list | None, convert: Callable[[Any], Any]) -> list | None:
    """``convert`` each item, skipping those it rejects (``None``); ``None`` if no list was found."""
    if items is None:
        return None
    return [x for x in map(convert, items) if x is not None]


def parse_entities(text: str) -> list[dict[str, Any]] | None:
    """Entities of an NER reply (bad items skipped), or None if no usable JSON was found."""
    return _valid_items(_entity_list(parse_json(text, accept=_looks_like(_entity_list, dict))), as_entity)


def parse_triples(text: str) -> list[list[str]] | None:
    """Triples of an RE reply (bad items skipped), or None if no usable JSON was found."""
    return _valid_items(_triple_list(parse_json(text, accept=_looks_like(_triple_list, (list, tuple)))), as_triple)
