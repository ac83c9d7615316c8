"""``kgrag bench --qa`` run control: reruns after LLM outages, the not-measured flag, per-step
reply statistics, the journal and ``--resume``, concurrency and ``vanilla-rag:RETRIEVER``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kgrag_plugins.cli import main
from kgrag_plugins.eval import qa_llm, qa_run
from kgrag_plugins.eval.qa import QARunAborted, qa_markdown_table, run_qa_bench, vanilla_rag_system
from kgrag_plugins.eval.qa_meter import MeteredLLM, QuestionMeter, metering
from kgrag_plugins.eval.qa_run import summarize_row
from kgrag_plugins.eval.scripted import ScriptedQALLM
from kgrag_plugins.methods.baselines import BM25Retriever
from kgrag_plugins.methods.kg_infused import KGInfusedRetriever
from kgrag_plugins.models.breaker import CircuitBreaker
from kgrag_plugins.models.llm import LLMTimeoutError, LLMUnavailableError

#: Keys that depend on timing, not on what was answered.
TIMING = ("latency_s", "questions_per_minute", "concurrency", "llm_seconds")


@pytest.fixture(autouse=True)
def _sample_only(request):
    """Non-slow tests run on the sample index, journals in a temp dir (conftest: qa_bench_on_sample)."""
    if not request.node.get_closest_marker("slow"):
        request.getfixturevalue("qa_bench_on_sample")


@pytest.fixture
def sleeps(monkeypatch):
    """The harness's cool-down waits, recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(qa_run, "_sleep", waited.append)
    return waited


class FlakyLLM(ScriptedQALLM):
    """Scripted replies, except that ``fail(n)`` (n = the 1-based call number) may return an
    exception to raise instead. Its breaker's cool-down is what the harness should wait."""

    def __init__(self, fail, cooldown: float = 0.01, delay: float = 0.0) -> None:
        super().__init__()
        self.fail, self.delay = fail, delay
        self.breaker = CircuitBreaker(cooldown=cooldown)
        self.n = self.in_flight = self.max_in_flight = 0
        self._count = threading.Lock()

    def complete(self, prompt, **kwargs):
        with self._count:
            self.n += 1
            n = self.n
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            exc = self.fail(n)
            if exc is not None:
                raise exc
            return super().complete(prompt, **kwargs)
        finally:
            with self._count:
                self.in_flight -= 1


class Crash(Exception):
    """Stands in for the process dying mid-run."""


def _bench(llm, systems, limit, **kw):
    return run_qa_bench("sample", systems, llm=llm, llm_name="scripted", limit=limit, progress=False, **kw)


def _no_seconds(usage):
    """``llm_usage`` without its wall seconds (timing; calls and tokens are compared)."""
    return {
        "steps": {s: {k: v for k, v in st.items() if k != "seconds"} for s, st in usage["steps"].items()},
        "total": {k: v for k, v in usage["total"].items() if k != "seconds"},
    }


def _no_timing(report):
    return {
        name: {k: _no_seconds(v) if k == "llm_usage" else v for k, v in r.items() if k not in TIMING}
        for name, r in report["results"].items()
    }


def _question_lines(path: Path) -> list[tuple[str, int]]:
    lines = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return [(r["row"], r["i"]) for r in lines if r["type"] == "question"]


# --------------------------------------------------------------------------- LLM outages


@pytest.mark.parametrize(
    ("system", "exc"),
    [("no-retrieval", LLMUnavailableError("breaker open")), ("vanilla-rag", LLMTimeoutError("no reply in 30 s"))],
)
def test_outage_is_rerun_after_the_cooldown_and_measured(sleeps, tmp_path, system, exc):
    """The first call fails (the answer step's llm_error / the note step's LLMError): the question
    is rerun after the breaker's cool-down and its answer is a measured one, not a fallback."""
    llm = FlakyLLM(lambda n: exc if n == 1 else None, cooldown=0.01)
    report = _bench(llm, [system], 2, journal=tmp_path / "j.jsonl")
    clean = _bench(ScriptedQALLM(), [system], 2, journal=False)
    r = report["results"][system]
    assert sleeps == [0.01]
    assert r["fallbacks"] == 0 and r["measured"] and r["fallback_share"] == 0.0 and r["reruns"] == 1
    assert report["predictions"][system][0]["attempts"] == 2
    assert [p["prediction"] for p in report["predictions"][system]] == [
        p["prediction"] for p in clean["predictions"][system]
    ]
    assert r["llm_calls"] == clean["results"][system]["llm_calls"]  # the failed attempt is not counted


def test_persistent_outage_stops_with_one_line_and_resumes(sleeps, tmp_path, monkeypatch, capsys):
    """Every call from the third on fails: after 2 reruns the CLI stops with exit code 1 and one
    error line; the journal holds the two finished questions and --resume finishes the rest."""
    journal, out = tmp_path / "run.jsonl", tmp_path / "qa.json"
    flaky = FlakyLLM(lambda n: LLMUnavailableError("circuit breaker open") if n >= 3 else None)
    monkeypatch.setattr(qa_llm, "resolve_llm", lambda *a, **k: (flaky, "scripted", lambda: None))
    argv = ["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--systems", "no-retrieval"]
    argv += ["--limit", "4", "--quiet", "--journal", str(journal), "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--resume" in err and "question 3" in err and str(journal) in err
    assert sleeps == [0.01, 0.01] and flaky.n == 5  # question 3: 1 try + 2 reruns
    assert _question_lines(journal) == [("no-retrieval", 0), ("no-retrieval", 1)]
    assert not out.exists()

    healthy = ScriptedQALLM()
    monkeypatch.setattr(qa_llm, "resolve_llm", lambda *a, **k: (healthy, "scripted", lambda: None))
    assert main([*argv, "--resume"]) == 0
    assert healthy.calls == 2  # questions 3 and 4 only
    assert _question_lines(journal) == [("no-retrieval", i) for i in range(4)]
    report = json.loads(out.read_text())
    clean = _bench(ScriptedQALLM(), ["no-retrieval"], 4, journal=False)
    assert report["resumed_questions"] == 2
    assert report["predictions"] == clean["predictions"]
    assert _no_timing(report) == _no_timing(clean)


def test_an_outage_of_timeouts_names_the_deadline_and_concurrency(sleeps):
    """Calls that run out of time (a slow server, not a missing one) stop the run with a hint to
    raise --llm-deadline or lower --concurrency; a server that is not there gets no such hint."""
    slow = FlakyLLM(lambda n: LLMTimeoutError("got no reply within its 30s deadline") if n >= 2 else None)
    with pytest.raises(QARunAborted, match="rerun with --resume") as err:
        _bench(slow, ["no-retrieval"], 3, journal=False)
    assert "longer --llm-deadline or a lower --concurrency" in str(err.value)
    down = FlakyLLM(lambda n: LLMUnavailableError("connection refused") if n >= 2 else None)
    with pytest.raises(QARunAborted) as err:
        _bench(down, ["no-retrieval"], 3, journal=False)
    assert "--llm-deadline" not in str(err.value)


def test_abort_with_concurrency_keeps_finished_questions(sleeps, tmp_path):
    llm = FlakyLLM(lambda n: LLMUnavailableError("down") if n >= 3 else None)
    with pytest.raises(QARunAborted, match="rerun with --resume"):
        _bench(llm, ["no-retrieval"], 6, journal=tmp_path / "j.jsonl", concurrency=3)
    lines = _question_lines(tmp_path / "j.jsonl")
    assert len(lines) == len(set(lines)) == 2


# --------------------------------------------------------------------------- invalid replies: measured behaviour


def test_invalid_replies_are_counted_per_step_not_rerun_and_flag_the_row(sleeps):
    report = _bench(ScriptedQALLM(overrides={"answer": "%%%% ####"}), ["vanilla-rag"], 2, journal=False)
    r = report["results"]["vanilla-rag"]
    assert sleeps == [] and r["reruns"] == 0  # invalid replies are the system's behaviour
    assert r["reply_stats"] == {
        "write_note": {"replies": 2, "valid": 2, "constrained": 0},
        "answer": {"replies": 4, "valid": 0, "constrained": 0},  # each answer asked twice
    }
    assert r["invalid_replies"] == 4 and r["fallback_steps"] == {"answer": 2}
    assert r["fallback_share"] == 1.0 and r["measured"] is False
    md = qa_markdown_table(report)
    assert "| vanilla-rag |" in md and "not measured (fallbacks 100%)" in md
    assert "| system | step | replies | valid % | constrained | fallbacks |" in md
    assert "| vanilla-rag | answer | 4 | 0% | 0 | 2 |" in md
    assert "| vanilla-rag | write_note | 2 | 100% | 0 | 0 |" in md


def _record(i: int, fallback: bool) -> dict:
    return {
        "row": "x", "i": i, "id": f"q{i}", "prediction": "" if fallback else "a", "answers": ["a"],
        "scores": dict.fromkeys(qa_run.SCORE_KEYS, 0.0 if fallback else 1.0), "latency_s": 0.1, "calls": 1,
        "prompt_tokens": 3, "completion_tokens": 1, "token_source": "tiktoken cl100k_base", "fallback": fallback,
        "llm_error": [{"step": "answer", "kind": "invalid_reply", "error": "x"}] if fallback else [],
        "reply_stats": {"answer": {"replies": 2 if fallback else 1, "valid": 0 if fallback else 1, "constrained": 0}},
        "retrievals": None, "attempts": 1,
    }  # fmt: skip


@pytest.mark.parametrize(("fallbacks", "measured"), [(0, True), (1, True), (2, False)])
def test_measured_threshold_is_five_percent(fallbacks, measured):
    result, rows = summarize_row([_record(i, i < fallbacks) for i in range(20)])
    assert result["measured"] is measured and result["fallback_share"] == fallbacks / 20
    assert result["fallbacks"] == fallbacks and result["invalid_replies"] == 2 * fallbacks
    assert len(rows) == 20 and sum(r["fallback"] for r in rows) == fallbacks


def test_metered_llm_counts_replies_per_question_across_threads():
    m = MeteredLLM(ScriptedQALLM())
    meters = [QuestionMeter() for _ in range(4)]

    def work(meter: QuestionMeter) -> None:
        with metering(meter):
            for _ in range(50):
                m.record_reply("answer", True, False)
                m.record_reply("note", False, True)

    threads = [threading.Thread(target=work, args=(mt,)) for mt in meters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.reply_stats() == {
        "answer": {"replies": 200, "valid": 200, "constrained": 0},
        "note": {"replies": 200, "valid": 0, "constrained": 200},
    }
    assert all(mt.replies == {"answer": [50, 50, 0], "note": [50, 0, 50]} for mt in meters)


# --------------------------------------------------------------------------- journal and resume


def test_resume_after_a_crash_equals_an_uninterrupted_run(tmp_path):
    journal = tmp_path / "j.jsonl"
    systems = ["no-retrieval", "vanilla-rag"]
    # no-retrieval: 4 calls; vanilla-rag: 2 per question, so call 7 is question 2's note
    with pytest.raises(Crash):
        _bench(FlakyLLM(lambda n: Crash() if n == 7 else None), systems, 4, journal=journal)
    before = _question_lines(journal)
    assert before == [("no-retrieval", i) for i in range(4)] + [("vanilla-rag", 0)]
    with journal.open("a") as fh:  # a kill -9 in the middle of a write
        fh.write('{"type": "question", "row": "vanilla-rag", "i": 1, "pred')
    with pytest.raises(ValueError, match="another config.*limit"):
        _bench(ScriptedQALLM(), systems, 3, journal=journal, resume=True)
    resumed_llm = ScriptedQALLM()
    resumed = _bench(resumed_llm, systems, 4, journal=journal, resume=True)
    assert resumed_llm.calls == 6  # vanilla-rag questions 2-4 only: nothing ran twice
    after = _question_lines(journal)
    assert after == before + [("vanilla-rag", i) for i in (1, 2, 3)] and len(set(after)) == len(after)
    clean = _bench(ScriptedQALLM(), systems, 4, journal=False)
    assert resumed["predictions"] == clean["predictions"]
    assert _no_timing(resumed) == _no_timing(clean)
    # a finished journal resumes to the same report without any LLM call
    again_llm = ScriptedQALLM()
    again = _bench(again_llm, systems, 4, journal=journal, resume=True)
    assert again_llm.calls == 0 and _no_timing(again) == _no_timing(clean)


def test_resume_with_a_larger_limit_extends_the_run_and_keeps_its_answers(tmp_path, caplog):
    journal = tmp_path / "j.jsonl"
    systems = ["no-retrieval", "vanilla-rag"]
    _bench(ScriptedQALLM(), systems, 2, journal=journal)
    first = _question_lines(journal)
    llm = ScriptedQALLM()
    with caplog.at_level("INFO", logger="kgrag_plugins.eval.qa_run"):
        extended = _bench(llm, systems, 4, journal=journal, resume=True)
    assert "extending the run from its first 2 to its first 4 questions" in caplog.text
    assert llm.calls == 2 + 4  # questions 3-4 only: 1 call each for no-retrieval, 2 for vanilla-rag
    after = _question_lines(journal)
    assert after[: len(first)] == first and len(set(after)) == len(after) == 8
    assert _no_timing(extended) == _no_timing(_bench(ScriptedQALLM(), systems, 4, journal=False))
    assert extended["n_questions"] == 4
    # the extension is recorded: resuming at 4 again asks nothing; going back to 3 is refused
    again = ScriptedQALLM()
    _bench(again, systems, 4, journal=journal, resume=True)
    assert again.calls == 0
    with pytest.raises(ValueError, match="another config.*limit: journal 4, now 3"):
        _bench(ScriptedQALLM(), systems, 3, journal=journal, resume=True)


def test_read_journal_applies_extend_ignores_a_torn_line_and_changes_nothing(tmp_path):
    journal = tmp_path / "j.jsonl"
    systems = ["no-retrieval"]
    _bench(ScriptedQALLM(), systems, 2, journal=journal)
    _bench(ScriptedQALLM(), systems, 3, journal=journal, resume=True)
    with journal.open("a", encoding="utf-8") as fh:
        fh.write('{"type": "question", "row": "no-retr')  # a kill mid-write
    before = journal.read_bytes()
    config, records = qa_run.read_journal(journal)
    assert journal.read_bytes() == before  # reading never truncates
    assert config["limit"] == 3 and config["prompts"] == qa_run.prompt_fingerprint()
    questions = [(r["row"], r["i"]) for r in records if r["type"] == "question"]
    assert questions == [("no-retrieval", 0), ("no-retrieval", 1), ("no-retrieval", 2)]
    assert [r["type"] for r in records].count("extend") == 1
    (tmp_path / "bad.jsonl").write_text(before.decode().splitlines()[0] + "\n{oops\n")
    with pytest.raises(ValueError, match="line 2 is damaged"):
        qa_run.read_journal(tmp_path / "bad.jsonl")
    (tmp_path / "other.jsonl").write_text("[1]\n")
    with pytest.raises(ValueError, match="not a QA journal"):
        qa_run.read_journal(tmp_path / "other.jsonl")


def test_a_new_run_keeps_the_previous_journal(tmp_path):
    journal = tmp_path / "j.jsonl"
    _bench(ScriptedQALLM(), ["no-retrieval"], 1, journal=journal)
    _bench(ScriptedQALLM(), ["no-retrieval"], 1, journal=journal)
    assert (tmp_path / "j.jsonl.prev").is_file() and _question_lines(journal) == [("no-retrieval", 0)]
    with pytest.raises(ValueError, match="not a QA journal"):
        (tmp_path / "other.jsonl").write_text('{"x": 1}\n')
        _bench(ScriptedQALLM(), ["no-retrieval"], 1, journal=tmp_path / "other.jsonl", resume=True)


def test_resume_refuses_a_journal_written_under_other_prompts(tmp_path, monkeypatch, caplog):
    journal = tmp_path / "j.jsonl"
    _bench(ScriptedQALLM(), ["no-retrieval"], 2, journal=journal)
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["config"]["prompts"] == qa_run.prompt_fingerprint()
    monkeypatch.setattr("kgrag_plugins.eval.qa.prompt_fingerprint", lambda: "0" * 12)
    with pytest.raises(ValueError, match="prompts: journal .*prompts or output schemas differ"):
        _bench(ScriptedQALLM(), ["no-retrieval"], 2, journal=journal, resume=True)
    # a journal from before the fingerprint resumes (nothing asked again), with a WARNING
    lines = journal.read_text().splitlines()
    old = json.loads(lines[0])
    del old["config"]["prompts"]
    journal.write_text("\n".join([json.dumps(old), *lines[1:]]) + "\n")
    llm = ScriptedQALLM()
    with caplog.at_level("WARNING", logger="kgrag_plugins.eval.qa_run"):
        _bench(llm, ["no-retrieval"], 2, journal=journal, resume=True)
    assert llm.calls == 0 and "before journals recorded a prompt fingerprint" in caplog.text


def test_passage_chars_clips_every_passage_the_reader_sees_and_is_recorded(tmp_path):
    """``passage_chars``: the note prompt shows each passage cut to the budget (head, marker, tail),
    the journal's config records it (so --resume cannot mix budgets), and it ends with the run."""
    from kgrag_plugins.models.prompting import PASSAGE_PROMPT_CHARS, passage_chars

    class Recording(ScriptedQALLM):
        def __init__(self):
            super().__init__()
            self.prompts = []

        def complete(self, prompt, **kwargs):
            self.prompts.append(prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt))
            return super().complete(prompt, **kwargs)

    journal = tmp_path / "j.jsonl"
    llm = Recording()
    report = _bench(llm, ["vanilla-rag"], 2, journal=journal, passage_chars=250)
    notes = [p for p in llm.prompts if "characters cut to fit the prompt" in p]
    assert notes and len(notes) == 2  # one note per question, its long passages cut
    assert passage_chars() == PASSAGE_PROMPT_CHARS
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["config"]["passage_chars"] == 250
    assert report["results"]["vanilla-rag"]["n"] == 2
    with pytest.raises(ValueError, match="passage_chars"):
        _bench(ScriptedQALLM(), ["vanilla-rag"], 2, journal=journal, resume=True)  # the default budget
    plain = Recording()
    _bench(plain, ["vanilla-rag"], 2, journal=False)
    assert not any("characters cut to fit the prompt" in p for p in plain.prompts)


def test_prompt_fingerprint_ignores_comments_and_docstrings_not_prompt_text(tmp_path):
    src = 'X = 1\n\n\ndef f(q):\n    """Doc."""\n    return f"Answer {q}"  # short\n'
    (tmp_path / "p.py").write_text(src)
    base = qa_run.prompt_fingerprint(["p.py"], root=tmp_path)
    (tmp_path / "p.py").write_text("# a comment\n" + src.replace("Doc.", "Other doc.").replace("  # short", ""))
    assert qa_run.prompt_fingerprint(["p.py"], root=tmp_path) == base
    (tmp_path / "p.py").write_text(src.replace("Answer {q}", "Answer briefly {q}"))
    assert qa_run.prompt_fingerprint(["p.py"], root=tmp_path) != base


@pytest.mark.slow  # a real process: imports, index build into a fresh cache, then kill -9
def test_kill_9_then_resume(tmp_path, data_dir):
    journal, cache = tmp_path / "j.jsonl", tmp_path / "cache"
    argv = ["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--systems", "full,vanilla-rag", "--quiet"]
    argv += ["--journal", str(journal), "--cache-dir", str(cache), "--data-dir", str(data_dir)]
    proc = subprocess.Popen([sys.executable, "-m", "kgrag_plugins.cli", *argv], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.is_file() and len(_question_lines(journal)) >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    killed_at = _question_lines(journal)
    assert main([*argv, "--resume", "--out", str(tmp_path / "qa.json")]) == 0
    lines = _question_lines(journal)
    assert lines[: len(killed_at)] == killed_at and len(lines) == len(set(lines)) == 2 * 28
    report = json.loads((tmp_path / "qa.json").read_text())
    assert report["resumed_questions"] == len(killed_at)
    clean = run_qa_bench("sample", ["full", "vanilla-rag"], llm=ScriptedQALLM(), llm_name="scripted",
                         cache_dir=cache, data_dir=data_dir, progress=False, journal=False)  # fmt: skip
    assert report["predictions"] == clean["predictions"]


# --------------------------------------------------------------------------- concurrency


def test_concurrency_4_gives_the_same_answers_as_1():
    systems = ["no-retrieval", "vanilla-rag", "vanilla-rag:bm25"]
    one = _bench(ScriptedQALLM(), systems, 8, journal=False)
    llm = FlakyLLM(lambda n: None, delay=0.02)
    four = _bench(llm, systems, 8, journal=False, concurrency=4)
    assert llm.max_in_flight > 1  # questions really overlapped
    assert four["predictions"] == one["predictions"]  # in question order
    assert _no_timing(four) == _no_timing(one)
    assert all(r["concurrency"] == 4 and r["questions_per_minute"] > 0 for r in four["results"].values())


def test_several_concurrency_levels_give_one_row_each(tmp_path):
    """``--concurrency 1,4``: the throughput comparison in one run (same answers, one row per level)."""
    llm = FlakyLLM(lambda n: None, delay=0.02)
    report = _bench(llm, ["vanilla-rag"], 8, journal=tmp_path / "j.jsonl", concurrency=[1, 4])
    rows = report["results"]
    assert list(rows) == ["vanilla-rag@c1", "vanilla-rag@c4"] and report["concurrency"] == [1, 4]
    assert rows["vanilla-rag@c1"]["concurrency"] == 1 and rows["vanilla-rag@c4"]["concurrency"] == 4
    preds = report["predictions"]
    assert [p["prediction"] for p in preds["vanilla-rag@c1"]] == [p["prediction"] for p in preds["vanilla-rag@c4"]]
    # the c4 row had questions in flight together (which level is faster is the benchmark's to measure:
    # a wall-clock comparison here flipped on a box loaded by a vLLM server)
    assert llm.max_in_flight > 1 and all(r["questions_per_minute"] > 0 for r in rows.values())
    with pytest.raises(ValueError, match="concurrency"):
        _bench(llm, ["vanilla-rag"], 2, journal=False, concurrency=[])
    with pytest.raises(SystemExit) as bad:  # argparse: usage + one error line, exit code 2
        main(["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--concurrency", "0,2"])
    assert bad.value.code == 2


# --------------------------------------------------------------------------- vanilla-rag:RETRIEVER


def test_vanilla_rag_over_bm25(sample_mentions_index):
    report = _bench(ScriptedQALLM(), ["vanilla-rag", "vanilla-rag:bm25"], 2, journal=False)
    r = report["results"]["vanilla-rag:bm25"]
    assert r["n"] == 2 and r["llm_calls_per_q"] == 2.0 and r["measured"] and r["system"] == "vanilla-rag:bm25"
    q = "Which river flows through the city where Marie Curie was born?"
    kgi = KGInfusedRetriever(sample_mentions_index, llm=ScriptedQALLM())
    noted = []
    real = kgi.write_note
    kgi.write_note = lambda question, passages: noted.append(passages) or real(question, passages)
    bm25 = BM25Retriever(sample_mentions_index)
    ans = vanilla_rag_system(bm25, kgi)(q)
    assert ans.text and [sp.passage.id for sp in noted[0]] == bm25.retrieve(q, 6).passage_ids


def test_vanilla_rag_retriever_validation():
    with pytest.raises(ValueError, match="vanilla-rag:RETRIEVER takes one of dense, bm25"):
        _bench(ScriptedQALLM(), ["vanilla-rag:telepathy"], 1, journal=False)
    with pytest.raises(ValueError, match="unknown QA system.*vanilla-rag:RETRIEVER"):
        _bench(ScriptedQALLM(), ["oracle"], 1, journal=False)


# --------------------------------------------------------------------------- CLI options


def test_cli_passes_llm_options_and_records_them(tmp_path, monkeypatch, capsys):
    seen = {}

    def resolve(spec, model=None, **kwargs):
        seen.update(spec=spec, **kwargs)
        return ScriptedQALLM(), "scripted", lambda: None

    monkeypatch.setattr(qa_llm, "resolve_llm", resolve)
    journal = tmp_path / "j.jsonl"
    argv = ["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--systems", "no-retrieval", "--quiet"]
    argv += ["--limit", "2", "--llm-deadline", "7", "--max-tokens", "50", "--concurrency", "2"]
    assert main([*argv, "--journal", str(journal)]) == 0
    assert seen == {"spec": "scripted", "deadline": 7.0, "max_tokens": 50}
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["config"]["llm_options"] == {"max_tokens": 50}  # compared on --resume
    assert header["info"] == {"deadline": 7.0, "concurrency": 2, "llm_retries": 2}  # may change on --resume
    assert "| no-retrieval |" in capsys.readouterr().out
    assert main([*argv, "--llm-deadline", "60", "--journal", str(journal), "--resume"]) == 0  # nothing to rerun
    assert "| no-retrieval |" in capsys.readouterr().out
    assert main([*argv[:-2], "--max-tokens", "60", "--journal", str(journal), "--resume"]) == 2
    assert "another config" in capsys.readouterr().err
    assert main(["bench", "--dataset", "sample", "--resume"]) == 2
    assert "apply to --qa only" in capsys.readouterr().err
    assert main(["bench", "--dataset", "sample", "--passage-chars", "1000"]) == 2
    assert "--passage-chars" in capsys.readouterr().err
    assert main([*argv[:-2], "--passage-chars", "50", "--journal", str(tmp_path / "other.jsonl")]) == 2
    assert "at least 200" in capsys.readouterr().err


# --------------------------------------------------------------------------- a real server that stalls


def test_a_real_server_that_stalls_once_is_waited_out_and_retried():
    """An OpenAI-compatible HTTP server on 127.0.0.1 stalls past the client's deadline on its first
    request: the call times out, the breaker opens, the harness waits out the cool-down and reruns the
    question, which is then measured (never a fallback recorded as the answer)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from kgrag_plugins.models.llm import OpenAICompatibleLLM

    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(time.monotonic())
            if len(seen) == 1:
                time.sleep(1.0)  # the stall: past the 0.4 s deadline
            body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Paris"}}]}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        llm = OpenAICompatibleLLM(
            base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1",
            model="m",
            deadline=0.4,
            max_retries=0,
            breaker=CircuitBreaker(failures=1, cooldown=0.3),
        )
        report = _bench(llm, ["no-retrieval"], 2, journal=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
    r = report["results"]["no-retrieval"]
    assert r["measured"] and r["fallbacks"] == 0 and r["reruns"] == 1
    assert [p["prediction"] for p in report["predictions"]["no-retrieval"]] == ["Paris", "Paris"]
    assert len(seen) == 3 and seen[1] - seen[0] >= 0.3  # the rerun came after the cool-down
