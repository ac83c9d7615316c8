"""A stand-in Ollama server (no Ollama binary here): the native API shape that
:class:`~kgrag_plugins.models.ollama.OllamaLLM` speaks.

    python tests/reliability/ollama_stub.py --port PORT [--model NAME ...] [--reply TEXT] [--delay SECONDS]

or in a test, in a thread: ``with OllamaStub(models=["smollm2:135m"]) as stub: ... stub.url``.

* ``POST /api/chat``: a model it does not have -> HTTP 404 ``{"error": "model 'NAME' not found"}``
  (Ollama's reply); else the next scripted behaviour (:meth:`OllamaStub.script`: a reply text,
  ``("status", code, body)``, ``("sleep", seconds)`` then the default reply, or ``("raw", bytes)``),
  or ``--reply``. A reply is Ollama's non-streamed body: ``message.content``, ``done``,
  ``done_reason``, ``prompt_eval_count`` (words of the prompt) and ``eval_count`` (words of the
  reply). ``"stream": true`` (Ollama's default) gets NDJSON chunks, as Ollama sends them.
* ``GET /api/tags``: the models; ``GET /``: ``Ollama is running``.

Every request body is recorded (``stub.requests``: ``{"method", "path", "body"}``), so a test can
check ``format``, ``think``, ``keep_alive`` and ``options``. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODELS = ("smollm2:135m",)


def _prompt(body: dict[str, Any]) -> str:
    return " ".join(str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict))


class OllamaStub:
    """The stand-in server on 127.0.0.1 (a free port unless ``port``); a context manager runs it in a thread."""

    def __init__(
        self,
        models: tuple[str, ...] | list[str] = DEFAULT_MODELS,
        reply: str = "Paris",
        delay: float = 0.0,
        port: int = 0,
    ) -> None:
        self.models = list(models)
        self.reply = reply
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.behaviours: deque[Any] = deque()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def script(self, *behaviours: Any) -> None:
        """Queue what the next ``POST /api/chat`` calls get (see the module docstring)."""
        with self._lock:
            self.behaviours.extend(behaviours)

    def bodies(self, path: str = "/api/chat") -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"] == path]

    def __enter__(self) -> OllamaStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a deadline test)

            def _json(self, status: int, obj: Any) -> None:
                self._send(status, json.dumps(obj).encode())

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with stub._lock:
                    stub.requests.append({"method": "GET", "path": self.path, "body": None})
                if self.path == "/":
                    self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
                elif self.path == "/api/tags":
                    models = [{"name": m, "model": m, "size": 270_000_000, "details": {}} for m in stub.models]
                    self._json(200, {"models": models})
                else:
                    self._send(404, b"404 page not found", "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._json(400, {"error": "invalid JSON"})
                    return
                with stub._lock:
                    stub.requests.append({"method": "POST", "path": self.path, "body": body})
                if self.path != "/api/chat":
                    self._send(404, b"404 page not found", "text/plain")
                    return
                model = body.get("model")
                if model not in stub.models:
                    self._json(404, {"error": f"model '{model}' not found"})
                    return
                with stub._lock:
                    behaviour = stub.behaviours.popleft() if stub.behaviours else None
                time.sleep(stub.delay)
                if isinstance(behaviour, tuple) and behaviour[0] == "status":
                    self._json(behaviour[1], behaviour[2])
                    return
                if isinstance(behaviour, tuple) and behaviour[0] == "raw":
                    self._send(200, behaviour[1])
                    return
                if isinstance(behaviour, tuple) and behaviour[0] == "sleep":
                    time.sleep(behaviour[1])
                    behaviour = None
                text = stub.reply if behaviour is None else str(behaviour)
                prompt = _prompt(body)
                done = {
                    "model": model,
                    "created_at": "2026-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": text},
                    "done": True,
                    "done_reason": "stop",
                    "total_duration": 1_000_000,
                    "load_duration": 1000,
                    "prompt_eval_count": len(prompt.split()),
                    "eval_count": len(text.split()),
                }
                if body.get("stream", True) is False:
                    self._json(200, done)
                    return
                chunk = {**done, "message": {"role": "assistant", "content": text}, "done": False}
                del chunk["done_reason"]
                lines = json.dumps(chunk) + "\n" + json.dumps({**done, "message": {"role": "assistant", "content": ""}})
                self._send(200, (lines + "\n").encode(), "application/x-ndjson")

        return Handler


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", action="append", default=None, help="a model it has (repeatable)")
    ap.add_argument("--reply", default="Paris")
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args(argv)
    stub = OllamaStub(tuple(args.model or DEFAULT_MODELS), args.reply, args.delay, args.port)
    stub.httpd.serve_forever()


if __name__ == "__main__":
    main()
