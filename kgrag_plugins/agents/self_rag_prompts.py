"""Self-RAG prompts, reflection tokens and label parsing (docs/methods.md §6.2; Asai et al., ICLR 2024;
``AkariAsai/self-rag`` ``retrieval_lm/utils.py`` and ``run_short_form.py``).

Two modes share the critique score of :mod:`.self_rag`:

* ``"selfrag-tokens"``, for the released ``selfrag/selfrag_llama2_7b``: the model's own training
  format, ``"### Instruction:\\n{q}\\n\\n### Response:\\n"`` followed, per passage, by
  ``"[Retrieval]<paragraph>{title}\\n{text}</paragraph>"``; the model writes its reflection tokens
  itself. ``<paragraph>`` is the model's format, not one of our data tags, so the passage text is
  passed through :func:`~kgrag_plugins.models.prompting.escape_data` (a ``<paragraph>`` or
  ``</paragraph>`` written inside a passage becomes ``‹paragraph>`` and cannot close the slot).
* ``"prompted"``, for any instruct model: the four critiques are separate prompts (ours, after the
  critic instructions of the Self-RAG paper, App. A): retrieve? (``Yes`` / ``No``), relevant?
  (``Relevant`` / ``Irrelevant``), supported? (``Fully`` / ``Partially`` / ``No``), useful? (a digit
  ``1``-``5``). Passages and generated answers sit inside ``<passage>`` / ``<answer>`` data blocks
  with :data:`~kgrag_plugins.models.prompting.DATA_NOTICE`. Each label maps onto the matching
  reflection token, so both modes are scored by one formula.

Label replies are parsed by :func:`parse_label`: the reply must *open* with one of the labels
(after optional whitespace, quotes, brackets, ``*`` and a ``Judgement:`` / ``Answer:`` /
``Rating:`` / ``Label:`` prefix); text after the label is ignored. A reply that opens otherwise
("Sure! ...", "Not relevant", "The passage is relevant") is invalid (asked once more, then the
critique contributes 0). With token logprobs, :func:`label_probs` reads the label's probability
at the token where the label starts: every alternative token there that is a prefix of exactly
one label word adds its probability to that label, and the masses are renormalised over the
labels (Self-RAG renormalises over each reflection-token group the same way).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ..models.logprobs import Completion
from ..models.prompting import DATA_NOTICE, DataPrompt, escape_data
from ..models.replies import InvalidReply
from ..models.structured import OutputSchema, choice_schema

__all__ = [
    "CONTROL_TOKENS",
    "LABEL_SCHEMAS",
    "RELEVANCE_LABELS",
    "RELEVANCE_TOKENS",
    "RETRIEVAL_TOKENS",
    "RETRIEVE_LABELS",
    "SUPPORT_LABELS",
    "SUPPORT_TOKENS",
    "UTILITY_LABELS",
    "UTILITY_TOKENS",
    "label_probs",
    "parse_label",
    "postprocess_answer",
    "selfrag_paragraph",
    "selfrag_prompt",
]

# --------------------------------------------------------------------------- reflection tokens

RETRIEVAL_TOKENS = ("[Retrieval]", "[No Retrieval]")
RELEVANCE_TOKENS = ("[Relevant]", "[Irrelevant]")
SUPPORT_TOKENS = ("[Fully supported]", "[Partially supported]", "[No support / Contradictory]")
UTILITY_TOKENS = tuple(f"[Utility:{i}]" for i in range(1, 6))
#: Removed from a generation before it is an answer (``utils.control_tokens`` + end markers).
CONTROL_TOKENS = (
    *SUPPORT_TOKENS,
    "[No Retrieval]",
    "[Retrieval]",
    "[Continue to Use Evidence]",
    "[Irrelevant]",
    "[Relevant]",
    "<paragraph>",
    "</paragraph>",
    *UTILITY_TOKENS,
    "</s>",
    "<|endoftext|>",
)

SELFRAG_PROMPT = "### Instruction:\n{instruction}\n\n### Response:\n"
SELFRAG_PARAGRAPH = "[Retrieval]<paragraph>{title}\n{text}</paragraph>"


def selfrag_prompt(question: str) -> str:
    """``PROMPT_DICT["prompt_no_input"]`` of the Self-RAG repository with the question."""
    return SELFRAG_PROMPT.format(instruction=question)


def selfrag_paragraph(title: str, text: str) -> str:
    """The evidence suffix of ``run_short_form.py`` with ``title`` / ``text`` escaped (a
    ``</paragraph>`` inside a passage cannot close the model's paragraph slot)."""
    return SELFRAG_PARAGRAPH.format(title=escape_data(title), text=escape_data(text))


def postprocess_answer(text: str) -> str:
    """``postprocess_answer_option_conditioned`` + ``main`` of ``run_short_form.py``: drop the
    reflection and end tokens and newlines, then one leading ``#`` or ``:``; stripped."""
    for tok in CONTROL_TOKENS:
        text = text.replace(tok, "")
    text = text.replace("\n", "")
    if text[:1] in ("#", ":"):
        text = text[1:]
    return text.strip()


# --------------------------------------------------------------------------- prompted critiques

#: label word (lower case) -> reflection token, per critique.
RETRIEVE_LABELS = {"yes": "[Retrieval]", "no": "[No Retrieval]"}
RELEVANCE_LABELS = {"relevant": "[Relevant]", "irrelevant": "[Irrelevant]"}
SUPPORT_LABELS = {
    "fully": "[Fully supported]",
    "partially": "[Partially supported]",
    "no": "[No support / Contradictory]",
}
UTILITY_LABELS = {str(i): f"[Utility:{i}]" for i in range(1, 6)}

#: Tokens of a prompted critique (one label word) and of a prompted short answer.
LABEL_MAX_TOKENS = 8
ANSWER_MAX_TOKENS = 48


def _label_schema(name: str, labels: Mapping[str, str]) -> OutputSchema:
    """The reply is exactly one label word, capitalised as the prompt writes it."""
    return choice_schema(name, [w.capitalize() for w in labels], max_tokens=LABEL_MAX_TOKENS)


#: The schema of each prompted critique, by step name (App. A critiques as label choices).
LABEL_SCHEMAS: dict[str, OutputSchema] = {
    "retrieve?": _label_schema("selfrag_retrieve", RETRIEVE_LABELS),
    "relevant?": _label_schema("selfrag_relevant", RELEVANCE_LABELS),
    "supported?": _label_schema("selfrag_supported", SUPPORT_LABELS),
    "useful?": _label_schema("selfrag_useful", UTILITY_LABELS),
}

RETRIEVE_DECISION = DataPrompt(
    "Decide whether answering the question below would benefit from looking up external documents "
    "(for example Wikipedia passages). Say Yes if retrieved documents would help to give a better, "
    "factually grounded answer; say No if the question can be answered well without them.\n\n"
    "Question: {question}\n\n"
    "Reply with exactly one word: Yes or No.\n"
    "Judgement:"
)

RELEVANCE = DataPrompt(
    "You are given a question and a passage retrieved for it. Decide whether the passage is "
    "relevant to the question: it is Relevant if it contains information that helps to answer the "
    "question, Irrelevant otherwise.\n" + DATA_NOTICE + "\n\n"
    "Question: {question}\n\n"
    "<passage>\n{title}\n{text}\n</passage>\n\n"
    "Reply with exactly one word: Relevant or Irrelevant.\n"
    "Judgement:"
)

GENERATE = DataPrompt(
    "Answer the question using the passage below. Give only the short answer (a few words, no "
    "explanation).\n" + DATA_NOTICE + "\n\n"
    "<passage>\n{title}\n{text}\n</passage>\n\n"
    "Question: {question}\n"
    "Answer:"
)

GENERATE_NO_RETRIEVAL = DataPrompt(
    "Answer the question. Give only the short answer (a few words, no explanation).\n\nQuestion: {question}\nAnswer:"
)

SUPPORT = DataPrompt(
    "You are given a question, a passage and an answer written from the passage. Decide how much "
    "of the answer the passage supports:\n"
    "Fully - everything the answer states is stated in, or directly follows from, the passage;\n"
    "Partially - only part of the answer is supported by the passage;\n"
    "No - the passage does not support the answer, or contradicts it.\n" + DATA_NOTICE + "\n\n"
    "Question: {question}\n\n"
    "<passage>\n{title}\n{text}\n</passage>\n\n"
    "<answer>\n{answer}\n</answer>\n\n"
    "Reply with exactly one word: Fully, Partially or No.\n"
    "Judgement:"
)

UTILITY = DataPrompt(
    "Rate how useful the answer is as a response to the question, from 1 (not useful: off-topic, "
    "empty or evasive) to 5 (a complete, direct answer). Rate the answer as a response; do not "
    "check whether it is true.\n" + DATA_NOTICE + "\n\n"
    "Question: {question}\n\n"
    "<answer>\n{answer}\n</answer>\n\n"
    "Reply with a single digit from 1 to 5.\n"
    "Rating:"
)

_LEAD = re.compile(r"^[\s\"'`*\[(]*(?:(?:judge?ment|answer|rating|label|utility)\s*:\s*)?[\s\"'`*\[(]*", re.I)
_WORD = re.compile(r"[A-Za-z]+|[0-9]")
_STRIP = " \t\r\n\"'`*[]():.,;!-"


def parse_label(reply: str, labels: Mapping[str, str]) -> tuple[str, int]:
    """``(reflection token, offset of the label in reply)`` when ``reply`` opens with one of the
    ``labels`` words (case-insensitive; see the module docstring); else :class:`InvalidReply`."""
    text = reply or ""
    lead = _LEAD.match(text)
    start = lead.end() if lead else 0
    m = _WORD.match(text, start)
    if m is None or m.group(0).lower() not in labels:
        shown = " / ".join(labels)
        raise InvalidReply(f"reply does not open with one of the labels {shown}: {text.strip()[:120]!r}")
    return labels[m.group(0).lower()], m.start()


def _token_at(completion: Completion, offset: int) -> int | None:
    """Index of the token covering character ``offset`` of the text (when the tokens spell the
    text); else the first token with a letter or digit."""
    toks = completion.tokens
    if "".join(t.token for t in toks) == completion.text:
        pos = 0
        for i, t in enumerate(toks):
            if pos <= offset < pos + len(t.token) and t.token.strip(_STRIP):
                return i
            pos += len(t.token)
    return next((i for i, t in enumerate(toks) if t.token.strip(_STRIP)), None)


def label_probs(completion: Completion, labels: Mapping[str, str], offset: int = 0) -> dict[str, float] | None:
    """Renormalised probabilities of the reflection tokens of ``labels`` read from the
    alternatives at the token where the label starts (``offset`` from :func:`parse_label`);
    ``None`` when the completion has no logprobs or no alternative there names a label."""
    i = _token_at(completion, offset) if completion.tokens else None
    if i is None:
        return None
    mass = dict.fromkeys(labels.values(), 0.0)
    words = list(labels)
    for tok, lp in completion.tokens[i].top.items():
        t = tok.strip(_STRIP).lower()
        if not t or lp == -math.inf:
            continue
        hits = [w for w in words if w.startswith(t)]
        if len(hits) == 1:
            mass[labels[hits[0]]] += math.exp(lp)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {k: v / total for k, v in mass.items()}
