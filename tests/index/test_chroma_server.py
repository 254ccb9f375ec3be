"""The scale-out path: a real Chroma server (``chroma run``) reached through HttpClient."""

from __future__ import annotations

import pytest
from specrag.index import ChunkStore, IndexBuilder

from .chroma_server import ChromaServer
from .fleet import mini_fleet, row_ids, weather_api


@pytest.fixture
def chroma_server(tmp_path):
    server = ChromaServer(tmp_path / "server").start()
    yield server.port
    server.stop()


def test_build_and_query_through_a_chroma_server(chroma_server, tmp_path, settings, embed_model):
    settings = settings.model_copy(update={"chroma_host": "127.0.0.1", "chroma_port": chroma_server})
    store = ChunkStore.open(settings, embed_model=embed_model)
    report = IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    assert report.chunks_embedded == 11 and report.search_mode == "hybrid"
    assert any((tmp_path / "server").iterdir()) and not (settings.storage.data_dir / "chroma").exists()
    hits = store.vector_search("dog or cat", ["pets", "weather"], None, 5)
    assert hits[0].node.node_id == "pets:components/schemas/Pet"
    assert {h.node.metadata["source_file"] for h in hits} <= {"pets", "weather"}
    assert set(store.get_chunks(["users:components/schemas/User"])) == {"users:components/schemas/User"}
    report = IndexBuilder(store, settings).build(mini_fleet()[:2], progress=False)
    assert report.apis_removed == ["weather"]
    assert store.vectors.client.get(ids=row_ids(weather_api().chunks))["ids"] == []
    assert store.vectors.client.count() == 9
    store.close()
