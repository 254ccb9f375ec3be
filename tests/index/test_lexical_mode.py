"""No embedding model (disabled or unloadable): indexing and queries work on BM25 alone."""

from __future__ import annotations

import logging

import pytest
from specrag.core.settings import Settings
from specrag.index import ChunkStore, IndexBuilder, embeddings

from .fleet import mini_fleet, pets_api, users_api


@pytest.fixture(params=["none", "bad-path"])
def lexical_settings(request, tmp_path, monkeypatch, caplog) -> Settings:
    monkeypatch.setattr(embeddings, "_warned", set())
    if request.param == "none":
        return Settings(data_dir=tmp_path / "data", embed_model="none")
    return Settings(data_dir=tmp_path / "data", embed_model_path=tmp_path / "no-such-model")


def test_lexical_build_and_query(lexical_settings, caplog):
    with caplog.at_level(logging.WARNING, logger="specrag.index.embeddings"):
        store = ChunkStore.open(lexical_settings)
        store_again = ChunkStore.open(lexical_settings)
    expected_warnings = 0 if lexical_settings.embeddings.embed_model == "none" else 1
    assert len([r for r in caplog.records if "lexical-only" in r.getMessage()]) == expected_warnings
    assert store.search_mode == store_again.search_mode == "lexical"

    report = IndexBuilder(store, lexical_settings).build(mini_fleet(), progress=False)
    assert report.search_mode == "lexical" and report.chunks_embedded == 0 and report.local_written
    assert not (lexical_settings.storage.data_dir / "chroma").exists()  # no vectors kept, no Chroma touched
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


def test_an_unloadable_model_never_turns_an_index_with_vectors_lexical(settings, embed_model, tmp_path, monkeypatch):
    """A model that fails to load (offline, a wrong path) is not a request for a lexical index:
    the update is refused and the vectors stay; only SPECRAG_EMBED_MODEL=none rebuilds without them."""
    from specrag.core.errors import EmbedModelUnavailableError

    store = ChunkStore(settings, embed_model)
    IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    store.close()
    monkeypatch.setattr(embeddings, "_warned", set())
    broken = settings.model_copy(update={"embed_model_path": tmp_path / "no-such-model"})
    offline = ChunkStore.open(broken)
    with pytest.raises(EmbedModelUnavailableError, match="SPECRAG_EMBED_MODEL=none"):
        IndexBuilder(offline, broken).build([users_api("2")], progress=False)
    offline.close()

    again = ChunkStore.open(settings, embed_model=embed_model)  # the model is back: every vector is still there
    assert again.search_mode == "hybrid" and again.complete_api_ids() == {"users", "pets", "weather"}
    assert again.vector_search("dog or cat", None, None, 1)[0].node.node_id == "pets:components/schemas/Pet"
    again.close()

    lexical = settings.model_copy(update={"embed_model": "none"})
    chosen = ChunkStore.open(lexical)
    assert IndexBuilder(chosen, lexical).build(mini_fleet(), progress=False).search_mode == "lexical"
    chosen.close()
