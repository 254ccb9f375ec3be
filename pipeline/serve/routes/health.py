"""Liveness, readiness and metrics: never behind an API key."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from specrag.serve.kbs import KnowledgeBaseInfo
from specrag.serve.routes.common import state

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    kbs: list[KnowledgeBaseInfo] = Field(description="the knowledge bases; [] when API keys are configured "
                                                     "(this endpoint needs no key: it names no tenant's corpus)")
    knowledge_bases: int = Field(0, description="how many knowledge bases are open, all tenants together")


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request):
    """Ready when every knowledge base is open and has at least one complete API."""
    tenants = state(request).tenants
    infos = [kb.info() for kb in tenants.knowledge_bases()]
    ready = Readiness(status="ready" if infos and all(i.apis for i in infos) else "not_ready",
                      kbs=[] if tenants.keyed else infos, knowledge_bases=len(infos))
    return ready if ready.status == "ready" else JSONResponse(ready.model_dump(), status_code=503)


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format"}})
async def metrics(request: Request) -> Response:
    """Prometheus metrics (specrag_*)."""
    body, content_type = state(request).telemetry.metrics.exposition()
    return Response(content=body, media_type=content_type)
