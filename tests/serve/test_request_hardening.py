"""Requests the service refuses before any route: JSON it cannot echo (400, never 500), echoes cut
short, foreign Host/Origin on a keyless server (421/403), bodies over the limit (413, before the key
check and before reading them), and uvicorn's header-size limit."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.anyio

RETRIEVAL_ROUTES = ["/api/v1/retrieve/basic", "/api/v1/context"]


def in_process(app, base_url: str = "http://127.0.0.1:8080"):
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


def empty_app(**options):
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBases

    return create_app(KnowledgeBases([]), **options)


def keyed_app(**options):
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBases
    from specrag.serve.keys import ApiKeys, new_key_entry
    from specrag.serve.tenancy import Tenants

    key, entry = new_key_entry("alpha")
    return create_app(Tenants({"alpha": KnowledgeBases([], "alpha", private=True)}, ApiKeys([entry])), **options)


@pytest.mark.parametrize("route", RETRIEVAL_ROUTES)
@pytest.mark.parametrize("body", [
    b'{"kb_id": "specs", "query": "\\ud800"}',
    b'{"query": "list pets", "similarity_threshold": NaN}',
    b'{"query": "list pets", "similarity_threshold": Infinity}',
    b'{"query": "list pets", "similarity_threshold": -Infinity}',
    b'{"query": "list pets", "similarity_threshold": 1e400}',
    b'{"query": "list pets"',
    b'\xff\xfe',
], ids=["lone-surrogate", "nan", "infinity", "minus-infinity", "overflow", "truncated", "not-utf8"])
async def test_bodies_that_are_not_strict_json_get_a_short_400(client, route, body):
    r = await client.post(route, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert isinstance(r.json()["detail"], str) and len(r.content) < 300


async def test_invalid_json_without_a_content_type_is_a_400_too(client):
    r = await client.post("/api/v1/retrieve/basic", content=b"{nope")
    assert r.status_code == 400 and "not valid JSON" in r.json()["detail"]


@pytest.mark.parametrize("route", RETRIEVAL_ROUTES)
async def test_a_huge_field_is_echoed_as_a_short_prefix(client, route):
    r = await client.post(route, json={"query": "x" * 500_000, "similarity_threshold": 0.5})
    assert r.status_code == 422
    assert len(r.content) < 2_000, len(r.content)
    (error,) = [e for e in r.json()["detail"] if e["loc"] == ["body", "query"]]
    assert error["input"] == "x" * 200


async def test_a_huge_unknown_key_is_not_echoed_whole(client):
    r = await client.post("/api/v1/retrieve/basic", json={"query": "list pets", "k" * 300_000: 1})
    assert r.status_code in (400, 422) and len(r.content) < 3_000, len(r.content)


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:8080", "[::1]", "127.0.0.2:80"])
async def test_a_keyless_server_answers_loopback_hosts_and_its_own(host):
    async with in_process(empty_app(bind_host="127.0.0.2")) as client:
        for path in ["/healthz", "/api/v1/kbs"]:
            assert (await client.get(path, headers={"host": host})).status_code == 200, (path, host)
        r = await client.get("/api/v1/kbs", headers={"host": host, "origin": f"http://{host}"})
        assert r.status_code == 200


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/api/v1/kbs", "/openapi.json"])
async def test_dns_rebinding_gets_421_for_a_foreign_host_and_403_for_a_foreign_origin(path):
    """Health endpoints too: a keyless server listens on loopback only, where probes send a loopback Host."""
    async with in_process(empty_app(bind_host="127.0.0.1")) as client:
        r = await client.get(path, headers={"host": "evil.example", "origin": "http://evil.example"})
        assert r.status_code == 421 and r.json() == {"detail": "Invalid Host header"}
        r = await client.get(path, headers={"host": "localhost:8080", "origin": "http://evil.example"})
        assert r.status_code == 403 and r.json() == {"detail": "Invalid Origin header"}
        r = await client.post("/api/v1/retrieve/basic", json={"query": "q"}, headers={"host": "evil.example:8080"})
        assert r.status_code == 421


async def test_with_api_keys_any_host_reaches_the_key_check():
    async with in_process(keyed_app(bind_host="0.0.0.0")) as client:
        assert (await client.get("/api/v1/kbs", headers={"host": "api.example.com"})).status_code == 401


def test_the_mcp_app_allows_the_same_hosts():
    from specrag.serve.guard import rebinding_protection

    allowed = rebinding_protection("127.0.0.1").allowed_hosts
    assert {"localhost", "localhost:*", "127.0.0.1:*", "[::1]:*"} <= set(allowed) and "evil.example" not in allowed
    assert "[::1]:*" in rebinding_protection("::1").allowed_hosts


class CountingBody:
    """A request body of ``total`` bytes in 64 KiB chunks that counts what the server pulled."""

    def __init__(self, total: int):
        self.total, self.sent = total, 0

    async def __aiter__(self):
        while self.sent < self.total:
            chunk = b" " * min(64 * 1024, self.total - self.sent)
            self.sent += len(chunk)
            yield chunk


async def test_a_declared_body_over_the_limit_is_413_before_the_key_check_and_unread():
    body = CountingBody(50 * 1024 * 1024)
    async with in_process(keyed_app()) as client:
        r = await client.post("/api/v1/retrieve/basic", content=body,
                              headers={"content-length": str(body.total), "content-type": "application/json"})
    assert r.status_code == 413 and "detail" in r.json()
    assert body.sent <= 64 * 1024  # at most the one chunk the transport reads ahead


async def test_a_chunked_body_stops_being_read_at_the_limit():
    from specrag.serve.guard import MAX_BODY_BYTES

    body = CountingBody(50 * 1024 * 1024)
    async with in_process(keyed_app()) as client:
        r = await client.post("/api/v1/retrieve/basic", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert body.sent <= MAX_BODY_BYTES + 2 * 64 * 1024


async def test_a_body_under_the_limit_still_reaches_the_key_check():
    async with in_process(keyed_app()) as client:
        r = await client.post("/api/v1/retrieve/basic", json={"query": "list pets"})
    assert r.status_code == 401


def test_serve_passes_uvicorn_a_header_size_limit(monkeypatch):
    import types

    import uvicorn
    from specrag.cli import serve

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: seen.update(options))
    serve._uvicorn(object(), types.SimpleNamespace(serving=types.SimpleNamespace(
        serve_host="127.0.0.1", serve_port=8080, shutdown_timeout_s=1)))
    assert seen["h11_max_incomplete_event_size"] == serve.MAX_HEADER_BYTES == 64 * 1024
