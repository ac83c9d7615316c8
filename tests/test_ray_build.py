"""Distributed index builds on Ray (issue 19 item 5; ``kgrag index --engine ray``, docs/ray.md).

The Ray build must give the single-process index: same entities (ids, names, aliases,
descriptions, types), triples with their sources, links, passage ids and order, ParseKG, and
passage vectors within 1e-5. Ray runs locally with 2 CPUs, started and stopped by the module
fixture.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import require_extra

from kgrag_plugins.cli import main
from kgrag_plugins.index.ray_build import RayNotInstalledError, build_index_ray, require_ray
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.models.llm import ScriptedLLM
from kgrag_plugins.types import Passage


@pytest.fixture(scope="module")
def local_ray():
    """A local 2-CPU Ray for the module (build_index_ray uses an initialised Ray and leaves it running)."""
    ray = require_extra("ray", "ray")
    assert not ray.is_initialized()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def snapshot(index: KnowledgeIndex) -> dict:
    """Everything the parity claim covers except vectors (compared with a tolerance)."""
    g = index.graph
    links = g.link_matrix().tocoo()
    out = {
        "passages": [(p.id, p.title, p.text) for p in index.passages],
        "entities": [(e.id, e.name, tuple(e.aliases), e.description, e.type) for e in g.entities()],
        "triples": [(t.head, t.relation, t.tail, tuple(t.source_ids)) for t in g.triples()],
        "graph_passages": g.passage_ids,
        "links": sorted(zip(links.row.tolist(), links.col.tolist())),
        "meta": json.dumps(g.meta, sort_keys=True),
        "counts": index.counts,
        "builder": index.manifest["builder"],
    }
    if index.parsekg is not None:
        kg = index.parsekg
        out["parsekg"] = [
            (kg.passage_of(s), kg.sentence(s), kg.heads_of(s), kg.tails_of(s)) for s in range(kg.num_sentences)
        ]
    return out


def saved_files(index: KnowledgeIndex, *subdirs: str) -> dict[str, str]:
    """sha256 of every file the graph and ParseKG are saved as (byte-identical saves)."""
    gdir = index.path / index.manifest["generation"]
    return {
        str(f.relative_to(gdir)): hashlib.sha256(f.read_bytes()).hexdigest()
        for sub in subdirs
        for f in sorted((gdir / sub).rglob("*"))
        if f.is_file()
    }


def assert_same_index(single: KnowledgeIndex, distributed: KnowledgeIndex) -> None:
    a, b = snapshot(single), snapshot(distributed)
    for key in a:
        assert a[key] == b[key], f"Ray build differs from the single-process build in {key}"
    assert single.passages.ids == distributed.passages.ids
    va, vb = single.passages.vectors, distributed.passages.vectors
    assert va.shape == vb.shape and va.dtype == vb.dtype == np.float32
    assert np.abs(va - vb).max() <= 1e-5
    assert distributed.manifest["engine"]["name"] == "ray"
    assert distributed.manifest["corpus_hash"] == single.manifest["corpus_hash"]


@pytest.mark.parametrize("builder", ["mentions", pytest.param("parsekg", marks=pytest.mark.slow)])
def test_ray_build_matches_single_process_on_sample(local_ray, tmp_path, sample_corpus, builder) -> None:
    single = KnowledgeIndex.build(sample_corpus, tmp_path / "single", builder=builder, progress=False)
    # 5 partitions of batches of 8: blocks finish out of order and are merged back in corpus order
    dist = build_index_ray(sample_corpus, tmp_path / "ray", builder=builder, partitions=5, batch_size=8, progress=False)
    assert_same_index(single, dist)
    assert saved_files(single, "graph", "parsekg") == saved_files(dist, "graph", "parsekg")
    assert dist.manifest["engine"] == {"name": "ray", "partitions": 5, "workers": 2, "address": "local"}
    assert dist.manifest["build_stats"]["entities"] == single.manifest["build_stats"]["entities"] > 100
    # the saved index reopens (atomic generation switch) with the same content, and extends with its builder
    reopened = KnowledgeIndex.open(tmp_path / "ray")
    assert snapshot(reopened) == snapshot(dist)
    top = reopened.passages.dense_search(reopened.embed_query(sample_corpus[3].text), 1)
    assert top[0][0].id == sample_corpus[3].id
    added = reopened.add_passages([Passage("new1", "Hank Snow recorded songs in Nashville.", "New one")])
    assert added["passages"] == 1 and reopened.counts["passages"] == len(sample_corpus) + 1
    reopened.close()


@pytest.mark.slow  # the default run keeps the mentions parity test; make test-slow runs this
def test_ray_build_in_memory_with_entity_vectors_and_curated_graph(local_ray, sample_corpus, sample_graph) -> None:
    single = KnowledgeIndex.build(sample_corpus, graph=sample_graph, entity_vectors=True, progress=False)
    dist = build_index_ray(sample_corpus, graph=sample_graph, entity_vectors=True, progress=False)
    assert dist.path is None and dist.manifest["builder"] is None
    assert_same_index(single, dist)
    assert np.abs(single.entity_vectors - dist.entity_vectors).max() <= 1e-5


# --------------------------------------------------------------------------- LLM builder

_LLM_PASSAGES = [
    Passage("p1", "zq1 Barack Obama was born in Honolulu.", "Barack Obama"),
    Passage("p2", "zq2 Michelle Obama married Obama in Chicago.", "Michelle Obama"),
    Passage("p3", "zq3 Honolulu is the capital of Hawaii.", "Honolulu"),
    Passage("p4", "zq1 Barack Obama was born in Honolulu.", "Barack Obama"),  # a repeated chunk
]
_NER = {
    "zq1": [("Barack Obama", ["Obama"]), ("Honolulu", [])],
    "zq2": [("Michelle Obama", []), ("Obama", []), ("Chicago", [])],
    "zq3": [("Honolulu", []), ("Hawaii", [])],
}
_RE = {
    "zq1": [["Barack Obama", "born in", "Honolulu"]],
    "zq2": [["Michelle Obama", "married", "Obama"], ["Michelle Obama", "married in", "Chicago"]],
    "zq3": [["Honolulu", "capital of", "Hawaii"]],
}


def _reply(messages) -> str:
    text = messages[-1]["content"]
    mark = re.search(r"zq\d", text).group()
    if "named_entities:" in text:
        return json.dumps({"triples": _RE[mark]})
    return json.dumps(
        [{"name": n, "type": "PERSON", "aliases": a, "entity_information": f"{n}."} for n, a in _NER[mark]]
    )


def _scripted_llm() -> ScriptedLLM:
    return ScriptedLLM(_reply)


class _BowEmbedder:
    """A picklable hashed bag-of-words embedder (shipped to the workers as an instance)."""

    name, dim = "test/ray-bow", 32

    def embed(self, texts, *, progress=None):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(tok.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.mark.slow  # the default run keeps the mentions parity test; make test-slow runs this
def test_ray_build_llm_builder_matches_and_fills_the_cache(local_ray, tmp_path) -> None:
    emb = _BowEmbedder()
    single = KnowledgeIndex.build(
        _LLM_PASSAGES, tmp_path / "single", builder="llm", llm=_scripted_llm(), embedder=emb, progress=False
    )
    dist = build_index_ray(
        _LLM_PASSAGES, tmp_path / "ray", builder="llm", llm=_scripted_llm, embedder=emb, partitions=2, progress=False
    )
    assert_same_index(single, dist)
    assert {"barack_obama", "hawaii", "chicago"} <= {e.id for e in dist.graph.entities()}
    stats = dist.manifest["build_stats"]
    assert stats["llm_calls"] >= 6 and stats["chunks_extracted_on_workers"] >= 3
    assert len(list((tmp_path / "ray" / "llm_cache").glob("*.json"))) == 3  # distinct chunks, as single-process
    # a rebuild finds every chunk in the cache: the workers make no LLM call
    again = build_index_ray(
        _LLM_PASSAGES, tmp_path / "ray", builder="llm", llm=_scripted_llm, embedder=emb, progress=False
    )
    assert again.manifest["build_stats"]["llm_calls"] == 0
    assert snapshot(again) == snapshot(dist)


def test_ray_build_rejects_unpicklable_llm_and_unknown_builder(local_ray, sample_corpus) -> None:
    with pytest.raises(TypeError, match="zero-argument factory"):
        build_index_ray(sample_corpus[:3], builder="llm", llm=_scripted_llm(), progress=False)
    with pytest.raises(ValueError, match="needs an LLM"):
        build_index_ray(sample_corpus[:3], builder="llm", progress=False)
    with pytest.raises(ValueError, match="unknown builder"):
        build_index_ray(sample_corpus[:3], builder="nope", progress=False)


# --------------------------------------------------------------------------- CLI and the missing extra


@pytest.mark.slow  # the default run keeps the mentions parity test; make test-slow runs this
def test_cli_index_engine_ray(local_ray, tmp_path, capsys, sample_corpus, sample_mentions_index) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in sample_corpus), encoding="utf-8")
    out = tmp_path / "idx"
    argv = ["index", "--corpus", str(corpus), "--builder", "mentions", "--engine", "ray", "--partitions", "3"]
    assert main([*argv, "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"] == sample_mentions_index.counts
    index = KnowledgeIndex.open(out)
    assert index.manifest["engine"]["partitions"] == 3
    assert_same_index(sample_mentions_index, index)
    index.close()


def test_missing_ray_extra_is_a_clear_error(monkeypatch, tmp_path, capsys, sample_corpus) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(RayNotInstalledError, match=r"pip install 'kgrag-plugins\[ray\]'"):
        require_ray()
    with pytest.raises(RayNotInstalledError, match="the 'ray' extra"):
        build_index_ray(sample_corpus, tmp_path / "x", builder="mentions", progress=False)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps(sample_corpus[0].to_dict()) + "\n", encoding="utf-8")
    assert main(["index", "--corpus", str(corpus), "--engine", "ray", "--out", str(tmp_path / "idx")]) == 2
    err = capsys.readouterr().err
    assert "kgrag index: error: the Ray engine needs the 'ray' extra" in err
    assert not (tmp_path / "idx").exists()


# --------------------------------------------------------------------------- 2k MuSiQue passages


@pytest.mark.slow
def test_ray_build_matches_single_process_on_2k_musique(local_ray, tmp_path, data_dir) -> None:
    from kgrag_plugins.datasets.loaders import load_corpus_jsonl

    corpus_file = Path(data_dir) / "musique" / "corpus.jsonl"
    assert corpus_file.is_file(), f"MuSiQue corpus missing: {corpus_file}"
    passages = load_corpus_jsonl(corpus_file)[:2000]
    assert len(passages) == 2000
    single = KnowledgeIndex.build(passages, tmp_path / "single", builder="mentions", progress=False)
    dist = build_index_ray(passages, tmp_path / "ray", builder="mentions", progress=False)
    assert_same_index(single, dist)
    assert saved_files(single, "graph") == saved_files(dist, "graph")
    assert dist.counts["entities"] > 5000
