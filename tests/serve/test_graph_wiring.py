"""The multi-step work as `specrag serve` and `specrag mcp` mount it (``graph_wiring``): the plan and
agentic routes and the MCP plan / impact tools over the demo corpus's real engine, in process."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp import Client
from specrag.cli import main
from specrag.serve.graph_wiring import mcp_tools, routers

pytestmark = pytest.mark.anyio
EMAIL = "Change the email address of a user"


@pytest.fixture
async def wired(demo_kbs):
    from specrag.serve.app import create_app

    app = create_app(demo_kbs, extra_routers=routers())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        yield client


def _before(order: list[str], first: str, then: str) -> bool:
    return first in order and then in order and order.index(first) < order.index(then)


@pytest.mark.needs_embeddings
async def test_the_plan_route_orders_the_lookup_before_the_update(wired):
    r = await wired.post("/api/v1/plan", json={"query": EMAIL})
    assert r.status_code == 200, r.text
    plan = r.json()
    order = [f"{s['method']} {s['path']}" for s in plan["steps"]]
    assert _before(order, "GET /users", "PUT /users/{userId}"), order
    update = next(s for s in plan["steps"] if s["path"] == "/users/{userId}")
    assert any(b["param"] == "userId" and b["source"] == "step" for b in update["bindings"]), update["bindings"]
    assert plan["question"] == EMAIL and 0 < plan["total_tokens"] <= plan["token_budget"]
    assert (await wired.post("/api/v1/plan", json={"query": EMAIL, "kb_id": "nope"})).status_code == 404
    metrics = (await wired.get("/metrics")).text
    assert 'specrag_requests_total{endpoint="plan",mode="plan",status="ok"} 1.0' in metrics


async def test_the_agentic_route_answers_with_its_steps(wired, kb_id):
    r = await wired.post("/api/v1/retrieve/agentic", json={"query": "list pets and place an order", "kb_ids": [kb_id]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["request_id"] == r.headers["x-request-id"]
    actions = [s["action"] for s in body["steps"]]
    assert actions[0] == "decompose" and "retrieve" in actions
    assert body["results"] and all(r["document_id"] for r in body["results"])
    assert body["total_tokens_used"] == sum(s["tokens"] for s in body["steps"] if s["action"] != "decompose")


async def test_the_agentic_route_runs_over_one_named_knowledge_base(wired, kb_id):
    unknown = await wired.post("/api/v1/retrieve/agentic", json={"query": "list pets", "kb_ids": ["nope"]})
    assert unknown.status_code == 404 and "unknown kb_id" in unknown.json()["detail"]
    two = await wired.post("/api/v1/retrieve/agentic", json={"query": "list pets", "kb_ids": [kb_id, kb_id]})
    assert two.status_code == 422 and "one kb_id" in two.json()["detail"]


@pytest.mark.needs_embeddings
async def test_the_mcp_plan_and_impact_tools(demo_kbs):
    from specrag.serve.mcp_server import create_mcp_server

    async with Client(create_mcp_server(demo_kbs, **mcp_tools())) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"plan", "impact"} <= set(tools)
        answer = await client.call_tool("plan", {"query": EMAIL})
        plan = answer.structured_content
        order = [f"{s['method']} {s['path']}" for s in plan["plan"]["steps"]]
        assert _before(order, "GET /users", "PUT /users/{userId}") and plan["tokens"] > 0, order
        text = answer.content[0].text  # markdown: the calls in order, then each step's context
        assert text.startswith(f"# Plan for: {EMAIL}") and _before(text.split("\n"), "## Step 1: GET /users",
                                                                   "## Step 2: PUT /users/{userId}")
        answer = await client.call_tool("impact", {"api": "users_api", "schema": "Country"})
        assert answer.content[0].text.startswith("# What uses `Country` in `users_api`")
        assert "- `POST /users` (operationId `createUser`) via" in answer.content[0].text
        impact = answer.structured_content
        report = impact["impact"]
        assert report["schema_id"] == "users_api:components/schemas/Country"
        assert "users_api:components/schemas/Address" in report["components"]
        assert "POST /users" in {f"{o['method']} {o['path']}" for o in report["operations"]}
        missing = await client.call_tool("impact", {"api": "users_api", "schema": "Nope"})
        assert missing.is_error and "no schema 'Nope'" in missing.content[0].text


def test_the_openapi_command_documents_the_mounted_routes(capsys):
    assert main(["openapi"]) == 0
    paths = json.loads(capsys.readouterr().out)["paths"]
    assert {"/api/v1/plan", "/api/v1/retrieve/agentic", "/api/v1/retrieve/basic"} <= set(paths)
