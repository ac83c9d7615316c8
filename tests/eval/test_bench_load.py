"""``kgrag bench-load`` (kgrag_plugins.eval.bench_load; issue 34 item 4 "Load held"): concurrent
readers while a writer commits see one generation per read, never an older one after a commit
returned; the LangGraph server (``--graphs-dev``: ``langgraph dev``, runner in
kgrag_plugins.integrations.langgraph.load) follows commits made by another process."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from kgrag_plugins.cli import main
from kgrag_plugins.eval import bench_load
from kgrag_plugins.eval.bench_load import Commit, Query
from kgrag_plugins.index.lock import SwapGuard
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.types import Evidence, Passage

REPO = Path(__file__).resolve().parents[2]
KEYS = ("qps", "latency_ms", "errors", "writer", "staleness", "peak_rss_mb", "timeline", "commit_log")


def _run(tmp_path: Path, index: Path, *extra: str) -> dict:
    out = tmp_path / "out"
    argv = ["bench-load", "--index", str(index), "--out", str(out), "--clients", "8", "--write-every", "3", *extra]
    assert main(argv) == 0
    mode = "graphs-dev" if "--graphs-dev" in extra else "python"
    res = json.loads((out / f"bench-load-{mode}.json").read_text(encoding="utf-8"))
    assert all(k in res for k in KEYS), sorted(res)
    assert (out / f"bench-load-{mode}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / f"bench-load-{mode}.md").read_text(encoding="utf-8").startswith("| mode |")
    return res


def test_load_python_api_smoke_no_errors_no_stale_reads(sample_mentions_index, tmp_path):
    res = _run(tmp_path, sample_mentions_index.path, "--seconds", "15")
    st = res["staleness"]
    assert res["mode"] == "python" and res["errors"]["total"] == 0, res["errors"]
    assert res["writer"]["adds"] >= 1 and res["writer"]["deletes"] >= 1, res["writer"]
    assert st["basis"] == "revision" and st["checked"] == res["answered"] > 0
    assert st["stale_after_commit"] == 0 and st["straddled_a_commit"] == 0, st
    assert st["probes"] > 0 and st["probe_older_than_asked"] == 0 and st["returned_deleted_sentinel"] == 0, st
    assert res["qps"] > 0 and res["latency_ms"]["p50"] <= res["latency_ms"]["p95"] <= res["latency_ms"]["p99"]
    assert res["peak_rss_mb"]["bench_process"] > 0 and res["peak_rss_mb"]["server_tree"] is None


def test_load_staleness_counts_stale_and_deleted_answers():
    commits = [Commit(1, "add", 1, 1.0, 5.0, 1, "gen-a"), Commit(2, "add", 2, 2.0, 5.0, 2, "gen-b"),
               Commit(3, "delete", 1, 3.0, 5.0, 3, "gen-c")]  # fmt: skip
    fresh = Query(3.5, 3.6, "probe", asked=2, found=[2], revision=3, revision_end=3)
    newer = Query(1.5, 2.5, "probe", asked=1, found=[2], revision=2, revision_end=2)  # waited: fine
    old = Query(2.5, 2.6, "question", revision=1, revision_end=1)  # issued after rev 2 returned
    overtaken = Query(0.5, 3.5, "question", revision=0, revision_end=0)  # 3 commits returned meanwhile
    ghost = Query(3.5, 3.6, "probe", asked=2, found=[1, 2], revision=3, revision_end=3)  # deleted batch 1
    st = bench_load.staleness([fresh, newer, old, overtaken, ghost], commits, base_revision=0)
    assert st["basis"] == "revision" and st["checked"] == 5
    assert st["revision_stale_after_commit"] == 1 and st["stale_after_commit"] == 2
    assert st["returned_deleted_sentinel"] == 1 and st["probe_newer_than_asked"] == 1
    assert st["stale_gt1"] == 1 and st["stale_share"] == pytest.approx(2 / 5)  # old (lag 1), overtaken (lag 3)
    # no revisions (--graphs-dev): the probes decide
    lost = Query(2.5, 2.6, "probe", asked=2, found=[1])
    st = bench_load.staleness([Query(3.5, 3.6, "probe", asked=2, found=[2]), lost], commits, base_revision=None)
    assert st["basis"] == "sentinel probes" and st["stale_after_commit"] == 1 and st["stale_share"] == 0.5


def test_load_swap_guard_orders_reads_and_swaps():
    guard, events = SwapGuard(), []
    inside, release = threading.Event(), threading.Event()

    def reader() -> None:
        with guard.reading(), guard.reading():  # reads nest in one thread
            inside.set()
            release.wait(10)
            events.append("read")

    def swapper() -> None:
        with guard.swapping():
            events.append("swap")

    def late_reader() -> None:
        with guard.reading():
            events.append("late read")

    threads = [threading.Thread(target=reader)]
    threads[0].start()
    assert inside.wait(10)
    threads.append(threading.Thread(target=swapper))
    threads[1].start()
    time.sleep(0.2)
    threads.append(threading.Thread(target=late_reader))  # a waiting swap blocks new reads
    threads[2].start()
    time.sleep(0.2)
    assert events == []
    release.set()
    for t in threads:
        t.join(10)
    assert events == ["read", "swap", "late read"]
    with guard.reading(), pytest.raises(RuntimeError, match="inside a retrieval"):
        with guard.swapping():
            pass


def test_load_server_tree_rss_without_psutil():
    pytest.importorskip("langgraph")
    from kgrag_plugins.integrations.langgraph.dev_server import _proc_tree_rss_mb, tree_rss_mb

    ours, fallback = tree_rss_mb(os.getpid()), _proc_tree_rss_mb(os.getpid())
    assert ours > 10 and fallback == pytest.approx(ours, rel=0.2)


def test_load_graphs_dev_runner_is_reached_through_the_adapter_registry(monkeypatch):
    from kgrag_plugins import adapters

    assert callable(adapters.hook("graphs_load_runner"))
    monkeypatch.setattr(adapters, "_hooks", {})
    monkeypatch.setattr(adapters, "_loaded", True)  # as if no package declared the entry point
    args = argparse.Namespace(seconds=1.0, clients=1, write_every=1.0, batch=1, graphs_dev=True)
    with pytest.raises(ImportError, match=r"kgrag bench-load --graphs-dev needs the framework adapters"):
        bench_load.run_load(args)  # before any index is built


class _Blocking(Retriever):
    """Counts the index's passages before and after waiting for ``go``."""

    def __init__(self, index: KnowledgeIndex) -> None:
        self.index, self.seen = index, []
        self.started, self.go = threading.Event(), threading.Event()

    def _retrieve(self, query: str, k: int) -> Evidence:
        self.seen.append(len(self.index.passages))
        self.started.set()
        self.go.wait(10)
        self.seen.append(len(self.index.passages))
        return Evidence(query)


def test_load_retrieve_sees_one_generation_while_an_update_waits(sample_corpus, tmp_path):
    index = KnowledgeIndex.build(sample_corpus[:5], tmp_path / "index", progress=False)
    r = _Blocking(index)
    reading = threading.Thread(target=r.retrieve, args=("Where was Marie Curie born?", 1))
    reading.start()
    assert r.started.wait(10)
    new = [Passage("new", "a new passage")]
    writing = threading.Thread(target=index.add_passages, args=(new,), kwargs={"progress": False})
    writing.start()
    time.sleep(0.5)
    assert writing.is_alive() and index.revision == 0  # the swap waits for the read in flight
    r.go.set()
    reading.join(10)
    writing.join(30)
    assert r.seen == [5, 5] and index.revision == 1 and len(index.passages) == 6
    r.seen.clear()
    r.retrieve("again", 1)
    assert r.seen == [6, 6]
    index.close()


def test_load_follow_adopts_another_objects_commit(sample_corpus, tmp_path):
    KnowledgeIndex.build(sample_corpus[:5], tmp_path / "index", progress=False).close()
    reader, writer = KnowledgeIndex.open(tmp_path / "index"), KnowledgeIndex.open(tmp_path / "index")
    assert reader.follow() is False
    writer.add_passages([Passage("new", "a new passage")], progress=False)
    assert len(reader.passages) == 5 and reader.follow() is True
    assert reader.revision == 1 and len(reader.passages) == 6 and reader.manifest == writer.manifest
    assert reader.follow() is False and reader.revision == 1
    reader.close()
    writer.close()


def test_load_graphs_follow_commits_unless_pinned(sample_mentions_index, tmp_path, monkeypatch):
    pytest.importorskip("langgraph")
    shutil.copytree(sample_mentions_index.path, tmp_path / "index", ignore=shutil.ignore_patterns(".lock"))
    monkeypatch.setenv("KGRAG_INDEX_DIR", str(tmp_path / "index"))
    monkeypatch.delenv("KGRAG_LLM_BASE_URL", raising=False)
    monkeypatch.syspath_prepend(str(REPO))
    from graphs import _common
    from graphs.activation import build_graph

    sentinel = Passage("load-00001-s", bench_load.sentinel_text(1, "test"), "Load sentinel 1")
    question = {"question": sentinel.text}
    _common.reset()
    try:
        assert "load-00001-s" not in [d.id for d in build_graph().invoke(question)["documents"]]
        with KnowledgeIndex.open(tmp_path / "index") as other:  # a writer elsewhere (another process)
            other.add_passages([sentinel], progress=False)
        monkeypatch.setenv("KGRAG_INDEX_FOLLOW", "0")
        assert "load-00001-s" not in [d.id for d in build_graph().invoke(question)["documents"]]
        monkeypatch.delenv("KGRAG_INDEX_FOLLOW")
        assert "load-00001-s" in [d.id for d in build_graph().invoke(question)["documents"]]
    finally:
        _common.reset()


# ~40 s (langgraph dev start and warm-up, ~20 s on 2 busy cores, plus the run): in the default suite
# as the acceptance check of the HTTP path; the pinned-generation control below is in the slow suite
@pytest.mark.skipif(sys.version_info < (3, 11), reason="langgraph-cli's in-memory server needs python >= 3.11")
def test_load_langgraph_dev_smoke_follows_commits(sample_mentions_index, tmp_path):
    res = _run(tmp_path, sample_mentions_index.path, "--graphs-dev", "--seconds", "15")
    st = res["staleness"]
    assert res["mode"] == "graphs-dev" and res["errors"]["total"] == 0, res["errors"]
    assert res["writer"]["adds"] >= 1 and res["server"]["follows_commits"] is True
    assert st["basis"] == "sentinel probes" and st["probes"] > 0 and st["stale_after_commit"] == 0, st
    assert res["peak_rss_mb"]["server_tree"] > 0


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="langgraph-cli's in-memory server needs python >= 3.11")
def test_load_langgraph_pinned_generation_is_reported_stale(sample_mentions_index, tmp_path):
    out = tmp_path / "out"
    argv = ["bench-load", "--graphs-dev", "--pin-generation", "--seconds", "15", "--clients", "4",
            "--write-every", "3", "--index", str(sample_mentions_index.path), "--out", str(out)]  # fmt: skip
    assert main(argv) == 1  # the control run: stale answers make the command fail
    st = json.loads((out / "bench-load-graphs-dev.json").read_text(encoding="utf-8"))["staleness"]
    assert st["stale_after_commit"] > 0 and st["probe_older_than_asked"] > 0, st
