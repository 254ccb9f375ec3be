"""The request context: an id per HTTP request (the caller's ``X-Request-ID`` when it is a sane
token, else a new one), returned in the response header, set for every log line and span of the
request, plus one access log line and the per-route request counter.

A plain ASGI middleware (not ``BaseHTTPMiddleware``), so the route runs in this context."""

from __future__ import annotations

import logging
import re
import time

from specrag.serve.logs import request_id_var
from specrag.serve.request_ids import new_request_id
from specrag.serve.telemetry import Telemetry, current_telemetry

logger = logging.getLogger("specrag.http")
HEADER = b"x-request-id"
_SANE_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


class RequestContextMiddleware:
    def __init__(self, app, telemetry: Telemetry):
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or []).get(HEADER, b"").decode("latin-1")
        request_id = given if _SANE_ID.match(given) else new_request_id()
        tokens = request_id_var.set(request_id), current_telemetry.set(self.telemetry)
        status, start = [500], time.perf_counter()

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message["headers"] = [*message.get("headers", []), (HEADER, request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics = self.telemetry.metrics
            metrics.child(metrics.http_requests, route, scope["method"], str(status[0])).inc()
            logger.info("http.request", extra={"event": "http.request", "method": scope["method"], "route": route,
                                               "status": status[0],
                                               "latency_ms": round((time.perf_counter() - start) * 1000, 2)})
            current_telemetry.reset(tokens[1])
            request_id_var.reset(tokens[0])
