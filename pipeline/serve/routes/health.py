"""Liveness, readiness and metrics: never behind an API key."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from specrag.serve.kbs import ChromaStatus, KnowledgeBaseInfo
from specrag.serve.routes.common import state

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    kbs: list[KnowledgeBaseInfo] = Field(description="the knowledge bases; [] when API keys are configured "
                                                     "(this endpoint needs no key: it names no tenant's corpus)")
    knowledge_bases: int = Field(0, description="how many knowledge bases are open, all tenants together")
    chroma: ChromaStatus | None = Field(None, description="replicas: the last check of the Chroma server they pull "
                                                          "updates from (null without one). The local indexes "
                                                          "serve while it is unreachable, so readiness does not "
                                                          "depend on it; the knowledge bases' own state does")


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process answers (nothing here waits on a dependency)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request):
    """Ready when every knowledge base is open and has at least one complete API. Reads what is
    known now: a due check of the Chroma server starts in the background, never waited for."""
    tenants = state(request).tenants
    infos = [kb.info() for kb in tenants.knowledge_bases()]
    ready = Readiness(status="ready" if infos and all(i.apis for i in infos) else "not_ready",
                      kbs=[] if tenants.keyed else infos, knowledge_bases=len(infos),
                      chroma=_chroma_status(tenants))
    return ready if ready.status == "ready" else JSONResponse(ready.model_dump(), status_code=503)


def _chroma_status(tenants) -> ChromaStatus | None:
    """The worst news of the tenants' checks (one server for all), else the latest."""
    found = [s for kbs in tenants.all() if (s := kbs.chroma_status(detail=not tenants.keyed)) is not None]
    if not found:
        return None
    failed = [s for s in found if s.reachable is False]
    return min(failed or found, key=lambda s: float("inf") if s.checked_s_ago is None else s.checked_s_ago)


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format"}})
async def metrics(request: Request) -> Response:
    """Prometheus metrics (specrag_*)."""
    body, content_type = state(request).telemetry.metrics.exposition()
    return Response(content=body, media_type=content_type)
