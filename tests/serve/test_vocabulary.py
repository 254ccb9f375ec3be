"""One vocabulary on every surface: ``truncated`` means the same in the CLI's view, the HTTP
context, MCP, the log line and the metrics; every MCP ``tokens`` is the count of the text the
client gets; MCP chunks name their API; the context and plan tools take a bounded token budget;
no metadata value is JSON text inside JSON."""

from __future__ import annotations

import json
import logging
import re

import httpx
import pytest
from mcp import Client

pytestmark = pytest.mark.anyio
QUESTION = "How do I create a user?"
SMALL = 300  # tokens: createUser (154) is kept, part of its closure is not


@pytest.fixture(scope="module")
def small_kbs(demo_index):
    """The demo knowledge base with a server budget too small for createUser's whole closure."""
    from specrag.engine.factory import build_engine
    from specrag.serve.kbs import KnowledgeBase, KnowledgeBases

    local, store = demo_index
    engine = build_engine(local.model_copy(update={"context_token_limit": SMALL}), store=store)
    return KnowledgeBases([KnowledgeBase(local.storage.data_dir.name, local, engine, store)])


@pytest.fixture(scope="module")
def mcp_server(demo_kbs):
    from specrag.serve.graph_wiring import mcp_tools
    from specrag.serve.mcp_server import create_mcp_server

    return create_mcp_server(demo_kbs, **mcp_tools())


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag")


def json_text_inside(value, where: str = "") -> list[str]:
    """Every string in ``value`` that is itself a JSON list or object (JSON text inside JSON)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in json_text_inside(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in json_text_inside(v, f"{where}[{i}]")]
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return [where] if isinstance(json.loads(value), (list, dict)) else []
        except ValueError:
            return []
    return []


async def test_truncated_is_one_answer_on_every_surface(small_kbs, caplog):
    from specrag.context.knowledge import KnowledgeContext
    from specrag.engine.markdown import render_markdown
    from specrag.serve.app import create_app
    from specrag.serve.mcp_server import create_mcp_server

    app = create_app(small_kbs)
    with caplog.at_level(logging.INFO, logger="specrag.requests"):
        async with _client(app) as client:
            body = (await client.post("/api/v1/context", json={"query": QUESTION})).json()
            metrics = (await client.get("/metrics")).text
    stats = body["retrieval_stats"]
    assert stats["refs_cut"] and stats["limits_hit"]  # the budget left references out, no timeout
    assert stats["truncated"] is True and stats["truncated_reason"] == stats["limits_hit"][0]
    assert "truncated: yes" in render_markdown(KnowledgeContext.model_validate(body))  # the CLI's view
    event = next(r for r in caplog.records if r.getMessage() == "context")
    assert (event.truncated, event.truncated_reason) == (True, stats["truncated_reason"])
    assert f'specrag_truncated_total{{reason="{stats["truncated_reason"]}"}} 1.0' in metrics
    async with Client(create_mcp_server(small_kbs)) as mcp:
        result = (await mcp.call_tool("get_context", {"query": QUESTION})).structured_content
    assert (result["truncated"], result["truncated_reason"]) == (True, stats["truncated_reason"])


async def test_a_whole_context_is_not_truncated_anywhere(client):
    body = (await client.post("/api/v1/context", json={"query": QUESTION})).json()
    stats = body["retrieval_stats"]
    assert not stats["refs_cut"] and not stats["primaries_cut"]
    assert stats["truncated"] is False and stats["truncated_reason"] is None


async def test_every_mcp_tokens_is_the_count_of_the_text_returned(mcp_server, client):
    from specrag.core.tokens import count_tokens

    calls = {"search_apis": {"query": "add a pet"}, "search_operations": {"query": "add a pet", "top_k": 3},
             "get_context": {"query": QUESTION}, "plan": {"query": "create a user then get it"},
             "get_operation": {"api": "users_api", "operation": "createUser"},
             "get_schema": {"api": "users_api", "name": "User"},
             "impact": {"api": "users_api", "schema": "Country"}}
    async with Client(mcp_server) as mcp:
        results = {name: await mcp.call_tool(name, args) for name, args in calls.items()}
    for name, result in results.items():
        assert not result.is_error, (name, result.content)
        assert result.structured_content["tokens"] == count_tokens(result.content[0].text) > 0, name
    context = results["get_context"].structured_content
    http = (await client.post("/api/v1/context", json={"query": QUESTION})).json()
    examples = sum(c["example_request"]["tokens"] for c in context["chunks"] if c["example_request"])
    assert context["context_tokens"] == sum(c["tokens"] for c in context["chunks"]) + examples == http["total_tokens"]
    assert examples > 0
    assert all(c["tokens"] == count_tokens(c["text"]) for c in context["chunks"])
    plan = results["plan"].structured_content
    assert plan["context_tokens"] == plan["plan"]["total_tokens"] == sum(s["tokens"] for s in plan["plan"]["steps"])
    schema = results["get_schema"].structured_content
    assert schema["text_tokens"] == count_tokens(schema["text"])


async def test_mcp_context_chunks_name_their_api(mcp_server):
    async with Client(mcp_server) as mcp:
        chunks = (await mcp.call_tool("get_context", {"query": QUESTION})).structured_content["chunks"]
    assert chunks and all(c["api"] and c["api"] == c["id"].split(":", 1)[0] for c in chunks)


async def test_context_sized_tools_take_a_bounded_token_budget(mcp_server, client):
    """get_context, plan, get_operation, get_schema and impact hold their text to token_budget (100-100000);
    the HTTP context holds its chunk texts to it."""
    from specrag.core.tokens import count_tokens

    calls = {"get_context": {"query": QUESTION}, "plan": {"query": "create a user then get it"},
             "get_operation": {"api": "users_api", "operation": "createUser"},
             "get_schema": {"api": "users_api", "name": "User"}, "impact": {"api": "users_api", "schema": "Country"}}
    async with Client(mcp_server) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        for name in calls:
            budget = tools[name].input_schema["properties"]["token_budget"]
            assert "token_budget" not in tools[name].input_schema.get("required", []), name
            assert json.dumps(budget).count("100000") and json.dumps(budget).count('"minimum": 100'), (name, budget)
        whole = (await mcp.call_tool("get_context", {"query": QUESTION})).structured_content
        small = {name: await mcp.call_tool(name, {**args, "token_budget": SMALL}) for name, args in calls.items()}
        for bad in (99, 100_001, "lots"):
            refused = await mcp.call_tool("get_context", {"query": QUESTION, "token_budget": bad})
            assert refused.is_error, bad
    for name, result in small.items():
        assert count_tokens(result.content[0].text) == result.structured_content["tokens"] <= SMALL, name
    context = small["get_context"].structured_content
    assert whole["context_tokens"] > SMALL >= context["context_tokens"] and context["token_budget"] == SMALL
    assert context["truncated"] is True and not whole["truncated"]
    assert context["chunks"][0]["id"] == "users_api:paths/~1users/post"  # the first operation is kept whole
    plan = small["plan"].structured_content
    assert plan["truncated"] is True and plan["plan"]["steps"]  # each step keeps its operation: the text is cut
    http = (await client.post("/api/v1/context", json={"query": QUESTION, "token_budget": SMALL})).json()
    assert context["context_tokens"] <= http["total_tokens"] <= SMALL and http["retrieval_stats"]["truncated"] is True
    assert (await client.post("/api/v1/context", json={"query": QUESTION, "token_budget": 5})).status_code == 422


async def test_no_json_text_inside_json_on_any_surface(mcp_server, client, demo_engine):
    from specrag.serve.app import create_app
    from specrag.serve.graph_wiring import routers

    context = (await client.post("/api/v1/context", json={"query": QUESTION})).json()
    meta = context["primary_chunks"][0]["metadata"]
    assert isinstance(meta["base_urls"], list) and isinstance(meta["params"], list), meta
    assert json_text_inside(context) == []
    assert json_text_inside(json.loads(demo_engine.plan("create a user then get it").model_dump_json())) == []
    async with Client(mcp_server) as mcp:
        plan = (await mcp.call_tool("plan", {"query": "create a user then get it"})).structured_content
    assert json_text_inside(plan) == []
    async with _client(create_app(client._transport.app.state.tenants, extra_routers=routers())) as http:
        agentic = (await http.post("/api/v1/retrieve/agentic", json={"query": "create a user then get it"})).json()
    assert agentic["results"] and json_text_inside(agentic) == []
    assert not re.search(r'"\[\\"', json.dumps(agentic))
