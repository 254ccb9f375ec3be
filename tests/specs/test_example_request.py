"""An operation's example request: the recipe ingest stores (parameters with the spec's examples or
placeholders, a minimal body, the applied and the declared-only security) and the curl command and
raw HTTP request rendered from it."""

from __future__ import annotations

import json
from pathlib import Path

from specrag.specs.example_request import RequestRecipe, example_from_metadata, render_example
from specrag.specs.ingest import ingest_spec
from specrag.specs.models import Chunk

OAS3 = {
    "openapi": "3.0.3", "info": {"title": "Shop", "version": "1"},
    "servers": [{"url": "https://{region}.shop.example/v1", "variables": {"region": {"default": "eu"}}}],
    "security": [{"bearer": []}],
    "paths": {
        "/stores/{storeId}/orders": {
            "parameters": [{"name": "storeId", "in": "path", "required": True, "schema": {"type": "integer"},
                            "example": 42}],
            "post": {
                "operationId": "createOrder",
                "parameters": [
                    {"name": "mode", "in": "query", "required": True, "schema": {"type": "string", "enum": ["fast", "slow"]}},
                    {"name": "since", "in": "query", "required": True, "schema": {"type": "string", "format": "date"}},
                    {"name": "page", "in": "query", "schema": {"type": "integer"}},
                    {"name": "X-Trace", "in": "header", "required": True, "schema": {"type": "string"},
                     "examples": {"one": {"value": "abc"}}},
                    {"name": "Content-Type", "in": "header", "required": True, "schema": {"type": "string"}},
                ],
                "requestBody": {"required": True, "content": {
                    "application/xml": {"schema": {"$ref": "#/components/schemas/Order"}},
                    "application/json": {"schema": {"$ref": "#/components/schemas/Order"}}}},
                "responses": {"201": {"description": "created"}},
            },
        },
        "/stores/{storeId}": {"get": {
            "security": [], "parameters": [{"name": "storeId", "in": "path", "required": True,
                                            "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}},
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                            "oauth": {"type": "oauth2", "flows": {}}},
        "schemas": {"Order": {"type": "object", "required": ["sku", "quantity"], "properties": {
            "sku": {"type": "string", "example": "A-1"}, "quantity": {"type": "integer", "minimum": 1},
            "note": {"type": "string"}}}},
    },
}

SWAGGER2 = {
    "swagger": "2.0", "info": {"title": "Files", "version": "1"}, "host": "files.example", "basePath": "/api",
    "schemes": ["https"], "consumes": ["application/x-www-form-urlencoded"],
    "securityDefinitions": {"key": {"type": "apiKey", "in": "query", "name": "api_key"},
                            "login": {"type": "basic"}},
    "paths": {
        "/upload": {"post": {"security": [{"key": []}], "parameters": [
            {"name": "file", "in": "formData", "type": "file", "required": True},
            {"name": "title", "in": "formData", "type": "string", "required": True, "x-example": "My file"}],
            "responses": {"200": {"description": "ok"}}}},
        "/notes": {"post": {"security": [{"login": []}], "parameters": [
            {"name": "text", "in": "formData", "type": "string", "required": True},
            {"name": "tags", "in": "formData", "type": "array", "items": {"type": "string"}, "required": True}],
            "responses": {"200": {"description": "ok"}}}},
        "/raw": {"put": {"consumes": ["application/xml"], "parameters": [
            {"name": "body", "in": "body", "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}},
    },
}


def endpoints(tmp_path: Path, spec: dict, name: str = "shop") -> dict[str, Chunk]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec))
    result = ingest_spec(path, name, 1500)
    return {f"{c.method} {c.path}": c for c in result.chunks if c.type.value == "endpoint" and ":part" not in c.id}


def example(chunk: Chunk):
    """As the engine and get_operation build it: from the chunk's stored metadata."""
    stored = Chunk.from_metadata(chunk.id, chunk.text, chunk.metadata())
    return example_from_metadata(stored.metadata(), count_tokens=len)


def test_openapi_json_body_parameters_auth_and_declared_only_schemes(tmp_path):
    chunk = endpoints(tmp_path, OAS3)["POST /stores/{storeId}/orders"]
    ex = example(chunk)
    assert ex.url == "https://eu.shop.example/v1/stores/42/orders?mode=fast&since=<date>"
    assert ex.media_type == "application/json" and ex.body == {"sku": "A-1", "quantity": 1}
    assert ex.headers == {"X-Trace": "abc", "Authorization": "Bearer <token>", "Content-Type": "application/json"}
    assert ex.optional_params == 1 and ex.auth == ["bearer (HTTP bearer)"]
    assert ex.auth_declared_only == ["oauth (OAuth2)"]
    assert "# auth declared, not applied here: oauth (OAuth2)" in chunk.text
    assert ex.curl == ("curl -X POST 'https://eu.shop.example/v1/stores/42/orders?mode=fast&since=<date>' \\\n"
                       "  -H 'X-Trace: abc' \\\n  -H 'Authorization: Bearer <token>' \\\n"
                       "  -H 'Content-Type: application/json' \\\n  -d '{\"sku\": \"A-1\", \"quantity\": 1}'")
    assert ex.http == ("POST /v1/stores/42/orders?mode=fast&since=<date> HTTP/1.1\nHost: eu.shop.example\n"
                       "X-Trace: abc\nAuthorization: Bearer <token>\nContent-Type: application/json\n\n"
                       '{"sku": "A-1", "quantity": 1}')
    assert ex.tokens > 0


def test_a_public_operation_keeps_its_path_placeholder_and_sends_no_credentials(tmp_path):
    ex = example(endpoints(tmp_path, OAS3)["GET /stores/{storeId}"])
    assert ex.curl == "curl 'https://eu.shop.example/v1/stores/{storeId}'"
    assert ex.params[0].placeholder and ex.auth == ["none"]
    assert ex.auth_declared_only == ["bearer (HTTP bearer)", "oauth (OAuth2)"]


def test_swagger2_form_data_multipart_files_query_keys_and_basic_auth(tmp_path):
    chunks = endpoints(tmp_path, SWAGGER2, "files")
    upload = example(chunks["POST /upload"])
    assert upload.media_type == "multipart/form-data" and upload.body == {"file": "<binary>", "title": "My file"}
    assert upload.url == "https://files.example/api/upload?api_key=<api-key>"
    assert "-F 'file=@<file>'" in upload.curl and "-F 'title=My file'" in upload.curl
    assert "Content-Type" not in upload.curl  # curl -F writes it with the boundary
    assert "Content-Disposition: form-data; name=\"file\"; filename=\"<file>\"" in upload.http
    assert upload.auth_declared_only == ["login (HTTP basic)"]
    notes = example(chunks["POST /notes"])
    assert notes.media_type == "application/x-www-form-urlencoded"
    assert notes.body == {"text": "<string>", "tags": ["<string>"]}
    assert "-u '<username>:<password>'" in notes.curl and "--data-urlencode 'tags=<string>'" in notes.curl
    assert "Authorization: Basic <base64 of username:password>" in notes.http
    assert notes.http.endswith("text=%3Cstring%3E&tags=%3Cstring%3E")
    raw = example(chunks["PUT /raw"])
    assert raw.media_type == "application/xml" and "--data-binary '<string>'" in raw.curl


def test_shell_quoting_survives_quotes_in_values(tmp_path):
    spec = json.loads(json.dumps(OAS3))
    spec["components"]["schemas"]["Order"]["properties"]["sku"]["example"] = "it's"
    ex = example(endpoints(tmp_path, spec)["POST /stores/{storeId}/orders"])
    assert "-d '{\"sku\": \"it'\\''s\", \"quantity\": 1}'" in ex.curl


def test_no_server_means_a_host_placeholder_and_a_note():
    recipe = RequestRecipe(media_type="*/*", body={"a": 1})
    ex = render_example("patch", "/things", [], [], recipe)
    assert ex.url == "https://<host>/things" and ex.headers == {"Content-Type": "application/json"}
    assert ex.notes == ["the spec names no server: replace <host>"]
    relative = render_example("GET", "/things", ["/api/v3"], [], RequestRecipe())
    assert relative.url == "https://<host>/api/v3/things" and relative.http.startswith("GET /api/v3/things HTTP/1.1\nHost: <host>")


def test_multi_file_refs_resolve_through_the_specs_own_files(tmp_path):
    (tmp_path / "ops").mkdir()
    (tmp_path / "models").mkdir()
    (tmp_path / "api.yaml").write_text(
        "openapi: 3.0.3\ninfo: {title: M, version: '1'}\nservers: [{url: 'https://m.example'}]\n"
        "paths:\n  /things:\n    post:\n      $ref: ops/create.yaml\n")
    (tmp_path / "ops" / "create.yaml").write_text(
        "requestBody:\n  content:\n    application/json:\n      schema: {$ref: '../models/thing.yaml'}\n"
        "responses: {'201': {description: ok}}\n")
    (tmp_path / "models" / "thing.yaml").write_text(
        "type: object\nrequired: [name, owner]\nproperties:\n  name: {type: string, example: lamp}\n"
        "  owner: {$ref: 'owner.yaml#/Owner'}\n")
    (tmp_path / "models" / "owner.yaml").write_text("Owner: {type: object, required: [id], properties: {id: {type: integer}}}\n")
    result = ingest_spec(tmp_path / "api.yaml", "api", 1500)
    chunk = next(c for c in result.chunks if c.type.value == "endpoint")
    assert example(chunk).body == {"name": "lamp", "owner": {"id": 1}}


def test_a_stored_recipe_that_is_missing_or_malformed_gives_no_example():
    meta = {"method": "GET", "path": "/x", "base_urls": "[]", "auth": "[]"}
    assert example_from_metadata(meta) is None  # an index built before recipes
    assert example_from_metadata({**meta, "request": "{not json"}) is None
    assert example_from_metadata({**meta, "request": '{"params": 5}'}) is None
    assert Chunk.from_metadata("a:b", "", {"request": '{"params": 5}'}).request is None


def test_hostile_operations_stay_bounded(tmp_path):
    params = [{"name": f"p{i}'\n", "in": "query", "required": True, "schema": {"type": "string", "example": "v" * 5000}}
              for i in range(300)]
    spec = {"openapi": "3.0.0", "info": {"title": "H", "version": "1"},
            "paths": {"/h": {"post": {"parameters": params, "requestBody": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Loop"}}}}, "responses": {"200": {"description": "ok"}}}}},
            "components": {"schemas": {"Loop": {"type": "object", "required": ["self", "list"], "properties": {
                "self": {"$ref": "#/components/schemas/Loop"},
                "list": {"type": "array", "minItems": 100000, "items": {"$ref": "#/components/schemas/Loop"}}}}}}}
    ex = example(endpoints(tmp_path, spec, "hostile")["POST /h"])
    assert len(ex.params) == 20 and "280 more required parameters not shown" in ex.notes
    assert all(len(p.value) <= 200 and "\n" not in p.name for p in ex.params)
    assert len(ex.curl) < 20_000 and any("recursive" in n for n in ex.notes)
