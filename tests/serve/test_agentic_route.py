"""POST /api/v1/retrieve/agentic is mounted when an agentic retriever is given (the multi-step
retriever lives elsewhere); here a two-step retriever over basic retrieval stands in for it."""

from __future__ import annotations

import httpx
import pytest
from specrag.core.api_models import (
    AgenticRetrievalRequest,
    BasicRetrievalRequest,
    RetrievalResponse,
    RetrievalStep,
)

pytestmark = pytest.mark.anyio
URL = "/api/v1/retrieve/agentic"


class TwoSteps:
    """Retrieves the question, then its second half, over every knowledge base; merges the results."""

    async def arun(self, request: AgenticRetrievalRequest, kbs) -> RetrievalResponse:
        from specrag.serve.basic import BasicRetrieval

        basic = BasicRetrieval(kbs)
        kb_ids = request.kb_ids or [kb.kb_id for kb in kbs.all()]
        halves = [request.query, request.query.split(" and ")[-1]]
        steps, results = [], {}
        for number, sub_query in enumerate(halves[: request.max_steps], start=1):
            response = await basic.arun(BasicRetrievalRequest(kb_id=kb_ids[0], query=sub_query, mode=request.mode,
                                                                   top_k=request.top_k_per_step, similarity_threshold=0))
            results |= {r.chunk_id: r for r in response.results}
            steps.append(RetrievalStep(step_number=number, action="retrieve", sub_query=sub_query,
                                       result_ids=[r.chunk_id for r in response.results]))
        return RetrievalResponse(request_id="inner", results=list(results.values()), steps=steps,
                                 total_tokens_used=sum(r.metadata["n_tokens"] for r in results.values()),
                                 truncated=request.max_steps < len(halves), truncated_reason="max_steps"
                                 if request.max_steps < len(halves) else None)


@pytest.fixture
async def agentic_client(demo_kbs):
    from specrag.serve.app import create_app
    from specrag.serve.routes.agentic import agentic_router

    app = create_app(demo_kbs, extra_routers=[agentic_router(TwoSteps())])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        yield client


async def test_the_route_answers_with_the_steps_and_its_own_request_id(agentic_client):
    r = await agentic_client.post(URL, json={"query": "list pets and place an order", "top_k_per_step": 3})
    body = r.json()
    assert r.status_code == 200 and body["request_id"] == r.headers["x-request-id"]
    assert [s["sub_query"] for s in body["steps"]] == ["list pets and place an order", "place an order"]
    metrics = (await agentic_client.get("/metrics")).text
    assert 'specrag_latency_seconds_count{mode="hybrid",reasoning_effort="medium"} 1.0' in metrics


async def test_truncation_is_counted_by_reason(agentic_client):
    r = await agentic_client.post(URL, json={"query": "list pets and place an order", "max_steps": 1})
    assert r.json()["truncated"] is True
    assert 'specrag_truncated_total{reason="max_steps"} 1.0' in (await agentic_client.get("/metrics")).text


@pytest.mark.parametrize("change", [{"max_steps": 0}, {"max_steps": 21}, {"top_k_per_step": 51},
                                   {"token_budget": 99}, {"max_latency_ms": 999}, {"reasoning_effort": "max"},
                                   {"filters": {"verb": ["GET"]}}])
async def test_out_of_range_is_422(agentic_client, change):
    assert (await agentic_client.post(URL, json={"query": "list pets"} | change)).status_code == 422


async def test_without_a_retriever_there_is_no_route(client):
    assert (await client.post(URL, json={"query": "list pets"})).status_code == 404
    assert URL not in (await client.get("/openapi.json")).json()["paths"]
