"""Incremental builds: unchanged specs skipped, changed replaced, deleted removed, new model rebuilds."""

from __future__ import annotations

import numpy as np
import pytest
from specrag.index import ChunkStore, IndexBuilder, load_manifest

from .fleet import component, endpoint, mini_fleet, pets_api, row_ids, users_api, weather_api


def _build(settings, model, apis, **kwargs):
    store = ChunkStore.open(settings, embed_model=model)
    return store, IndexBuilder(store, settings, **kwargs).build(apis, progress=False)


def _pets_v2():
    pets = pets_api("2")
    pets.chunks = [pets.chunks[0], endpoint("pets", "delete", "/pets/{petId}", "Remove a pet for adoption", "deletePet"),
                   component("pets", "Pet", "a pet: hamster or parrot with a name")]
    return pets


def test_unchanged_specs_are_skipped(settings, embed_model):
    _build(settings, embed_model, mini_fleet())[0].close()
    before = load_manifest(settings.storage.data_dir)
    store, report = _build(settings, embed_model, mini_fleet())
    assert report.apis_unchanged == ["users", "pets", "weather"]
    assert report.chunks_embedded == 0 and not report.local_written and not report.apis_added
    assert load_manifest(settings.storage.data_dir).generation == before.generation
    store.close()


def test_changed_spec_is_replaced(settings, embed_model):
    _build(settings, embed_model, mini_fleet())[0].close()
    store, report = _build(settings, embed_model, [users_api(), _pets_v2(), weather_api()])
    assert report.apis_updated == ["pets"] and report.apis_unchanged == ["users", "weather"]
    # the unchanged 'list pets' text keeps its vector; the new and the changed text are embedded
    assert (report.chunks_embedded, report.chunks_reused) == (2, 1) and report.local_written
    new_ids = [c.id for c in _pets_v2().chunks]
    assert store.api_chunk_ids("pets") == new_ids
    assert "pets:paths/~1pets/post" not in store.get_chunks(new_ids + ["pets:paths/~1pets/post"])
    for search in (store.vector_search, store.lexical_search):
        ids = {h.node.node_id for h in search("add a pet to the store", ["pets"], None, 10)}
        assert "pets:paths/~1pets/post" not in ids and "pets:paths/~1pets~1{petId}/delete" in ids
    hamster = store.lexical_search("hamster", None, None, 5)
    assert [h.node.node_id for h in hamster] == ["pets:components/schemas/Pet"]
    assert store.get_chunks(["pets:components/schemas/Pet"])["pets:components/schemas/Pet"].text.endswith("name")
    store.close()


def test_deleted_spec_is_removed(settings, embed_model):
    _build(settings, embed_model, mini_fleet())[0].close()
    store, report = _build(settings, embed_model, [users_api(), pets_api()])
    assert report.apis_removed == ["weather"] and report.chunks_embedded == 0
    assert store.complete_api_ids() == {"users", "pets"}
    assert store.vectors.client.get(ids=row_ids(weather_api().chunks))["ids"] == []  # its texts' rows
    assert store.vectors.client.count() == 9
    assert store.vector_search("weather forecast", None, None, 20)
    for search in (store.vector_search, store.lexical_search):
        assert all(h.node.metadata["source_file"] != "weather" for h in search("weather forecast", None, None, 20))
    assert [p.name for p in (settings.storage.data_dir / "local").iterdir()] == [load_manifest(settings.storage.data_dir).local_dir]
    store.close()


def test_new_model_rebuilds_everything(settings, embed_model):
    _build(settings, embed_model, mini_fleet())[0].close()
    store, report = _build(settings.model_copy(update={"embed_model": "none"}), None, mini_fleet())
    assert report.chunks_embedded == 0 and report.search_mode == "lexical" and "now none" in report.full_rebuild
    assert settings.storage.collection not in {c.name for c in store.client.list_collections()}
    folders = [p.name for p in (settings.storage.data_dir / "chroma").iterdir() if p.is_dir()]
    assert folders == []  # the dropped collection's HNSW folder too (Chroma leaves it: chroma#5259)
    assert report.apis_added == ["users", "pets", "weather"] and report.local_written
    assert store.lexical_search("forecast", None, None, 1)[0].node.node_id == "weather:paths/~1forecast/get"
    store.close()


def test_new_chunker_rebuilds_what_it_changes(settings, embed_model):
    """A new chunker version re-examines every API; APIs whose chunks come out different are
    replaced, and every embed text seen before keeps its vector."""
    _build(settings, embed_model, mini_fleet())[0].close()
    store, report = _build(settings, embed_model, mini_fleet(), chunker_version="test-2")
    assert "chunker test-2" in report.full_rebuild and report.apis_unchanged == ["users", "pets", "weather"]
    assert report.chunks_embedded == 0 and not report.local_written
    assert load_manifest(settings.storage.data_dir).chunker_version == "test-2"
    store.close()
    rechunked = [users_api(), _pets_v2(), weather_api()]
    store, report = _build(settings, embed_model, rechunked, chunker_version="test-3")
    assert report.apis_updated == ["pets"] and (report.chunks_embedded, report.chunks_reused) == (2, 1)
    assert store.vectors.client.count() == 11 and store.api_chunk_ids("pets") == [c.id for c in _pets_v2().chunks]
    store.close()


def test_index_built_lexical_then_queried_with_model_is_lexical(settings, embed_model, caplog):
    _build(settings, None, mini_fleet())[0].close()
    store = ChunkStore.open(settings, embed_model=embed_model)
    assert store.search_mode == "lexical" and "lexical search only" in caplog.text
    assert store.vector_search("forecast", None, None, 3) == []
    assert store.get_chunks(["weather:paths/~1forecast/get"])
    store.close()


def test_bad_specs_are_left_out_and_the_rest_indexed(settings, caplog):
    """One spec that would corrupt the store (a taken file_id, duplicate chunk ids) is dropped
    with a warning; the build of the others goes on."""
    store = ChunkStore.open(settings, embed_model=None)
    twice = users_api()
    twice.chunks.append(twice.chunks[0])
    report = IndexBuilder(store, settings).build([pets_api(), pets_api("2"), twice, weather_api()], progress=False)
    assert report.apis_added == ["pets", "weather"]
    assert "not indexed: pets" in caplog.text and "same file_id" in caplog.text
    assert "not indexed: users" in caplog.text and "duplicate chunk ids" in caplog.text
    assert set(load_manifest(settings.storage.data_dir).apis) == {"pets", "weather"}
    assert store.lexical_search("forecast", None, None, 1)[0].node.node_id == "weather:paths/~1forecast/get"
    store.close()


def test_local_vectors_stay_aligned_after_updates(settings, embed_model):
    """Unchanged APIs' rows are copied from the previous generation; every local row holds its
    chunk's Chroma vector (as a float16 unit vector)."""
    _build(settings, embed_model, mini_fleet())[0].close()
    store, report = _build(settings, embed_model, [users_api(), _pets_v2(), weather_api()])
    assert report.chunks_embedded == 2
    local = store.local
    for file_id in local.header.apis:
        rows = [row_ids([c])[0] for c in local.api_chunks(file_id)]  # each chunk's text's row
        stored = store.vectors.client.get(ids=list(dict.fromkeys(rows)), include=["embeddings"])
        by_id = dict(zip(stored["ids"], stored["embeddings"]))
        expected = np.asarray([by_id[i] for i in rows], dtype=np.float32)
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        assert local.rows_vectors(file_id) == pytest.approx(expected, abs=2e-3), file_id
    store.close()


def test_empty_input_empties_the_index(settings, embed_model):
    _build(settings, embed_model, mini_fleet())[0].close()
    store, report = _build(settings, embed_model, [])
    assert sorted(report.apis_removed) == ["pets", "users", "weather"] and report.local_written
    assert store.complete_api_ids() == set() and store.local is None
    assert store.vectors.client.count() == 0
    assert store.vector_search("pets", None, None, 5) == [] and store.lexical_search("pets", None, None, 5) == []
    assert store.get_chunks(["pets:components/schemas/Pet"]) == {}
    store.close()


def test_segment_folders_are_kept_when_the_store_cannot_be_read(tmp_path):
    import uuid

    from specrag.index.collections import remove_orphan_segments

    folder = tmp_path / "chroma"
    (folder / str(uuid.uuid4())).mkdir(parents=True)
    (folder / "not-a-segment").mkdir()
    (folder / "chroma.sqlite3").write_text("not a database")
    assert remove_orphan_segments(folder) == 0 and len(list(folder.iterdir())) == 3
