"""The MCP server: :class:`~.tools.IndexTools` as four tools of the official SDK's ``MCPServer``
(FastMCP, renamed in mcp 2), over stdio or streamable HTTP (loopback by default, optional bearer token)."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from .tools import DEFAULT_METHOD, MAX_K, IndexTools

log = logging.getLogger(__name__)

__all__ = ["BearerAuth", "build_server", "http_app", "is_loopback", "serve_http", "serve_stdio"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

INSTRUCTIONS = (
    "Knowledge-graph RAG over one kgrag index. Call retrieve(question, method, k) for evidence passages "
    "and facts (method 'activation' by default; list_methods names the others), explain(question) for how "
    "spreading activation reached them, index_info for what the index holds."
)
_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

Question = Annotated[str, Field(description="the question, in natural language", min_length=1, max_length=2000)]
Method = Annotated[str, Field(description="retrieval method: one of list_methods' names ('-' and '_' alike)")]
K = Annotated[int, Field(description=f"passages to return, 1 to {MAX_K}", ge=1, le=MAX_K)]


def _tool_call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; a refused argument or a missing / mismatched index becomes a :class:`ToolError`,
    which the client receives as a tool result with ``isError`` set (the session goes on)."""
    try:
        return fn(*args)
    except (ValueError, FileNotFoundError, KeyError) as e:
        raise ToolError(str(e)) from e


def build_server(tools: IndexTools | str | Path | None = None, *, name: str = "kgrag") -> MCPServer:
    """An ``MCPServer`` with the tools ``retrieve``, ``explain``, ``list_methods``, ``index_info`` over
    ``tools`` (an :class:`IndexTools`, or the index directory for one; ``None``: the default index)."""
    from ..._version import __version__

    it = tools if isinstance(tools, IndexTools) else IndexTools(tools)
    server = MCPServer(name, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(annotations=_READ_ONLY)
    def retrieve(question: Question, method: Method = DEFAULT_METHOD, k: K = 5) -> dict[str, Any]:
        """Retrieve evidence for a question from the knowledge index: the top-k passages (id, title,
        clipped text, score), facts from the knowledge graph, and a short trace of what the method did."""
        return _tool_call(it.retrieve, question, method, k)

    @server.tool(annotations=_READ_ONLY)
    def explain(question: Question) -> str:
        """Explain in Markdown how spreading activation answers a question: the entities linked in it,
        the most activated entities and the relations between them, the passages and facts they led to."""
        return _tool_call(it.explain, question)

    @server.tool(annotations=_READ_ONLY)
    def list_methods() -> list[dict[str, Any]]:
        """The retrieval methods: name, one-line description, whether it runs on this index, and whether
        it can use an LLM (this server runs every method LLM-free)."""
        return _tool_call(it.list_methods)

    @server.tool(annotations=_READ_ONLY)
    def index_info() -> dict[str, Any]:
        """What the served index holds: passage, entity and triple counts, embedder, builder, path."""
        return _tool_call(it.index_info)

    server.index_tools = it  # type: ignore[attr-defined]  # the CLI and tests close / inspect it
    return server


# --------------------------------------------------------------------------- HTTP
def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets 401 (the
    token is compared in constant time and never logged); lifespan events pass through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token is empty")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = b""
        for key, value in scope.get("headers") or ():
            if key.lower() == b"authorization":
                given = value
                break
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        log.warning("refused an MCP request: %s Authorization header", "no" if not given else "a wrong")
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": "unauthorized", "detail": "send Authorization: Bearer <token>"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="kgrag-mcp"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer, *, host: str = "127.0.0.1", token: str | None = None, path: str = "/mcp") -> Any:
    """The SDK's streamable-HTTP Starlette app for ``server`` (DNS-rebinding protection on for a
    loopback ``host``), behind :class:`BearerAuth` when ``token`` is given."""
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    return BearerAuth(app, token) if token else app


def serve_http(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allow_remote: bool = False,
    path: str = "/mcp",
) -> None:
    """Serve ``server`` over streamable HTTP at ``http://host:port/path`` until interrupted. A host
    that is not loopback needs ``allow_remote`` (:class:`ValueError` otherwise)."""
    import uvicorn

    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"--host {host} is not a loopback address: the MCP server would be reachable from other machines; "
            "give --allow-remote (and a --token-env) to do that on purpose"
        )
    if not is_loopback(host) and not token:
        log.warning("serving MCP on %s without a bearer token: anyone who can reach it can query the index", host)
    if token:
        from ..._secrets import register_secret

        register_secret(token)
    app = http_app(server, host=host, token=token, path=path)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` over stdin / stdout until the client closes it."""
    server.run("stdio")
