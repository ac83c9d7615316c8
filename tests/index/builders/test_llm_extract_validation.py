"""LLM graph extraction validates its replies (issue 13 item 4): an invalid NER / RE reply is asked
once more, then the chunk falls back (counted in ``fallback_chunks``, WARNING) and is never cached,
so a rebuild with a working LLM gives the good graph."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import HashEmbedder
from test_llm_extract import PASSAGES, build, make_llm, snapshot

from kgrag_plugins.index.builders import llm_extract
from kgrag_plugins.index.builders.prompts import PROMPT_VERSION
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.models.llm import ScriptedLLM

GARBAGE = "lorem ipsum }{ no json here"


def garbage_llm() -> ScriptedLLM:
    return ScriptedLLM(lambda messages: GARBAGE)


def test_llm_extract_partial_garbage_falls_back_uncached_then_rebuilds(tmp_path, caplog) -> None:
    def override(messages):
        return GARBAGE if "zq2" in messages[-1]["content"] else None

    with caplog.at_level(logging.WARNING, logger="kgrag_plugins.build"):
        g, stats = build(llm=make_llm(override=override), cache_dir=tmp_path)
    assert stats.fallback_chunks == 1 and stats.unparsed == 2 and stats.failed == 0
    assert "michelle_obama" not in g and "hawaii" in g
    assert any("1 of 3 distinct chunk(s) fell back" in r.getMessage() for r in caplog.records)
    cached = [json.loads(f.read_text()) for f in tmp_path.glob("*.json")]
    assert len(cached) == 2 and all(c["ner_parsed"] and c["re_parsed"] for c in cached)  # only valid results

    good = make_llm()
    g2, stats2 = build(llm=good, cache_dir=tmp_path)
    assert stats2.cached == 2 and len(good.calls) == 2 and stats2.fallback_chunks == 0  # only zq2 again
    reference, _ = build()
    assert snapshot(g2) == snapshot(reference)


def test_llm_extract_all_garbage_fails_loudly_and_caches_nothing(tmp_path) -> None:
    idx = tmp_path / "idx"
    emb = HashEmbedder()
    with pytest.raises(RuntimeError, match="no valid reply for any of the 3 chunk"):
        KnowledgeIndex.build(PASSAGES, idx, embedder=emb, builder="llm", llm=garbage_llm(), progress=False)
    assert not list((idx / "llm_cache").glob("*.json"))
    # a rebuild with a good LLM gives the good graph
    index = KnowledgeIndex.build(PASSAGES, idx, embedder=emb, builder="llm", llm=make_llm(), progress=False)
    reference, _ = build()
    assert snapshot(index.graph) == snapshot(reference)
    assert index.manifest["build_stats"]["fallback_chunks"] == 0


def test_llm_extract_ignores_cached_invalid_results(tmp_path) -> None:
    """A cache entry an older version wrote for an unparsed reply is recomputed, not reused."""
    build(cache_dir=tmp_path)
    for f in tmp_path.glob("*.json"):
        data = json.loads(f.read_text())
        data.update(ner_parsed=False, entities=[], triples=[])
        f.write_text(json.dumps(data))
    llm = make_llm()
    g, stats = build(llm=llm, cache_dir=tmp_path)
    assert stats.cached == 0 and len(llm.calls) == 6
    assert snapshot(g) == snapshot(build()[0])
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["prompt_version"] == PROMPT_VERSION


def test_llm_extract_invalid_reply_retried_once(tmp_path) -> None:
    seen: dict[str, int] = {}

    def override(messages):
        content = messages[-1]["content"]
        if "zq3" in content and "named_entities:" not in content:
            seen["zq3"] = seen.get("zq3", 0) + 1
            return GARBAGE if seen["zq3"] == 1 else None  # invalid once, then valid
        return None

    g, stats = build(llm=make_llm(override=override), cache_dir=tmp_path)
    assert seen["zq3"] == 2 and stats.fallback_chunks == 0 and stats.unparsed == 1
    assert snapshot(g) == snapshot(build()[0])
    assert len(list(tmp_path.glob("*.json"))) == 3
    assert llm_extract.ExtractionStats().fallback_chunks == 0
