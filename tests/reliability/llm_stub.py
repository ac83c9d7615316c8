"""A stand-in OpenAI-compatible LLM server, run as its own process by tests/reliability.

    python tests/reliability/llm_stub.py --port PORT [--reply TEXT] [--rules FILE] [--delay SECONDS] [--log FILE]

Speaks the shapes :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` uses:
``POST /v1/chat/completions``, ``POST /v1/completions`` and ``GET /v1/models`` (one model,
``owned_by`` ``"vllm"``, so a client with ``structured="auto"`` settles on vLLM's fields).
Every reply is ``--reply`` after ``--delay`` seconds, or the reply of the first of ``--rules``
(a JSON list of ``[[substring, ...], reply]``) whose substrings are all in the prompt; a prompt
containing ``SLOW`` waits 60 s (a call to kill the server in the middle of), and one containing
``KEYS`` answers with the request body's sorted keys as JSON. ``--log``: one line per request received (``path`` and the
time), flushed at once, so a test knows when a call is in flight. Standard library only: it
starts in about 0.1 s.
"""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "stub-model"


def _prompt(body: dict) -> str:
    if isinstance(body.get("prompt"), str):
        return body["prompt"]
    return " ".join(str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict))


def make_handler(
    reply: str, delay: float, log_path: str | None, rules: list | None = None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client pools its connection

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _log(self) -> None:
            if log_path:
                with open(log_path, "a", encoding="utf-8") as f:
                    f.write(f"{time.time():.3f} {self.command} {self.path}\n")

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._log()
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            self._log()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            prompt = _prompt(body)
            time.sleep(60.0 if "SLOW" in prompt else delay)
            text = next((r for subs, r in rules or () if all(x in prompt for x in subs)), reply)
            text = json.dumps(sorted(body)) if "KEYS" in prompt else text
            usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
            if self.path.rstrip("/") == "/v1/chat/completions":
                choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            elif self.path.rstrip("/") == "/v1/completions":
                choice = {"index": 0, "text": text, "finish_reason": "stop"}
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            out = {"id": "stub", "object": "chat.completion", "model": MODEL, "choices": [choice], "usage": usage}
            self._send(200, out)

    return Handler


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--reply", default="Paris")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--rules", default=None)
    args = ap.parse_args(argv)
    rules = json.loads(open(args.rules, encoding="utf-8").read()) if args.rules else None
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.reply, args.delay, args.log, rules))
    httpd.daemon_threads = True
    httpd.serve_forever()


if __name__ == "__main__":
    main()
