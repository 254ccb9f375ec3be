"""The HTTP service: ``create_app(kbs)`` builds the FastAPI app over opened knowledge bases.

Every route's engine work is async or runs in worker threads, so one event loop serves
concurrent requests. Errors are one JSON line ``{"detail": ...}``: 404 for an unknown kb, API,
operation or schema, 422 for invalid input, 503 for a missing index, 500 otherwise.
"""

from __future__ import annotations

import logging
from typing import Sequence

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from pipeline.errors import SpecragError
from pipeline.serve.basic import BasicRetrieval
from pipeline.serve.concurrency import serving_threads
from pipeline.serve.errors import http_status
from pipeline.serve.kbs import KnowledgeBases
from pipeline.serve.middleware import RequestContextMiddleware
from pipeline.serve.routes import apis, context, health, retrieve
from pipeline.serve.telemetry import Telemetry
from pipeline.serve.tracing import install_instrumentation

logger = logging.getLogger(__name__)
VERSION = "0.1.0"
DESCRIPTION = ("Answers 'how do I do X with these APIs?' over indexed OpenAPI corpora: ranked hybrid retrieval, "
               "the budgeted $ref closure of an operation (the KnowledgeContext), and browsing by API, "
               "operation and schema.")


def create_app(kbs: KnowledgeBases, *, telemetry: Telemetry | None = None,
               extra_routers: Sequence[APIRouter] = (), threads: int | None = None) -> FastAPI:
    """``extra_routers``: routes over capabilities built elsewhere, e.g. ``agentic_router(retriever)``
    (``routes/agentic.py``) and ``plan_router(planner, Plan)`` (``routes/plan.py``). ``threads``:
    while the app runs, its request worker threads (see ``concurrency.serving_threads``)."""
    install_instrumentation()
    lifespan = (lambda app: serving_threads(threads)) if threads else None
    app = FastAPI(title="specrag", version=VERSION, description=DESCRIPTION, lifespan=lifespan)
    app.state.kbs = kbs
    app.state.telemetry = telemetry or Telemetry()
    app.state.basic = BasicRetrieval(kbs)
    app.add_middleware(RequestContextMiddleware, telemetry=app.state.telemetry)
    app.add_exception_handler(SpecragError, _error)
    app.add_exception_handler(Exception, _error)
    for router in [retrieve.router, *extra_routers, context.router, apis.router, health.router]:
        app.include_router(router)
    return app


async def _error(request: Request, exc: Exception) -> JSONResponse:
    status = http_status(exc)
    if status >= 500:
        logger.exception("request failed", exc_info=exc)
    detail = str(exc) if status < 500 else f"internal error ({type(exc).__name__}); see the server log"
    return JSONResponse({"detail": detail}, status_code=status)
