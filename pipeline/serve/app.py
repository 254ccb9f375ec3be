"""The HTTP service: ``create_app(tenants)`` builds the FastAPI app over opened knowledge bases.

Every route's engine work is async or runs in worker threads, so one event loop serves
concurrent requests. Errors are one JSON line ``{"detail": ...}``: 401 without a known API key
(when keys are configured), 403 for another tenant's kb_id or tenant_id, 404 for an unknown kb,
API, operation or schema, 422 for invalid input (each error's input cut to a short prefix), 503 for
a missing index, 500 otherwise. Before any of that, ``guard.RequestGuard`` answers 400 for a body
that is not strict JSON, 413 for one over ``MAX_BODY_BYTES`` and, on a keyless server given its
``bind_host``, 421/403 for a foreign Host/Origin (DNS rebinding). With a
reload interval, a background task swaps in re-indexed knowledge bases (``reload.py``).
``/docs`` (Swagger UI) loads its scripts, styles and favicon from the service itself
(``/docs-assets/``, the files the ``fastapi-offline`` wheel ships), never from a CDN. There is no
``/redoc``: ReDoc's bundle always fetches a logo from its own CDN.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Sequence

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import (
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from specrag.core.errors import SpecragError
from specrag.serve.concurrency import serving_threads
from specrag.serve.errors import http_status
from specrag.serve.guard import MAX_BODY_BYTES, RequestGuard, rebinding_protection
from specrag.serve.kbs import KnowledgeBases
from specrag.serve.logs import LOGGED_MARK
from specrag.serve.middleware import RequestContextMiddleware
from specrag.serve.reload import IndexWatcher
from specrag.serve.routes import apis, context, health, retrieve
from specrag.serve.telemetry import Telemetry
from specrag.serve.tenancy import Tenants
from specrag.serve.tracing import install_instrumentation

logger = logging.getLogger(__name__)
VERSION = "0.1.0"
DESCRIPTION = ("Answers 'how do I do X with these APIs?' over indexed OpenAPI corpora: ranked hybrid retrieval, "
               "the budgeted $ref closure of an operation (the KnowledgeContext), and browsing by API, "
               "operation and schema.")
DOCS_ASSETS_URL = "/docs-assets"
# swagger-ui-bundle.js, swagger-ui.css and favicon.png (swagger-ui-dist 5) are the ones /docs loads
DOCS_ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"


def create_app(served: Tenants | KnowledgeBases, *, telemetry: Telemetry | None = None,
               extra_routers: Sequence[APIRouter] = (), reload_interval_s: float = 0.0,
               threads: int | None = None, bind_host: str | None = None,
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """``served``: the tenants (or one local tenant's knowledge bases, no keys). ``extra_routers``:
    routes over capabilities built elsewhere, e.g. ``agentic_router(retriever)`` (``routes/agentic.py``)
    and ``plan_router(planner, Plan)`` (``routes/plan.py``). ``reload_interval_s`` > 0 runs the
    index watcher while the app's lifespan lasts; ``threads``, its request worker threads
    (``concurrency.serving_threads``). ``bind_host``: the address a server listens on; given, and with
    no API keys, only loopback names and it are answered as Host (an in-process app has no socket a
    browser could reach, so none is checked without it)."""
    install_instrumentation()
    tenants = served if isinstance(served, Tenants) else Tenants.local(served)
    watcher = IndexWatcher(tenants, reload_interval_s)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        async with AsyncExitStack() as stack:
            if threads:
                await stack.enter_async_context(serving_threads(threads))
            task = asyncio.create_task(watcher.run()) if reload_interval_s > 0 else None
            try:
                yield
            finally:
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)

    app = FastAPI(title="specrag", version=VERSION, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None)  # FastAPI's own pages load from CDNs: _serve_docs_offline
    app.state.tenants = tenants
    app.state.watcher = watcher
    app.state.telemetry = telemetry or Telemetry()
    security = rebinding_protection(bind_host) if bind_host is not None and not tenants.keyed else None
    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes, security=security)
    app.add_middleware(RequestContextMiddleware, telemetry=app.state.telemetry)  # outermost: logs the guard's refusals too
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(SpecragError, _error)
    app.add_exception_handler(Exception, _error)
    for router in [retrieve.router, *extra_routers, context.router, apis.router, health.router]:
        app.include_router(router)
    _serve_docs_offline(app)
    return app


def _serve_docs_offline(app: FastAPI) -> None:
    """``/docs`` and ``/docs/oauth2-redirect`` as FastAPI builds them, but with every asset served
    from ``DOCS_ASSETS_URL``: FastAPI's defaults fetch them from jsdelivr and the favicon from
    fastapi.tiangolo.com, so offline the page was blank. Open without a
    key, like ``/openapi.json``: they hold no tenant's data. Paths honour the ASGI ``root_path``."""
    app.mount(DOCS_ASSETS_URL, StaticFiles(directory=DOCS_ASSETS_DIR), name="docs-assets")
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url  # "/docs/oauth2-redirect"

    def root(request: Request) -> str:
        return request.scope.get("root_path", "").rstrip("/")

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    async def swagger_ui(request: Request) -> HTMLResponse:
        assets = root(request) + DOCS_ASSETS_URL
        return get_swagger_ui_html(
            openapi_url=root(request) + app.openapi_url, title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root(request) + oauth2_redirect_url,
            swagger_js_url=f"{assets}/swagger-ui-bundle.js", swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png", init_oauth=app.swagger_ui_init_oauth,
            # validatorUrl null: no "valid spec" badge fetched from validator.swagger.io
            swagger_ui_parameters={**(app.swagger_ui_parameters or {}), "validatorUrl": None})

    @app.get(oauth2_redirect_url, include_in_schema=False, response_class=HTMLResponse)
    async def swagger_ui_oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()


async def _error(request: Request, exc: Exception) -> JSONResponse:
    """A SpecragError's own one-line message, whatever its status (a missing index is 503 and says
    which tenant and what to run); anything else at 500 is 'internal error', its traceback logged."""
    status = http_status(exc)
    if isinstance(exc, SpecragError):
        if status >= 500:
            logger.warning("request failed: %s", exc)
        detail = str(exc)
    else:
        if status >= 500:
            logger.exception("request failed", exc_info=exc)
            try:  # the server's own record of it (uvicorn's, after Starlette re-raises) is then dropped
                setattr(exc, LOGGED_MARK, logger.name)
            except AttributeError:
                pass
        detail = str(exc) if status < 500 else f"internal error ({type(exc).__name__}); see the server log"
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


ECHOED_INPUT_CHARS = 200


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 (a list of errors), but each error's input cut to a short prefix: the default
    echoed a 10 MB field whole. A body that is not JSON is a 400, one line."""
    errors = exc.errors()
    if any(error.get("type") == "json_invalid" for error in errors):
        return JSONResponse({"detail": "request body is not valid JSON"}, status_code=400)
    short = [{**error, "loc": [_prefix(part) for part in error.get("loc", ())], "input": _prefix(error.get("input"))}
             for error in errors]
    short = [{**error, "ctx": _prefix(error["ctx"])} if "ctx" in error else error for error in short]
    return JSONResponse({"detail": short}, status_code=422)


def _prefix(value):
    """``value`` when short and encodable as strict JSON, else the first ``ECHOED_INPUT_CHARS`` of its text."""
    encoded = jsonable_encoder(value)
    text = encoded if isinstance(encoded, str) else json.dumps(encoded, default=str)
    try:
        if len(text) <= ECHOED_INPUT_CHARS:
            json.dumps(encoded, ensure_ascii=False, allow_nan=False).encode("utf-8")
            return encoded
    except ValueError:  # NaN, Infinity, a lone surrogate
        pass
    return text[:ECHOED_INPUT_CHARS].encode("utf-8", "backslashreplace").decode("utf-8")
