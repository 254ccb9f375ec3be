"""The manifest: atomic writes, round trip, and unreadable files treated as no index."""

from __future__ import annotations

from pipeline.index.manifest import ApiEntry, ApiState, Manifest, load_manifest, manifest_path, save_manifest


def _manifest() -> Manifest:
    return Manifest(embed_model="none", chunker_version="1", generation=3, apis={
        "pets": ApiEntry(content_hash="a", state=ApiState.COMPLETE, n_chunks=3),
        "users": ApiEntry(content_hash="b", state=ApiState.PENDING, n_chunks=6),
    })


def test_round_trip_and_states(tmp_path):
    save_manifest(tmp_path, _manifest())
    loaded = load_manifest(tmp_path)
    assert loaded.complete_ids() == {"pets"} and loaded.pending_ids() == {"users"}
    assert loaded.bm25_stale and loaded.versions["chromadb"]
    assert loaded.compatible("none", "1") and not loaded.compatible("none", "2")
    assert not loaded.compatible("FastEmbedEmbedding:x", "1")
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temp file left behind


def test_missing_or_corrupt_manifest_is_none(tmp_path):
    assert load_manifest(tmp_path) is None
    manifest_path(tmp_path).write_text('{"embed_model": "none", "apis": ', encoding="utf-8")
    assert load_manifest(tmp_path) is None
