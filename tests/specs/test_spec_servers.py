"""Base URL and auth of an operation: OAS 3 servers (variables, path-item and operation overrides),
Swagger 2 host + basePath + schemes, security requirements; carried by the endpoint chunk."""

from __future__ import annotations

import json

from specrag.specs.models import Chunk
from specrag.specs.servers import auth_requirements, base_urls

OAS3 = {
    "openapi": "3.0.3",
    "servers": [{"url": "https://{region}.api.example.com/{version}/",
                 "variables": {"region": {"default": "eu", "enum": ["eu", "us"]}, "version": {"default": "v2"}}},
                {"url": "https://sandbox.example.com"}],
    "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                                       "bearer": {"type": "http", "scheme": "bearer"},
                                       "oauth": {"type": "oauth2", "flows": {}}}},
    "security": [{"key": []}],
}


def test_openapi_servers_fill_variables_with_defaults_in_declared_order():
    assert base_urls(OAS3, {}, {}) == ["https://eu.api.example.com/v2", "https://sandbox.example.com"]


def test_operation_servers_override_path_item_servers_which_override_the_document():
    item = {"servers": [{"url": "https://files.example.com"}]}
    assert base_urls(OAS3, item, {}) == ["https://files.example.com"]
    assert base_urls(OAS3, item, {"servers": [{"url": "https://upload.example.com/{x}"}]}) == [
        "https://upload.example.com/{x}"]  # a variable without a default stays visible


def test_swagger2_host_base_path_and_schemes_with_an_operation_override():
    doc = {"swagger": "2.0", "host": "api.example.org", "basePath": "/v1/", "schemes": ["http", "https"]}
    assert base_urls(doc, {}, {}) == ["http://api.example.org/v1", "https://api.example.org/v1"]
    assert base_urls(doc, {}, {"schemes": ["https"]}) == ["https://api.example.org/v1"]
    assert base_urls({"swagger": "2.0", "host": "h.example"}, {}, {}) == ["https://h.example"]
    assert base_urls({"swagger": "2.0", "basePath": "/api"}, {}, {}) == ["/api"]
    assert base_urls({"swagger": "2.0"}, {}, {}) == []


def test_security_requirements_name_the_scheme_and_where_the_credential_goes():
    assert auth_requirements(OAS3, {}) == ["key (API key in header 'X-Key')"]
    assert auth_requirements(OAS3, {"security": [{"bearer": []}, {"key": [], "oauth": ["read", "write"]}]}) == [
        "bearer (HTTP bearer)", "key (API key in header 'X-Key') + oauth (OAuth2 scopes read, write)"]
    assert auth_requirements(OAS3, {"security": []}) == ["none"]
    assert auth_requirements({"openapi": "3.0.0"}, {}) == []


def test_hostile_values_are_ignored_or_shortened():
    doc = {"openapi": "3.0.0", "servers": [{"url": 5}, "x", {"url": "https://" + "a" * 5000}],
           "security": "everyone"}
    urls = base_urls(doc, {"servers": "nope"}, {"servers": None})
    assert len(urls) == 1 and len(urls[0]) <= 200 and urls[0].startswith("https://aaa")
    assert auth_requirements(doc, {}) == []
    assert base_urls({"swagger": "2.0", "host": "h", "schemes": ["ftp", 3]}, {}, {}) == ["https://h"]


def test_endpoint_chunk_carries_base_url_and_auth_in_text_and_metadata(tmp_path):
    from specrag.specs.ingest import ingest_spec

    spec = dict(OAS3, info={"title": "T", "version": "1"},
                paths={"/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}})
    path = tmp_path / "items.json"
    path.write_text(json.dumps(spec))
    result = ingest_spec(path, "items", 1500)
    endpoint = next(c for c in result.chunks if c.type.value == "endpoint")
    assert "# base URL: https://eu.api.example.com/v2 | https://sandbox.example.com" in endpoint.text
    assert "# auth: key (API key in header 'X-Key')" in endpoint.text
    again = Chunk.from_metadata(endpoint.id, endpoint.text, endpoint.metadata())
    assert again.base_urls == endpoint.base_urls == ["https://eu.api.example.com/v2", "https://sandbox.example.com"]
    assert again.auth == endpoint.auth


def test_schemes_declared_but_not_applied_are_named_as_such():
    from specrag.specs.servers import declared_only

    assert declared_only(OAS3, {}) == ["bearer (HTTP bearer)", "oauth (OAuth2)"]
    assert declared_only(OAS3, {"security": [{"bearer": []}, {"key": [], "oauth": ["read"]}]}) == []
    assert declared_only(OAS3, {"security": []}) == ["key (API key in header 'X-Key')", "bearer (HTTP bearer)",
                                                     "oauth (OAuth2)"]
    many = {"openapi": "3.0.0", "components": {"securitySchemes": {f"s{i}": {"type": "http", "scheme": "basic"}
                                                                   for i in range(7)}}}
    assert declared_only(many, {}) == [f"s{i} (HTTP basic)" for i in range(4)] + ["+3 more"]
    assert declared_only({"swagger": "2.0", "securityDefinitions": "x"}, {}) == []
