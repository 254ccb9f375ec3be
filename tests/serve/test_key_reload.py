"""API keys follow the keys file while the server runs (a removed key stops working without a
restart), and a tenant whose key works but who has no index yet gets one clear line saying so."""

from __future__ import annotations

import logging

import httpx
import pytest

pytestmark = pytest.mark.anyio


def _write_keys(path, keys: dict[str, str]) -> None:
    from specrag.core.atomic import write_atomic
    from specrag.serve.keys import KeyEntry, KeysFile, key_hash

    entries = [KeyEntry(tenant=tenant, sha256=key_hash(key)) for key, tenant in keys.items()]
    write_atomic(path, KeysFile(keys=entries).model_dump_json().encode())


@pytest.fixture
def keyed_app(demo_kbs, tmp_path, monkeypatch, make_demo_settings):
    """The demo knowledge bases as tenant 'default', keys from a file; tenant 'gamma' has a key, no index."""
    from specrag.serve import keys as keys_module
    from specrag.serve.app import create_app
    from specrag.serve.keys import ApiKeys
    from specrag.serve.tenancy import Tenants

    monkeypatch.setattr(keys_module, "RELOAD_CHECK_S", 0.0, raising=False)  # every lookup may stat the file
    path = tmp_path / "keys.json"
    _write_keys(path, {"k-one": "default", "k-two": "default", "k-gamma": "gamma"})
    settings = make_demo_settings(tmp_path / "data").model_copy(update={"api_keys_file": path})
    app = create_app(Tenants({"default": demo_kbs}, ApiKeys.from_settings(settings)))
    return app, path


async def test_a_key_removed_from_the_file_stops_working_without_a_restart(keyed_app):
    app, path = keyed_app
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        async def status(key: str) -> int:
            return (await client.get("/api/v1/kbs", headers={"X-API-Key": key})).status_code

        assert (await status("k-one"), await status("k-two")) == (200, 200)
        _write_keys(path, {"k-two": "default", "k-three": "default"})  # k-one revoked, k-three added
        assert (await status("k-one"), await status("k-two"), await status("k-three")) == (401, 200, 200)
        path.write_text("{not json")  # a broken file keeps the keys read before
        assert (await status("k-two"), await status("k-one")) == (200, 401)
        path.unlink()  # no file: no key from it works, and the server stays keyed
        assert (await status("k-two"), await status("")) == (401, 401)


async def test_reads_of_the_keys_file_are_bounded(tmp_path, monkeypatch):
    from specrag.serve import keys as keys_module
    from specrag.serve.keys import ApiKeys, read_keys_file

    path = tmp_path / "keys.json"
    _write_keys(path, {"k-one": "acme"})
    keys = ApiKeys([], path, read_keys_file(path))
    stats = []
    real_stat = keys_module.os.stat
    monkeypatch.setattr(keys_module.os, "stat", lambda p, *a, **k: stats.append(p) or real_stat(p, *a, **k))
    for _ in range(50):
        assert keys.tenant_of("k-one") == "acme"
    assert len(stats) <= 1  # RELOAD_CHECK_S (2 s) between stats, not one per request


async def test_a_tenant_without_an_index_gets_one_clear_line(keyed_app, caplog):
    app, _ = keyed_app
    gamma = {"Authorization": "Bearer k-gamma"}
    with caplog.at_level(logging.WARNING):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
            r = await client.post("/api/v1/context", json={"query": "create a user"}, headers=gamma)
            assert (await client.get("/api/v1/kbs", headers=gamma)).json() == []
    detail = r.json()["detail"]
    assert r.status_code == 503 and "\n" not in detail, r.text
    assert "internal error" not in detail and "'gamma'" in detail and "specrag index" in detail
    assert "--tenant gamma" in detail
    assert not any(record.exc_info for record in caplog.records)  # an operator's to-do, not a traceback
