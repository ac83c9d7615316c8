"""Bad input on the retrieval surface fails early with a one-line error naming the field and
the fix: ``retrieve`` / ``aretrieve`` arguments, unknown entity ids, ``kgrag ask`` on a KG-only
index."""

from __future__ import annotations

import asyncio
import difflib

import numpy as np
import pytest
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.graph import KnowledgeGraph, UnknownEntityError
from kgrag_plugins.methods.base import Retriever
from kgrag_plugins.types import Entity, Evidence


class Recording(Retriever):
    """Records the arguments that reach ``_retrieve``."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def _retrieve(self, query: str, k: int) -> Evidence:
        self.calls.append((query, k))
        return Evidence(query, [])


def _one_line_naming(err: BaseException, field: str) -> str:
    msg = str(err)
    assert "\n" not in msg and msg.startswith(f"{field} must be"), msg
    return msg


BAD_K = st.one_of(
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
    st.integers(max_value=0),
    st.lists(st.integers(), max_size=2),
    st.decimals(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=150, deadline=None)
@given(k=BAD_K)
def test_retrieve_rejects_any_bad_k_before_work(k):
    r = Recording()
    with pytest.raises((TypeError, ValueError)) as ei:
        r.retrieve("who discovered radium?", k)
    msg = _one_line_naming(ei.value, "k")
    assert "pass e.g. k=5" in msg
    # wrong type -> TypeError, right type but < 1 -> ValueError
    assert isinstance(ei.value, ValueError if isinstance(k, int) and not isinstance(k, bool) else TypeError)
    with pytest.raises(type(ei.value), match="^k must be"):
        asyncio.run(r.aretrieve("who discovered radium?", k))
    assert r.calls == []


@settings(max_examples=50, deadline=None)
@given(k=st.one_of(st.integers(1, 10_000), st.integers(1, 100).map(np.int64)))
def test_retrieve_accepts_positive_ints_as_plain_int(k):
    r = Recording()
    r.retrieve("q", k)
    asyncio.run(r.aretrieve("q", k))
    assert [type(c[1]) for c in r.calls] == [int, int] and r.calls[0][1] == int(k)


@pytest.mark.parametrize("query", [None, 42, b"bytes", ["q"]])
def test_retrieve_rejects_non_str_query(query):
    r = Recording()
    with pytest.raises(TypeError) as ei:
        r.retrieve(query, 3)
    assert type(query).__name__ in _one_line_naming(ei.value, "query")
    with pytest.raises(TypeError, match="^query must be"):
        asyncio.run(r.aretrieve(query, 3))
    assert r.calls == []


def test_retrieve_inputs_on_a_real_retriever(sample_corpus):
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.baselines import DenseRetriever

    idx = KnowledgeIndex.build(sample_corpus[:5], embedder=HashEmbedder(dim=64), progress=False)
    r = DenseRetriever(idx)
    for bad in (2.5, "3", True):
        with pytest.raises(TypeError, match=r"^k must be a positive int .*got " + repr(bad).replace(".", r"\.")):
            r.retrieve("Marie Curie", bad)
    with pytest.raises(TypeError, match="^query must be"):
        r.retrieve(None, 3)  # type: ignore[arg-type]
    assert len(r.retrieve("Marie Curie", np.int64(2)).passages) == 2


# --------------------------------------------------------------------------- unknown entities


def _graph(names: list[str]) -> KnowledgeGraph:
    g = KnowledgeGraph()
    for n in names:
        g.add_entity(Entity(n.lower(), n))
    return g


def test_retrieve_unknown_entity_lists_close_names():
    g = _graph(["Marie Curie", "Pierre Curie", "Warsaw", "Paris", "Vistula"])
    with pytest.raises(UnknownEntityError) as ei:
        g.index_of("marie cury")
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("unknown entity id 'marie cury'")
    assert "did you mean 'marie curie' (Marie Curie)" in msg
    assert ei.value.close_ids() == ["marie curie"]
    with pytest.raises(UnknownEntityError, match="did you mean 'warsaw'"):
        g.name_of("WARSAWW")  # case-insensitive
    with pytest.raises(UnknownEntityError, match="no similar id among the graph's 5 entities"):
        g.index_of("qqqqqqqq")


def test_retrieve_unknown_entity_hint_is_lazy_and_bounded(monkeypatch):
    import kgrag_plugins.index.unknown_entity as hints

    calls: list[int] = []
    real = difflib.get_close_matches
    monkeypatch.setattr(
        difflib, "get_close_matches", lambda w, cands, **kw: (calls.append(len(cands)), real(w, cands, **kw))[1]
    )
    g = _graph([f"Entity {i}" for i in range(50)] + ["Zeta Prime"])
    for _ in range(100):  # code that catches the error pays nothing
        try:
            g.index_of("zeta primo")
        except KeyError:
            pass
    assert calls == []
    with pytest.raises(UnknownEntityError, match="did you mean 'zeta prime'"):
        g.index_of("zeta primo")
    assert calls == [51]
    monkeypatch.setattr(hints, "HINT_MAX_CANDIDATES", 10)  # large graph: same first letter only
    with pytest.raises(UnknownEntityError, match="did you mean 'zeta prime'"):
        g.index_of("zeta primo")
    assert calls[-1] == 1
    monkeypatch.setattr(hints, "HINT_MAX_ENTITIES", 10)  # huge graph: no search at all
    with pytest.raises(UnknownEntityError, match="no close-id search") as ei:
        g.index_of("zeta primo")
    assert ei.value.close_ids() == [] and len(calls) == 2


def test_retrieve_frag_unknown_topic_entity_names_close_ones():
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.frag.retriever import FRAGRetriever

    g = _graph(["Big", "Penny Marshall", "Tom Hanks"])
    g.add_triple("big", "directed_by", "penny marshall")
    g.add_triple("big", "starred_actors", "tom hanks")
    frag = FRAGRetriever(KnowledgeIndex.build([], graph=g, embedder=HashEmbedder(dim=64), progress=False))
    with pytest.raises(UnknownEntityError, match=r"unknown topic entity id 'tom hank'; did you mean 'tom hanks'"):
        frag.paths("who starred in it?", topic_entities=["tom hank"])


# --------------------------------------------------------------------------- kgrag ask


@pytest.fixture()
def kg_only_index(tmp_path, monkeypatch):
    """A saved KG-only index (the bundled sample KG, no passages), opened by the CLI with the
    same hash embedder."""
    import kgrag_plugins.index.store as store
    from kgrag_plugins.demo import sample_kg_path
    from kgrag_plugins.index.importers import load_kg
    from kgrag_plugins.index.store import KnowledgeIndex

    emb = HashEmbedder(dim=128)
    graph, _ = load_kg(sample_kg_path(), "metaqa", progress=False)
    KnowledgeIndex.build([], tmp_path / "kg", graph=graph, embedder=emb, progress=False)
    monkeypatch.setattr(store, "default_embedder", lambda: emb)
    return tmp_path / "kg"


def test_retrieve_cli_ask_on_kg_only_index_says_so(kg_only_index, capsys):
    from kgrag_plugins.cli import main

    assert main(["ask", "--index", str(kg_only_index), "Where was Marie Curie born?"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    line = out.err.strip()
    assert "\n" not in line and line.startswith("kgrag ask: error:")
    assert "has no passages" in line and "--retriever frag" in line


def test_retrieve_cli_ask_frag_on_kg_only_index_prints_paths_and_answers(kg_only_index, capsys):
    from kgrag_plugins.cli import main

    assert (
        main(["ask", "--index", str(kg_only_index), "--retriever", "frag", "-k", "3", "Where was [Marie Curie] born?"])
        == 0
    )
    out = capsys.readouterr().out
    assert "  path " in out and "Marie Curie -> born_in -> Warsaw" in out
    answers = [ln for ln in out.splitlines() if ln.startswith("answers: ")]
    assert len(answers) == 1 and "Warsaw" in answers[0]
    # --draw: FRAG evidence is drawn as its paths (not as an activation it does not have)
    pic = kg_only_index.parent / "frag-paths.html"
    q = "Where was [Marie Curie] born?"
    assert main(["ask", "--index", str(kg_only_index), "--retriever", "frag", "--draw", str(pic), q]) == 0
    assert "path entities" in capsys.readouterr().err
    html = pic.read_text()
    assert "FRAG paths" in html and "Marie Curie" in html and "Warsaw" in html
    # nothing found -> one line on stderr and a non-zero exit, not silence
    assert main(["ask", "--index", str(kg_only_index), "--retriever", "frag", "xyzzy plugh?"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("kgrag ask: no evidence from --retriever frag: no topic entity")
