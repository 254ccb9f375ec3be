"""What every route shares: the app's state, the caller's knowledge bases, the error responses it documents."""

from __future__ import annotations

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from specrag.serve.kbs import KnowledgeBases


class ErrorBody(BaseModel):
    detail: str


ERRORS = {400: {"model": ErrorBody, "description": "a body that is not JSON"},
          401: {"model": ErrorBody, "description": "no API key, or an unknown one (when keys are configured)"},
          403: {"model": ErrorBody, "description": "a kb_id or tenant_id that is not your API key's tenant's"},
          404: {"model": ErrorBody, "description": "unknown kb_id, API, operation or schema"},
          422: {"description": "a field out of range, an unknown filter key or API id"}}

_BEARER = HTTPBearer(auto_error=False, description="an API key as a bearer token (when keys are configured)")
_API_KEY = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key (when keys are configured)")


def state(request: Request):
    """The app's state: tenants, telemetry (and the index watcher)."""
    return request.app.state


async def caller_kbs(request: Request, bearer: HTTPAuthorizationCredentials | None = Depends(_BEARER),
                     api_key: str | None = Depends(_API_KEY)) -> KnowledgeBases:
    """The knowledge bases of the API key's tenant (401 without a known key, when keys are configured)."""
    return state(request).tenants.caller(bearer.credentials if bearer else api_key)


Caller = Depends(caller_kbs)
