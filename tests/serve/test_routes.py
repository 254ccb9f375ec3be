"""The product's own routes in-process: the KnowledgeContext, browsing by API, operation and
schema, health and readiness."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_context_is_the_budgeted_closure(client, kb_id):
    r = await client.post("/api/v1/context", json={"query": "How do I create a user?", "kb_id": kb_id})
    assert r.status_code == 200
    ctx = r.json()
    assert ctx["primary_chunks"][0]["id"] == "users_api:paths/~1users/post"
    ids = {c["id"] for c in ctx["primary_chunks"] + ctx["referenced_chunks"]}
    assert {"users_api:components/schemas/UserCreate", "users_api:components/schemas/Address",
            "users_api:components/schemas/Country"} <= ids
    cut = {c["id"] for c in ctx["retrieval_stats"]["refs_cut"]} | set(ctx["retrieval_stats"]["refs_missing"])
    for chunk in ctx["primary_chunks"] + ctx["referenced_chunks"]:  # ref_ids: chunk id -> where it is referenced
        for ref in chunk["metadata"]["ref_ids"]:
            assert ref in ids or ref in cut, (chunk["id"], ref)


async def test_context_without_kb_id_uses_the_only_one_and_names_unknown_apis(client):
    assert (await client.post("/api/v1/context", json={"query": "list pets"})).status_code == 200
    r = await client.post("/api/v1/context", json={"query": "list pets", "apis": ["petstore"]})
    assert r.status_code == 422 and "petstore_v2" in r.json()["detail"]  # did you mean ...
    assert (await client.post("/api/v1/context", json={"query": ""})).status_code == 422


async def test_kbs_and_apis(client, kb_id):
    kbs = (await client.get("/api/v1/kbs")).json()
    assert [k["kb_id"] for k in kbs] == [kb_id] and kbs[0]["apis"] == 2
    apis = (await client.get("/api/v1/apis")).json()
    assert {a["api"] for a in apis} == {"users_api", "petstore_v2"} and all(a["kb_id"] == kb_id for a in apis)
    assert (await client.get("/api/v1/apis", params={"kb_id": kb_id})).json() == apis
    assert (await client.get("/api/v1/apis", params={"kb_id": "nope"})).status_code == 404


@pytest.mark.parametrize("operation", ["createUser", "POST /users", "post%20/users"])
async def test_an_operation_by_operation_id_or_method_and_path(client, operation):
    r = await client.get(f"/api/v1/apis/users_api/operations/{operation}")
    assert r.status_code == 200, r.text
    op = r.json()
    assert op["chunk_id"] == "users_api:paths/~1users/post" and op["method"] == "POST" and op["path"] == "/users"
    assert op["errors"]["chunk_id"] == "users_api:paths/~1users/post:errors"
    assert op["tokens"] > 0 and op["truncated"] is False and "users_api:components/schemas/UserCreate" in op["ref_ids"]
    assert op["base_urls"] == ["https://api.example.com/v1"] and op["auth"] == ["bearerAuth (HTTP bearer)"]
    example = op["example_request"]
    assert example["url"] == "https://api.example.com/v1/users" and example["media_type"] == "application/json"
    assert example["headers"]["Authorization"] == "Bearer <token>" and set(example["body"]) == {"name", "email", "address"}
    assert example["curl"].startswith("curl -X POST ") and example["http"].startswith("POST /v1/users HTTP/1.1\n")


async def test_max_tokens_cuts_and_says_so(client):
    r = await client.get("/api/v1/apis/users_api/operations/createUser", params={"max_tokens": 5})
    op = r.json()
    assert op["tokens"] == 5 and op["truncated"] is True and len(op["text"]) < 60
    assert (await client.get("/api/v1/apis/users_api/operations/createUser", params={"max_tokens": 0})).status_code == 422


async def test_schemas_and_not_found(client):
    r = await client.get("/api/v1/apis/petstore_v2/schemas/Pet")
    assert r.status_code == 200 and r.json()["chunk_id"] == "petstore_v2:definitions/Pet"
    missing = await client.get("/api/v1/apis/users_api/schemas/Nope")
    assert missing.status_code == 404 and "UserCreate" in missing.json()["detail"]
    assert (await client.get("/api/v1/apis/nope/schemas/Pet")).status_code == 404
    assert (await client.get("/api/v1/apis/users_api/operations/nope")).status_code == 404
    assert (await client.get("/api/v1/apis/users_api/operations/GET /nowhere")).status_code == 404


async def test_health_readiness_and_openapi_need_no_key(client, kb_id):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = (await client.get("/readyz")).json()
    assert ready["status"] == "ready" and ready["kbs"][0]["kb_id"] == kb_id
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert {"/api/v1/retrieve/basic", "/api/v1/context", "/api/v1/apis", "/healthz", "/readyz", "/metrics",
            "/api/v1/apis/{api}/operations/{operation}", "/api/v1/apis/{api}/schemas/{name}"} <= set(paths)


def test_an_indexed_corpus_is_served_by_folder_name_or_alias(demo_index):
    from specrag.core.errors import IndexNotBuiltError
    from specrag.serve.kbs import _existing

    local, _ = demo_index
    root = local.model_copy(update={"data_dir": local.storage.data_dir.parent.parent})
    key = local.storage.data_dir.name
    assert _existing(root, key).storage.data_dir == _existing(root, key.rsplit("-", 1)[0]).storage.data_dir == local.storage.data_dir
    with pytest.raises(IndexNotBuiltError, match=f"no index 'nope' .*indexed: {key}"):
        _existing(root, "nope")


async def test_schema_lookups_read_an_api_index_once_through_the_engines_reader(demo_index, monkeypatch):
    """The service's lookups and the engine's stages share one cache of parsed API indexes."""
    import httpx
    from specrag.catalog import io
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBase, KnowledgeBases

    reads = []
    real = io.load_api_index
    monkeypatch.setattr(io, "load_api_index", lambda d, fid: reads.append(fid) or real(d, fid))
    kb = KnowledgeBase.open(demo_index[1])  # a fresh engine: nothing read yet
    transport = httpx.ASGITransport(app=create_app(KnowledgeBases([kb])))
    async with httpx.AsyncClient(transport=transport, base_url="http://specrag") as client:
        for _ in range(2):
            assert (await client.get("/api/v1/apis/petstore_v2/schemas/Pet")).status_code == 200
    assert kb.engine.graph.load_index("petstore_v2") is kb.api_index("petstore_v2")
    assert reads.count("petstore_v2") == 1
