"""``kb_id`` means one thing on every HTTP route and MCP tool: an optional knowledge base id or
alias; without it, the one knowledge base served. The agentic route's old ``kb_ids`` list still
reads (one id at most)."""

from __future__ import annotations

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio
BODIES = {"/api/v1/retrieve/basic": {"query": "create a user", "mode": "keyword"},
          "/api/v1/context": {"query": "create a user"},
          "/api/v1/plan": {"query": "create a user"},
          "/api/v1/retrieve/agentic": {"query": "create a user", "max_steps": 2}}


@pytest.fixture
async def wired(demo_kbs):
    import httpx
    from specrag.serve.app import create_app
    from specrag.serve.graph_wiring import routers

    app = create_app(demo_kbs, extra_routers=routers())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        yield client


@pytest.mark.parametrize("route", list(BODIES))
async def test_kb_id_is_optional_and_takes_an_id_or_an_alias(wired, demo_kbs, route):
    kb = demo_kbs.all()[0]
    for extra in ({}, {"kb_id": kb.kb_id}, {"kb_id": kb.alias}):
        r = await wired.post(route, json=BODIES[route] | extra)
        assert r.status_code == 200, (route, extra, r.text)
    unknown = await wired.post(route, json=BODIES[route] | {"kb_id": "nope"})
    assert unknown.status_code == 404 and "unknown kb_id" in unknown.json()["detail"], unknown.text


async def test_one_kb_id_shape_in_the_openapi_document_and_the_mcp_tools(wired, demo_kbs):
    from specrag.serve.graph_wiring import mcp_tools
    from specrag.serve.mcp_server import create_mcp_server

    doc = (await wired.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    for name in ("BasicRetrievalRequest", "AgenticRetrievalRequest", "ContextRequest", "PlanRequest"):
        assert "kb_id" not in schemas[name].get("required", []), name
        assert {t.get("type") for t in schemas[name]["properties"]["kb_id"]["anyOf"]} == {"string", "null"}, name
    assert schemas["AgenticRetrievalRequest"]["properties"]["kb_ids"]["deprecated"] is True
    browse = [p for path in doc["paths"].values() for op in path.values() for p in op.get("parameters", [])
              if p["name"] == "kb_id"]
    assert browse and all(not p.get("required") for p in browse)
    async with Client(create_mcp_server(demo_kbs, **mcp_tools())) as client:
        tools = (await client.list_tools()).tools
    with_kb = [t for t in tools if "kb_id" in t.input_schema["properties"]]
    assert len(with_kb) == len(tools)
    assert all("kb_id" not in t.input_schema.get("required", []) for t in with_kb)


async def test_the_old_kb_ids_list_still_reads(wired, kb_id):
    r = await wired.post("/api/v1/retrieve/agentic", json=BODIES["/api/v1/retrieve/agentic"] | {"kb_ids": [kb_id]})
    assert r.status_code == 200, r.text
    both = await wired.post("/api/v1/retrieve/agentic", json=BODIES["/api/v1/retrieve/agentic"]
                            | {"kb_ids": [kb_id], "kb_id": "other"})
    assert both.status_code == 422 and "one kb_id" in both.json()["detail"]


async def test_the_plan_route_takes_the_token_budget_too(wired):
    r = await wired.post("/api/v1/plan", json={"query": "create a user then get it", "token_budget": 400})
    assert r.status_code == 200 and r.json()["token_budget"] == 400, r.text
    assert (await wired.post("/api/v1/plan", json={"query": "x", "token_budget": 10})).status_code == 422
