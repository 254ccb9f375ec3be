"""The service over the demo corpus (indexed once per session), in-process through httpx's ASGI
transport; ``live_server`` runs the same app in a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def demo_kbs(demo_index):
    from pipeline.serve.kbs import KnowledgeBase, KnowledgeBases

    _, store = demo_index
    return KnowledgeBases([KnowledgeBase.open(store)])


@pytest.fixture
def app(demo_kbs):
    from pipeline.serve.app import create_app

    return create_app(demo_kbs)


@pytest.fixture
async def client(app):
    import httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specrag") as client:
        yield client


@pytest.fixture(scope="session")
def kb_id(demo_kbs):
    return demo_kbs.all()[0].kb_id
