"""Self-Ask with a pluggable retrieve step, and Self-Ask + KG-Infused RAG (kg-infused-rag.md
App. F.1 and D.3; docs/methods.md §6.1).

Loop: the model continues the Self-Ask transcript (prompt :data:`~.prompts.SELF_ASK_PROMPT`,
stop at ``"Intermediate answer:"``) until it writes a ``Follow up:`` question or ``So the final
answer is:``. For a follow-up, the retrieve step fetches 6 passages and a **separate RAG call**
answers it in one sentence (:func:`~.common.answer_sub_question`; the paper does not say whether
intermediate answers are a separate call or a continuation, docs/methods.md §8.5: a separate call keeps
the answer grounded in the passages); the answer goes back into the transcript as
``Intermediate answer:``. The final answer is the text after ``So the final answer is:``.

**Step cap** (paper: unknown): ``max_steps`` follow-ups (default 5); then the model is asked once
more with the transcript ending in ``So the final answer is:``. **A repeated follow-up** (one
already asked, or the question itself after the first turn) ends the questioning the same way:
the model has nothing new to ask, so it is asked for the final answer (a ``"repeat"`` step in
``steps``; not an invalid reply: asking again only loops, which is what small models such as
SmolLM2-135M do; the paper does not say).

**+ KG-Infused RAG** (:func:`self_ask_kg_infused_graph`): each follow-up goes through
:class:`~.kg_step.KGInfusedPlugin`: spreading activation and KG-based QE on the follow-up, 3
passages for it + 3 new for q' (two calls of the retrieve step), note, KG-augmented note, and the
follow-up's answer from the fact-enhanced note (the KG-Infused answer prompt).

**Unusable replies**: a reply is parsed by :func:`parse_self_ask` (tolerant of case, markdown bold,
a missing colon, preamble text, ``Final answer:``); a reply with neither marker, an empty
follow-up, or a refusal is asked once more, then the loop stops with a WARNING and a
``trace["llm_error"]`` entry, and the documented fallback answers the question with the RAG
answer call over every passage gathered so far (retrieving for the question first when nothing
was retrieved); ``fallback=False`` leaves ``generation`` empty instead. An unparsable reply is
never the answer. A failed intermediate answer becomes ``"Unknown."`` in the transcript.

**LLM-free**: Self-Ask needs an LLM to ask follow-ups; without one the graph runs one retrieval
for the question (the KG variant: the KG plug-in's retrieval, LLM-free) and ``generation`` is ``""``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

from ..integrations._extras import require

require("langgraph", "langgraph", "langchain_core", feature="kgrag_plugins.agents")

from langgraph.graph import END, START, StateGraph  # noqa: E402

from ..models.prompting import escape_data  # noqa: E402
from ..models.replies import InvalidReply, check_text, complete_validated, first_line  # noqa: E402
from ..types import Evidence  # noqa: E402
from .common import MAX_SUB_ANSWER_CHARS, answer_sub_question, evidence_record, llm_of, resolve_step, strip_markers  # noqa: E402
from .kg_step import KGInfusedPlugin  # noqa: E402
from .prompts import SELF_ASK_FINAL_SCHEMA, SELF_ASK_SCHEMA, self_ask_prompt  # noqa: E402
from .retrieve import RetrieveStep  # noqa: E402
from .state import AgentState, add_evidence, add_llm_errors, agent_question, final_update, state_evidence  # noqa: E402

__all__ = ["SelfAskStep", "parse_self_ask", "self_ask_graph", "self_ask_kg_infused_graph"]

logger = logging.getLogger("kgrag_plugins.agents.self_ask")

#: Follow-ups before the final answer is forced (the paper's cap is unknown).
MAX_STEPS = 5
#: Passages retrieved per follow-up (App. F.1, Table 20: 6).
K_PASSAGES = 6
#: What an intermediate answer reads when its call failed.
UNKNOWN = "Unknown."
STOP = ["Intermediate answer:", "intermediate answer:"]

# ---------------------------------------------------------------------- parsing

_MARKDOWN = re.compile(r"[*`#]+")
_NEEDED = re.compile(r"are\s+follow[\s-]*ups?\s+questions?\s+needed\s+here\s*:?[ \t]*(?:yes|no)?[ \t]*[.!]?", re.I)
_FOLLOW = re.compile(
    r"(?<![\w])follow[\s-]*up(?:\s+question)?\s*[:：]|^[ \t]*follow[\s-]*up(?:\s+question)?\b[ \t]*[:：\-–]?",
    re.I | re.M,
)
_FINAL = re.compile(
    r"(?:so\s+)?the\s+final\s+answer\s+is\s*[:：]?|(?<![\w])final\s+answer\s*[:：]|^[ \t]*final\s+answer\b[ \t]*[:：]?",
    re.I | re.M,
)
_INTERMEDIATE = re.compile(r"intermediate\s+answer\s*[:：]?", re.I)


@dataclass(frozen=True)
class SelfAskStep:
    """A parsed Self-Ask reply: a follow-up question or the final answer."""

    kind: Literal["follow_up", "final", "repeat"]
    text: str


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def _segment(s: str, start: int) -> str:
    """Text from ``start`` to the next marker or line end, stripped of quotes and spaces."""
    rest = s[start:]
    cut = len(rest)
    for rx in (_FOLLOW, _FINAL, _INTERMEDIATE):
        m = rx.search(rest)
        if m and m.start() < cut:
            cut = m.start()
    rest = rest[:cut]
    return first_line(rest).strip().strip("\"'“”").strip()


def parse_self_ask(
    reply: str, *, question: str = "", previous: list[str] | tuple[str, ...] = (), final_only: bool = False
) -> SelfAskStep:
    """Parse one Self-Ask continuation (App. D.3 format), tolerant of small-model drift: any
    case, markdown bold / headings, a missing colon after ``Follow up`` at a line start, text
    before the marker, ``Final answer:`` / ``The final answer is:`` for the final marker, and the
    ``Are follow up questions needed here: Yes.`` preamble. The earliest marker wins (a model
    that runs on past its follow-up has its invented answers ignored). A bare single question
    line is read as a follow-up. With ``final_only`` (the transcript already ends in the final
    marker) the first line is the answer when no marker is present.

    Raises :class:`~kgrag_plugins.models.replies.InvalidReply` for: no marker; an empty, over-long
    or refusing follow-up / answer. A follow-up equal to one in ``previous`` (rule 3: never
    repeat), or equal to ``question`` after the first turn, is kind ``"repeat"`` (the caller asks
    for the final answer). A first follow-up that restates the question is a plain follow-up: it
    retrieves for the question itself (one-shot RAG inside the agent), which is what small models
    (SmolLM2-135M) do on their first turn."""
    s = _MARKDOWN.sub("", reply or "")
    s = _NEEDED.sub("\n", s)
    fm, am = _FOLLOW.search(s), _FINAL.search(s)
    if final_only and am is None and fm is None:
        text = first_line(_INTERMEDIATE.sub(" ", s)).strip().strip("\"'“”").strip()
        return SelfAskStep("final", _check_final(text))
    if fm is None and am is None:
        line = first_line(s)
        if line.endswith("?") and len(line) <= MAX_SUB_ANSWER_CHARS:
            return _follow_up(line, question, previous)
        raise InvalidReply("no 'Follow up:' or 'So the final answer is:' marker")
    if am is not None and (fm is None or am.start() < fm.start() or final_only):
        return SelfAskStep("final", _check_final(_segment(s, am.end())))
    return _follow_up(_segment(s, fm.end()), question, previous)


def _check_final(text: str) -> str:
    text = text.rstrip(" .")
    if not text:
        raise InvalidReply("empty final answer")
    return check_text(text, single_line=True, max_chars=MAX_SUB_ANSWER_CHARS)


def _follow_up(text: str, question: str, previous: list[str] | tuple[str, ...]) -> SelfAskStep:
    if not text:
        raise InvalidReply("empty follow-up question")
    text = check_text(text, single_line=True, max_chars=MAX_SUB_ANSWER_CHARS)
    n = _norm(text)
    repeat = (question and previous and n == _norm(question)) or any(n == _norm(p) for p in previous)
    return SelfAskStep("repeat" if repeat else "follow_up", text)


# ---------------------------------------------------------------------- graph


def _transcript_line(follow_up: str, answer: str) -> str:
    """One Follow up / Intermediate answer pair; the model-written answer is escaped and its
    Self-Ask markers removed (it is data read from passages)."""
    ia = escape_data(strip_markers(answer)) or UNKNOWN
    return f"Follow up: {follow_up}\nIntermediate answer: {ia}\n"


def _build(
    step: RetrieveStep,
    llm: Any,
    *,
    max_steps: int,
    fallback: bool,
    plugin: KGInfusedPlugin | None,
    name: str,
    checkpointer: Any,
) -> Any:
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
        raise ValueError(f"max_steps must be a non-negative int, got {max_steps!r}")

    def search(question: str) -> tuple[Evidence, int, dict[str, Any], list[dict[str, Any]], Any]:
        """Retrieve for ``question``: the plain step or the KG plug-in."""
        if plugin is None:
            ev = step(question)
            return ev, 1, evidence_record(ev), [], None
        found = plugin.retrieve(question, step)
        rec = {**evidence_record(found.evidence), "expanded_query": found.expanded, "sources": found.sources}
        return found.evidence, found.retrievals, rec, found.errors, found

    def add(state: dict[str, Any], ev: Evidence, n: int) -> dict[str, Any]:
        upd = add_evidence(state, ev, retriever=step.name)
        upd["retrievals"] = int(state.get("retrievals") or 0) + n
        return upd

    def llm_free(state: dict[str, Any]) -> dict[str, Any]:
        q = agent_question(state)
        ev, n, rec, errors, _ = search(q)
        upd = add(state, ev, n)
        steps = [{"kind": "retrieve", "mode": "llm-free", **rec}]
        new = {**state, **upd}
        return {
            **final_update(new, "", agent=name, mode="llm-free"),
            "trace": add_llm_errors(state, errors, agent=name, mode="llm-free"),
            "steps": steps,
            "finished": True,
        }

    def ask(state: dict[str, Any]) -> dict[str, Any]:
        q = agent_question(state)
        subs = list(state.get("sub_questions") or [])
        steps = list(state.get("steps") or [])
        errors: list[dict[str, Any]] = []

        def step(force: bool) -> SelfAskStep | None:
            return complete_validated(
                llm,
                self_ask_prompt(q, state.get("scratchpad") or "", force_final=force),
                lambda r: parse_self_ask(r, question=q, previous=subs, final_only=force),
                step="self_ask",
                errors=errors,
                log=logger,
                stop=STOP,
                schema=SELF_ASK_FINAL_SCHEMA if force else SELF_ASK_SCHEMA,
                temperature=0.0,
            )

        force = len(subs) >= max_steps
        parsed = step(force)
        if parsed is not None and parsed.kind == "repeat":
            # nothing new to ask: the final answer now, as at the step cap
            steps.append({"kind": "repeat", "question": parsed.text})
            force = True
            parsed = step(force)
        if parsed is None:
            steps.append({"kind": "ask", "error": errors[-1]["error"] if errors else "no reply"})
            return {"steps": steps, "finished": True, "trace": add_llm_errors(state, errors), "follow_up": ""}
        if parsed.kind == "final":
            steps.append({"kind": "final", "answer": parsed.text, "forced": force})
            return {"steps": steps, "finished": True, "generation": parsed.text, "follow_up": ""}
        steps.append({"kind": "follow_up", "question": parsed.text})
        return {"steps": steps, "follow_up": parsed.text}

    def answer_follow_up(state: dict[str, Any]) -> dict[str, Any]:
        fu = state["follow_up"]
        ev, n, rec, errors, found = search(fu)
        upd = add(state, ev, n)
        extra: dict[str, Any] = {}
        if plugin is not None:
            ans, extra, more = plugin.answer(fu, found)
            errors = errors + more
        else:
            ans = answer_sub_question(llm, fu, ev, errors, step="self_ask.intermediate_answer")
        ia = strip_markers(ans) if ans else UNKNOWN
        steps = list(state.get("steps") or [])
        steps.append({"kind": "retrieve", "question": fu, **rec, "answer": ia, **extra})
        return {
            **upd,
            "steps": steps,
            "sub_questions": [*(state.get("sub_questions") or []), fu],
            "intermediate_answers": [*(state.get("intermediate_answers") or []), ia],
            "scratchpad": (state.get("scratchpad") or "") + _transcript_line(fu, ia),
            "trace": add_llm_errors(state, errors),
        }

    def finish(state: dict[str, Any]) -> dict[str, Any]:
        gen = state.get("generation") or ""
        upd: dict[str, Any] = {}
        entries: dict[str, Any] = {"agent": name, "mode": "llm", "follow_ups": len(state.get("sub_questions") or [])}
        errors: list[dict[str, Any]] = []
        if not gen and fallback:
            # documented fallback: a RAG answer over everything gathered (never the bad reply)
            new = dict(state)
            if not state.get("documents"):
                ev, n, rec, errs, _ = search(state["question"])
                errors += errs
                upd = add(state, ev, n)
                new.update(upd)
            ans = answer_sub_question(
                llm, state["question"], state_evidence(new), errors, step="self_ask.fallback_answer", max_passages=12
            )
            gen = ans or ""
            entries["fallback"] = "rag_answer"
            state = new
        out = final_update(state, gen, **entries)
        out["trace"] = add_llm_errors({"trace": out["trace"]}, errors)
        return {**upd, **out}

    def after_ask(state: dict[str, Any]) -> str:
        return "finish" if state.get("finished") else "answer_follow_up"

    g = StateGraph(AgentState)
    if llm is None:
        g.add_node("retrieve", llm_free)
        g.add_edge(START, "retrieve")
        g.add_edge("retrieve", END)
    else:
        g.add_node("ask", ask)
        g.add_node("answer_follow_up", answer_follow_up)
        g.add_node("finish", finish)
        g.add_edge(START, "ask")
        g.add_conditional_edges("ask", after_ask, {"finish": "finish", "answer_follow_up": "answer_follow_up"})
        g.add_edge("answer_follow_up", "ask")
        g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer, name=name)


def self_ask_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    k: int = K_PASSAGES,
    max_steps: int = MAX_STEPS,
    fallback: bool = True,
    checkpointer: Any = None,
) -> Any:
    """Self-Ask (KG-Infused RAG App. F.1/D.3) as a compiled graph over any retrieve step
    (``k`` passages per follow-up, default 6; ``max_steps`` follow-ups, default 5). See the
    module docstring for the loop, the fallback and the LLM-free path."""
    return _build(
        resolve_step(retrieve, k),
        llm_of(llm),
        max_steps=max_steps,
        fallback=fallback,
        plugin=None,
        name="self_ask",
        checkpointer=checkpointer,
    )


def self_ask_kg_infused_graph(
    retrieve: Any,
    llm: Any = None,
    *,
    kg_infused: Any,
    k_each: int = 3,
    max_steps: int = MAX_STEPS,
    fallback: bool = True,
    kg_options: dict | None = None,
    checkpointer: Any = None,
) -> Any:
    """Self-Ask + KG-Infused RAG (App. F.1): ``retrieve`` is the corpus retriever and
    ``kg_infused`` a ``KGInfusedRetriever`` or a ``KnowledgeIndex`` to build one from
    (``kg_options``); per follow-up: activation + KG-based QE, ``k_each`` passages for the
    follow-up + ``k_each`` new for q', note, KG-augmented note, answer from it."""
    llm = llm_of(llm)
    plugin = KGInfusedPlugin(kg_infused, llm, k_each=k_each, kg_options=kg_options)
    return _build(
        resolve_step(retrieve, 2 * k_each),
        llm,
        max_steps=max_steps,
        fallback=fallback,
        plugin=plugin,
        name="self_ask_kg_infused",
        checkpointer=checkpointer,
    )
