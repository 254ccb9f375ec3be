"""``POST /api/v1/retrieve/agentic``: multi-step retrieval over an agentic retriever (anything with
``async arun(AgenticRetrievalRequest, KnowledgeBases) -> RetrievalResponse``: the caller's tenant's
knowledge bases come with each request), mounted by passing
``agentic_router(retriever)`` to ``create_app(..., extra_routers=[...])``."""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter, Request
from specrag.core.api_models import AgenticRetrievalRequest, RetrievalResponse
from specrag.serve.kbs import KnowledgeBases
from specrag.serve.logs import request_id_var
from specrag.serve.routes.common import ERRORS, Caller, state
from specrag.serve.tenancy import check_tenant_id


class AgenticRetriever(Protocol):
    async def arun(self, request: AgenticRetrievalRequest, kbs: KnowledgeBases) -> RetrievalResponse: ...


def agentic_router(retriever: AgenticRetriever) -> APIRouter:
    router = APIRouter(tags=["retrieval"])

    @router.post("/api/v1/retrieve/agentic", response_model=RetrievalResponse, responses=ERRORS)
    async def retrieve_agentic(body: AgenticRetrievalRequest, request: Request,
                               kbs: KnowledgeBases = Caller) -> RetrievalResponse:
        """Decomposes the question, retrieves per step within max_steps, token_budget and max_latency_ms,
        and returns every step taken."""
        async with state(request).telemetry.track("retrieve.agentic", mode=body.mode.value,
                                                  reasoning_effort=body.reasoning_effort.value) as outcome:
            check_tenant_id(kbs, body)
            response = (await retriever.arun(body, kbs)).model_copy(update={"request_id": request_id_var.get()})
            outcome.add_response(response)
        return response

    return router
