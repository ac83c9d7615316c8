"""Retrieved text is data (issue 13 item 6): every prompt with retrieved content delimits it,
says so, and escapes delimiter look-alikes; FRAG uses the paper's prompt wording (item 9).

The structural test renders every prompt builder of the package with a passage from the
injection corpus (``tests/data/prompt_injections.jsonl``: instructions plus ``</passages>``,
``＜/paths＞``, ``&lt;/facts&gt;``, ``<|im_start|>``, ... look-alikes) and checks that the hostile
text cannot add, remove or close a data block and only ever appears inside one.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import string
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kgrag_plugins
from kgrag_plugins.agents import prompts as ag_prompts
from kgrag_plugins.agents import self_rag_prompts as sr_prompts
from kgrag_plugins.index.builders import prompts as extract_prompts
from kgrag_plugins.methods import answer as answer_mod
from kgrag_plugins.methods.frag import prompts as frag_prompts
from kgrag_plugins.methods.frag.hop_classifier import count_hops
from kgrag_plugins.methods.kg_infused import prompts as kgi
from kgrag_plugins.methods.know3 import prompts as k3_prompts
from kgrag_plugins.methods.sa_rag import prompts as sa_prompts
from kgrag_plugins.methods.sa_rag.cot import SARAGCoT
from kgrag_plugins.methods.sa_rag.retriever import SARAGRetriever
from kgrag_plugins.methods.translator import prompts as tr_prompts
from kgrag_plugins.models import prompting
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.models.prompting import DATA_NOTICE, DataPrompt, data_block, escape_data
from kgrag_plugins.types import Evidence, Fact, Passage, ScoredPassage

CORPUS = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "prompt_injections.jsonl").open()]
BENIGN = "Ada Lovelace was born in London."

#: A real delimiter: ``<label>`` or ``</label>`` exactly as the builders write them.
TAG = re.compile(r"</?[a-z][a-z_]*>")


def _joined(messages) -> str:
    return "\n".join(m["content"] for m in messages) if isinstance(messages, list) else messages


def _evidence(text: str) -> Evidence:
    return Evidence("q", [ScoredPassage(Passage("p1", text, "Title"), 1.0)], [Fact(f"A r {text}")])


# KG-Infused: what goes in each slot (the helpers the retriever uses)
KGI_SLOTS: dict[str, Callable[[str], str]] = {
    "passages": lambda t: kgi.format_passages([("T", t), ("", BENIGN)]),
    "triples": lambda t: kgi.format_candidate_groups([(t, [(t, "r", "B"), ("A", t, "B")])]),
    "previous_selected_triples": lambda t: kgi.format_triples([(t, "r", "B")]),
    "new_retrieved_triples": lambda t: kgi.format_candidate_groups([("A", [("A", "r", t)])]),
    "selected_triples": lambda t: kgi.format_triples([("A", t, "B")]),
    "triples_summary": lambda t: t,
    "passage": lambda t: t,
}


def _fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


def _kgi_builder(key: str) -> Callable[[str], str]:
    template = kgi.PROMPTS[key]

    def build(t: str) -> str:
        return template.format(**{f: ("Q?" if f == "question" else KGI_SLOTS[f](t)) for f in _fields(template)})

    return build


def _answer_prompt(t: str) -> str:
    llm = ScriptedLLM(["x"])
    answer_mod.generate_answer(llm, "q", _evidence(t))
    return _joined(llm.calls[0]["messages"])


#: Every prompt builder of the package that carries retrieved content.
BUILDERS: dict[str, Callable[[str], str]] = {
    "extract.ner_messages": lambda t: _joined(extract_prompts.ner_messages(t)),
    "extract.re_messages": lambda t: _joined(extract_prompts.re_messages(t, ["Ada", t])),
    "frag.reasoning_prompt": lambda t: frag_prompts.reasoning_prompt("q", [f"A -> r -> {t}", t]),
    "frag.hop_estimation_prompt": lambda t: frag_prompts.hop_estimation_prompt("q", [t, "A -> r -> B"]),
    "sa_rag.reasoning": lambda t: sa_prompts.REASONING_SYSTEM + "\n" + SARAGRetriever.context(_evidence(t)),
    "sa_rag.answering": lambda t: (
        sa_prompts.ANSWERING_SYSTEM + "\n" + SARAGCoT.merge_context(t, SARAGRetriever.context(_evidence(t)))
    ),
    "answer.generate_answer": _answer_prompt,
    "translator.clue_translation_prompt": lambda t: tr_prompts.clue_translation_prompt(t),
    "translator.qa_prompt": lambda t: tr_prompts.qa_prompt("q", [t, "Warsaw lies on the Vistula."]),
    "translator.decomposition_prompt": lambda t: tr_prompts.decomposition_prompt("q", [t], ["an earlier query", t]),
    **{f"kg_infused.{k}": _kgi_builder(k) for k, v in kgi.PROMPTS.items() if set(_fields(v)) - {"question"}},
    "know3.qa_prompt": lambda t: k3_prompts.qa_prompt("q", [t, BENIGN]),
    "know3.reference_prompt": lambda t: k3_prompts.reference_prompt("q", [(t, t), ("Ada", BENIGN)]),
    "know3.query_prompt": lambda t: k3_prompts.query_prompt("q", [t], t),
    "know3.extraction_messages": lambda t: _joined(k3_prompts.extraction_messages(t, [t, "Ada"])),
    "know3.relevance_messages": lambda t: _joined(k3_prompts.relevance_messages("q", t, [(t, t)])),
    "agents.sub_answer_messages": lambda t: _joined(ag_prompts.sub_answer_messages("q", _evidence(t))),
    "agents.format_context": lambda t: sa_prompts.REASONING_SYSTEM + "\n" + ag_prompts.format_context(_evidence(t)),
    "self_rag.RELEVANCE": lambda t: sr_prompts.RELEVANCE.format(question="q", title=t, text=t),
    "self_rag.GENERATE": lambda t: sr_prompts.GENERATE.format(question="q", title="T", text=t),
    "self_rag.SUPPORT": lambda t: sr_prompts.SUPPORT.format(question="q", title="T", text=t, answer=t),
    "self_rag.UTILITY": lambda t: sr_prompts.UTILITY.format(question="q", answer=t),
}

#: What each prompts module exposes, and where it is covered above (names must be listed here).
COVERED = {
    "kgrag_plugins.index.builders.prompts": {"ner_messages", "re_messages", "NER_SYSTEM", "RE_SYSTEM"},
    "kgrag_plugins.methods.frag.prompts": {"reasoning_prompt", "hop_estimation_prompt", "REASONING", "HOP_ESTIMATION"},
    "kgrag_plugins.methods.sa_rag.prompts": {"REASONING_SYSTEM", "ANSWERING_SYSTEM"},
    "kgrag_plugins.methods.translator.prompts": {
        "clue_translation_prompt",
        "qa_prompt",
        "decomposition_prompt",
        "CLUE_TRANSLATION",
        "QA",
        "DECOMPOSITION",
    },
    "kgrag_plugins.methods.know3.prompts": {
        "qa_prompt",
        "reference_prompt",
        "query_prompt",
        "extraction_messages",
        "relevance_messages",
        "format_entities",
        "QA",
        "QA_END",
        "REFERENCE_GENERATION",
        "QUERY_GENERATION",
        "EXTRACTION_SYSTEM",
        "RELEVANCE_SYSTEM",
    },
    "kgrag_plugins.agents.prompts": {
        "self_ask_prompt",
        "SELF_ASK_PROMPT",
        "sub_answer_messages",
        "SUB_ANSWER_SYSTEM",
        "DECOMPOSE_SYSTEM",
        "format_context",
    },
    "kgrag_plugins.methods.kg_infused.prompts": {
        *(n for n in kgi.__all__ if n.isupper() and n != "PROMPTS"),
        "format_candidate_groups",
        "format_passages",
        "format_triple",
        "format_triples",
    },
}
#: Public names of prompts modules that build no prompt.
NOT_PROMPTS = {"postprocess", "PROMPTS", "PROMPT_VERSION", "ENTITY_TYPES", "STOP", "MAX_TOKENS", "QUESTION_PREFIX"}
NOT_PROMPTS |= {"PERSONA", "PERSONA_HOP"}  # parts of REASONING / HOP_ESTIMATION
NOT_PROMPTS |= {"NEXT_QUERY_MARK", "parse_next_query", "parse_qa"}  # the translator's reply parsing
NOT_PROMPTS |= {"parse_hop_estimate"}  # FRAG-F's reply parsing
NOT_PROMPTS |= {"parse_answer", "parse_reference", "parse_query", "parse_triples", "parse_relevance", "RELEVANCE_MARK"}
NOT_PROMPTS |= set(prompting.__all__)  # the shared sentences, imported
NOT_PROMPTS |= {"NEEDED_LINE", "FINAL_CUE"}  # Self-Ask markers (no retrieved text: self_ask_prompt)
# reply schemas and their literals (models/structured.py: what a reply may look like, no prompt text)
NOT_PROMPTS |= {"NO_PATH", "hop_schema", "NONE_SELECTED", "selection_schema", "note_schema", "PHRASE_CHARS"}


def _blocks(text: str) -> list[tuple[str, int, int]]:
    """(label, start, end) of every data block; asserts the tags pair up without nesting."""
    body = text.replace(DATA_NOTICE, " " * len(DATA_NOTICE))
    out, open_tag = [], None
    for m in TAG.finditer(body):
        label = m.group().strip("</>")
        if m.group().startswith("</"):
            assert open_tag is not None and open_tag[0] == label, f"stray {m.group()} at {m.start()}"
            out.append((label, open_tag[1], m.start()))
            open_tag = None
        else:
            assert open_tag is None, f"{m.group()} opened inside <{open_tag[0]}>"
            open_tag = (label, m.end())
    assert open_tag is None, f"<{open_tag[0]}> never closed"
    return out


def _payload(injection: str) -> str:
    """The longest plain-words run of an injection: survives escaping and JSON quoting."""
    return max(re.findall(r"[A-Za-z][A-Za-z ,]{10,}", injection), key=len).strip(" ,")


@pytest.mark.parametrize("row", CORPUS, ids=[r["id"] for r in CORPUS])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_prompt_delimits_retrieved_text(name, row):
    build = BUILDERS[name]
    hostile, benign = build(row["text"]), build(BENIGN)
    assert DATA_NOTICE in hostile
    # the hostile text adds, removes and closes no delimiter
    assert TAG.findall(hostile.replace(DATA_NOTICE, "")) == TAG.findall(benign.replace(DATA_NOTICE, ""))
    blocks = _blocks(hostile)
    assert blocks
    # ... and everything it says is inside a block
    for needle in (row["fact"], _payload(row["injection"])):
        hits = [m.start() for m in re.finditer(re.escape(needle), hostile)]
        assert hits, needle
        for at in hits:
            assert any(s <= at and at + len(needle) <= e for _, s, e in blocks), (needle, at)


def test_every_prompt_builder_is_covered():
    """Structural guard: a new prompt template or builder in any ``prompts`` module must be
    added to BUILDERS (or NOT_PROMPTS) before this passes."""
    modules = [
        m.name for m in pkgutil.walk_packages(kgrag_plugins.__path__, "kgrag_plugins.") if m.name.endswith(".prompts")
    ]
    assert sorted(modules) == sorted(COVERED)
    for name in modules:
        mod = importlib.import_module(name)
        public = {
            n
            for n, v in vars(mod).items()
            if not n.startswith("_")
            and (isinstance(v, str) or (inspect.isfunction(v) and v.__module__ == name))
            and n not in ("annotations",)
        }
        assert public - NOT_PROMPTS <= COVERED[name], (name, public - NOT_PROMPTS - COVERED[name])
    # every KG-Infused template escapes its fields and keeps every data slot inside tags
    for key, template in kgi.PROMPTS.items():
        assert isinstance(template, DataPrompt), key
        for f in set(_fields(template)) - {"question"}:
            before, after = template.split("{" + f + "}")
            opened = TAG.findall(before)[-1]
            assert not opened.startswith("</") and after.lstrip("\n").startswith(opened.replace("<", "</")), (key, f)
            assert DATA_NOTICE in template, key


@given(
    st.lists(st.sampled_from(list("<>/|!? \n&#;xltpa_s3c0") + ["\uff1c", "\u27e8", "\u200b", "passages"])).map("".join)
)
def test_escaped_data_never_contains_a_tag(text):
    escaped = escape_data(text)
    assert not TAG.search(escaped) and "<|" not in escaped and "</" not in escaped
    assert escape_data(escaped) == escaped  # idempotent
    block = data_block("passages", [text, text])
    assert TAG.findall(block) == ["<passages>", "</passages>"]


@given(
    st.text(
        alphabet=st.characters(
            blacklist_characters="<\uff1c\ufe64\u3008\u2329\u27e8&\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad"
        )
    )
)
def test_escape_leaves_ordinary_text_alone(text):
    assert escape_data(text) == text


def test_triples_and_paths_stay_readable():
    assert escape_data("<Marie Curie | born in | Warsaw>") == "<Marie Curie | born in | Warsaw>"
    assert escape_data("Big <- directed_by <- Penny Marshall") == "Big <- directed_by <- Penny Marshall"
    assert kgi.format_triple("a</triples>", "r", "b>c") == "<a\u2039/triples\u203a | r | b\u203ac>"
    with pytest.raises(ValueError, match="label"):
        data_block("Passages>", "x")


# --------------------------------------------------------------------------- FRAG wording (item 9)


def test_frag_prompts_use_the_paper_wording():
    persona = (
        "You are an expert reasoner with a deep understanding of logical connections and relationships. "
        "Your task is to analyze the given reasoning paths and provide"
    )
    assert frag_prompts.PERSONA == persona + " clear and accurate answers to the questions based on these paths."
    assert frag_prompts.PERSONA_HOP == persona + " accurate reasoning path to the questions based on these paths."
    hop = frag_prompts.hop_estimation_prompt("who directed Big", ["Big -> directed_by -> Penny Marshall"])
    assert hop.startswith(
        frag_prompts.PERSONA_HOP + " Based on the reasoning paths, please extract the correct reasoning path. "
        "If NO correct reasoning path, please just reply NO."
    )
    assert hop.endswith("Question:\nwho directed Big\n\nCorrect reasoning path:")
    reasoning = frag_prompts.reasoning_prompt("who directed Big", ["Big -> directed_by -> Penny Marshall"])
    assert reasoning.startswith(
        frag_prompts.PERSONA + " Based on the reasoning paths, please answer the given question."
    )
    assert "<paths>\nBig -> directed_by -> Penny Marshall\n</paths>" in reasoning
    # the hop reply is still read: a model continuing "Correct reasoning path:" or echoing it
    assert count_hops("Big -> directed_by -> Penny Marshall -> directed -> Awakenings") == 2
    assert count_hops("Correct reasoning path: Big -> directed_by -> Penny Marshall") == 1
