"""The service over the demo corpus (indexed once per session), in-process through httpx's ASGI
transport; ``live_server`` runs the same app in a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import shutil

import pytest

from .tenants import SPECS


@pytest.fixture(scope="session")
def demo_kbs(demo_index):
    from specrag.serve.kbs import KnowledgeBase, KnowledgeBases

    _, store = demo_index
    return KnowledgeBases([KnowledgeBase.open(store)])


@pytest.fixture
def app(demo_kbs):
    from specrag.serve.app import create_app

    return create_app(demo_kbs)


@pytest.fixture
async def client(app):
    import httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        yield client


@pytest.fixture(scope="session")
def kb_id(demo_kbs):
    return demo_kbs.all()[0].kb_id


@pytest.fixture(scope="session")
def tenant_world(tmp_path_factory, make_demo_settings):
    """(tenants with keys, kb_id both tenants hold, kb_id only beta holds): see tenants.py."""
    from specrag.serve.keys import ApiKeys
    from specrag.serve.tenancy import Tenants

    from .tenants import build_two_tenants

    settings, _, shared_kb, beta_only_kb = build_two_tenants(tmp_path_factory.mktemp("tenants"), make_demo_settings)
    tenants = Tenants.open(settings, ApiKeys.from_settings(settings))
    yield tenants, shared_kb, beta_only_kb
    tenants.close()


@pytest.fixture
def served_copy(tmp_path, make_demo_settings):
    """(settings, specs copy, KnowledgeBases) over a copy of the demo specs, default tenant."""
    from specrag.serve.kbs import KnowledgeBases

    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    settings = make_demo_settings(tmp_path / "data")
    kbs = KnowledgeBases.open(settings, [[specs]])
    yield settings, specs, kbs
    kbs.close()
