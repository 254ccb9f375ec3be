"""Chunking of two small hand-written specs (Swagger 2 and OAS 3): which chunks exist, their
metadata and texts, and the exact ``ref_ids`` links for every place a ``$ref`` may sit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specrag.specs.ingest import ingest_spec
from specrag.specs.models import Chunk, ChunkType

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def shop() -> dict[str, Chunk]:
    api = ingest_spec(FIXTURES / "shop_swagger2.yaml", "shop", 1500)
    assert api.refs.total == api.refs.resolved > 0
    return {c.id: c for c in api.chunks}


@pytest.fixture(scope="module")
def zoo() -> dict[str, Chunk]:
    api = ingest_spec(FIXTURES / "zoo_oas3.yaml", "zoo", 1500)
    assert api.refs.total == api.refs.resolved > 0
    return {c.id: c for c in api.chunks}


def test_swagger2_one_chunk_per_operation_component_and_error_group(shop):
    assert sorted(shop) == sorted([
        "shop:paths/~1orders/get", "shop:paths/~1orders/post", "shop:paths/~1orders/post:errors",
        "shop:paths/~1orders~1{id}/delete",
        "shop:definitions/Order", "shop:definitions/NewOrder", "shop:definitions/LineItem",
        "shop:definitions/Money", "shop:definitions/Error",
        "shop:parameters/Limit", "shop:parameters/Tenant", "shop:responses/BadRequest",
        "shop:securityDefinitions/api_key",
    ])
    kinds = {cid: c.kind for cid, c in shop.items() if c.type is ChunkType.COMPONENT}
    assert kinds["shop:definitions/Order"] == "schemas"
    assert kinds["shop:parameters/Limit"] == "parameters"
    assert kinds["shop:responses/BadRequest"] == "responses"
    assert kinds["shop:securityDefinitions/api_key"] == "securitySchemes"


def test_oas3_one_chunk_per_component_kind(zoo):
    components = {c.kind: set() for c in zoo.values() if c.type is ChunkType.COMPONENT}
    for c in zoo.values():
        if c.type is ChunkType.COMPONENT:
            components[c.kind].add(c.name)
    assert components == {
        "schemas": {"Animal", "Cat", "Dog", "Bird", "Problem"}, "parameters": {"AnimalId"},
        "requestBodies": {"AnimalBody"}, "responses": {"Conflict"}, "headers": {"Rate"},
        "links": {"GetAnimal"}, "callbacks": {"Fed"}, "securitySchemes": {"bearer"}, "examples": {"ACat"},
    }
    assert all(cid == f"zoo:components/{c.kind}/{c.name}" for cid, c in zoo.items() if c.type is ChunkType.COMPONENT)


def test_errors_chunk_only_for_operations_with_error_responses(shop, zoo):
    errors = sorted(cid for cid, c in {**shop, **zoo}.items() if c.type is ChunkType.ERRORS)
    assert errors == ["shop:paths/~1orders/post:errors", "zoo:paths/~1animals/post:errors"]
    shop_err = shop["shop:paths/~1orders/post:errors"]
    assert (shop_err.method, shop_err.path, shop_err.kind) == ("POST", "/orders", "errors")
    assert '"400"' in shop_err.text or "'400'" in shop_err.text
    assert "default:" in shop_err.text and "unexpected" in shop_err.text
    post = shop["shop:paths/~1orders/post"]
    assert "unexpected" not in post.text and "'201'" in post.text  # error responses moved out
    assert post.ref_ids["shop:paths/~1orders/post:errors"] == ["responses"]
    assert shop_err.referenced_by == [post.id]
    zoo_err = zoo["zoo:paths/~1animals/post:errors"]
    assert "try later" in zoo_err.text and "'409'" in zoo_err.text  # 5xx and 4xx together


def test_endpoint_metadata(shop):
    post = shop["shop:paths/~1orders/post"]
    meta = post.metadata()
    assert {k: meta[k] for k in ("source_file", "type", "kind", "method", "path", "operation_id", "name", "summary")} == {
        "source_file": "shop", "type": "endpoint", "kind": "operation", "method": "POST", "path": "/orders",
        "operation_id": "createOrder", "name": "createOrder", "summary": "Create an order"}
    assert json.loads(meta["tags"]) == ["orders"]
    assert shop["shop:paths/~1orders/get"].summary == "List all orders"  # markdown stripped


def test_metadata_is_flat_and_round_trips(shop, zoo):
    for chunk in [*shop.values(), *zoo.values()]:
        meta = chunk.metadata()
        assert all(isinstance(v, (str, int, float, bool)) for v in meta.values()), meta
        # embed/search texts are not stored as metadata; everything else comes back
        back = Chunk.from_metadata(chunk.id, chunk.text, meta)
        assert back == chunk.model_copy(update={"embed_text": "", "search_text": ""})
        full = Chunk.from_metadata(chunk.id, chunk.text, meta | {"embed_text": chunk.embed_text,
                                                                   "search_text": chunk.search_text})
        assert full == chunk


def test_from_metadata_tolerates_malformed_json():
    chunk = Chunk.from_metadata("a:b", "t", {"type": "errors", "ref_ids": "{not json", "tags": "[1",
                                             "referenced_by": '{"x": 1}'})
    assert (chunk.type, chunk.ref_ids, chunk.tags, chunk.referenced_by) == (ChunkType.ERRORS, {}, [], [])


def test_text_keeps_refs_and_embed_text_is_short(shop, zoo):
    post = shop["shop:paths/~1orders/post"]
    assert post.text.startswith("# POST /orders  (operationId: createOrder)")
    assert "$ref: '#/definitions/NewOrder'" in post.text
    assert "note" not in post.text  # NewOrder's body is not inlined
    order = shop["shop:definitions/Order"]
    assert "$ref: '#/definitions/LineItem'" in order.text and "sku" not in order.text
    for chunk in [*shop.values(), *zoo.values()]:
        assert 0 < len(chunk.embed_text) <= 300, chunk.embed_text
        assert chunk.search_text
    assert "createOrder" in post.search_text and "create Order" in post.search_text
    assert post.embed_text.startswith("POST orders: Create an order")  # method, path words, summary


@pytest.mark.parametrize("source, target, locations", [
    # nested properties, items, additionalProperties, allOf
    ("shop:definitions/LineItem", "shop:definitions/Money", ["/properties/price"]),
    ("shop:definitions/Order", "shop:definitions/LineItem", ["/properties/items/items"]),
    ("shop:definitions/Order", "shop:definitions/Money", ["/properties/extra/additionalProperties"]),
    ("shop:definitions/NewOrder", "shop:definitions/Order", ["/allOf/0"]),
    # operation parameters (own and path-level), body, responses, response components, security
    ("shop:paths/~1orders/get", "shop:parameters/Limit", ["/parameters/0"]),
    ("shop:paths/~1orders/get", "shop:parameters/Tenant", ["/parameters/0"]),
    ("shop:paths/~1orders/get", "shop:definitions/Order", ["/responses/200/schema/items"]),
    ("shop:paths/~1orders/post", "shop:definitions/NewOrder", ["/parameters/0/schema"]),
    ("shop:paths/~1orders/post", "shop:securityDefinitions/api_key", ["security"]),
    ("shop:paths/~1orders/post:errors", "shop:responses/BadRequest", ["/responses/400"]),
    ("shop:paths/~1orders/post:errors", "shop:definitions/Error", ["/responses/default/schema"]),
    ("shop:responses/BadRequest", "shop:definitions/Error", ["/schema"]),
    # OAS 3: anyOf, oneOf, discriminator mapping, requestBody, headers, callbacks, links
    ("zoo:components/schemas/Animal", "zoo:components/schemas/Cat", ["/properties/pet/anyOf/0"]),
    ("zoo:paths/~1animals~1{id}/get", "zoo:components/schemas/Dog",
     ["/responses/200/content/application~1json/schema/discriminator/mapping",
      "/responses/200/content/application~1json/schema/oneOf/1"]),
    ("zoo:paths/~1animals~1{id}/get", "zoo:components/schemas/Bird",
     ["/responses/200/content/application~1json/schema/discriminator/mapping"]),
    ("zoo:paths/~1animals~1{id}/get", "zoo:components/parameters/AnimalId", ["/parameters/0"]),
    ("zoo:paths/~1animals/post", "zoo:components/requestBodies/AnimalBody", ["/requestBody"]),
    ("zoo:components/requestBodies/AnimalBody", "zoo:components/schemas/Animal", ["/content/application~1json/schema"]),
    ("zoo:paths/~1animals/post", "zoo:components/headers/Rate", ["/responses/201/headers/X-Rate"]),
    ("zoo:paths/~1animals/post", "zoo:components/callbacks/Fed", ["/callbacks/onFed"]),
    ("zoo:components/callbacks/Fed", "zoo:components/schemas/Animal",
     ["/{$request.body#~1callback}/post/requestBody/content/application~1json/schema"]),
    ("zoo:paths/~1animals/post", "zoo:components/links/GetAnimal", ["/responses/201/links/GetAnimal"]),
    ("zoo:paths/~1animals/post", "zoo:paths/~1animals~1{id}/get", ["/responses/201/links/Self"]),
    ("zoo:components/links/GetAnimal", "zoo:paths/~1animals~1{id}/get", ["/"]),
    ("zoo:paths/~1animals/post:errors", "zoo:components/responses/Conflict", ["/responses/409"]),
    ("zoo:components/responses/Conflict", "zoo:components/schemas/Problem",
     ["/content/application~1problem+json/schema"]),
])
def test_ref_found_with_its_location(shop, zoo, source, target, locations):
    chunks = {**shop, **zoo}
    assert sorted(chunks[source].ref_ids[target]) == sorted(locations)
    assert source in chunks[target].referenced_by


def test_referenced_by_is_the_inverse_of_ref_ids(shop, zoo):
    for chunks in (shop, zoo):
        inverse: dict[str, set[str]] = {cid: set() for cid in chunks}
        for chunk in chunks.values():
            for rid in chunk.ref_ids:
                inverse[rid].add(chunk.id)
        assert {cid: set(c.referenced_by) for cid, c in chunks.items()} == inverse
