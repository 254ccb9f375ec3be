"""Chroma holds one row per distinct embed text: APIs that repeat texts share rows, a row goes
when no API uses its text any more, rows nobody uses are swept on repair, and a store of an
earlier version (one row per chunk) is rebuilt from the local index without re-embedding."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import numpy as np
import pytest
from specrag.index import ChunkStore, IndexBuilder, load_manifest
from specrag.index.manifest import TEXT_ROWS, manifest_path
from specrag.index.pack import PACK_FORMAT
from specrag.index.vector_reuse import embed_text, hash_hex, text_hash
from specrag.specs.models import ApiChunks

from .fleet import api, component, endpoint, mini_fleet, row_ids


def _shop(file_id: str, second: str = "create") -> ApiChunks:
    """The same shop API under another file_id: its texts are the same (version copies in a fleet)."""
    second_op = (endpoint(file_id, "post", "/orders", "Create an order", "createOrder") if second == "create" else
                 endpoint(file_id, "delete", "/orders/{id}", "Cancel an order", "cancelOrder"))
    return api(file_id, [endpoint(file_id, "get", "/orders", "List the orders of the shop", "listOrders"), second_op,
                         component(file_id, "Order", "an order: its items and total")])


def _build(settings, model, apis, **kwargs):
    store = ChunkStore.open(settings, embed_model=model, **kwargs)
    return store, IndexBuilder(store, settings).build(apis, progress=False)


def test_apis_sharing_embed_texts_share_rows(settings, embed_model):
    store, report = _build(settings, embed_model, [_shop("shop"), _shop("shop_v2", "cancel")])
    assert report.chunks_embedded == report.vectors_added == 4  # 6 chunks, 4 distinct texts
    assert store.chroma.count() == 4
    assert set(store.chroma.get(include=[])["ids"]) == set(row_ids(_shop("shop").chunks + _shop("shop_v2", "cancel").chunks))
    assert store.vector_search("cancel an order", ["shop_v2"], None, 1)[0].node.node_id == \
        "shop_v2:paths/~1orders~1{id}/delete"
    store.close()
    store, report = _build(settings, embed_model, [_shop("shop"), _shop("shop_v2", "cancel"), _shop("shop_v3")])
    assert report.apis_added == ["shop_v3"] and report.chunks_embedded == report.vectors_added == 0
    assert store.chroma.count() == 4
    store.close()


def test_removing_an_api_keeps_the_rows_it_shares_and_deletes_its_own(settings, embed_model):
    _build(settings, embed_model, [_shop("shop"), _shop("shop_v2", "cancel")])[0].close()
    store, report = _build(settings, embed_model, [_shop("shop")])
    assert report.apis_removed == ["shop_v2"] and report.vectors_deleted == 1
    assert set(store.chroma.get(include=[])["ids"]) == set(row_ids(_shop("shop").chunks))
    store.close()
    store, report = _build(settings, embed_model, [_shop("shop_v2", "cancel")])
    assert report.apis_added == ["shop_v2"] and report.apis_removed == ["shop"]
    assert (report.chunks_embedded, report.vectors_added, report.vectors_deleted) == (1, 1, 1)  # cancel back, create gone
    assert set(store.chroma.get(include=[])["ids"]) == set(row_ids(_shop("shop_v2", "cancel").chunks))
    store.close()


def test_repair_after_a_lost_manifest_reuses_chroma_by_hash_and_sweeps_unused_rows(settings, embed_model):
    store, _ = _build(settings, embed_model, mini_fleet())
    orphan = "00000000deadbeef"  # a row no generation uses (a killed run's text that changed again)
    store.chroma.add(ids=[orphan], embeddings=np.ones((1, 384), np.float32))
    store.close()
    manifest_path(settings.storage.data_dir).unlink()
    store, report = _build(settings, embed_model, mini_fleet(), repair=True)
    assert "manifest.json is missing" in report.damage and report.apis_repaired == [] and len(report.apis_added) == 3
    assert report.chunks_embedded == 0 and report.vectors_added == 0  # every vector found in Chroma by its hash
    assert report.vectors_deleted == 1 and orphan not in store.chroma.get(include=[])["ids"]
    assert store.chroma.count() == 11
    assert store.vector_search("dog or cat", None, None, 1)[0].node.node_id == "pets:components/schemas/Pet"
    store.close()


@pytest.mark.parametrize("local_index", ["kept", "unreadable"])
def test_an_index_with_one_row_per_chunk_is_rebuilt_from_its_own_vectors(settings, embed_model, caplog, local_index):
    """An index of the previous version: per-chunk rows (id = chunk id, metadata with the text's
    hash) and a manifest without ``vector_rows``. The next build rebuilds the collection from those
    rows' vectors, embedding nothing, also when the local index is of a format this version cannot
    read (it is rebuilt from the specs and the migrated rows), and the one after leaves it alone."""
    fleet = mini_fleet()
    store, _ = _build(settings, embed_model, fleet)
    store.reset_vectors()
    chunks = [c for a in fleet for c in a.chunks]
    vectors = np.concatenate([store.local.rows_vectors(a.api.file_id) for a in fleet])
    store.chroma.add(ids=[c.id for c in chunks], embeddings=vectors,
                     metadatas=[{"source_file": c.file_id, "type": c.type.value,
                                 "embed_hash": hash_hex(text_hash(embed_text(c)))} for c in chunks])
    # a per-chunk store has many more rows than texts: these pages are free once it is rebuilt
    store.chroma.add(ids=[f"copy:{i}" for i in range(2000)], embeddings=np.tile(vectors[:1], (2000, 1)),
                     metadatas=[{"source_file": f"copy{i}", "type": "component",
                                 "embed_hash": hash_hex(text_hash(embed_text(chunks[0])))} for i in range(2000)])
    store.close()
    path = manifest_path(settings.storage.data_dir)
    old = json.loads(path.read_text())
    del old["vector_rows"]
    path.write_text(json.dumps(old))
    if local_index == "unreadable":  # as a generation of the previous pack format is to this version
        header = settings.storage.data_dir / "local" / old["local_dir"] / "pack.json"
        header.write_text(header.read_text().replace(f'"format_version":{PACK_FORMAT}', '"format_version":1'))
    assert load_manifest(settings.storage.data_dir).vector_rows == "chunk"

    store, report = _build(settings, embed_model, fleet, repair=True)  # as `specrag index` opens it
    assert "one row per chunk" in caplog.text and "no re-embedding" in caplog.text
    assert report.chunks_embedded == 0
    if local_index == "kept":
        assert report.apis_unchanged == ["users", "pets", "weather"]
    else:
        assert report.full_rebuild.startswith("index damaged") and len(report.apis_repaired) == 3
    assert set(store.chroma.get(include=[])["ids"]) == set(row_ids(chunks)) and report.vectors_added == 11
    got = store.chroma.get(ids=row_ids(chunks[:1]), include=["embeddings"])["embeddings"][0]
    np.testing.assert_allclose(np.asarray(got), vectors[0], rtol=1e-5, atol=1e-7)  # the old row's own vector
    assert load_manifest(settings.storage.data_dir).vector_rows == TEXT_ROWS
    database = settings.storage.data_dir / "chroma" / "chroma.sqlite3"
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0  # the dropped rows' pages handed back
    assert store.vector_search("weather forecast for a city", None, None, 1)[0].node.node_id == \
        "weather:paths/~1forecast/get"
    store.close()
    caplog.clear()
    store, report = _build(settings, embed_model, fleet)
    assert report.vectors_added == 0 and "one row per chunk" not in caplog.text
    store.close()
