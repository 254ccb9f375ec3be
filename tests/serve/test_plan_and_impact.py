"""The plan route and the MCP plan / impact tools, mounted over small planner and impact functions
(the real ones come from the multi-step work): shapes, tokens, errors, 422s."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from mcp import Client
from pydantic import BaseModel
from specrag.core.api_models import BasicRetrievalRequest

pytestmark = pytest.mark.anyio


class Plan(BaseModel):
    steps: list[str]


class Impact(BaseModel):
    schema_id: str
    dependents: list[str]


async def first_two_operations(kb, query: str) -> Plan:
    from specrag.serve.basic import BasicRetrieval
    from specrag.serve.kbs import KnowledgeBases

    response = await BasicRetrieval(KnowledgeBases([kb])).arun(BasicRetrievalRequest(
        kb_id=kb.kb_id, query=query, top_k=2, filters={"type": ["endpoint"]}, similarity_threshold=0))
    return Plan(steps=[r.chunk_id for r in response.results])


async def referenced_by(kb, api: str, schema: str) -> Impact:
    """Everything that references the schema, directly or through other schemas (a BFS on referenced_by)."""
    from specrag.index.lookup import get_schema

    start = (await asyncio.to_thread(get_schema, kb, api, schema)).chunk_id
    seen, frontier = {start}, [start]
    while frontier:
        chunks = kb.store.get_chunks(frontier)
        frontier = [r for c in chunks.values() for r in c.referenced_by if r not in seen]
        seen |= set(frontier)
    return Impact(schema_id=start, dependents=sorted(seen - {start}))


async def test_the_plan_route(demo_kbs):
    from specrag.serve.app import create_app
    from specrag.serve.routes.plan import plan_router

    app = create_app(demo_kbs, extra_routers=[plan_router(first_two_operations, Plan)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        r = await client.post("/api/v1/plan", json={"query": "create a user"})
        assert r.status_code == 200 and r.json()["steps"][0] == "users_api:paths/~1users/post"
        assert (await client.post("/api/v1/plan", json={"query": ""})).status_code == 422
        assert (await client.post("/api/v1/plan", json={"query": "x", "kb_id": "nope"})).status_code == 404
        schema = (await client.get("/openapi.json")).json()
        assert "Plan" in schema["components"]["schemas"] and "/api/v1/plan" in schema["paths"]
        metrics = (await client.get("/metrics")).text
    assert 'specrag_requests_total{endpoint="plan",mode="plan",status="ok"} 1.0' in metrics


async def test_the_mcp_plan_and_impact_tools(demo_kbs):
    from specrag.serve.mcp_server import create_mcp_server

    server = create_mcp_server(demo_kbs, planner=(first_two_operations, Plan), impact=(referenced_by, Impact))
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"plan", "impact"} <= set(tools)
        for name in ("plan", "impact"):
            assert {"tokens", "truncated"} <= set(tools[name].output_schema["properties"])
        answer = await client.call_tool("plan", {"query": "create a user"})
        plan = answer.structured_content
        assert plan["plan"]["steps"][0] == "users_api:paths/~1users/post" and plan["tokens"] > 0
        # a planner's own model reads as its JSON, fenced; the same model is the structured content
        assert answer.content[0].text.startswith("```json\n") and '"users_api:paths/~1users/post"' in answer.content[0].text
        impact = (await client.call_tool("impact", {"api": "users_api", "schema": "Country"})).structured_content
        assert {"users_api:components/schemas/Address", "users_api:paths/~1users/post"} <= set(
            impact["impact"]["dependents"])
        missing = await client.call_tool("impact", {"api": "users_api", "schema": "Nope"})
        assert missing.is_error and "no schema 'Nope'" in missing.content[0].text
