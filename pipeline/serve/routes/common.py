"""What every route shares: the app's state, the error responses it documents."""

from __future__ import annotations

from fastapi import Request
from pydantic import BaseModel


class ErrorBody(BaseModel):
    detail: str


ERRORS = {400: {"model": ErrorBody, "description": "a body that is not JSON"},
          404: {"model": ErrorBody, "description": "unknown kb_id, API, operation or schema"},
          422: {"description": "a field out of range, an unknown filter key or API id"}}


def state(request: Request):
    """The app's state: kbs, telemetry, basic (and agentic when wired)."""
    return request.app.state
