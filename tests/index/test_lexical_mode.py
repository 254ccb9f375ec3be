"""No embedding model (disabled or unloadable): indexing and queries work on BM25 alone."""

from __future__ import annotations

import logging

import pytest

from pipeline.index import ChunkStore, IndexBuilder, embeddings
from pipeline.settings import Settings

from .fleet import mini_fleet, pets_api, users_api


@pytest.fixture(params=["none", "bad-path"])
def lexical_settings(request, tmp_path, monkeypatch, caplog) -> Settings:
    monkeypatch.setattr(embeddings, "_warned", set())
    if request.param == "none":
        return Settings(data_dir=tmp_path / "data", embed_model="none")
    return Settings(data_dir=tmp_path / "data", embed_model_path=tmp_path / "no-such-model")


def test_lexical_build_and_query(lexical_settings, caplog):
    with caplog.at_level(logging.WARNING, logger="pipeline.index.embeddings"):
        store = ChunkStore.open(lexical_settings)
        store_again = ChunkStore.open(lexical_settings)
    expected_warnings = 0 if lexical_settings.embed_model == "none" else 1
    assert len([r for r in caplog.records if "lexical-only" in r.getMessage()]) == expected_warnings
    assert store.search_mode == store_again.search_mode == "lexical"

    report = IndexBuilder(store, lexical_settings).build(mini_fleet(), progress=False)
    assert report.search_mode == "lexical" and report.chunks_embedded == 0 and report.local_written
    assert not (lexical_settings.data_dir / "chroma").exists()  # no vectors kept, no Chroma touched
    assert store.vector_search("weather", None, None, 5) == []
    assert store.lexical_search("weather forecast", None, None, 1)[0].node.node_id == "weather:paths/~1forecast/get"
    assert {h.node.metadata["source_file"] for h in store.lexical_search("user", ["pets"], None, 10)} == {"pets"}
    chunks = store.get_chunks(["users:components/schemas/User", "users:components/schemas/Nope"])
    assert list(chunks) == ["users:components/schemas/User"] and chunks["users:components/schemas/User"].ref_ids
    assert store.api_chunk_ids("weather") == ["weather:paths/~1forecast/get", "weather:components/schemas/Forecast"]

    report = IndexBuilder(store, lexical_settings).build([users_api(), pets_api("2")], progress=False)
    assert report.apis_removed == ["weather"] and report.apis_updated == ["pets"]
    assert store.complete_api_ids() == {"users", "pets"}
    assert store.lexical_search("weather forecast", None, None, 5) == []
    store.close()
    store_again.close()
