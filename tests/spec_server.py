"""A real HTTP server on 127.0.0.1, in a thread, for the tests of specs at URLs.

It serves the files of a folder with a strong ETag (a 304 when If-None-Match matches) and
records every request's path and headers; ``routes`` answer chosen paths otherwise (redirects,
a slow body, an endless body, an error)."""

from __future__ import annotations

import hashlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable


class SpecServer:
    def __init__(self, folder: Path):
        self.folder = folder
        self.routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.requests.append((self.path, dict(self.headers)))
                route = server.routes.get(self.path)
                if route is not None:
                    route(self)
                else:
                    server.serve_file(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def seen(self, path: str) -> list[dict[str, str]]:
        """The headers of each request for ``path``, in order."""
        return [headers for p, headers in self.requests if p == path]

    def serve_file(self, h: BaseHTTPRequestHandler) -> None:
        path = self.folder / h.path.lstrip("/").split("?")[0]
        if not path.is_file() or not path.resolve().is_relative_to(self.folder.resolve()):
            return send(h, 404, b"not found")
        body = path.read_bytes()
        etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        if h.headers.get("If-None-Match") == etag:
            return send(h, 304, b"", {"ETag": etag})
        kind = "application/json" if path.suffix == ".json" else "application/yaml"
        send(h, 200, body, {"ETag": etag, "Content-Type": kind})


def send(h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    h.send_response(status)
    for name, value in (headers or {}).items():
        h.send_header(name, value)
    if status != 304:
        h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    if body:
        h.wfile.write(body)


def redirect(location: str, status: int = 302) -> Callable[[BaseHTTPRequestHandler], None]:
    return lambda h: send(h, status, b"", {"Location": location})


def slow(seconds: float, body: bytes = b'{"openapi": "3.0.0"}') -> Callable[[BaseHTTPRequestHandler], None]:
    def route(h: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        try:
            send(h, 200, body)
        except OSError:
            pass  # the client gave up first

    return route


def endless(h: BaseHTTPRequestHandler) -> None:
    """A body with no Content-Length that never ends (until the client hangs up)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Connection", "close")
    h.end_headers()
    h.close_connection = True
    chunk = b" " * 65536
    try:
        for _ in range(10_000):  # 640 MiB: far past any test's limit
            h.wfile.write(chunk)
    except OSError:
        pass
