"""The HTTP service: ``create_app(tenants)`` builds the FastAPI app over opened knowledge bases.

Every route's engine work is async or runs in worker threads, so one event loop serves
concurrent requests. Errors are one JSON line ``{"detail": ...}``: 401 without a known API key
(when keys are configured), 403 for another tenant's kb_id or tenant_id, 404 for an unknown kb,
API, operation or schema, 422 for invalid input, 503 for a missing index, 500 otherwise. With a
reload interval, a background task swaps in re-indexed knowledge bases (``reload.py``).
``/docs`` (Swagger UI) loads its scripts, styles and favicon from the service itself
(``/docs-assets/``, the files the ``fastapi-offline`` wheel ships), never from a CDN. There is no
``/redoc``: ReDoc's bundle always fetches a logo from its own CDN.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Sequence

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from specrag.errors import SpecragError
from specrag.serve.concurrency import serving_threads
from specrag.serve.errors import http_status
from specrag.serve.kbs import KnowledgeBases
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
               threads: int | None = None) -> FastAPI:
    """``served``: the tenants (or one local tenant's knowledge bases, no keys). ``extra_routers``:
    routes over capabilities built elsewhere, e.g. ``agentic_router(retriever)`` (``routes/agentic.py``)
    and ``plan_router(planner, Plan)`` (``routes/plan.py``). ``reload_interval_s`` > 0 runs the
    index watcher while the app's lifespan lasts; ``threads``, its request worker threads
    (``concurrency.serving_threads``)."""
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
    app.add_middleware(RequestContextMiddleware, telemetry=app.state.telemetry)
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
    status = http_status(exc)
    if status >= 500:
        logger.exception("request failed", exc_info=exc)
    detail = str(exc) if status < 500 else f"internal error ({type(exc).__name__}); see the server log"
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)
