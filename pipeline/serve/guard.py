"""Checks every HTTP request passes before any route, key check or body parse.

``RequestGuard`` (outside the routes, so before the API key check):

* DNS rebinding: on a keyless server (only ever bound to loopback, see ``cli/serve.py``) a web page
  whose name resolves to 127.0.0.1 could read the service from the browser. Its Host is then not
  a loopback name (421), or its Origin is foreign (403). The check is the MCP SDK's
  (``TransportSecurityMiddleware``) with the allow-list of ``rebinding_protection``, which the MCP
  app uses too.
* Body size: a Content-Length over the limit is refused before a byte is read, and a body without
  one (chunked) stops being read at the limit (413), so a caller without a key cannot make the
  server hold a large body.
* Strict JSON: NaN, Infinity, numbers that overflow to infinity and lone surrogates are no JSON we
  serve: 400, so no route and no error message ever holds a value it cannot encode.

Every refusal is one short ``{"detail": ...}`` that never repeats the input.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.transport_security import (
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse

MAX_BODY_BYTES = 1024 * 1024  # a query is at most 20,000 characters: a request body is far below this
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def rebinding_protection(bind_host: str) -> TransportSecuritySettings:
    """The Hosts (any port, or none) and Origins (http or https) a keyless server answers: loopback
    names and the address it is bound to."""
    bound = f"[{bind_host}]" if ":" in bind_host and not bind_host.startswith("[") else bind_host
    hosts = [h for name in dict.fromkeys([*LOOPBACK_HOSTS, bound.lower()]) for h in (name, f"{name}:*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts])


class Refused(Exception):
    """A request answered by the guard itself: ``status`` and a one-line detail."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status


class RequestGuard:
    """ASGI middleware: Host/Origin (when ``security`` is given), body size, strict JSON."""

    def __init__(self, app, *, max_body_bytes: int = MAX_BODY_BYTES,
                 security: TransportSecuritySettings | None = None):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.host_check = TransportSecurityMiddleware(security) if security else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            await self._check_headers(scope)
            body = await self._read_body(scope, receive)
            if body:
                _check_json(scope, body)
        except Refused as exc:
            return await JSONResponse({"detail": str(exc)}, status_code=exc.status)(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # http.disconnect

        return await self.app(scope, replay, send)

    async def _check_headers(self, scope) -> None:
        if self.host_check is not None:
            refused = await self.host_check.validate_request(Request(scope))
            if refused is not None:  # the SDK's plain-text 421 / 403, as our one-line JSON
                raise Refused(refused.status_code, bytes(refused.body).decode())
        length = Headers(scope=scope).get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            raise Refused(413 if length.isdigit() else 400,
                                  f"request body over {self.max_body_bytes} bytes" if length.isdigit()
                                  else "invalid Content-Length")

    async def _read_body(self, scope, receive) -> bytes:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise Refused(400, "client disconnected")  # nobody reads this answer
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                raise Refused(413, f"request body over {self.max_body_bytes} bytes")
            if not message.get("more_body", False):
                return bytes(body)


def _check_json(scope, body: bytes) -> None:
    """400 for a body the routes would parse as JSON (FastAPI does without a Content-Type too) that is
    not strict JSON: invalid, NaN/Infinity, a number beyond a float, a lone surrogate."""
    content_type = Headers(scope=scope).get("content-type", "").split(";")[0].strip().lower()
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        return
    try:
        strict = json.loads(body, parse_constant=_not_json)
        json.dumps(strict, ensure_ascii=False, allow_nan=False).encode("utf-8")  # 1e400 -> inf; "\ud800"
    except ValueError as exc:  # JSONDecodeError, UnicodeError, out-of-range float
        raise Refused(400, f"request body is not valid JSON: {_reason(exc)}") from None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at byte {exc.pos}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, UnicodeError):
        return "a string holds a lone surrogate"
    if "Out of range float" in str(exc):
        return "a number is out of range (NaN, Infinity or beyond a float)"
    return str(exc)[:100]
