"""``kgrag mcp``: serve an index over the Model Context Protocol (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token from ``--token-env VAR`` (the variable must be set and non-empty) or ``--token``."""
    if args.token_env:
        value = os.environ.get(args.token_env, "").strip()
        if not value:
            raise ValueError(f"--token-env {args.token_env}: the environment variable is not set or empty")
        return value
    if args.token is not None:
        if not args.token.strip():
            raise ValueError("--token is empty")
        return args.token.strip()
    return None


def _cmd_mcp(args: argparse.Namespace) -> int:
    """Run the server until the client closes stdio or the HTTP server is interrupted."""
    token = _token(args)
    if args.transport == "stdio" and (token or args.allow_remote):
        raise ValueError("--token, --token-env and --allow-remote apply to --transport http")
    if args.transport == "http" and not 1 <= args.port <= 65535:
        raise ValueError(f"--port must be from 1 to 65535, got {args.port}")
    if args.index is not None and not (args.index / "manifest.json").is_file():
        raise FileNotFoundError(f"--index {args.index} is not a kgrag index (no manifest.json); build one: kgrag index")
    try:
        from .integrations.mcp import build_server, is_loopback, serve_http, serve_stdio
    except ImportError as e:
        raise ValueError(str(e)) from None
    if args.transport == "http" and not is_loopback(args.host) and not args.allow_remote:
        raise ValueError(
            f"--host {args.host} is not a loopback address: the server would be reachable from other machines; "
            "add --allow-remote (with --token-env) to do that on purpose"
        )
    server = build_server(args.index)
    try:
        if args.transport == "stdio":
            serve_stdio(server)
            return 0
        host = f"[{args.host}]" if ":" in args.host else args.host
        auth = "bearer token required" if token else "no token"
        print(f"kgrag mcp: serving http://{host}:{args.port}{args.path} ({auth})", file=sys.stderr, flush=True)
        serve_http(server, host=args.host, port=args.port, token=token, allow_remote=args.allow_remote, path=args.path)
    finally:
        server.index_tools.close()
    return 0


def add_mcp_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``kgrag mcp`` to the ``kgrag`` sub-commands."""
    m = sub.add_parser(
        "mcp",
        help="serve an index to MCP clients (tools: retrieve, explain, list_methods, index_info; extra 'mcp')",
    )
    m.add_argument(
        "--index",
        type=Path,
        default=None,
        metavar="DIR",
        help="the saved index (default: $KGRAG_INDEX_DIR, else the bundled sample index, built once into the cache)",
    )
    m.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="http: streamable HTTP")
    m.add_argument(
        "--host", default="127.0.0.1", help="--transport http: address to bind (loopback unless --allow-remote)"
    )
    m.add_argument("--port", type=int, default=8000, help="--transport http: port")
    m.add_argument("--path", default="/mcp", help="--transport http: the endpoint's path")
    token = m.add_mutually_exclusive_group()
    token.add_argument(
        "--token-env",
        metavar="VAR",
        default=None,
        help="--transport http: require 'Authorization: Bearer <token>', the token read from environment variable VAR",
    )
    token.add_argument(
        "--token",
        default=None,
        help="--transport http: the bearer token itself (shown in the process list; prefer --token-env)",
    )
    m.add_argument(
        "--allow-remote", action="store_true", help="--transport http: allow a --host that is not a loopback address"
    )
    m.set_defaults(func=_cmd_mcp)
