"""Issue 34 item 5: secrets stay secret; every server we start binds to loopback by default.

Sentinel secrets (``KGRAG_LLM_API_KEY``, ``OPENAI_API_KEY``, a password in an LLM URL, graph
database and Chroma passwords, an embedding key) are set, then a full run goes through them: an
index built with the LLM builder, ``ask --generate``, a LangGraph graph (state dumped), a QA bench
(JSON + markdown), errors provoked with URLs that embed credentials and a server that echoes the
credentials it got, and the ``repr`` of every client object; in-process and as CLI subprocesses,
logging at DEBUG into files. A stand-in OpenAI-compatible server records the ``Authorization``
header it receives: the key must reach it (so it was used) and appear in none of the captured
outputs (stdout, stderr, log files, every file written, traces, state, reports, reprs, exception
messages). docs/reliability.md §11.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import kgrag_plugins
from kgrag_plugins._secrets import RedactingFilter, mask_url, redact, redact_argv, register_secret, split_userinfo

REPO = Path(__file__).resolve().parents[2]
MARK = "SENTINEL"  # every sentinel contains it: a partial leak (a key cut or half-masked) is caught too
LLM_KEY = "sk-SENTINEL-llm-7f3a9c21"
OPENAI_KEY = "sk-SENTINEL-openai-2b8e41"
URL_PW = "SENTINEL-urlpw-5d0c"
DB_PW = "SENTINEL-dbpw-91ab"
CHROMA_PW = "SENTINEL-chroma-44e2"
EMBED_KEY = "sk-SENTINEL-embed-66d1"
NEO4J_PW = "SENTINEL-neo4j-3c7f"
Q = "Which river flows through the city where Marie Curie was born?"


# --------------------------------------------------------------------------- the stand-in LLM server


class StubLLM:
    """An OpenAI-compatible chat server on 127.0.0.1 that records each ``Authorization`` header.
    Model ``leaky`` gets HTTP 401 and ``leaky500`` HTTP 500 whose body echoes the credentials it
    received (decoded), like a careless proxy; ``/embeddings`` always answers so (401)."""

    def __init__(self) -> None:
        self.auth: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _echo(self, auth: str) -> str:
                kind, _, value = auth.partition(" ")
                if kind == "Basic":
                    value = base64.b64decode(value).decode()
                return f"rejected credentials {auth!r} (decoded: {value}) for http://{value}@upstream/v1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                stub.auth.append(self.headers.get("Authorization", ""))
                self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]})

            def do_POST(self) -> None:  # noqa: N802
                auth = self.headers.get("Authorization", "")
                stub.auth.append(auth)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if body.get("model") in ("leaky", "leaky500") or self.path.endswith("/embeddings"):
                    status = 500 if body.get("model") == "leaky500" else 401
                    self._send(status, {"error": {"message": self._echo(auth)}})
                    return
                message = {"role": "assistant", "content": _reply(body)}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                usage = {"prompt_tokens": 5, "completion_tokens": 1}
                self._send(200, {"id": "s", "object": "chat.completion", "choices": [choice], "usage": usage})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, userinfo: str = "") -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}/v1"


def _reply(body: dict[str, Any]) -> str:
    """A valid reply to the LLM builder's NER / RE prompts, else ``Warsaw``."""
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages") or [])
    if "named_entities" in prompt:
        return '{"triples": []}'
    if "information-extraction assistant" in prompt:
        return '[{"name": "Marie Curie", "type": "PERSON", "aliases": [], "entity_information": "a physicist"}]'
    return "Warsaw"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- capture and check


class Captured:
    """Every output of the run, by label, and the files and logs to scan at the end."""

    def __init__(self, root: Path, log_file: Path) -> None:
        self.root, self.log_file = root, log_file
        self.texts: list[tuple[str, str]] = []

    def add(self, label: str, obj: Any) -> None:
        text = obj if isinstance(obj, str) else json.dumps(obj, default=repr, ensure_ascii=False)
        self.texts.append((label, text))

    def add_error(self, label: str, exc: BaseException, chain: bool = True) -> None:
        """The exception's message, repr and formatted traceback (with its causes when ``chain``)."""
        self.add(f"{label}: str", str(exc))
        self.add(f"{label}: repr", repr(exc))
        self.add(f"{label}: traceback", "".join(traceback.format_exception(exc, chain=chain)))

    def leaks(self, skip: tuple[str, ...] = ()) -> list[str]:
        for h in logging.getLogger().handlers:
            h.flush()
        found = [f"{label}: ...{t[max(0, t.find(MARK) - 120) : t.find(MARK) + 60]}..." for label, t in self.texts]
        found = [f for f, (_, t) in zip(found, self.texts) if MARK in t]
        for path in sorted(p for p in self.root.rglob("*") if p.is_file() and p.name not in skip):
            data = path.read_bytes()
            i = data.find(MARK.encode())
            if i >= 0:
                found.append(f"file {path.relative_to(self.root)}: ...{data[max(0, i - 120) : i + 60]!r}...")
        return found


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Sentinel secrets in the environment, the stand-in server, DEBUG logs of every logger into a
    file (the test's own handler: no redacting filter, so what reaches it is what the code logs)."""
    root = tmp_path_factory.mktemp("secrets")
    stub = StubLLM()
    stub.thread.start()
    mp = pytest.MonkeyPatch()
    env = {
        "KGRAG_LLM_API_KEY": LLM_KEY,
        "OPENAI_API_KEY": OPENAI_KEY,
        "KGRAG_LLM_BASE_URL": stub.url(),
        "KGRAG_LLM_MODEL": "stub",
        "KGRAG_LLM_DEADLINE": "10",
        "KGRAG_LLM_BREAKER_COOLDOWN": "0.01",
        "NEO4J_PASSWORD": NEO4J_PW,
        "FALKORDB_PASSWORD": DB_PW,
        "CHROMA_CLIENT_AUTH_CREDENTIALS": CHROMA_PW,
        "KGRAG_CACHE_DIR": str(root / "cache"),
        "KGRAG_PROGRESS": "0",
    }
    for k, v in env.items():
        mp.setenv(k, v)
    mp.delenv("KGRAG_INDEX_DIR", raising=False)
    mp.delenv("KGRAG_CHROMA_URL", raising=False)
    log_file = root / "logs" / "debug.log"
    log_file.parent.mkdir()
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root_logger = logging.getLogger()
    chatty = ("httpx", "httpcore", "urllib3", "chromadb", "redis", "neo4j", "langgraph", "langchain")
    levels = {n: logging.getLogger(n).level for n in chatty}
    old_level = root_logger.level
    root_logger.addHandler(handler)
    root_logger.setLevel(logging.DEBUG)
    for n in chatty:
        logging.getLogger(n).setLevel(logging.DEBUG)
    try:
        yield {"root": root, "stub": stub, "env": env, "captured": Captured(root, log_file)}
    finally:
        root_logger.removeHandler(handler)
        handler.close()
        root_logger.setLevel(old_level)
        for n, lv in levels.items():
            logging.getLogger(n).setLevel(lv)
        stub.httpd.shutdown()
        stub.httpd.server_close()
        mp.undo()


def _reset_cli_logging() -> None:
    """``main(["-vv", ...])`` sets levels; keep the capture at DEBUG for the next step."""
    logging.getLogger().setLevel(logging.DEBUG)
    for n in ("httpx", "httpcore", "chromadb", "urllib3"):
        logging.getLogger(n).setLevel(logging.DEBUG)


def _main(cap: Captured, label: str, argv: list[str]) -> int:
    """``kgrag ARGV`` in-process, its stdout and stderr captured."""
    from kgrag_plugins.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    _reset_cli_logging()
    cap.add(f"{label}: stdout", out.getvalue())
    cap.add(f"{label}: stderr", err.getvalue())
    return rc


@pytest.fixture(scope="module")
def cli_run(world) -> dict[str, Any]:
    """The CLI as subprocesses, logging at DEBUG (``-vv``) to stderr: ``kgrag index --builder llm``
    on ten sample passages (the key as Bearer), then ``kgrag ask --generate`` on that index with an
    LLM URL holding a password (sent as Basic)."""
    root, stub = world["root"], world["stub"]
    corpus = root / "corpus.jsonl"
    lines = (Path(kgrag_plugins.__file__).parent / "data" / "sample_corpus.jsonl").read_text().splitlines()
    corpus.write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")
    index_dir = root / "index"
    env = {**os.environ, **world["env"], "PYTHONDONTWRITEBYTECODE": "1"}
    cli = [sys.executable, "-m", "kgrag_plugins.cli", "-vv"]
    runs = {
        "index": (["index", "--corpus", str(corpus), "--builder", "llm", "--out", str(index_dir)], {}),
        "ask": (["ask", "--index", str(index_dir), "--generate", Q], {"KGRAG_LLM_BASE_URL": stub.url(f"cli:{URL_PW}")}),
    }
    codes, err = {}, {}
    for name, (argv, extra) in runs.items():
        with (root / "logs" / f"cli-{name}.out").open("wb") as o, (root / "logs" / f"cli-{name}.err").open("wb") as e:
            codes[name] = subprocess.run(cli + argv, env={**env, **extra}, stdout=o, stderr=e, timeout=180).returncode
        err[name] = (root / "logs" / f"cli-{name}.err").read_text(errors="replace")
    return {"index": index_dir, "codes": codes, "stderr": err}


@pytest.fixture(scope="module")
def full_run(world, cli_run) -> dict[str, Any]:
    """The in-process full run on the CLI's index: retrieve + answer (Evidence and trace dumped),
    ``ask --generate`` against a dead URL with a password, two LangGraph graphs (state dumped) and
    ``bench --qa`` with an LLM URL holding a password (JSON report, journal, markdown)."""
    from kgrag_plugins.eval import qa
    from kgrag_plugins.eval.bench import RETRIEVERS
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.integrations.langgraph import kg_infused_graph
    from kgrag_plugins.methods.answer import generate_answer
    from kgrag_plugins.models.llm import OpenAICompatibleLLM

    root, cap, stub = world["root"], world["captured"], world["stub"]
    assert cli_run["codes"]["index"] == 0, cli_run["stderr"]["index"][-3000:]
    index_dir, out = cli_run["index"], root / "out"
    out.mkdir()
    mp = pytest.MonkeyPatch()
    index = KnowledgeIndex.open(index_dir)
    try:
        # 1. retrieve + answer with the key (Bearer); a server echoing the key it got (HTTP 401)
        ev = RETRIEVERS["hybrid"][0](index).retrieve(Q, 3)
        with OpenAICompatibleLLM.from_env() as llm:
            ans = generate_answer(llm, Q, ev)
        cap.add("ask: evidence", ev.to_dict())
        cap.add("ask: answer", {"text": ans.text, "metadata": ans.metadata})
        with OpenAICompatibleLLM(model="leaky", max_retries=0) as leaky:
            ans = generate_answer(leaky, Q, ev)
        assert ans.metadata.get("llm_error"), ans.metadata
        cap.add("ask (leaky server): answer", {"text": ans.text, "metadata": ans.metadata})

        # 2. kgrag -vv ask --generate against a dead URL with a password: one error line, exit 1
        mp.setenv("KGRAG_LLM_BASE_URL", f"http://kgrag:{URL_PW}@127.0.0.1:{_closed_port()}/v1")
        mp.setenv("KGRAG_LLM_DEADLINE", "2")
        assert _main(cap, "ask (dead URL)", ["-vv", "ask", "--index", str(index_dir), "--generate", Q]) == 1
        mp.undo()

        # 3. the LangGraph graph of graphs/kg_infused.py (its LLM from a URL with a password), and
        #    kg_infused_graph with a server echoing the key (errors in the state's trace)
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from graphs import _common
        from graphs import kg_infused as graph_module

        mp.setenv("KGRAG_INDEX_DIR", str(index_dir))
        mp.setenv("KGRAG_LLM_BASE_URL", stub.url(f"kgrag:{URL_PW}"))
        _common.reset()
        try:
            cap.add("langgraph (graphs/kg_infused): state", graph_module.build_graph().invoke({"question": Q}))
            cap.add("langgraph: llm repr", repr(_common.load_llm()))
        finally:
            _common.reset()
            mp.undo()
        with OpenAICompatibleLLM(model="leaky500", max_retries=1, backoff=0.01) as bad:
            state = kg_infused_graph(index, llm=bad).invoke({"question": Q})
        assert state["trace"].get("llm_error"), state["trace"]
        cap.add("langgraph (server echoing the key): state", state)

        # 4. kgrag -vv bench --qa with an LLM URL holding a password (the sample's questions over
        #    this index: the benches' index lookup is pointed at it, as conftest's qa_bench_on_sample)
        mp.setattr(qa, "dataset_index", lambda ds, **kwargs: (index, True))
        argv = ["-vv", "bench", "--qa", "--dataset", "sample", "--llm", stub.url(f"bench:{URL_PW}"), "--llm-model",
                "stub", "--systems", "vanilla-rag", "--limit", "2", "--quiet", "--out", str(out / "qa.json"),
                "--cache-dir", str(root / "bench-cache")]  # fmt: skip
        assert _main(cap, "bench", argv) == 0
        report = json.loads((out / "qa.json").read_text())
        assert report["results"]["vanilla-rag"]["n"] == 2
    finally:
        mp.undo()
        index.close()
    return {"index": index_dir}


# --------------------------------------------------------------------------- the runs


def test_in_process_run_uses_the_key_and_leaks_nothing(world, full_run):
    """Retrieve + answer, ``ask`` against a dead URL, LangGraph states, ``bench --qa``: the DEBUG
    log file, traces, states, reports, stdout/stderr and every file written hold no sentinel; the
    key and the URL passwords did reach the server."""
    stub, cap = world["stub"], world["captured"]
    assert f"Bearer {LLM_KEY}" in stub.auth  # the key was used ...
    basic = {base64.b64decode(a.split()[1]).decode() for a in stub.auth if a.startswith("Basic ")}
    assert {f"kgrag:{URL_PW}", f"bench:{URL_PW}"} <= basic  # ... and the URL passwords too
    assert "DEBUG httpcore" in cap.log_file.read_text()  # the capture was at DEBUG
    leaks = cap.leaks()
    assert not leaks, "\n".join(leaks)


def test_cli_subprocess_run_leaks_nothing(world, cli_run):
    """``kgrag -vv index --builder llm`` and ``kgrag -vv ask --generate`` (URL with a password) as
    subprocesses: their stdout, stderr (DEBUG logs) and the index they write hold no sentinel."""
    stub, cap = world["stub"], world["captured"]
    assert cli_run["codes"] == {"index": 0, "ask": 0}, {n: e[-3000:] for n, e in cli_run["stderr"].items()}
    assert all("DEBUG" in e for e in cli_run["stderr"].values())  # -vv: logs at DEBUG
    assert f"Bearer {LLM_KEY}" in stub.auth
    assert f"cli:{URL_PW}" in {base64.b64decode(a.split()[1]).decode() for a in stub.auth if a.startswith("Basic ")}
    leaks = cap.leaks()
    assert not leaks, "\n".join(leaks)


def test_client_errors_with_credentials_are_redacted(world, tmp_path):
    """Wrong URLs that embed credentials and servers that echo them: our exception messages (and
    what they wrap), the logs and the CLI's error line hold no secret."""
    from kgrag_plugins.index.graphdb.kg import PropertyGraphKG
    from kgrag_plugins.index.passages import chroma_client
    from kgrag_plugins.integrations.llama_index.graphdb import CypherAdapter, falkordb_kg, neo4j_kg
    from kgrag_plugins.models.embed import OpenAICompatibleEmbedder
    from kgrag_plugins.models.llm import OpenAICompatibleLLM
    from kgrag_plugins.models.vllm import VLLMServer, VLLMStartupError

    cap, stub, dead = world["captured"], world["stub"], _closed_port()
    cases: list[tuple[str, Any]] = [
        ("llm: dead URL with password", lambda: OpenAICompatibleLLM(
            base_url=f"http://kgrag:{URL_PW}@127.0.0.1:{dead}/v1", model="m", max_retries=1, backoff=0.01
        ).complete("hi")),
        ("llm: server echoing the key (401)", lambda: OpenAICompatibleLLM(model="leaky").complete("hi")),
        ("llm: server echoing the key (500, retried)", lambda: OpenAICompatibleLLM(
            model="leaky500", max_retries=1, backoff=0.01).complete("hi")),
        ("llm: server echoing the URL password", lambda: OpenAICompatibleLLM(
            base_url=stub.url(f"kgrag:{URL_PW}"), model="leaky").complete("hi")),
        ("embedder: server echoing the key", lambda: OpenAICompatibleEmbedder(
            base_url=stub.url(f"e:{URL_PW}"), model="e", api_key=EMBED_KEY)),
        ("chroma: dead URL with password", lambda: chroma_client(url=f"http://chroma:{CHROMA_PW}@127.0.0.1:{dead}")),
        ("falkordb: dead URL with password", lambda: falkordb_kg(
            f"redis://default:{DB_PW}@127.0.0.1:{dead}", timeout=2)),
        ("neo4j: password", lambda: neo4j_kg(f"bolt://127.0.0.1:{dead}", "neo4j", NEO4J_PW)),
    ]  # fmt: skip

    class LostStore:  # a graph store whose client error names the URL with its password
        sanitize_query_output = False

        def structured_query(self, query: str, param_map: Any = None) -> Any:
            raise ConnectionError(f"Error 111 connecting to redis://default:{DB_PW}@127.0.0.1:{dead}")

    kg = PropertyGraphKG(
        CypherAdapter(LostStore(), dialect="falkordb", url=f"redis://default:{DB_PW}@127.0.0.1:{dead}")
    )
    cases.append(("graph db: lost server", lambda: kg.num_triples()))
    fake = tmp_path / "vllm"  # a `vllm` that prints its arguments (as vLLM logs its args) and dies
    fake.write_text('#!/bin/sh\necho "vllm args: $*"\nexit 3\n')
    fake.chmod(0o755)
    server = VLLMServer(str(tmp_path), executable=str(fake), extra_args=["--api-key", LLM_KEY],
                        log_file=tmp_path / "vllm.log", startup_timeout=20)  # fmt: skip
    cases.append(("vllm: startup error", server.start))
    raised = {}
    for label, call in cases:
        with pytest.raises(Exception) as info:
            call()
        raised[label] = type(info.value).__name__
        # the stand-in driver's own error (with the password) stays the __cause__ of ours, unchanged
        own_cause = label == "graph db: lost server"
        cap.add_error(label, info.value, chain=not own_cause)
        if not own_cause:
            logging.getLogger("kgrag_plugins.tests").warning("%s failed", label, exc_info=info.value)
    assert raised["llm: dead URL with password"] in ("LLMResponseError", "LLMTimeoutError", "LLMUnavailableError")
    assert raised["vllm: startup error"] == VLLMStartupError.__name__
    # the CLI's one error line echoes a mistyped --llm value: its password is masked
    argv = ["bench", "--qa", "--dataset", "sample", "--llm", f"htp://kgrag:{URL_PW}@127.0.0.1:{dead}/v1"]
    assert _main(cap, "cli error line (mistyped --llm URL)", argv) == 2
    leaks = cap.leaks(skip=("vllm.log",))
    assert not leaks, "\n".join(leaks)


def test_reprs_hold_no_secret(world, full_run):
    """``repr`` / ``str`` of our LLM clients, adapters, embedder, retrievers, index and graph-db objects."""
    from kgrag_plugins.eval.qa_meter import MeteredLLM
    from kgrag_plugins.index.graphdb.kg import PropertyGraphKG
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.integrations.langchain import KGRAGLangChainRetriever
    from kgrag_plugins.integrations.llama_index import KGRAGLlamaLLM
    from kgrag_plugins.integrations.llama_index.graphdb import CypherAdapter
    from kgrag_plugins.methods.kg_infused import KGInfusedRetriever
    from kgrag_plugins.models.embed import OpenAICompatibleEmbedder
    from kgrag_plugins.models.llm import OpenAICompatibleLLM
    from kgrag_plugins.models.vllm import VLLMServer

    cap, stub = world["captured"], world["stub"]
    index = KnowledgeIndex.open(full_run["index"])
    plain = OpenAICompatibleLLM.from_env()
    userinfo = OpenAICompatibleLLM(base_url=stub.url(f"kgrag:{URL_PW}"), api_key=LLM_KEY)

    class Store:
        sanitize_query_output = False

    objects: dict[str, Any] = {
        "llm (env key)": plain,
        "llm (URL password)": userinfo,
        "metered llm": MeteredLLM(userinfo),
        "kg-infused retriever": KGInfusedRetriever(index, llm=userinfo),
        "langchain retriever": KGRAGLangChainRetriever.from_index(index, "kg_infused", llm=userinfo),
        "llamaindex llm": KGRAGLlamaLLM(userinfo),
        "llamaindex llm metadata": KGRAGLlamaLLM(userinfo).metadata,
        "index": index,
        "graph db": PropertyGraphKG(CypherAdapter(Store(), dialect="falkordb", url=f"redis://:{DB_PW}@h:6379")),
        "cypher adapter url": CypherAdapter(Store(), dialect="falkordb", url=f"redis://:{DB_PW}@h:6379").url,
        "vllm server": VLLMServer(str(full_run["index"]), port=8000, extra_args=["--api-key", LLM_KEY]),
        "embedder": OpenAICompatibleEmbedder(base_url=stub.url(f"e:{URL_PW}"), model="e", api_key=EMBED_KEY, dim=3),
    }
    for label, obj in objects.items():
        cap.add(f"repr {label}", repr(obj))
        cap.add(f"str {label}", str(obj))
    assert "***" in repr(plain) and "127.0.0.1" in repr(userinfo)
    objects["embedder"]._client.close()
    index.close()
    leaks = cap.leaks()
    assert not leaks, "\n".join(leaks)


# --------------------------------------------------------------------------- the redaction helper


def test_redaction_helper():
    """``mask_url``, ``split_userinfo``, ``redact``, ``redact_argv`` and the logging filter."""
    assert mask_url("redis://:pw@h:6379/0") == "redis://***@h:6379/0"
    assert mask_url("https://u:p@ss@h/v1?api_key=k&x=1") == "https://***@h/v1?api_key=***&x=1"
    assert split_userinfo("http://u:p%40w@h:1/v1") == ("http://h:1/v1", ("u", "p@w"))
    assert split_userinfo("http://h/v1") == ("http://h/v1", None)
    register_secret("SENTINEL-registered-1")
    text = "Bearer abc.def Authorization: Basic dXM6cHc= password=hunter2 SENTINEL-registered-1 http://a:b@c"
    clean = redact(text)
    assert all(s not in clean for s in ("abc.def", "dXM6cHc=", "hunter2", "registered", "a:b@")), clean
    assert "max_tokens=512" in redact("max_tokens=512")  # ordinary text stays
    assert redact_argv(["vllm", "--api-key", "K1", "--password=P1", "--port", "8"]) == [
        "vllm", "--api-key", "***", "--password=***", "--port", "8",
    ]  # fmt: skip
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "key %s", ("SENTINEL-registered-1",), None)
    assert RedactingFilter().filter(record) and "SENTINEL" not in record.getMessage()


def test_cli_log_handler_redacts(tmp_path):
    """The stderr handler ``kgrag`` installs (no handler configured yet) masks secrets in records
    of any library (httpx logs URLs as it got them)."""
    code = (
        "import logging, sys\n"
        "from kgrag_plugins.cli import _configure_logging\n"
        "_configure_logging(2)\n"
        f"logging.getLogger('httpx').info('HTTP Request: POST http://u:{URL_PW}@h/v1 key %s', {LLM_KEY!r})\n"
    )
    env = {**os.environ, "KGRAG_LLM_API_KEY": LLM_KEY, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "HTTP Request" in out.stderr and MARK not in out.stderr, out.stderr


# --------------------------------------------------------------------------- bind addresses


def test_serve_llm_binds_loopback_by_default(monkeypatch, tmp_path):
    """``kgrag serve-llm`` (and ``VLLMServer``) put ``--host 127.0.0.1`` on the ``vllm serve``
    command line unless told otherwise (the command is built, vLLM is not started)."""
    from kgrag_plugins.cli import build_parser, main
    from kgrag_plugins.models import vllm

    assert build_parser().parse_args(["serve-llm", "m"]).host == "127.0.0.1"
    built: list[list[str]] = []

    def fake_start(self: vllm.VLLMServer) -> vllm.VLLMServer:
        self.executable, self.port = str(tmp_path / "vllm"), self.port or 8000
        built.append(self.command())
        raise vllm.VLLMStartupError("not started in this test")

    monkeypatch.setattr(vllm.VLLMServer, "start", fake_start)
    assert main(["serve-llm", str(tmp_path)]) == 1
    cmd = built[0]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1", cmd
    assert vllm.VLLMServer(str(tmp_path)).host == "127.0.0.1"
    assert vllm.DEFAULT_ENV["VLLM_HOST_IP"] == "127.0.0.1"
    assert main(["serve-llm", str(tmp_path), "--host", "0.0.0.0"]) == 1  # told otherwise: honoured
    assert built[1][built[1].index("--host") + 1] == "0.0.0.0"


def test_graphdb_server_binds_loopback():
    """``FalkorDBServer``'s ``redis-server`` command line binds 127.0.0.1 only."""
    from kgrag_plugins.index.graphdb.server import FalkorDBServer, falkordb_command

    cmd = falkordb_command(6399, "/tmp/x")
    assert cmd[cmd.index("--bind") + 1] == "127.0.0.1", cmd
    assert FalkorDBServer(port=6399).url == "redis://127.0.0.1:6399"


def test_langgraph_dev_binds_loopback():
    """``make graphs-dev`` runs ``langgraph dev --host 127.0.0.1`` (make -n prints the command)."""
    out = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "graphs-dev"], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "langgraph dev" in ln)
    argv = line.split()
    assert argv[argv.index("--host") + 1] == "127.0.0.1", line
