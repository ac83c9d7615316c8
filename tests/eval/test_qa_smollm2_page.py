"""benchmarks/qa_smollm2.py's page logic (issue 30): the KG-retriever runs join their dataset's
comparison, and their fallbacks count like any other run's."""

from __future__ import annotations

import pytest
from conftest import load_script

page = load_script("benchmarks/qa_smollm2.py")


def _rep(rows: dict[str, tuple[float, bool]]) -> dict:
    results = {s: {"acc": acc, "measured": ok, "fallback_share": 0.0 if ok else 0.2, "fallbacks": 0}
               for s, (acc, ok) in rows.items()}  # fmt: skip
    return {"results": results}


def test_kg_retriever_rows_join_the_multi_hop_comparison_and_the_fallback_check():
    act = "vanilla-rag:activation"
    reports = {
        "popqa": _rep({"no-retrieval": (0.02, True), "vanilla-rag": (0.18, True), act: (0.30, True)}),
        "musique": _rep({"no-retrieval": (0.05, True), "vanilla-rag": (0.10, True), act: (0.06, True)}),
    }
    kg = {
        "popqa": _rep({"vanilla-rag:frag": (0.01, True), "vanilla-rag:translator": (0.25, True)}),
        "musique": _rep({"vanilla-rag:frag": (0.12, True), "vanilla-rag:translator": (0.04, False)}),
    }
    lines = "\n".join(page.summary_lines(reports, None, kg=kg))
    # the best KG plug-in on musique is now FRAG's row (0.12 >= 0.10), not activation's (0.06)
    assert "musique: best KG plug-in `vanilla-rag:frag` Acc 0.12 vs `vanilla-rag` 0.10" in lines
    assert "at least `vanilla-rag` on 1 of 1 sets" in lines
    # PopQA's "beats no-retrieval" counts the KG rows too, and names the one that does not
    assert "beaten by 3 of 4 retrieval systems (not: vanilla-rag:frag)" in lines
    # a KG run with fallbacks over 5 % is flagged as not measured, under its own run's name
    assert "musique (KG retrievers)/vanilla-rag:translator (20 %)" in lines
    # without kg runs, the summary is what it was
    plain = "\n".join(page.summary_lines(reports, None))
    assert "vanilla-rag:frag" not in plain and "musique: best KG plug-in `vanilla-rag:activation`" in plain


def test_the_readme_qa_table_is_the_committed_reports():
    """Every Acc in the README's SmolLM2 table is the committed report's figure (main or KG run)."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| system | PopQA | HotpotQA | 2Wiki | MuSiQue |") :].split("\n\n")[0]
    sets = ["popqa", "hotpotqa", "2wikimultihopqa", "musique"]
    acc = {}
    for ds in sets:
        for suffix in ("", "-kg"):
            path = root / "docs" / "benchmarks" / "qa" / f"qa-smollm2-{ds}{suffix}.json"
            if path.is_file():
                for system, r in json.loads(path.read_text())["results"].items():
                    acc[(system, ds)] = f"{r['acc']:.2f}"
    checked = 0
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        system = re.match(r"`([^`]+)`", cells[0]).group(1)
        for ds, cell in zip(sets, cells[1:]):
            if cell:
                assert cell.strip("*") == acc[(system, ds)], (system, ds, cell)
                checked += 1
    assert checked >= 20


def test_valid_rate_line_names_the_constrained_steps_below_98_percent():
    """Only fully constrained steps count; the lowest row of each step is the one named."""

    def rep(ds, stats):
        return {"dataset": ds, "results": {s: {"reply_stats": st} for s, st in stats.items()}}

    note_ok = {"write_note": {"replies": 100, "valid": 99, "constrained": 100}}
    note_bad = {"write_note": {"replies": 104, "valid": 96, "constrained": 104}}
    free = {"answer": {"replies": 100, "valid": 50, "constrained": 0}}  # unconstrained: not counted
    sel = {"triple_selection": {"replies": 48, "valid": 48, "constrained": 48}}
    reports = [rep("popqa", {"a": note_ok, "b": {**free, **sel}}), rep("musique", {"c": note_bad}), None]
    (line,) = page.valid_rate_lines(reports)
    assert line.startswith("- Valid replies on constrained steps: 1 of 2 steps at least 98% in every row")
    assert "`write_note` 92% (musique `c`)" in line and "answer" not in line
    (ok,) = page.valid_rate_lines([rep("popqa", {"a": note_ok, "b": sel})])
    assert ok.endswith("2 of 2 steps at least 98% in every row.")
    assert page.valid_rate_lines([rep("popqa", {"b": free})]) == []


def test_the_reader_budget_run_gets_its_own_goal_line_and_table():
    act = "vanilla-rag:activation"
    reports = {"popqa": _rep({"no-retrieval": (0.03, True), "vanilla-rag": (0.40, True), act: (0.36, True)})}
    budget = _rep({"vanilla-rag": (0.41, True), act: (0.50, True), "vanilla-rag:frag": (0.30, False)})
    for name, r in [*reports["popqa"]["results"].items(), *budget["results"].items()]:
        r["tokens_per_q"] = {"prompt": 2000.0 if name == act else 1000.0}
    lines = "\n".join(page.summary_lines(reports, None, budget=budget))
    assert "PopQA: `vanilla-rag:activation` Acc 0.36 vs `vanilla-rag` (dense) 0.40: -4 points (misses" in lines
    assert "cut to 1,000 characters: `vanilla-rag:activation` Acc 0.50 vs `vanilla-rag` 0.41: +9 points (meets" in lines
    assert "popqa (passages cut to 1000)/vanilla-rag:frag (20 %)" in lines  # its fallbacks are checked too
    budget["results"]["vanilla-rag"]["acc"], budget["results"][act]["acc"] = 0.43, 0.48  # exactly +5 (floats)
    assert "+5 points (meets" in "\n".join(page.summary_lines(reports, None, budget=budget))
    budget["results"]["vanilla-rag"]["acc"], budget["results"][act]["acc"] = 0.41, 0.50
    section = "\n".join(page.budget_section(budget, [reports["popqa"], None]))
    # one comparison row per system run at both budgets (FRAG's main row is not in this main run)
    assert "| vanilla-rag:activation | 0.36 | 0.50 | - | 2000 | 2000 |" in section
    assert "| vanilla-rag | 0.40 | 0.41 | - | 1000 | 1000 |" in section and "| vanilla-rag:frag |" not in section
    # the first budget run is read back beside it: its goal line is said apart, its rows stop counting
    first = _rep({"vanilla-rag": (0.43, True), act: (0.48, True), "vanilla-rag:hybrid": (0.38, False)})
    lines = "\n".join(page.summary_lines(reports, None, budget=budget, budget_first=first))
    assert "characters (first run, paragraph note schema): `vanilla-rag:activation` Acc 0.48 vs" in lines
    assert "first run)/vanilla-rag:hybrid" in lines and "first run)/vanilla-rag " not in lines


def test_the_readme_budget_table_is_the_committed_report():
    """The README's passage-budget table is the committed ``qa-smollm2-popqa-chars1000-w10`` report."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| PopQA, 1,000 characters a passage |") :].split("\n\n")[0]
    rb = page.READER_BUDGET
    report = json.loads((root / "docs/benchmarks/qa" / f"qa-smollm2-{rb['dataset']}-{rb['journal']}.json").read_text())
    rows = table.splitlines()[2:]
    assert len(rows) == len(rb["systems"]) == len(report["results"])
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        r = report["results"][re.match(r"`([^`]+)`", cells[0]).group(1)]
        assert cells[1].strip("*") == f"{r['acc']:.2f}" and cells[2] == f"{r['tokens_per_q']['prompt']:.0f}"
        # the 4,000-character column: the row's latest full-length run (note rerun, else the main run)
        name = re.match(r"`([^`]+)`", cells[0]).group(1)
        full = next(
            rep["results"][name]
            for rep in (
                json.loads((root / "docs/benchmarks/qa" / f"qa-smollm2-popqa{j}.json").read_text())
                for j in (f"-{page.NOTE_RERUN['journal']}", "")
            )  # fmt: skip
            if name in rep["results"]
        )
        assert cells[3] == f"{full['acc']:.2f}"


def test_note_rerun_rows_supersede_theirs_in_the_valid_rate_check():
    """A ``--note-rerun`` row replaces the same dataset's row in the valid-reply check and is
    reported beside its earlier figures; rows it does not rerun still count."""

    def row(acc, valid, replies):
        stats = {"write_note": {"replies": replies, "valid": valid, "constrained": replies}}
        return {"acc": acc, "measured": True, "fallback_share": 0.0, "fallbacks": 0, "reply_stats": stats}

    reports = {
        "musique": {
            "dataset": "musique",
            "results": {"vanilla-rag": row(0.07, 96, 105), "vanilla-rag:activation": row(0.06, 99, 100)},
        }
    }
    note = {"musique": {"dataset": "musique", "results": {"vanilla-rag": row(0.09, 100, 100)}}}
    lines = "\n".join(page.summary_lines(reports, None, note=note))
    assert (
        "musique with the note schema naming the question: `vanilla-rag` `write_note` valid 100/100 (100%), "
        "Acc 0.09, fallbacks 0 (before: 96/105 (91%), Acc 0.07)." in lines
    )
    assert "1 of 1 steps at least 98% in every row." in lines  # the superseded 91 % row no longer counts
    before = "\n".join(page.summary_lines(reports, None))
    assert "below: `write_note` 91% (musique `vanilla-rag`)" in before
    note["musique"]["results"]["vanilla-rag"] = row(0.09, 97, 100)
    assert "below: `write_note` 97% (musique `vanilla-rag`)" in "\n".join(page.summary_lines(reports, None, note=note))


def test_a_run_under_earlier_prompts_is_read_from_its_report(tmp_path):
    """A journal whose prompt fingerprint is not today's cannot resume: its report is read back,
    marked, and the page says so; nothing is asked of the LLM."""
    import argparse
    import json

    journal = tmp_path / "qa-smollm2-popqa-chars1000.journal.jsonl"
    journal.write_text(json.dumps({"type": "header", "version": 1, "config": {"prompts": "0" * 12}}) + "\n")
    report = {"dataset": "popqa", "journal": str(journal), "results": {"vanilla-rag": {"acc": 0.43}}}
    (tmp_path / "qa-smollm2-popqa-chars1000.json").write_text(json.dumps(report))
    args = argparse.Namespace(out_dir=tmp_path)
    got = page._run("qa-smollm2-popqa-chars1000", "popqa", ["vanilla-rag"], None, "none", args)
    assert got["earlier_prompts"] == "0" * 12 and got["results"] == report["results"]
    assert page._journal_prompts(tmp_path / "absent.jsonl") is None


def test_the_page_has_the_note_rerun_section(tmp_path):
    """write_page with a note rerun: its section and table are on the page (the main runs' own
    notes text does not shadow it)."""
    from kgrag_plugins.eval.qa import qa_markdown_table  # noqa: F401  (the page's table writer)

    def report(ds, systems):
        row = {
            "em": 0.0, "f1": 0.1, "acc": 0.1, "acc_raw": 0.1, "f1_last_alias": 0.0, "llm_calls_per_q": 2.0,
            "tokens_per_q": {"prompt": 10, "completion": 2}, "latency_s": {"p50": 1.0, "p95": 2.0},
            "questions_per_minute": 5.0, "fallbacks": 0, "empty_answers": 0, "measured": True, "fallback_share": 0.0,
            "reply_stats": {"write_note": {"replies": 10, "valid": 10, "constrained": 10}},
        }  # fmt: skip
        return {"dataset": ds, "n_questions": 10, "corpus_size": 5, "llm": "x", "journal": f"/j/{ds}.jsonl",
                "results": {s: dict(row) for s in systems}}  # fmt: skip

    out = tmp_path / "page.md"
    page.write_page(
        out, {"musique": report("musique", ["vanilla-rag"])}, None, "cmd",
        note={"musique": report("musique", ["vanilla-rag"])},
    )  # fmt: skip
    text = out.read_text()
    assert "## musique with the note schema naming the question" in text
    assert "`vanilla-rag` `write_note` valid 10/10 (100%)" in text


def test_note_systems_picks_rows_per_dataset_and_rejects_others():
    got = page.note_systems("2wikimultihopqa=vanilla-rag:frag+vanilla-rag:translator; hotpotqa=vanilla-rag")
    assert got == {"2wikimultihopqa": ["vanilla-rag:frag", "vanilla-rag:translator"], "hotpotqa": ["vanilla-rag"]}
    assert page.note_systems(None) == {} and page.note_systems("") == {}
    for bad in ("2wikimultihopqa", "2wikimultihopqa=", "=vanilla-rag", "popqa=full"):
        with pytest.raises(ValueError, match="--note-systems"):
            page.note_systems(bad)


def test_first_note_runs_are_superseded_by_the_current_and_paired_per_question(tmp_path):
    """The first note-schema run (``note_first``) supersedes the main run's row and today's note run
    supersedes it, in the valid-reply check and the PopQA comparison; each is paired per question
    against the run before the note schema (two-sided sign test on the questions that changed)."""
    import json

    def journal(name, accs):
        lines = [{"type": "header", "version": 1, "config": {}}]
        lines += [{"type": "question", "row": "vanilla-rag", "i": i, "scores": {"acc": a}} for i, a in enumerate(accs)]
        (tmp_path / name).write_text("".join(json.dumps(x) + "\n" for x in lines))
        return str(tmp_path / name)

    def run(name, acc, valid, accs):
        stats = {"write_note": {"replies": 100, "valid": valid, "constrained": 100}}
        row = {"acc": acc, "measured": True, "fallback_share": 0.0, "fallbacks": 0, "reply_stats": stats}
        return {"dataset": "popqa", "journal": journal(name, accs), "results": {"vanilla-rag": row}}

    before = run("main.jsonl", 0.40, 100, [1] * 8 + [0] * 2)
    before["results"]["vanilla-rag:activation"] = {**before["results"]["vanilla-rag"], "acc": 0.50}
    first = run("first.jsonl", 0.35, 95, [0] * 8 + [1] * 2)  # 2 better, 8 worse
    now = run("now.jsonl", 0.41, 100, [1] * 10)  # 2 better, 0 worse
    lines = "\n".join(
        page.summary_lines(
            {"popqa": before}, None, note={"popqa": now}, note_first={"popqa": first}, journal_dir=tmp_path
        )  # fmt: skip
    )
    assert "first note schema (the question named within 5 words): `vanilla-rag` `write_note` valid 95/100" in lines
    assert "paired: 2 better, 8 worse (sign p 0.109)" in lines  # 2 * P(X <= 2), X ~ Bin(10, 1/2)
    assert "paired: 2 better, 0 worse (sign p 0.500)" in lines
    assert "1 of 1 steps at least 98% in every row." in lines  # first's 95 % is superseded by now's row
    assert "`vanilla-rag:activation` Acc 0.50 vs `vanilla-rag` (dense) 0.41" in lines  # today's row
    without = "\n".join(page.summary_lines({"popqa": before}, None, note_first={"popqa": first}))
    assert "below: `write_note` 95% (popqa `vanilla-rag`)" in without and "paired" not in without


def test_reader_ranking_run_gets_its_goal_line_pairs_and_section(tmp_path, monkeypatch):
    """The READER_RANKING run is compared within itself: the reader-ranked activation row against
    dense (its goal line, paired per question), the default ranking beside it; its fallbacks and
    constrained replies count like any run's, and the page gets its section and table."""
    import json

    rr = page.READER_RANKING
    accs = {"vanilla-rag": [1, 0, 0, 0, 1, 0], rr["default"]: [1, 0, 0, 1, 0, 0], rr["ranked"]: [1, 1, 1, 1, 0, 0]}
    lines = [{"type": "header", "version": 1, "config": {}}]
    lines += [
        {"type": "question", "row": r, "i": i, "scores": {"acc": a}} for r, xs in accs.items() for i, a in enumerate(xs)
    ]
    (tmp_path / "reader.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    reader = _rep({"vanilla-rag": (0.33, True), rr["default"]: (0.33, True), rr["ranked"]: (0.40, False)})
    reader.update(dataset="popqa", journal=str(tmp_path / "reader.jsonl"))
    reports = {"popqa": _rep({"no-retrieval": (0.03, True), "vanilla-rag": (0.38, True)})}
    got = "\n".join(page.summary_lines(reports, None, reader=reader, journal_dir=tmp_path))
    # ranked 0.40 vs dense 0.33 in the same run: +7, paired 3 better (questions 1-3), 1 worse (question 4)
    assert "`vanilla-rag:activation` Acc 0.40 vs `vanilla-rag` (dense) 0.33: +7 points (meets the +5-point goal)" in got
    assert "paired against dense: 3 better, 1 worse (sign p 0.625)" in got
    # the shipped ranking against dense in the same run: +0, paired 1 better (question 3), 1 worse (question 4)
    assert "activation as shipped: `vanilla-rag:activation` Acc 0.33 vs `vanilla-rag` (dense) 0.33: +0 points" in got
    assert "+0 points (misses the +5-point goal); paired against dense: 1 better, 1 worse (sign p 1.000)." in got
    assert f"popqa (reader ranking)/{rr['ranked']} (20 %)" in got  # its fallbacks are checked
    # an earlier run of the same two configurations: how far each moved, question by question
    old = [{"type": "header", "version": 1, "config": {}}]
    then = [1, 1, 0, 0, 1, 0]
    old += [{"type": "question", "row": "vanilla-rag", "i": i, "scores": {"acc": a}} for i, a in enumerate(then)]
    old += [{"type": "question", "row": "vanilla-rag:activation", "i": i, "scores": {"acc": 0}} for i in range(6)]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(x) + "\n" for x in old))
    before = _rep({"vanilla-rag": (0.50, True), "vanilla-rag:activation": (0.0, True)})
    before["journal"] = "/elsewhere/old.jsonl"  # found in journal_dir by name
    moved = "\n".join(page.summary_lines(reports, None, reader=reader, journal_dir=tmp_path, note={"popqa": before}))
    assert "the same configurations in two runs (`old.jsonl`, then this one): `vanilla-rag` 0.50 -> 0.33 " in moved
    assert "(0 better, 1 worse (sign p 1.000)); `vanilla-rag:activation` 0.00 -> 0.33 (2 better, 0 worse" in moved
    assert "two runs" not in got  # without an earlier run, no such line
    reader["results"][rr["ranked"]]["acc"] = 0.37
    assert "+4 points (misses the +5-point goal)" in "\n".join(page.summary_lines(reports, None, reader=reader))
    pm = load_script("benchmarks/qa_smollm2_page.py")  # the page module itself, its table stubbed
    assert pm.reader_lines({"results": {"vanilla-rag": {"acc": 0.3}}}) == []  # no ranked row: no claim
    monkeypatch.setattr(pm, "qa_markdown_table", lambda rep: f"TABLE {sorted(rep['results'])}")
    pm.write_page(tmp_path / "page.md", reports, None, "cmd", reader=reader, journal_dir=tmp_path)
    text = (tmp_path / "page.md").read_text()
    section = text[text.index("## popqa rerun: dense, activation as shipped") :]
    assert "bridge_promote=2.0, chain_check=True" in section and f"TABLE {sorted(reader['results'])}" in section
    assert "+4 points (misses the +5-point goal)" in text.split("## popqa rerun")[0]  # in the summary


def test_the_readme_reader_ranking_table_is_the_committed_report():
    """The README's PopQA rerun table is the committed ``qa-smollm2-popqa-reader`` report, its
    paired column the report's journal, question by question."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| PopQA, one run | Acc |") :].split("\n\n")[0]
    rr = page.READER_RANKING
    qa = root / "docs" / "benchmarks" / "qa"
    report = json.loads((qa / f"qa-smollm2-{rr['dataset']}-{rr['journal']}.json").read_text())
    rows = table.splitlines()[2:]
    assert len(rows) == len(report["results"]) == 3
    dense = page.row_acc(report, "vanilla-rag", qa)
    for line, name in zip(rows, ["vanilla-rag", rr["default"], rr["ranked"]]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        r = report["results"][name]
        assert cells[1].strip("*") == f"{r['acc']:.2f}" and cells[2] == f"{r['tokens_per_q']['prompt']:.0f}"
        if name != "vanilla-rag":
            got = page.pairs(dense, page.row_acc(report, name, qa))
            assert got.startswith(cells[3].replace(" / ", " better, ") + " worse"), (cells[3], got)
    # the third run's sentence is its committed report
    third = json.loads((qa / "qa-smollm2-popqa-rerun.json").read_text())["results"]
    said = " ".join(readme[readme.index("A third run") :].split("\n\n")[0].split())
    dense, act = third["vanilla-rag"]["acc"], third["vanilla-rag:activation"]["acc"]
    assert f"gave dense {dense:.2f} and activation {act:.2f}" in said
    assert f"+{100 * (act - dense):.0f} points" in said


def test_the_readme_local_reader_sentence_is_the_committed_report():
    """The README's deterministic PopQA run (``local:smollm2``) quotes its committed report, and its
    paired counts are the report's journal, question by question."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    qa = root / "docs" / "benchmarks" / "qa"
    report = json.loads((qa / "qa-smollm2-local-popqa.json").read_text())
    res = report["results"]
    assert report["llm"].startswith("local:smollm2") and report["n_questions"] == 100
    said = readme[readme.index("**Without vLLM's run-to-run drift**") :][:900]
    acc = {k: f"{res[k]['acc']:.2f}" for k in ("no-retrieval", "vanilla-rag", "vanilla-rag:activation")}
    gave = f"gave no-retrieval {acc['no-retrieval']}, dense {acc['vanilla-rag']}"
    assert f"{gave} and activation {acc['vanilla-rag:activation']}" in said
    got = page.pairs(page.row_acc(report, "vanilla-rag", qa), page.row_acc(report, "vanilla-rag:activation", qa))
    better, worse = got.split(" better, ")[0], got.split(" better, ")[1].split(" worse")[0]
    assert f"{better} better and {worse} worse" in said and got.split("(")[1].rstrip(")") in said
    assert all(res[k]["fallbacks"] == 0 and res[k]["measured"] for k in acc)


def _full_row(acc: float, fallbacks: int = 0, stats: dict | None = None) -> dict:
    share = fallbacks / 100
    return {
        "em": 0.0, "f1": 0.1, "acc": acc, "acc_raw": acc, "f1_last_alias": 0.0, "llm_calls_per_q": 3.0,
        "tokens_per_q": {"prompt": 10, "completion": 2}, "latency_s": {"p50": 1.0, "p95": 2.0},
        "questions_per_minute": 5.0, "fallbacks": fallbacks, "empty_answers": 0, "measured": share <= 0.05,
        "fallback_share": share, "reply_stats": stats or {},
    }  # fmt: skip


def test_the_agents_runs_pair_each_agent_with_its_sa_rag_twin_and_count_like_any_run(tmp_path):
    """An AGENTS_MULTIHOP run: each dense agent against its SA-RAG twin, paired per question from the
    run's journal; the best KG plug-in against the same run's vanilla-rag; its fallbacks and
    constrained replies enter the page-wide checks; write_page gives it a section and table."""
    import json

    accs = {"cot-rag": [1, 0, 0, 0], "sa-rag+cot": [1, 1, 1, 0], "decomposition": [1, 1, 0, 0],
            "sa-rag+decomposition": [0, 1, 0, 0], "vanilla-rag": [0, 0, 1, 0]}  # fmt: skip
    lines = [{"type": "header", "version": 1, "config": {}}]
    lines += [
        {"type": "question", "row": r, "i": i, "scores": {"acc": a}} for r, v in accs.items() for i, a in enumerate(v)
    ]
    (tmp_path / "agents.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    low = {"self_ask": {"replies": 100, "valid": 90, "constrained": 100}}
    results = {r: _full_row(sum(v) / 4) for r, v in accs.items()}
    results["self-ask"] = _full_row(0.25, stats=low)
    results["front-door"] = _full_row(0.5, fallbacks=9)
    rep = {"dataset": "musique", "n_questions": 4, "corpus_size": 9, "llm": "x", "embedder": "e",
           "journal": "/elsewhere/agents.jsonl", "results": results}  # fmt: skip
    got = "\n".join(page.summary_lines({}, None, agents={"musique": rep}, journal_dir=tmp_path))
    assert "- musique, the agents (4 questions, one run): `sa-rag+cot` 0.75 vs `cot-rag` 0.25 (2 better, 0 worse" in got
    assert "`sa-rag+decomposition` 0.25 vs `decomposition` 0.50 (0 better, 1 worse (sign p 1.000))" in got
    assert "best KG plug-in `sa-rag+cot` 0.75 vs `vanilla-rag` 0.25." in got
    assert "musique (agents)/front-door (9 %)" in got  # over 5 %: not measured, named with its run
    assert "below: `self_ask` 90% (musique `self-ask`)" in got
    assert "the agents" not in "\n".join(page.summary_lines({}, None))
    out = tmp_path / "page.md"
    page.write_page(out, {}, None, "cmd", agents={"musique": rep})
    text = out.read_text()
    assert "## musique: the agents" in text and "Index embedder: `e`" in text
    assert "| sa-rag+decomposition |" in text


def test_page_only_reads_every_report_and_asks_no_llm(tmp_path, monkeypatch):
    """--page-only rewrites the page from the reports in --out-dir: no LLM is resolved, the reports
    are taken as written (not marked as earlier prompts), the command on the page is the measuring
    one, and a missing report stops with one line naming it."""
    import json

    def boom(*a, **k):
        raise AssertionError("--page-only must not resolve an LLM")

    monkeypatch.setattr(page, "resolve_llm", boom)
    rep = {"dataset": "popqa", "n_questions": 4, "corpus_size": 9, "llm": "x", "journal": "/j/popqa.jsonl",
           "results": {"vanilla-rag": _full_row(0.5)}}  # fmt: skip
    (tmp_path / "qa-smollm2-popqa.json").write_text(json.dumps(rep))
    out = tmp_path / "page.md"
    argv = ["--datasets", "popqa", "--no-throughput", "--out-dir", str(tmp_path), "--page", str(out)]
    assert page.main([*argv, "--page-only"]) == 0
    text = out.read_text()
    assert "| vanilla-rag | 0.000 | 0.100 | 0.500 |" in text and "--page-only" not in text
    assert "earlier prompts" not in text
    with pytest.raises(SystemExit, match="qa-smollm2-hotpotqa.json is missing"):
        page.main(
            ["--datasets", "hotpotqa", "--no-throughput", "--out-dir", str(tmp_path), "--page", str(out), "--page-only"]
        )
