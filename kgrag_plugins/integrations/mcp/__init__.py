"""An MCP server over a kgrag index (``kgrag mcp``, docs/frameworks.md#mcp-server; extra ``mcp``).

Tools ``retrieve``, ``explain``, ``list_methods`` and ``index_info`` on the official MCP Python SDK,
served over stdio or streamable HTTP::

    from kgrag_plugins.integrations.mcp import build_server

    server = build_server("my-index")  # an mcp MCPServer; server.run("stdio")
"""

from __future__ import annotations

from .._extras import require

require("mcp", "mcp", feature="kgrag_plugins.integrations.mcp")

from .server import BearerAuth, build_server, http_app, is_loopback, serve_http, serve_stdio  # noqa: E402
from .tools import DEFAULT_METHOD, MAX_K, IndexTools, ToolInputError  # noqa: E402

__all__ = [
    "DEFAULT_METHOD",
    "MAX_K",
    "BearerAuth",
    "IndexTools",
    "ToolInputError",
    "build_server",
    "http_app",
    "is_loopback",
    "serve_http",
    "serve_stdio",
]
