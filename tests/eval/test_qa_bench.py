"""``kgrag bench --qa``: refusal without an LLM, the scripted LLM end to end, fallbacks, option
grids, and the KG-Infused variants calling the right steps (issue 16 items 6, 7)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.cli import main
from kgrag_plugins.eval.bench import parse_retriever_opts, run_bench
from kgrag_plugins.eval.qa import (
    KG_INFUSED_VARIANTS,
    MeteredLLM,
    _system_grid,
    kg_infused_system,
    qa_markdown_table,
    run_qa_bench,
)
from kgrag_plugins.eval.qa_llm import resolve_llm
from kgrag_plugins.eval.scripted import KINDS, ScriptedQALLM, prompt_kind
from kgrag_plugins.methods.baselines import DenseRetriever
from kgrag_plugins.methods.kg_infused import KGInfusedRetriever
from kgrag_plugins.methods.kg_infused import prompts as P
from kgrag_plugins.methods.kg_infused.parsing import parse_triples
from kgrag_plugins.models.llm import ScriptedLLM

METRICS = ("em", "f1", "acc", "acc_raw", "f1_last_alias")


@pytest.fixture(scope="module")
def qa_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("qa-cache")


@pytest.fixture(autouse=True)
def _sample_only(request):
    """Non-slow tests run on the sample index, journals in a temp dir (conftest: qa_bench_on_sample)."""
    if not request.node.get_closest_marker("slow"):
        request.getfixturevalue("qa_bench_on_sample")


@pytest.fixture
def sample_graph_index(sample_mentions_index):
    return sample_mentions_index


# --------------------------------------------------------------------------- CLI: refusal and LLM specs


def test_qa_without_llm_refuses_naming_the_options(monkeypatch, capsys):
    monkeypatch.delenv("KGRAG_LLM_BASE_URL", raising=False)
    assert main(["bench", "--dataset", "sample", "--qa"]) == 2
    err = capsys.readouterr().err
    assert "--qa needs an LLM" in err
    for option in ("--llm URL", "--llm vllm:PATH", "--llm scripted", "KGRAG_LLM_BASE_URL"):
        assert option in err


def test_llm_specs(monkeypatch, tmp_path, capsys):
    import kgrag_plugins.models.vllm as vllm_mod

    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm executable anywhere
    monkeypatch.setattr(vllm_mod, "_REPO", tmp_path)  # (nor a .venv-vllm in this checkout)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--dataset", "sample", "--qa", "--llm", "vllm:/models/x"]) == 2
    assert "own virtualenv" in capsys.readouterr().err
    assert main(["bench", "--dataset", "sample", "--qa", "--llm", "telepathy"]) == 2
    assert "--llm 'telepathy'" in capsys.readouterr().err
    assert main(["bench", "--dataset", "sample", "--llm", "scripted"]) == 2  # --llm without --qa
    assert "apply to --qa only" in capsys.readouterr().err
    assert main(["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--slice-corpus"]) == 2
    assert "--slice-corpus applies to retrieval benchmarks, not --qa" in capsys.readouterr().err
    monkeypatch.delenv("KGRAG_LLM_MODEL", raising=False)
    with pytest.raises(ValueError, match="needs a model"):
        resolve_llm("http://127.0.0.1:9/v1")
    llm, name, close = resolve_llm("http://127.0.0.1:9/v1", "m")
    assert (llm.base_url, llm.model, name) == ("http://127.0.0.1:9/v1", "m", "http://127.0.0.1:9/v1 (m)")
    assert llm.timeout == 60.0  # the client's default attempt
    close()
    # a deadline past the 60 s attempt lets one attempt use it (a slow CPU server's long note is not
    # abandoned and resent); a shorter one leaves the attempt at 60 s, bounded by the deadline anyway
    slow, _, close = resolve_llm("http://127.0.0.1:9/v1", "m", deadline=300)
    assert (slow.deadline, slow.timeout) == (300.0, 300.0)
    close()
    quick, _, close = resolve_llm("http://127.0.0.1:9/v1", "m", deadline=5)
    assert (quick.deadline, quick.timeout) == (5.0, 60.0)
    close()
    assert isinstance(resolve_llm("scripted")[0], ScriptedQALLM)


# --------------------------------------------------------------------------- end to end


def test_scripted_end_to_end_writes_json_and_table(qa_cache, tmp_path, capsys):
    systems = list(KG_INFUSED_VARIANTS) + ["self-ask"]
    out = tmp_path / "qa.json"
    argv = ["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--limit", "2", "--quiet"]
    argv += ["--systems", ",".join(systems), "--cache-dir", str(qa_cache), "--out", str(out)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["task"] == "qa" and report["n_questions"] == 2 and report["llm"] == "scripted"
    assert "not answer quality" in report["note"] and "not answer quality" in table
    assert list(report["results"]) == systems
    for name, r in report["results"].items():
        assert set(METRICS) <= set(r), name
        assert all(0.0 <= r[m] <= 1.0 for m in METRICS)
        assert r["n"] == 2 and r["llm_calls"] >= 2 and r["prompt_tokens"] > 0 and r["completion_tokens"] > 0
        assert r["token_count"] == "tiktoken cl100k_base"
        assert r["fallbacks"] == 0 and r["empty_answers"] == 0, name  # the scripted replies all parse
        assert r["latency_s"]["p50"] <= r["latency_s"]["p95"]
        assert len(report["predictions"][name]) == 2
        assert f"| {name} |" in table
    for col in ("EM", "F1", "Acc", "Acc_raw", "F1 last alias", "LLM calls/q", "p95 s", "fallbacks"):
        assert col in table
    # NoR makes one call per question; the full pipeline with one round at least select, summary, QE,
    # note, augmentation and answer
    assert report["results"]["no-retrieval"]["llm_calls"] == 2
    assert report["results"]["full"]["llm_calls_per_q"] >= 6


def test_qa_report_has_tokens_and_seconds_per_step(qa_cache, tmp_path, capsys):
    """Issue 37 item 5: per-step calls, tokens and seconds in the report JSON and the table, and
    the closing one-line total; the per-step totals agree with the per-question counters."""
    out = tmp_path / "qa-usage.json"
    argv = ["bench", "--dataset", "sample", "--qa", "--llm", "scripted", "--limit", "2", "--quiet"]
    argv += ["--systems", "no-retrieval,full", "--cache-dir", str(qa_cache), "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    calls = prompt = completion = 0
    for name, r in report["results"].items():
        usage = r["llm_usage"]
        assert usage["steps"], name
        for step, row in usage["steps"].items():
            assert row["calls"] >= 1 and row["prompt_tokens"] > 0 and row["seconds"] >= 0, (name, step)
            assert row["estimated"] is True  # the scripted LLM reports no usage: tiktoken estimates
        total = usage["total"]
        assert total["calls"] == sum(x["calls"] for x in usage["steps"].values())
        # the same calls and tiktoken counts as the per-question meter (MeteredLLM)
        assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (
            r["llm_calls"], r["prompt_tokens"], r["completion_tokens"],
        )  # fmt: skip
        assert r["llm_seconds"] == total["seconds"]
        calls, prompt, completion = (
            calls + total["calls"],
            prompt + total["prompt_tokens"],
            completion + total["completion_tokens"],
        )
        assert f"| {name} | **total** | {total['calls']} |" in printed
    assert set(report["results"]["no-retrieval"]["llm_usage"]["steps"]) == {"answer"}
    assert "| system | step | LLM calls | prompt tokens | completion tokens | LLM s |" in printed
    assert f"LLM usage: {calls} calls, {prompt} prompt tokens, {completion} completion tokens" in printed


def test_scores_come_from_the_parsed_answer(qa_cache):
    """A reply with a marker is post-processed before scoring: 'Answer: the Vistula.' matches gold
    'Vistula' (SQuAD EM) for the first question only."""
    llm = ScriptedQALLM(overrides={"answer": "Answer: the Vistula."})
    report = run_qa_bench("sample", ["vanilla-rag"], llm=llm, limit=2, cache_dir=qa_cache, progress=False)
    preds = report["predictions"]["vanilla-rag"]
    assert [p["prediction"] for p in preds] == ["the Vistula.", "the Vistula."]
    r = report["results"]["vanilla-rag"]
    assert (r["em"], r["acc"], r["acc_raw"], r["f1"]) == (0.5, 0.5, 0.5, 0.5)
    assert r["fallbacks"] == 0


@pytest.mark.parametrize("drift", ["%%%% #### !!!", "I'm sorry, but I cannot answer that.", "   "])
def test_a_drifting_answer_is_a_fallback_not_an_answer(qa_cache, drift):
    llm = ScriptedQALLM(overrides={"answer": drift, "answer_no_retrieval": drift})
    report = run_qa_bench(
        "sample", ["no-retrieval", "vanilla-rag"], llm=llm, limit=2, cache_dir=qa_cache, progress=False
    )
    for name in ("no-retrieval", "vanilla-rag"):
        r = report["results"][name]
        assert r["fallbacks"] == 2 and r["empty_answers"] == 2
        assert all(r[m] == 0.0 for m in METRICS)
        assert all(p["prediction"] == "" and p["fallback"] for p in report["predictions"][name])
    # the invalid answer was asked once more: 2 answer calls per question, plus the note for RAG
    assert report["results"]["no-retrieval"]["llm_calls"] == 4
    assert report["results"]["vanilla-rag"]["llm_calls"] == 6


@pytest.mark.parametrize(
    ("system", "kind", "drift", "empty"),
    [
        ("self-ask", "self_ask", "%%%% ####", False),  # documented fallback: answer from the last retrieval
        ("sa-rag+cot", "sa_answer", "not json at all", True),  # no JSON final_answer: no answer
        ("cot-rag", "sa_answer", "The answer is probably X.", True),
    ],
)
def test_agent_drift_is_a_fallback(system, kind, drift, empty, qa_cache):
    llm = ScriptedQALLM(overrides={kind: drift})
    report = run_qa_bench("sample", [system], llm=llm, limit=2, cache_dir=qa_cache, progress=False)
    r = report["results"][system]
    assert r["fallbacks"] == 2 and r["empty_answers"] == (2 if empty else 0)
    assert all(drift not in p["prediction"] and p["fallback"] for p in report["predictions"][system])


# --------------------------------------------------------------------------- grids


def test_grid_one_row_per_setting(qa_cache):
    report = run_qa_bench(
        "sample",
        ["vanilla-rag", "full"],
        llm=ScriptedQALLM(),
        limit=2,
        cache_dir=qa_cache,
        progress=False,
        retriever_opts=["kg-infused.rounds=1,2"],
    )
    assert list(report["results"]) == ["vanilla-rag", "full[kg-infused.rounds=1]", "full[kg-infused.rounds=2]"]
    assert report["results"]["full[kg-infused.rounds=1]"]["options"] == {"kg-infused": {"rounds": 1}}
    # one round: selection, summary, QE, note, augmentation, answer; two rounds add the update call(s)
    one, two = (report["results"][f"full[kg-infused.rounds={r}]"]["llm_calls_per_q"] for r in (1, 2))
    assert one == 6.0 and two > one
    md = qa_markdown_table(report).split("| system | step |")[0]  # the main table, not the per-step one
    assert md.count("| full[kg-infused.rounds=") == 2


def test_grid_targets():
    opts = parse_retriever_opts(["sa-rag.relation_threshold=0.4,0.5", "kg-infused.rounds=1,2,3", "self-ask.k=3,6"])
    assert _system_grid("sa-rag+cot", opts) == [
        {"sa-rag": {"relation_threshold": 0.4}},
        {"sa-rag": {"relation_threshold": 0.5}},
    ]
    assert len(_system_grid("self-ask+kg-infused", opts)) == 3
    assert len(_system_grid("self-ask", opts)) == 2
    assert len(_system_grid("full", opts)) == 3
    assert _system_grid("vanilla-rag", opts) == [{}]  # no KG: runs once
    with pytest.raises(ValueError, match="none of the systems uses"):
        run_qa_bench("sample", ["vanilla-rag"], llm=ScriptedQALLM(), retriever_opts=["sa-rag.relation_threshold=0.4"])
    with pytest.raises(ValueError, match="unknown QA system"):
        run_qa_bench("sample", ["oracle"], llm=ScriptedQALLM())


def test_retrieval_bench_grid_one_row_per_setting(qa_cache):
    report = run_bench(
        "sample",
        ["dense", "bm25"],
        limit=2,
        cache_dir=qa_cache,
        progress=False,
        retriever_opts=["dense.exact=true,false"],
    )
    assert list(report["results"]) == ["dense[exact=True]", "dense[exact=False]", "bm25"]


@pytest.mark.slow  # FRAG embeds its relation chains per query: 25-45 s on the shared 2-core machine
def test_retrieval_bench_frag_route_grid(qa_cache):
    """FRAG's route option (``mode``: simple / complex / auto) in the retrieval bench: one row each."""
    report = run_bench(
        "sample",
        ["frag"],
        limit=1,
        cache_dir=qa_cache,
        progress=False,
        retriever_opts=["frag.mode=simple,complex,auto"],
    )
    assert list(report["results"]) == ["frag[mode=simple]", "frag[mode=complex]", "frag[mode=auto]"]


# --------------------------------------------------------------------------- the variants' steps

STEPS = (
    "seed",
    "activate",
    "summarize",
    "expand_query",
    "dual_retrieve",
    "retrieve",
    "write_note",
    "augment",
    "answer",
)


def _spied(index) -> tuple[KGInfusedRetriever, dict[str, list[tuple]]]:
    kgi = KGInfusedRetriever(index, llm=ScriptedQALLM(), rounds=1)
    calls: dict[str, list[tuple]] = {s: [] for s in STEPS}
    for step in STEPS:
        real = getattr(kgi, step)

        def spy(*args, _real=real, _step=step, **kwargs):
            calls[_step].append(args)
            return _real(*args, **kwargs)

        setattr(kgi, step, spy)
    return kgi, calls


Q = "Which river flows through the city where Marie Curie was born?"


def test_variants_call_the_right_steps(sample_graph_index):
    top6 = DenseRetriever(sample_graph_index).retrieve(Q, 6).passage_ids
    ran: dict[str, dict[str, list[tuple]]] = {}
    for variant in KG_INFUSED_VARIANTS:
        kgi, calls = _spied(sample_graph_index)
        ans = kg_infused_system(variant, kgi)(Q)
        assert ans.text and not ans.metadata.get("llm_error"), variant
        ran[variant] = calls
    n = {v: {s: len(c) for s, c in calls.items()} for v, calls in ran.items()}
    assert not any(n["no-retrieval"].values())  # never retrieves, notes or uses the KG
    assert n["vanilla-rag"]["seed"] == n["vanilla-rag"]["activate"] == n["vanilla-rag"]["expand_query"] == 0
    assert n["vanilla-rag"]["write_note"] == 1 and n["vanilla-rag"]["augment"] == 0
    assert [sp.passage.id for sp in ran["vanilla-rag"]["write_note"][0][1]] == top6
    assert n["vanilla-qe"]["activate"] == 0 and n["vanilla-qe"]["augment"] == 0
    assert n["vanilla-qe"]["expand_query"] == 1 and ran["vanilla-qe"]["expand_query"][0][1] == ""  # q alone
    assert n["vanilla-qe"]["dual_retrieve"] == 1
    assert n["qe-only"]["retrieve"] == 1 and n["qe-only"]["activate"] == 1 and n["qe-only"]["augment"] == 0
    assert n["ka-only"]["activate"] == 1 and n["ka-only"]["expand_query"] == 0 and n["ka-only"]["augment"] == 1
    assert [sp.passage.id for sp in ran["ka-only"]["write_note"][0][1]] == top6  # note over the vanilla top-6
    question, note, summary = ran["ka-only"]["augment"][0]
    assert note and summary  # the note is augmented with the triples summary
    assert n["full"]["retrieve"] == 1 and n["full"]["augment"] == 1 and n["full"]["answer"] == 1


# --------------------------------------------------------------------------- the scripted LLM and metering


def test_scripted_replies_follow_the_paper_formats():
    llm = ScriptedQALLM()
    groups = [("Marie Curie", [("Marie Curie", "born in", "Warsaw"), ("Marie Curie", "field", "physics")])]
    sel = P.TRIPLES_SELECTION.format(question=Q, triples=P.format_candidate_groups(groups))
    cands = {"Marie Curie | born in | Warsaw": 0, "Marie Curie | field | physics": 1}
    assert prompt_kind([{"role": "user", "content": sel}]) == "triple_selection"
    assert [t.index for t in parse_triples(llm.complete(sel), cands)] == [0, 1]
    passages = P.format_passages([("Warsaw", "Warsaw lies on the Vistula. It is big."), ("Paris", "Paris.")])
    note = llm.complete(P.WRITE_NOTE.format(question=Q, passages=passages))
    assert note.startswith("Warsaw. Warsaw lies on the Vistula.")
    assert llm.complete(P.ANSWER_WITH_RETRIEVAL.format(passages=passages, question=Q)) == "Warsaw"
    summary = "Warsaw lies on the Vistula. " * 400
    long = P.AUG_PASSAGE.format(question=Q, passage="word " * 2000, triples_summary=summary)
    assert len(llm.complete(long)) < 4000  # under the text validators' cap (a real model's length)
    assert llm.complete(P.ANSWER_WITHOUT_RETRIEVAL.format(question=Q)) == "Marie Curie"
    from kgrag_plugins.agents.prompts import self_ask_prompt
    from kgrag_plugins.agents.self_ask import parse_self_ask

    first = parse_self_ask(llm.complete(self_ask_prompt(Q, "")), question=Q)
    assert first.kind == "follow_up" and first.text == "What is Marie Curie?"
    pad = "Follow up: Where was Marie Curie born?\nIntermediate answer: Marie Curie was born in Warsaw.\n"
    final = parse_self_ask(llm.complete(self_ask_prompt(Q, pad)), question=Q)
    assert (final.kind, final.text) == ("final", "Marie Curie")
    assert llm.kinds == {
        "triple_selection": 1, "note": 1, "answer": 1, "augment": 1, "answer_no_retrieval": 1, "self_ask": 2
    }  # fmt: skip
    with pytest.raises(ValueError, match="unknown prompt kind"):
        ScriptedQALLM(overrides={"nonsense": "x"})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=3))
def test_scripted_llm_replies_to_anything(texts):
    messages = [{"role": "user", "content": t} for t in texts]
    assert prompt_kind(messages) in KINDS
    assert isinstance(ScriptedQALLM().reply(messages), str)


def test_metered_llm_counts_tokens_and_endpoint_usage():
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base")
    m = MeteredLLM(ScriptedLLM(["Warsaw is the answer."]))
    assert m.complete("Where was Marie Curie born?") == "Warsaw is the answer."
    assert m.snapshot() == (1, len(enc.encode("Where was Marie Curie born?")), len(enc.encode("Warsaw is the answer.")))
    assert m.token_source == "tiktoken cl100k_base"

    class WithUsage(ScriptedLLM):
        def __init__(self):
            super().__init__(lambda msgs: "ok")
            self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

        def complete(self, prompt, **kw):
            self.usage["prompt_tokens"] += 100
            self.usage["completion_tokens"] += 7
            return super().complete(prompt, **kw)

    m = MeteredLLM(WithUsage())
    m.complete("x")
    m.complete("y")
    assert m.snapshot() == (2, 200, 14) and m.token_source == "endpoint usage"
    failing = MeteredLLM(ScriptedLLM([]))
    with pytest.raises(Exception):
        failing.complete("x")
    assert failing.snapshot() == (1, 0, 0)


# --------------------------------------------------------------------------- the acceptance run


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["musique", "hotpotqa", "2wikimultihopqa", "popqa"])
def test_scripted_qa_on_20_questions(dataset, data_dir, tmp_path):
    t0 = time.perf_counter()
    report = run_qa_bench(dataset, None, llm=ScriptedQALLM(), llm_name="scripted", data_dir=data_dir, limit=20,
                          out=tmp_path / f"{dataset}.json", progress=False)  # fmt: skip
    assert report["n_questions"] == 20 and len(report["results"]) >= len(KG_INFUSED_VARIANTS)
    for name, r in report["results"].items():
        assert set(METRICS) <= set(r) and r["n"] == 20, name
    assert (tmp_path / f"{dataset}.json").is_file()
    print(f"{dataset}: {time.perf_counter() - t0:.0f} s")
