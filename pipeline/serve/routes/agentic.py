"""``POST /api/v1/retrieve/agentic``: multi-step retrieval. Included by ``create_app`` when it is
given an agentic retriever (anything with ``async arun(AgenticRetrievalRequest) -> RetrievalResponse``)."""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter, Request

from pipeline.api_models import AgenticRetrievalRequest, RetrievalResponse
from pipeline.serve.logs import request_id_var
from pipeline.serve.routes.common import ERRORS, state

router = APIRouter(tags=["retrieval"])


class AgenticRetriever(Protocol):
    async def arun(self, request: AgenticRetrievalRequest) -> RetrievalResponse: ...


@router.post("/api/v1/retrieve/agentic", response_model=RetrievalResponse, responses=ERRORS)
async def retrieve_agentic(body: AgenticRetrievalRequest, request: Request) -> RetrievalResponse:
    """Decomposes the question, retrieves per step within max_steps, token_budget and max_latency_ms,
    and returns every step taken."""
    app = state(request)
    async with app.telemetry.track("retrieve.agentic", mode=body.mode.value,
                                   reasoning_effort=body.reasoning_effort.value) as outcome:
        response = (await app.agentic.arun(body)).model_copy(update={"request_id": request_id_var.get()})
        outcome.add_response(response)
    return response
