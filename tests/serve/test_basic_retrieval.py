"""POST /api/v1/retrieve/basic in-process: modes, the similarity threshold per mode, filters,
422 outside a range, 404 for an unknown knowledge base, keyword fallback on a lexical index."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.anyio
URL = "/api/v1/retrieve/basic"


@pytest.mark.needs_embeddings
async def test_defaults_vector_mode_answers_with_the_service_shape(client, kb_id):
    r = await client.post(URL, json={"kb_id": kb_id, "query": "create a new user account", "similarity_threshold": 0})
    assert r.status_code == 200
    body = r.json()
    assert set(body) >= {"request_id", "answer", "results", "steps", "total_tokens_used", "total_latency_ms",
                         "truncated"}
    assert body["request_id"] == r.headers["x-request-id"]
    top = body["results"][0]
    assert top["chunk_id"] == "users_api:paths/~1users/post" and top["document_id"] == "users_api"
    assert set(top) == {"chunk_id", "document_id", "text", "score", "metadata"}
    assert top["metadata"]["method"] == "POST" and "users_api:components/schemas/UserCreate" in top["metadata"]["ref_ids"]
    assert len(body["results"]) == 10 and body["steps"][0]["action"] == "retrieve"
    assert body["total_tokens_used"] == sum(i["metadata"]["n_tokens"] for i in body["results"]) > 0
    assert [s["score"] for s in body["results"]] == sorted((s["score"] for s in body["results"]), reverse=True)


@pytest.mark.needs_embeddings
async def test_vector_scores_are_rescaled_cosines_and_the_threshold_cuts_on_them(client, kb_id, demo_index):
    _, store = demo_index
    query = "postal address of a user"
    r = await client.post(URL, json={"kb_id": kb_id, "query": query, "top_k": 100, "similarity_threshold": 0})
    results = r.json()["results"]
    q = np.asarray(store.embed_query(query), dtype=np.float32)
    q /= np.linalg.norm(q)
    for item in results[:5]:
        row = store.local.pack.ids.index(item["chunk_id"])
        cosine = float(store.local.vectors[row].astype(np.float32) @ q)  # stored float16: a looser tolerance
        assert item["score"] == pytest.approx((1 + cosine) / 2, abs=2e-3)
    cut = results[3]["score"]
    r = await client.post(URL, json={"kb_id": kb_id, "query": query, "top_k": 100, "similarity_threshold": cut})
    kept = r.json()["results"]
    assert kept and all(i["score"] >= cut for i in kept) and len(kept) < len(results)


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_keyword_and_hybrid_scores_are_relative_to_the_best_hit(client, kb_id, mode):
    body = {"kb_id": kb_id, "query": "user postal address country", "mode": mode, "top_k": 20}
    everything = (await client.post(URL, json=body | {"similarity_threshold": 0})).json()["results"]
    assert everything[0]["score"] == 1.0 and all(0 <= i["score"] <= 1 for i in everything)
    best_only = (await client.post(URL, json=body | {"similarity_threshold": 1.0})).json()["results"]
    assert best_only and {i["score"] for i in best_only} == {1.0}
    half = (await client.post(URL, json=body | {"similarity_threshold": 0.5})).json()["results"]
    assert [i["chunk_id"] for i in half] == [i["chunk_id"] for i in everything if i["score"] >= 0.5]


async def test_keyword_mode_needs_the_words(client, kb_id):
    r = await client.post(URL, json={"kb_id": kb_id, "query": "zzzz qqqq", "mode": "keyword", "similarity_threshold": 0})
    assert r.status_code == 200 and r.json()["results"] == []


@pytest.mark.parametrize("filters, check", [
    ({"api": ["petstore_v2"]}, lambda i: i["document_id"] == "petstore_v2"),
    ({"type": ["component"]}, lambda i: i["metadata"]["type"] == "component"),
    ({"method": ["DELETE"]}, lambda i: i["metadata"]["method"] == "DELETE"),
    ({"api": ["users_api"], "type": ["errors"]}, lambda i: i["chunk_id"].endswith(":errors")),
])
async def test_filters_hold_in_every_mode(client, kb_id, filters, check):
    for mode in ("keyword", "vector", "hybrid"):
        r = await client.post(URL, json={"kb_id": kb_id, "query": "user pet order", "mode": mode, "filters": filters,
                                         "similarity_threshold": 0, "top_k": 50})
        results = r.json()["results"]
        assert r.status_code == 200 and results and all(check(i) for i in results), (mode, filters)


@pytest.mark.parametrize("change", [
    {"top_k": 0}, {"top_k": 101}, {"similarity_threshold": -0.1}, {"similarity_threshold": 1.01},
    {"mode": "semantic"}, {"query": ""}, {"filters": {"tag": ["x"]}}, {"filters": {"type": ["operation"]}},
    {"filters": {"method": ["get"]}}, {"filters": {"api": ["nope_api"]}}, {"kb_id": ""}, {"unknown_field": 1},
])
async def test_invalid_requests_are_422(client, kb_id, change):
    r = await client.post(URL, json={"kb_id": kb_id, "query": "create a user"} | change)
    assert r.status_code == 422, r.text
    assert r.json()["detail"]


async def test_an_unknown_knowledge_base_is_404_with_a_hint(client, kb_id):
    r = await client.post(URL, json={"kb_id": kb_id[:-1], "query": "create a user"})
    assert r.status_code == 404 and kb_id in r.json()["detail"]


async def test_the_alias_names_the_same_knowledge_base(client, demo_kbs, kb_id):
    alias = demo_kbs.get(kb_id).alias
    r = await client.post(URL, json={"kb_id": alias, "query": "create a user", "similarity_threshold": 0})
    assert r.status_code == 200 and r.json()["results"]


async def test_a_lexical_index_answers_vector_requests_with_keyword_search_and_says_so(demo_index):
    import httpx
    from specrag.index.store import ChunkStore
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBase, KnowledgeBases

    local, _ = demo_index
    store = ChunkStore.open(local, embed_model=None)
    kbs = KnowledgeBases([KnowledgeBase.open(store)])
    transport = httpx.ASGITransport(app=create_app(kbs))
    async with httpx.AsyncClient(transport=transport, base_url="http://specrag") as client:
        r = await client.post(URL, json={"kb_id": kbs.all()[0].kb_id, "query": "create a user"})
    store.close()
    body = r.json()
    assert r.status_code == 200 and body["results"][0]["chunk_id"] == "users_api:paths/~1users/post"
    assert "keyword search instead" in body["degraded"] and "mode=keyword" in body["steps"][0]["detail"]


async def test_the_body_is_the_response_models_own_json_and_documented_as_it(client, kb_id, app):
    """The route sends bytes encoded in the worker thread: the same bytes FastAPI writes for its response_model."""
    from pydantic import TypeAdapter
    from specrag.core.api_models import RetrievalResponse

    r = await client.post(URL, json={"kb_id": kb_id, "query": "create a new user account", "mode": "keyword"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    parsed = RetrievalResponse.model_validate_json(r.content)
    assert parsed.results and parsed.request_id == r.headers["x-request-id"]
    assert r.content == TypeAdapter(RetrievalResponse).dump_json(parsed)
    ok = app.openapi()["paths"][URL]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/RetrievalResponse"}
