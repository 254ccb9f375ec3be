"""The MCP server with the SDK's Client: in process, and once over streamable HTTP on loopback."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from specrag.core.tokens import count_tokens

from .live import running_uvicorn

pytestmark = pytest.mark.anyio
TOOLS = {"search_apis", "search_operations", "get_context", "get_operation", "get_schema"}


@pytest.fixture(scope="module")
def mcp_server(demo_kbs):
    from specrag.serve.mcp_server import create_mcp_server

    return create_mcp_server(demo_kbs)


async def test_tool_schemas(mcp_server):
    async with Client(mcp_server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["get_context"].input_schema["required"] == ["query"]
    assert set(tools["get_operation"].input_schema["required"]) == {"api", "operation"}
    assert tools["search_operations"].input_schema["properties"]["top_k"]["maximum"] == 100
    for tool in tools.values():
        assert tool.description and {"tokens", "truncated"} <= set(tool.output_schema["properties"]), tool.name
    for name in ("get_context", "get_operation", "get_schema"):  # the context-sized answers
        assert "token_budget" in tools[name].input_schema["properties"], name


async def test_get_context_reports_every_ref_included_or_cut(mcp_server, demo_index):
    async with Client(mcp_server) as client:
        result = await client.call_tool("get_context", {"query": "How do I create a user?"})
    assert not result.is_error
    _assert_every_ref_included_or_cut(result.structured_content, demo_index[1])


def _assert_every_ref_included_or_cut(body: dict, store) -> None:
    """The get_context answer for 'create a user': every $ref of every chunk is in it or named as cut."""
    assert body["chunks"][0]["id"] == "users_api:paths/~1users/post"
    examples = sum(c["example_request"]["tokens"] for c in body["chunks"] if c["example_request"])
    assert body["chunks"][0]["example_request"]["curl"].startswith("curl -X POST 'https://api.example.com/v1/users'")
    assert body["context_tokens"] == sum(c["tokens"] for c in body["chunks"]) + examples > 0 and body["tokens"] > 0
    assert body["truncated"] == bool(body["refs_cut"] or body["primaries_cut"])
    ids = {c["id"] for c in body["chunks"]}
    expanded = sorted(c["id"] for c in body["chunks"] if not c["signature"])  # a signature's refs are not followed
    assert len(expanded) < len(ids)  # the other ranked operations are there, as signatures
    reported = {c["id"] for c in body["refs_cut"]} | set(body["refs_missing"])
    refs = [(chunk.id, ref) for chunk in store.get_chunks(expanded).values() for ref in chunk.ref_ids]
    assert refs and all(ref in ids or ref in reported for _, ref in refs), refs


async def test_search_then_describe(mcp_server):
    async with Client(mcp_server) as client:
        apis = (await client.call_tool("search_apis", {"query": "add a pet to the store"})).structured_content
        assert apis["apis"][0]["api"] == "petstore_v2" and apis["tokens"] > 0
        ops = (await client.call_tool("search_operations", {"query": "add a new pet", "apis": ["petstore_v2"],
                                                            "top_k": 3})).structured_content
        assert len(ops["operations"]) == 3 and ops["operations"][0]["method"] == "POST"
        top = ops["operations"][0]
        op = (await client.call_tool("get_operation", {"api": top["api"], "operation": f"POST {top['path']}"}))
        assert op.structured_content["chunk_id"] == top["chunk_id"] and op.structured_content["truncated"] is False
        example = op.structured_content["example_request"]  # the pet store's api_key, in its header
        assert example["headers"]["api_key"] == "<api-key>" and example["body"] == {"name": "doggie", "photoUrls": ["<string>"]}
        whole = (await client.call_tool("get_schema", {"api": "petstore_v2", "name": "Pet"})).structured_content
        schema = (await client.call_tool("get_schema", {"api": "petstore_v2", "name": "Pet", "token_budget": 100}))
    assert whole["truncated"] is False
    cut = schema.structured_content
    assert cut["truncated"] is True and cut["text_tokens"] < whole["text_tokens"]
    assert count_tokens(schema.content[0].text) == cut["tokens"] <= 100 < whole["tokens"]


async def test_answers_are_markdown_with_the_result_beside_it(mcp_server):
    """The text a model reads is markdown naming what the next call takes; the same result is the
    structured content."""
    async with Client(mcp_server) as client:
        apis = await client.call_tool("search_apis", {"query": "add a pet to the store"})
        ops = await client.call_tool("search_operations", {"query": "add a new pet", "top_k": 3})
        op = await client.call_tool("get_operation", {"api": "users_api", "operation": "createUser"})
        schema = await client.call_tool("get_schema", {"api": "users_api", "name": "User"})
        context = await client.call_tool("get_context", {"query": "How do I create a user?"})
    text = {name: r.content[0].text for name, r in
            {"apis": apis, "ops": ops, "op": op, "schema": schema, "context": context}.items()}
    assert text["apis"].startswith("# APIs for: add a pet to the store")
    assert all(f"- `{a['api']}` — {a['name']}" in text["apis"] for a in apis.structured_content["apis"])
    assert all(f"`{o['method']} {o['path']}` in `{o['api']}`" in text["ops"]
               for o in ops.structured_content["operations"])
    assert text["op"].startswith("# POST /users (operationId `createUser`) · API `users_api`")
    assert "`User`, `UserCreate`" in text["op"] and "## Error responses" in text["op"]  # names get_schema takes
    assert "## Example request" in text["op"] and op.structured_content["example_request"]["curl"] in text["op"]
    assert op.structured_content["text"] in text["op"] and op.structured_content["errors"]["text"] in text["op"]
    assert text["schema"].startswith("# schema `User` · API `users_api`") and "`Address`" in text["schema"]
    assert text["context"].startswith("# Context for: How do I create a user?")
    assert all(f"`{c['id']}`" in text["context"] for c in context.structured_content["chunks"])
    for result in (apis, ops, op, schema, context):
        assert not result.is_error and "```json" not in result.content[0].text
        assert result.structured_content["tokens"] == count_tokens(result.content[0].text)


@pytest.mark.parametrize("budget", [100, 300, 1000])
async def test_every_context_sized_answer_holds_to_its_token_budget(mcp_server, budget):
    """Within the budget, and truncated exactly when the whole answer would not have fit."""
    calls = {"get_context": {"query": "How do I create a user?"},
             "get_operation": {"api": "users_api", "operation": "createUser"},
             "get_schema": {"api": "users_api", "name": "User"}}
    async with Client(mcp_server) as client:
        whole = {name: (await client.call_tool(name, args)).structured_content for name, args in calls.items()}
        results = {name: await client.call_tool(name, {**args, "token_budget": budget}) for name, args in calls.items()}
    for name, result in results.items():
        body = result.structured_content
        assert count_tokens(result.content[0].text) == body["tokens"] <= budget, (name, budget)
        assert body["truncated"] is (whole[name]["tokens"] > budget), (name, budget, whole[name]["tokens"])
        assert whole[name]["truncated"] is False


async def test_errors_are_tool_errors_with_the_reason(mcp_server):
    async with Client(mcp_server) as client:
        missing = await client.call_tool("get_schema", {"api": "users_api", "name": "Nope"})
        assert missing.is_error and "UserCreate" in missing.content[0].text
        unknown = await client.call_tool("get_context", {"query": "list pets", "kb_id": "nope"})
        assert unknown.is_error and "unknown kb_id" in unknown.content[0].text
        invalid = await client.call_tool("search_operations", {"query": "x", "top_k": 0})
        assert invalid.is_error


async def test_resources(mcp_server):
    async with Client(mcp_server) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"specrag://{api}/operations/{operation_id}", "specrag://{api}/schemas/{name}"}
        op = await client.read_resource("specrag://users_api/operations/createUser")
        assert op.contents[0].text.startswith("# POST /users")
        schema = await client.read_resource("specrag://users_api/schemas/User")
        assert "A user of the account" in schema.contents[0].text


def test_over_streamable_http_on_loopback(mcp_server, demo_index):
    import anyio

    async def session(url: str) -> dict:
        async with Client(url) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            return (await client.call_tool("get_context", {"query": "How do I create a user?"})).structured_content

    with running_uvicorn(mcp_server.streamable_http_app()) as base_url:
        body = anyio.run(session, f"{base_url}/mcp")
    _assert_every_ref_included_or_cut(body, demo_index[1])
    assert "users_api:components/schemas/Address" in json.dumps(body)
