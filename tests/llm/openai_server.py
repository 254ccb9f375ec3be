"""A scripted OpenAI-compatible server for tests: stdlib ``http.server`` in a thread on 127.0.0.1.

Each test queues replies (answer text, status code, delay, headers); the server answers
``POST /v1/chat/completions`` with them in order, then with ``default``, and records every request
body (and its Authorization header) so tests can assert on what the real client sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pydantic import BaseModel, Field


class Reply(BaseModel):
    status: int = 200
    content: str = Field("", description="the assistant's text, for status 200")
    delay_s: float = Field(0.0, description="sleep before answering (to trigger client timeouts)")
    prompt_tokens: int = 40
    completion_tokens: int = 12
    headers: dict[str, str] = Field(default_factory=dict)


def answer(payload: dict | str, **kwargs) -> Reply:
    """A 200 reply whose content is ``payload`` (dicts are sent as JSON text)."""
    return Reply(content=payload if isinstance(payload, str) else json.dumps(payload), **kwargs)


class ScriptedServer:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.authorizations: list[str | None] = []  # the Authorization header of every request
        self.default: Reply | None = None
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, *replies: Reply, default: Reply | None = None) -> None:
        with self._lock:
            self._queue.extend(replies)
            self.default = default

    def next_reply(self, body: dict) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._queue:
                return self._queue.popleft()
            return self.default or Reply(status=500, content="unscripted request")

    def user_texts(self) -> list[str]:
        """The first user message of every request received."""
        return [next(m["content"] for m in r["messages"] if m["role"] == "user") for r in self.requests]

    def pause(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def start(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def _completion(reply: Reply, model: str) -> dict:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": reply.content}}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            server.authorizations.append(self.headers.get("Authorization"))
            if not self.path.endswith("/chat/completions"):
                return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            reply = server.next_reply(body)
            server.pause(reply.delay_s)
            if reply.status == 200:
                return self._send(200, _completion(reply, body.get("model", "")), reply.headers)
            error = {"message": reply.content or f"status {reply.status}", "type": "server_error", "code": None}
            self._send(reply.status, {"error": error}, reply.headers)

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
            pass

    return Handler
