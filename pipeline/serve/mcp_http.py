"""The MCP server over streamable HTTP, behind the same API keys as the HTTP service.

``ApiKeyGate`` wraps the SDK's Starlette app: a request without a known key gets 401 before MCP
reads it; otherwise the key's tenant's knowledge bases go into the ASGI scope's state, where the
tools read them (``mcp_server.kbs_of``). Nothing here logs a header.
"""

from __future__ import annotations

from specrag.serve.guard import rebinding_protection
from specrag.serve.mcp_server import STATE_KEY
from specrag.serve.tenancy import Tenants, Unauthorized
from starlette.datastructures import Headers
from starlette.responses import JSONResponse


def presented_key(headers: Headers) -> str | None:
    """``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return headers.get("x-api-key") or None


class ApiKeyGate:
    def __init__(self, app, tenants: Tenants):
        self.app = app
        self.tenants = tenants

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            kbs = self.tenants.caller(presented_key(Headers(scope=scope)))
        except Unauthorized as exc:
            response = JSONResponse({"detail": str(exc)}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            return await response(scope, receive, send)
        scope.setdefault("state", {})[STATE_KEY] = kbs
        return await self.app(scope, receive, send)


def streamable_http_app(server, tenants: Tenants, host: str):
    """The SDK's streamable HTTP app (``/mcp``) behind the key check; keyless, its Host/Origin check
    allows what the HTTP service's does (``guard.rebinding_protection``; with keys, the SDK's default)."""
    security = None if tenants.keyed else rebinding_protection(host)
    return ApiKeyGate(server.streamable_http_app(host=host, transport_security=security), tenants)
