"""How the service's errors map to HTTP statuses (and to the status label of the metrics)."""

from __future__ import annotations

from pydantic import ValidationError

from pipeline.errors import IndexNotBuiltError, SpecragError
from pipeline.serve.kbs import UnknownKnowledgeBase
from pipeline.serve.lookup import NotFound


def http_status(exc: BaseException) -> int:
    if isinstance(exc, (UnknownKnowledgeBase, NotFound)):
        return 404
    if isinstance(exc, IndexNotBuiltError):
        return 503
    if isinstance(exc, (SpecragError, ValidationError)):
        return 422
    return 500


def status_class(exc: BaseException) -> str:
    return "server_error" if http_status(exc) >= 500 else "client_error"
