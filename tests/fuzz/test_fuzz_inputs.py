"""Fuzzing the remaining inputs a user hands the library (issue 34 item 6, "Bad input, one more round").

KG files at the file level (encodings, BOMs, CRLF / CR, NUL bytes, huge lines, wrong column
counts, gzip or not) through ``load_kg`` and ``kgrag index --kg``; ``--retriever-opt`` strings;
LangGraph input states (every graph of ``graphs/``); LlamaIndex ``QueryBundle`` s and LangChain
queries; odd passage metadata on the adapters' nodes / documents. Property for each: a valid
result, or a library error (a ``ValueError`` subclass, or a deliberate ``TypeError`` /
``UnknownEntityError`` of the argument checks) raised in ``kgrag_plugins`` with a one-line message --
never a KeyError / IndexError / AttributeError / TypeError / UnicodeError from deep inside.
One index (the bundled sample, ``parsekg`` builder) is built for the module.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib
import io
import json
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.importers import KGFormatError, LoadReport, load_kg
from kgrag_plugins.index.unknown_entity import UnknownEntityError
from kgrag_plugins.types import Evidence, Fact, Passage, ScoredPassage

REPO = Path(__file__).resolve().parents[2]
FEW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
SOME = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

Q = "Which river flows through the city where Marie Curie was born?"
HUGE = "Marie Curie " * (1 << 17)  # 1.5 MB: over the 100,000-character query cap and spaCy's 1M limit
#: Values of the wrong kind for any key: None, numbers, blank / odd / huge strings, lists, dicts.
odd_value = st.one_of(
    st.none(),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["", "   ", "\t\n", "\ud800", "\x00", "a\x00b", "\ufeffQ", HUGE]),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=6)), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=2),
)
query_text = st.one_of(
    st.sampled_from([Q, "Who directed Big?", "Marie Curie", "Warsaw\x00", "  Vistula  ", HUGE, "", "   ", "\ud800x"]),
    st.text(max_size=40),
)
_DELIBERATE = re.compile(r"\b(must be|needs)\b")


def _assert_clean(exc: BaseException) -> None:
    """A library error with a one-line message, raised by kgrag_plugins' own checks."""
    msg = str(exc)
    where = traceback.extract_tb(exc.__traceback__)[-1]
    assert msg.strip() and "\n" not in msg, f"{type(exc).__name__} message is not one line: {msg!r}"
    assert "/kgrag_plugins/" in where.filename, f"{type(exc).__name__} from {where.filename}:{where.lineno}: {msg}"
    assert not isinstance(exc, (UnicodeError, RecursionError)), repr(exc)
    if isinstance(exc, TypeError):  # only the argument checks' own ("query must be a non-empty str ...")
        assert _DELIBERATE.search(msg), f"TypeError from {where.filename}:{where.lineno}: {msg}"
    else:
        assert isinstance(exc, (ValueError, UnknownEntityError)), f"{type(exc).__name__}: {msg}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-inputs")


@pytest.fixture(scope="module")
def fuzz_index(tmp_path_factory):
    """The bundled sample with the LLM-free ``parsekg`` builder (entities, triples, ParseKG: every
    method and graph runs on it), built once for the module."""
    from kgrag_plugins.demo import sample_corpus
    from kgrag_plugins.index.store import KnowledgeIndex

    path = tmp_path_factory.mktemp("fuzz-index") / "index"
    index = KnowledgeIndex.build(sample_corpus(), path, builder="parsekg", entity_vectors=True, progress=False)
    yield index
    index.close()


# --------------------------------------------------------------------------- KG files

GOOD = {
    "metaqa": ["Big|directed_by|Penny Marshall", "Big|starred_actors|Tom Hanks", "Splash|starred_actors|Tom Hanks"],
    "tsv": ["subject\trelation\tobject", "Big\tdirected_by\tPenny Marshall", "Big\tstarred_actors\tTom Hanks"],
    "openie": [
        json.dumps({"passage_id": "p1", "title": "Big", "entities": ["Big"], "triples": [["Big", "by", "Marshall"]]}),
        json.dumps({"passage_id": "p2", "triples": [["Tom Hanks", "starred in", "Splash"]]}),
    ],
    "wikidata5m": ["Q1\tP1\tQ2", "Q2\tP5\tQ3", "Q3\tP1\tQ1"],
}
SEP = {"metaqa": "|", "tsv": "\t", "openie": ",", "wikidata5m": "\t"}


@st.composite
def kg_line(draw: Any, fmt: str) -> str:
    """A good line of ``fmt``, or one with a column dropped / added, a NUL, a BOM, the wrong separator."""
    line = draw(st.sampled_from(GOOD[fmt]))
    op = draw(st.sampled_from(["keep", "keep", "drop", "add", "nul", "bom", "sep", "empty", "text"]))
    sep = SEP[fmt]
    if op == "drop":
        return sep.join(line.split(sep)[:-1])
    if op == "add":
        return line + sep + draw(st.text(max_size=5))
    if op == "nul":
        k = draw(st.integers(0, len(line)))
        return line[:k] + "\x00" + line[k:]
    if op == "bom":
        return "\ufeff" + line
    if op == "sep":
        return line.replace(sep, draw(st.sampled_from([",", ";", " ", "|", "\t", "\x00"])))
    if op == "empty":
        return draw(st.sampled_from(["", " ", "\t\t", sep * 2]))
    if op == "text":
        return draw(st.text(max_size=30))
    return line


@st.composite
def kg_file(draw: Any) -> tuple[str, bytes, str]:
    """``(format, file bytes, suffix)``: lines in any encoding and line ending, maybe a 1 MB line,
    maybe gzip (whole, truncated) or a plain file named ``.gz``."""
    fmt = draw(st.sampled_from(list(GOOD)))
    lines = draw(st.lists(kg_line(fmt), max_size=8))
    if draw(st.sampled_from([False, False, False, True])):  # a huge line (one field, or a huge field)
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(GOOD[fmt])) + "x" * (1 << 20))
    text = draw(st.sampled_from(["\n", "\r\n", "\r"])).join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))
    encoding = draw(
        st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"])
    )
    data = text.encode(encoding, "replace")
    wrap = draw(st.sampled_from(["none", "none", "none", "gzip", "gzip-truncated", "fake-gz"]))
    if wrap == "gzip":
        data = gzip.compress(data)
    elif wrap == "gzip-truncated":
        data = gzip.compress(data)[: draw(st.integers(0, 30))]
    return fmt, data, ".txt" if wrap == "none" else ".txt.gz"


def _check_kg_load(path: Path, fmt: str, on_error: str) -> None:
    try:
        g, rep = load_kg(path, fmt, on_error=on_error, progress=False)
    except KGFormatError as e:
        assert str(path) in str(e)
        _assert_clean(e)
    else:
        assert isinstance(g, KnowledgeGraph) and isinstance(rep, LoadReport)
        assert g.num_triples > 0 or (fmt == "openie" and g.num_entities > 0)


@MANY
@given(case=kg_file(), on_error=st.sampled_from(["skip", "raise"]))
@example(case=("metaqa", b"Big|directed_by|Penny Marshall\n", ".txt.gz"), on_error="skip")  # BadGzipFile before
@example(case=("tsv", gzip.compress(b"a\tr\tb\n" * 50)[:25], ".txt.gz"), on_error="skip")  # EOFError before
@example(case=("wikidata5m", "Q1\tP1\tQ2\r\n".encode("utf-16"), ".txt"), on_error="raise")
def test_fuzz_kg_files(workdir, case, on_error):
    fmt, data, suffix = case
    path = workdir / f"kg-{fmt}{suffix}"
    path.write_bytes(data)
    _check_kg_load(path, fmt, on_error)


@pytest.mark.parametrize(
    "data",
    [b"Big|directed_by|Penny Marshall\n", gzip.compress(b"Big|r|x\n" * 100)[:30], b"\x1f\x8b\x08\x00" + b"\xff" * 40],
    ids=["not-gzip", "truncated", "corrupt"],
)
def test_bad_gzip_kg_file_is_a_format_error(workdir, data):
    """A ``.gz`` KG file that is not gzip, truncated or corrupt (was BadGzipFile / EOFError / zlib.error)."""
    path = workdir / "bad.txt.gz"
    path.write_bytes(data)
    for fmt in GOOD:
        with pytest.raises(KGFormatError, match=r"not a readable gzip file") as e:
            load_kg(path, fmt, progress=False)
        _assert_clean(e.value)


class _StubIndex:
    """What ``kgrag index`` prints of a built index (the build itself is not under test here)."""

    def __init__(self, graph: Any):
        self.path = "stub"
        self.counts = {"triples": graph.num_triples if graph is not None else 0}
        self.manifest = {"timings": {}}


def _kgrag_index(argv: list[str]) -> tuple[int, str]:
    from kgrag_plugins import cli
    from kgrag_plugins.index.store import KnowledgeIndex

    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        mp.setattr(KnowledgeIndex, "build", classmethod(lambda cls, passages, out, **kw: _StubIndex(kw.get("graph"))))
        rc = cli.main(argv)
    return rc, err.getvalue()


@FEW
@given(case=kg_file(), on_error=st.sampled_from(["skip", "raise"]))
@example(case=("openie", b'{"passage_id": "p"}', ".txt.gz"), on_error="raise")  # BadGzipFile traceback before
def test_fuzz_kg_import_cli(workdir, case, on_error):
    """``kgrag index --kg FILE --format F``: rc 0, or rc 2 and one ``kgrag index: error:`` line."""
    fmt, data, suffix = case
    path = workdir / f"cli-{fmt}{suffix}"
    path.write_bytes(data)
    rc, err = _kgrag_index(["index", "--kg", str(path), "--format", fmt, "--on-error", on_error, "--out", "unused"])
    lines = [ln for ln in err.splitlines() if ln.startswith("kgrag index")]
    if rc == 0:
        assert not lines and "loaded " in err
    else:
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("kgrag index: error: "), err


# --------------------------------------------------------------------------- --retriever-opt

opt_part = st.one_of(
    st.sampled_from(["dense", "kg_infused", "translator", "alpha", "rounds", "exact", " a ", "b.c", "", "é", "\x00"]),
    st.text(max_size=6),
)
opt_values = st.one_of(
    st.lists(
        st.sampled_from(["1", "2.5", "true", "None", "nan", "", " ", "abc", "1e999", "9" * 5000, "١٢"]), max_size=3
    ).map(",".join),
    st.text(max_size=10),
)
opt_spec = st.one_of(
    st.builds(lambda n, k, v: f"{n}.{k}={v}", opt_part, opt_part, opt_values),
    st.text(max_size=20),
)


@MANY
@given(specs=st.lists(opt_spec, max_size=3))
@example(specs=["dense.exact=,"])  # no values: the retriever silently never ran
@example(specs=["dense.b.c=1"])  # not an identifier: TypeError in the factory later
@example(specs=[" dense . exact = true "])
def test_fuzz_retriever_opt_strings(specs):
    from kgrag_plugins.eval.bench import RETRIEVERS, _opt_grid, parse_retriever_opts

    try:
        opts = parse_retriever_opts(specs, sorted(RETRIEVERS))
    except ValueError as e:
        _assert_clean(e)
        assert "--retriever-opt" in str(e)
        return
    for name, options in opts.items():
        assert name == name.strip() and name
        for key, values in options.items():
            assert key.isidentifier() and values, (name, key, values)
        assert _opt_grid(options)  # at least one run per named retriever


@pytest.fixture(scope="module")
def bench_on_index(fuzz_index):
    """``run_bench("sample", ...)`` over the module's index (no dataset index is built)."""
    from kgrag_plugins.eval import bench

    def run(retrievers: list[str], opts: list[str]) -> dict[str, Any]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bench, "dataset_index", lambda ds, **kw: (fuzz_index, True))
            return bench.run_bench("sample", retrievers, limit=1, progress=False, retriever_opts=opts)

    return run


@FEW
@given(
    name=st.sampled_from(["dense", "bm25", "hybrid"]),
    key=st.sampled_from(["exact", "candidates", "rrf_k", "bogus", "k", "index"]),
    values=st.lists(st.sampled_from(["true", "0", "-1", "3", "2.5", "none", "abc", "nan"]), min_size=1, max_size=2),
)
@example(name="dense", key="bogus", values=["1"])  # TypeError (unexpected keyword) before
@example(name="hybrid", key="candidates", values=["abc"])  # TypeError deep in the fusion before
@example(name="hybrid", key="rrf_k", values=["-1"])  # ZeroDivisionError before
def test_fuzz_retriever_opt_runs(bench_on_index, name, key, values):
    """An unknown option or a value of the wrong type: one line naming the run, not a traceback."""
    try:
        report = bench_on_index([name], [f"{name}.{key}={','.join(values)}"])
    except ValueError as e:
        _assert_clean(e)
        assert "--retriever-opt" in str(e) and name in str(e)
    else:
        assert all(label.startswith(f"{name}[{key}=") for label in report["results"])


# --------------------------------------------------------------------------- LangGraph states

GRAPHS = ["activation", "frag", "kg_infused", "know3", "sa_rag", "translator"]
AGENT_GRAPHS = ["self-ask", "self-ask+kg-infused", "cot", "cot-rag", "sa-rag+cot", "decomposition", "front-door"]


@pytest.fixture(scope="module")
def graph_of(fuzz_index, tmp_path_factory):
    """``graph_of(name)``: the compiled graph of ``graphs/<name>.py`` (or agent ``name``) over the
    module's index, LLM-free, built once per name."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    mp = pytest.MonkeyPatch()
    mp.setenv("KGRAG_INDEX_DIR", str(fuzz_index.path))
    mp.setenv("KGRAG_CACHE_DIR", str(tmp_path_factory.mktemp("graphs-cache")))
    mp.delenv("KGRAG_LLM_BASE_URL", raising=False)
    from graphs import _common

    _common.reset()

    def build(name: str) -> Any:
        if name in GRAPHS:
            return importlib.import_module(f"graphs.{name}").build_graph()
        return importlib.import_module("graphs.agents").build_graph(name)

    yield build
    _common.reset()
    mp.undo()


messages = st.one_of(
    odd_value,
    st.lists(
        st.one_of(
            st.none(),
            st.integers(),
            query_text,
            st.tuples(st.sampled_from(["user", "human", "ai", "bogus"]), query_text),
            st.fixed_dictionaries({}, optional={"role": st.sampled_from(["user", "x"]), "content": query_text}),
        ),
        max_size=3,
    ),
)
state = st.fixed_dictionaries(
    {},
    optional={
        "question": st.one_of(query_text, odd_value),
        "messages": messages,
        "query": odd_value,
        "documents": st.one_of(odd_value, st.lists(st.one_of(st.text(max_size=8), odd_value), max_size=3)),
        "facts": odd_value,
        "trace": odd_value,
        "topic_entities": odd_value,
        "route": odd_value,
        "steps": odd_value,
        "reasoning": odd_value,
        "sub_questions": odd_value,
        "retrievals": odd_value,
        "extra_key": odd_value,
    },
)


#: A usable question plus one key of any value: most of these runs go through to the method.
one_odd_key = st.builds(
    lambda q, kv: {"question": q, **kv},
    st.sampled_from([Q, "Who directed Big?", "Where was Marie Curie born?"]),
    st.dictionaries(
        st.sampled_from(["query", "documents", "facts", "trace", "topic_entities", "route", "steps", "follow_up"]),
        odd_value,
        max_size=1,
    ),
)


def _check_graph_run(graph: Any, inp: dict[str, Any]) -> None:
    try:
        out = graph.invoke(dict(inp))
    except Exception as e:  # noqa: BLE001 - the property: only clean library errors
        _assert_clean(e)
    else:
        assert isinstance(out, dict) and isinstance(out.get("documents", []), list)


@SOME
@given(name=st.sampled_from(GRAPHS + AGENT_GRAPHS), inp=st.one_of(state, one_odd_key))
@example(name="activation", inp={"question": Q, "trace": "x"})  # TypeError in with_trace before
@example(name="frag", inp={"question": Q, "query": 5})  # TypeError in the hop router before
@example(name="self-ask", inp={})  # KeyError 'question' before
@example(name="self-ask+kg-infused", inp={"question": ["a"]})  # TypeError unhashable list before
@example(name="cot", inp={"question": Q, "facts": 5})  # TypeError int not iterable before
@example(name="front-door", inp={"question": Q, "steps": 5})  # TypeError (an agent's steps is a list) before
@example(name="sa_rag", inp={"messages": 5})  # NotImplementedError (message coercion) before
@example(name="translator", inp={"question": "\ud800?"})  # TypeError in the tokenizer before
@example(name="know3", inp={"question": HUGE})  # spaCy E088 before
def test_fuzz_langgraph_states(graph_of, name, inp):
    _check_graph_run(graph_of(name), inp)


@pytest.mark.parametrize(
    "name, inp, match",
    [
        ("activation", {"question": Q, "trace": "x"}, "'trace' must be a dict"),
        ("frag", {"question": Q, "topic_entities": [1, None]}, "'topic_entities' must hold entity id strings"),
        ("frag", {"messages": [{"role": "user"}]}, "'messages' must hold LangChain messages"),
        ("decomposition", {"messages": "hi"}, "needs a non-empty 'question'"),
        ("self-ask+kg-infused", {"question": None}, "needs a non-empty 'question'"),
        ("front-door", {"question": Q, "facts": 5}, "'facts' must be a list"),
        ("kg_infused", {"question": "a\ud800"}, "not valid Unicode"),
        ("activation", {"question": HUGE}, "at most 100000"),
    ],
)
def test_langgraph_bad_states_are_one_line_errors(graph_of, name, inp, match):
    with pytest.raises(ValueError, match=match) as e:
        graph_of(name).invoke(inp)
    _assert_clean(e.value)


def test_langgraph_odd_but_valid_states_run(graph_of):
    """A non-string ``query`` falls back to the question; one ``topic_entities`` id may be a string."""
    out = graph_of("frag").invoke({"question": Q, "query": 5, "topic_entities": "marie curie"})
    assert out["trace"]["frag"]["topic_entities"] == ["marie curie"]
    assert graph_of("activation").invoke({"question": Q, "query": None, "extra_key": object()})["documents"]


@MANY
@given(
    docs=st.lists(
        st.one_of(
            st.text(max_size=8),
            odd_value,
            st.dictionaries(st.sampled_from(["id", "text", "title", "score", "page_content"]), odd_value, max_size=4),
        ),
        max_size=4,
    )
)
@example(docs=[{"id": "p", "text": "t", "score": "high"}])  # float('high') ValueError from deep inside before
def test_fuzz_state_documents(docs):
    from kgrag_plugins.integrations.langgraph.state import documents_to_passages, state_to_evidence

    try:
        out = documents_to_passages(docs)
        ev = state_to_evidence({"question": Q, "documents": docs})
    except (TypeError, ValueError) as e:
        _assert_clean(e)
    else:
        assert all(isinstance(sp.passage.id, str) and isinstance(sp.score, float) for sp in out)
        assert len(ev.passages) == len(out)


# --------------------------------------------------------------------------- LlamaIndex / LangChain

ADAPTER_METHODS = ["activation", "dense", "frag", "sa_rag"]


@pytest.fixture(scope="module")
def adapters(fuzz_index):
    """``(LlamaIndex KGRetriever, LangChain retriever)`` per method over the module's index."""
    from kgrag_plugins.integrations._common import make_method
    from kgrag_plugins.integrations.langchain import KGRAGLangChainRetriever
    from kgrag_plugins.integrations.llama_index import KGRetriever

    made: dict[str, tuple[Any, Any]] = {}

    def get(method: str) -> tuple[Any, Any]:
        if method not in made:
            r = make_method(fuzz_index, method)
            made[method] = (KGRetriever(r, similarity_top_k=3), KGRAGLangChainRetriever(retriever=r, k=3))
        return made[method]

    return get


@SOME
@given(method=st.sampled_from(ADAPTER_METHODS), query=query_text, embedding=st.booleans())
@example(method="frag", query="\ud800", embedding=False)  # UnicodeEncodeError in spaCy before
@example(method="activation", query=HUGE, embedding=False)  # spaCy E088 before
@example(method="dense", query="   ", embedding=True)
def test_fuzz_llama_index_query_bundles(adapters, method, query, embedding):
    from llama_index.core.schema import NodeWithScore, QueryBundle

    bundle = QueryBundle(query_str=query, embedding=[0.0] * 4 if embedding else None)
    try:
        nodes = adapters(method)[0].retrieve(bundle)
    except Exception as e:  # noqa: BLE001
        _assert_clean(e)
    else:
        assert all(isinstance(n, NodeWithScore) and 0.0 <= n.score <= 1.0 for n in nodes)


@SOME
@given(method=st.sampled_from(ADAPTER_METHODS), query=st.one_of(query_text, odd_value))
@example(method="dense", query="\ud800")  # TypeError in the tokenizer before
@example(method="frag", query=HUGE)
def test_fuzz_langchain_queries(adapters, method, query):
    from langchain_core.documents import Document

    try:
        docs = adapters(method)[1].invoke(query)
    except Exception as e:  # noqa: BLE001
        _assert_clean(e)
    else:
        assert all(isinstance(d, Document) and isinstance(d.metadata["score"], float) for d in docs)


meta_key = st.one_of(st.text(max_size=6), st.integers(), st.none(), st.tuples(st.text(max_size=2)))
meta_value = st.one_of(
    odd_value,
    st.binary(max_size=4),
    st.sets(st.integers(), max_size=2),
    st.lists(st.lists(st.integers(), max_size=2), max_size=2),
)


@MANY
@given(
    meta=st.dictionaries(meta_key, meta_value, max_size=4),
    fact_data=st.dictionaries(meta_key, meta_value, max_size=3),
    pid=st.text(min_size=1, max_size=8),
)
@example(meta={1: "a"}, fact_data={}, pid="p")  # pydantic ValidationError (TextNode metadata keys) before
@example(meta={"score": "high", "kind": 5, "title": None, "id": 3}, fact_data={None: 1}, pid="p")
def test_fuzz_adapter_node_metadata(meta, fact_data, pid):
    """Odd passage / fact metadata (non-string keys, nested values, bytes, sets) on the adapters' nodes."""
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore

    from kgrag_plugins.integrations.langchain.retriever import evidence_to_documents
    from kgrag_plugins.integrations.langgraph.state import documents_to_passages
    from kgrag_plugins.integrations.langgraph.state import evidence_to_documents as state_documents
    from kgrag_plugins.integrations.llama_index.nodes import evidence_to_nodes

    ev = Evidence(
        Q, [ScoredPassage(Passage(pid, "text", "Title", meta), 0.5)], [Fact("a r b", score=0.2, data=fact_data)]
    )
    nodes = evidence_to_nodes(ev)
    assert all(isinstance(n, NodeWithScore) and all(isinstance(k, str) for k in n.node.metadata) for n in nodes)
    assert all(isinstance(d, Document) for d in evidence_to_documents(ev))
    back = documents_to_passages(state_documents(ev))
    assert [sp.passage.id for sp in back] == [pid]
