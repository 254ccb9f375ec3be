"""How the service's errors map to HTTP statuses (and to the status label of the metrics)."""

from __future__ import annotations

from pydantic import ValidationError
from specrag.core.errors import IndexNotBuiltError, SpecragError
from specrag.index.lookup import NotFound
from specrag.serve.kbs import ForbiddenKnowledgeBase, UnknownKnowledgeBase
from specrag.serve.tenancy import ForbiddenTenant, Unauthorized


def http_status(exc: BaseException) -> int:
    if isinstance(exc, Unauthorized):
        return 401
    if isinstance(exc, (ForbiddenKnowledgeBase, ForbiddenTenant)):
        return 403
    if isinstance(exc, (UnknownKnowledgeBase, NotFound)):
        return 404
    if isinstance(exc, IndexNotBuiltError):
        return 503
    if isinstance(exc, (SpecragError, ValidationError)):
        return 422
    return 500


def status_class(exc: BaseException) -> str:
    return "server_error" if http_status(exc) >= 500 else "client_error"
