"""Tenants and API keys: two tenants hold the same kb_id and API ids with different chunks; each
key reads only its tenant's, through vectors, BM25, lookups, the context and agentic routes and
every cache on the way (asked in turns, so a cache filled by one tenant would answer the other)."""

from __future__ import annotations

import httpx
import pytest

from .tenants import KEYS, MARKER, auth

pytestmark = pytest.mark.anyio
BASIC = "/api/v1/retrieve/basic"


@pytest.fixture(scope="module")
def world(tenant_world):
    return tenant_world


@pytest.fixture(scope="module")
def tenant_app(world):
    from specrag.serve.app import create_app
    from specrag.serve.graph_wiring import routers

    return create_app(world[0], extra_routers=routers())


@pytest.fixture
async def http(tenant_app):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=tenant_app), base_url="http://specrag") as client:
        yield client


def texts(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return " ".join(r["text"] for r in response.json()["results"])


async def test_both_tenants_hold_the_same_kb_id_and_api_ids(http, world):
    _, shared, beta_only = world
    acme = (await http.get("/api/v1/kbs", headers=auth("acme"))).json()
    beta = (await http.get("/api/v1/kbs", headers=auth("beta"))).json()
    assert [k["kb_id"] for k in acme] == [shared]
    assert sorted(k["kb_id"] for k in beta) == sorted([shared, beta_only])
    apis = {t: {a["api"] for a in (await http.get("/api/v1/apis", params={"kb_id": shared},
                                                   headers=auth(t))).json()} for t in KEYS}
    assert apis["acme"] == apis["beta"] == {"users_api", "petstore_v2"}


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
async def test_no_chunk_of_the_other_tenant_through_any_search_mode(http, world, mode):
    body = {"kb_id": world[1], "query": f"create a user {MARKER}", "mode": mode, "similarity_threshold": 0,
            "top_k": 20}
    for _ in range(2):  # in turns: a cache keyed by kb or query alone would answer the second tenant wrongly
        beta = await http.post(BASIC, json=body, headers=auth("beta"))
        acme = await http.post(BASIC, json=body, headers=auth("acme"))
        assert MARKER in texts(beta)
        assert MARKER not in texts(acme)
        assert "users_api:paths/~1users/post" in {r["chunk_id"] for r in acme.json()["results"]}


async def test_lookups_context_and_agentic_answer_from_the_callers_index(http, world):
    shared = world[1]
    for _ in range(2):
        for tenant, has_marker in (("beta", True), ("acme", False)):
            op = await http.get("/api/v1/apis/users_api/operations/createUser", params={"kb_id": shared},
                                headers=auth(tenant))
            assert (MARKER in op.json()["summary"]) is has_marker
            ctx = await http.post("/api/v1/context", json={"kb_id": shared, "query": "How do I create a user?"},
                                  headers=auth(tenant))
            assert ctx.status_code == 200 and (MARKER in ctx.text) is has_marker
            agentic = await http.post("/api/v1/retrieve/agentic", json={"kb_ids": [shared], "query": "create a user"},
                                      headers=auth(tenant))
            assert (MARKER in texts(agentic)) is has_marker


async def test_a_missing_or_unknown_key_is_401(http, world):
    body = {"kb_id": world[1], "query": "create a user"}
    for headers in ({}, {"Authorization": "Bearer not-a-key"}, {"X-API-Key": "not-a-key"},
                    {"Authorization": f"Basic {KEYS['acme']}"}):
        r = await http.post(BASIC, json=body, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert "not-a-key" not in r.text and KEYS["acme"] not in r.text
    assert (await http.get("/api/v1/kbs")).status_code == 401
    assert (await http.post(BASIC, json=body, headers={"X-API-Key": KEYS["acme"]})).status_code == 200


async def test_another_tenants_kb_is_403_and_says_no_more_than_a_kb_nobody_has(http, world):
    _, shared, beta_only = world
    foreign = await http.post(BASIC, json={"kb_id": beta_only, "query": "list pets"}, headers=auth("acme"))
    nobody = await http.post(BASIC, json={"kb_id": "petonly-0000000000", "query": "list pets"}, headers=auth("acme"))
    assert foreign.status_code == nobody.status_code == 403
    assert foreign.json()["detail"].replace(beta_only, "X") == nobody.json()["detail"].replace("petonly-0000000000", "X")
    assert (await http.get("/api/v1/apis", params={"kb_id": beta_only}, headers=auth("acme"))).status_code == 403
    own = await http.post(BASIC, json={"kb_id": beta_only, "query": "list pets"}, headers=auth("beta"))
    assert own.status_code == 200


async def test_the_body_tenant_id_cannot_leave_the_keys_tenant(http, world):
    body = {"kb_id": world[1], "query": f"create a user {MARKER}", "mode": "keyword", "similarity_threshold": 0}
    assert (await http.post(BASIC, json=body | {"tenant_id": "beta"}, headers=auth("acme"))).status_code == 403
    assert (await http.post("/api/v1/retrieve/agentic", json={"query": "create a user", "tenant_id": "beta"},
                            headers=auth("acme"))).status_code == 403
    own = await http.post(BASIC, json=body | {"tenant_id": "acme"}, headers=auth("acme"))
    assert MARKER not in texts(own)


async def test_open_endpoints_need_no_key_and_name_no_tenants_corpus(http, world):
    for path in ("/healthz", "/metrics", "/openapi.json"):
        assert (await http.get(path)).status_code == 200, path
    ready = await http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["kbs"] == [] and ready.json()["knowledge_bases"] == 3
    assert world[1] not in ready.text
    schemes = (await http.get("/openapi.json")).json()["components"]["securitySchemes"]
    assert {"HTTPBearer", "APIKeyHeader"} <= set(schemes)


def test_keys_file_and_env_give_the_same_tenants(tmp_path):
    from specrag.core.settings import Settings
    from specrag.serve.keys import (
        ApiKeys,
        ApiKeysError,
        KeysFile,
        key_hash,
        new_key_entry,
    )

    key, entry = new_key_entry("acme")
    path = tmp_path / "keys.json"
    path.write_text(KeysFile(keys=[entry]).model_dump_json())
    assert key not in path.read_text() and entry.sha256 == key_hash(key)
    from_file = ApiKeys.from_settings(Settings(api_keys_file=path, _env_file=None))
    from_env = ApiKeys.from_settings(Settings(api_keys=f"beta:sha256:{key_hash('k2')},gamma:k3", _env_file=None))
    assert from_file.tenant_of(key) == "acme" and from_file.tenant_of("other") is None
    assert from_env.tenant_of("k2") == "beta" and from_env.tenant_of("k3") == "gamma" and from_env.tenant_of("") is None
    path.write_text('{"keys": [{"tenant": "acme", "key": "plain"}]}')
    with pytest.raises(ApiKeysError, match="not a keys file") as err:
        ApiKeys.from_settings(Settings(api_keys_file=path, _env_file=None))
    assert "plain" not in str(err.value)
    with pytest.raises(ApiKeysError, match="entry 2") as err:
        ApiKeys.from_settings(Settings(api_keys="acme:secret1,secret2-without-tenant", _env_file=None))
    assert "secret" not in str(err.value)


def test_one_catalog_folder_for_every_tenant_is_refused(tmp_path):
    from specrag.core.settings import Settings
    from specrag.serve.keys import ApiKeys
    from specrag.serve.tenancy import SharedCatalogDir, Tenants

    settings = Settings(data_dir=tmp_path, catalog_dir=tmp_path / "catalogs", api_keys="acme:k1", _env_file=None)
    with pytest.raises(SharedCatalogDir, match="SPECRAG_CATALOG_DIR"):
        Tenants.open(settings, ApiKeys.from_settings(settings))
