"""``kgrag mcp``: the index served over the Model Context Protocol, checked with the official SDK's client
(issue 37 item 3): the four tools listed and called in process, bad arguments as tool errors (the session
goes on), ``kgrag mcp --transport http`` behind a bearer token in a subprocess, a non-loopback host refused."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import require_extra

require_extra("mcp", "mcp")

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from kgrag_plugins.cli import main  # noqa: E402
from kgrag_plugins.integrations.mcp import build_server, is_loopback  # noqa: E402

#: sq-01 of the bundled sample questions; its first-hop gold passage is s-001 (Marie Curie)
QUESTION = "Which river flows through the city where Marie Curie was born?"
TOOLS = {"retrieve", "explain", "list_methods", "index_info"}
TOKEN_ENV = "KGRAG_TEST_MCP_TOKEN"


def _run(coro: Any, seconds: float = 120) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(seconds):
            return await coro

    return asyncio.run(bounded())


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture(scope="module")
def server(sample_index):
    """The MCP server over the saved sample index (title graph, real MiniLM; no ParseKG)."""
    srv = build_server(sample_index.path)
    yield srv
    srv.index_tools.close()


def test_lists_the_four_tools_and_calls_each(server, sample_index):
    async def session() -> dict[str, Any]:
        async with Client(server) as client:
            listed = await client.list_tools()
            out: dict[str, Any] = {"tools": {t.name: t for t in listed.tools}}
            for method in ("dense", "activation"):
                out[method] = await client.call_tool("retrieve", {"question": QUESTION, "method": method, "k": 3})
            out["default"] = await client.call_tool("retrieve", {"question": QUESTION})
            out["explain"] = await client.call_tool("explain", {"question": QUESTION})
            out["methods"] = await client.call_tool("list_methods", {})
            out["info"] = await client.call_tool("index_info", {})
            return out

    out = _run(session())
    assert set(out["tools"]) == TOOLS
    schema = out["tools"]["retrieve"].input_schema
    assert schema["required"] == ["question"] and schema["properties"]["k"]["maximum"] == 50
    for method in ("dense", "activation"):
        res = out[method]
        assert not res.is_error, _text(res)
        body = res.structured_content
        assert body["method"] == method and 1 <= len(body["passages"]) <= 3
        assert all(p["id"] and p["title"] and p["text"] for p in body["passages"])
        assert "s-001" in [p["id"] for p in body["passages"]]
        assert body["trace"]["retriever"] and "seconds" in body["trace"]
    assert out["activation"].structured_content["facts"], "activation returns graph facts"
    assert out["activation"].structured_content["trace"]["seeds"]
    assert out["default"].structured_content["method"] == "activation"
    assert len(out["default"].structured_content["passages"]) == 5

    explained = _text(out["explain"])
    assert not out["explain"].is_error and explained.startswith("## Why these passages")
    assert "**Passages:**" in explained and "s-001" in explained

    methods = {m["name"]: m for m in out["methods"].structured_content["result"]}
    assert {"dense", "bm25", "hybrid", "activation", "frag", "translator"} <= set(methods)
    assert methods["activation"]["available"] and methods["activation"]["default"]
    assert not methods["translator"]["available"] and "ParseKG" in methods["translator"]["why_not"]
    assert methods["frag"]["llm"].startswith("optional") and methods["dense"]["llm"] == "none"

    info = out["info"].structured_content
    assert info["path"] == str(sample_index.path)
    assert info["counts"]["passages"] == len(sample_index.passages) and info["counts"]["entities"] > 0
    assert info["embedder"]["name"] == sample_index.embedder.name


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"question": QUESTION, "method": "no-such-method"}, "unknown method 'no-such-method'"),
        ({"question": QUESTION, "k": 0}, "greater than or equal to 1"),
        ({"question": QUESTION, "k": 51}, "less than or equal to 50"),
        ({"question": QUESTION, "k": "many"}, "valid integer"),
        ({"question": ""}, "at least 1 character"),
        ({"question": "   "}, "question must be a non-empty string"),
        ({}, "question"),
        ({"question": QUESTION, "method": "translator"}, "no ParseKG"),
    ],
)
def test_bad_arguments_are_tool_errors_and_the_session_goes_on(server, arguments, message):
    async def session() -> tuple[Any, Any, Any]:
        async with Client(server) as client:
            bad = await client.call_tool("retrieve", arguments)
            empty = await client.call_tool("explain", {"question": ""})
            good = await client.call_tool("retrieve", {"question": QUESTION, "method": "bm25", "k": 2})
            return bad, empty, good

    bad, empty, good = _run(session())
    assert bad.is_error and message in _text(bad), _text(bad)
    assert empty.is_error
    assert not good.is_error and len(good.structured_content["passages"]) == 2


def test_index_dir_env_is_the_default(sample_index, monkeypatch):
    monkeypatch.setenv("KGRAG_INDEX_DIR", str(sample_index.path))
    srv = build_server()
    try:
        assert srv.index_tools.index_dir() == sample_index.path
        assert srv.index_tools.index_info()["path"] == str(sample_index.path)
    finally:
        srv.index_tools.close()


def test_loopback_hosts():
    assert all(map(is_loopback, ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.168.1.10", "example.com"]))


def test_cli_refuses_a_remote_host_and_misplaced_options(capsys, sample_index):
    index = str(sample_index.path)
    assert main(["mcp", "--index", index, "--transport", "http", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--allow-remote" in err and err.startswith("kgrag mcp: error:")
    assert main(["mcp", "--index", index, "--token", "abc"]) == 2  # stdio has no token
    assert "--transport http" in capsys.readouterr().err
    assert main(["mcp", "--index", index, "--transport", "http", "--token-env", "KGRAG_TEST_UNSET_VAR"]) == 2
    assert "KGRAG_TEST_UNSET_VAR" in capsys.readouterr().err
    assert main(["mcp", "--index", str(Path(index).parent / "missing")]) == 2
    assert "not a kgrag index" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(proc: subprocess.Popen, port: int, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"kgrag mcp exited with {proc.returncode}: {log.read_text()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"kgrag mcp did not listen on port {port} within {seconds} s")


def test_http_transport_with_a_bearer_token(sample_index, tmp_path):
    token = "mcp-test-token-" + os.urandom(8).hex()
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**os.environ, TOKEN_ENV: token}
    cmd = [sys.executable, "-m", "kgrag_plugins.cli", "mcp", "--index", str(sample_index.path)]
    cmd += ["--transport", "http", "--port", str(port), "--token-env", TOKEN_ENV]
    log_path = tmp_path / "stderr.txt"
    stderr = log_path.open("w+")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path)
    try:
        _wait_for_port(proc, port, log_path)
        assert httpx2.post(url, json={}).status_code == 401
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")

        async def with_token() -> tuple[set[str], Any, Any]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                hit = await client.call_tool("retrieve", {"question": QUESTION, "method": "dense", "k": 3})
                bad = await client.call_tool("retrieve", {"question": QUESTION, "k": 0})
                return names, hit, bad

        names, hit, bad = _run(with_token())
        assert names == TOOLS
        assert not hit.is_error and "s-001" in [p["id"] for p in hit.structured_content["passages"]]
        assert bad.is_error

        async def without_token() -> None:
            async with Client(url) as client:
                await client.list_tools()

        with pytest.raises(BaseException) as refused:  # the SDK raises its error inside an ExceptionGroup
            _run(without_token(), seconds=60)
        assert not isinstance(refused.value, TimeoutError)
        assert proc.poll() is None, "the server survives refused clients"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        stderr.seek(0)
        log = stderr.read()
        stderr.close()
    assert f"serving {url}" in log and "bearer token required" in log
    assert token not in log


def test_stdio_transport(sample_index, tmp_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgrag_plugins.cli", "mcp", "--index", str(sample_index.path)],
        env={**os.environ},
        cwd=str(tmp_path),
    )

    async def session() -> tuple[set[str], Any]:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            return names, await client.call_tool("retrieve", {"question": QUESTION, "method": "bm25", "k": 2})

    names, hit = _run(session())
    assert names == TOOLS
    assert not hit.is_error and [p["id"] for p in hit.structured_content["passages"]][0] == "s-001"
