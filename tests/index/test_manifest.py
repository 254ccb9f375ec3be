"""The manifest: atomic writes, round trip, the recorded index shape, and damage as one-line errors."""

from __future__ import annotations

import json

import pytest
from specrag.core.errors import IndexDamagedError
from specrag.index.manifest import (
    ApiEntry,
    ApiState,
    IndexShape,
    Manifest,
    load_manifest,
    manifest_path,
    save_manifest,
)

SHAPE = IndexShape(embed_model="none", chunker_version="1", chunk_max_tokens=1500, lexical_version="1")


def _manifest() -> Manifest:
    return Manifest(**SHAPE.model_dump(), generation=3, apis={
        "pets": ApiEntry(content_hash="a", state=ApiState.COMPLETE, n_chunks=3),
        "users": ApiEntry(content_hash="b", state=ApiState.PENDING, n_chunks=6),
        "maps": ApiEntry(content_hash="", state=ApiState.PENDING),
    })


def test_round_trip_and_states(tmp_path):
    save_manifest(tmp_path, _manifest())
    loaded = load_manifest(tmp_path)
    assert loaded.pending_ids() == {"users", "maps"} and loaded.settled_ids() == {"pets"}
    # a pending API with a content hash is held by the live generation (a build is rewriting its
    # rows, or was killed doing so): it is served as committed; one without was never committed
    assert loaded.complete_ids() == {"pets", "users"}
    assert loaded.versions["chromadb"] and loaded.local_dir is None
    assert loaded.shape == SHAPE
    assert loaded.shape != SHAPE.model_copy(update={"chunk_max_tokens": 500})
    assert loaded.shape != SHAPE.model_copy(update={"embed_model": "FastEmbedEmbedding:x"})
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temp file left behind


def test_missing_manifest_is_none(tmp_path):
    assert load_manifest(tmp_path) is None


def test_truncated_manifest_is_damage_in_one_line(tmp_path):
    save_manifest(tmp_path, _manifest())
    raw = manifest_path(tmp_path).read_bytes()
    manifest_path(tmp_path).write_bytes(raw[:len(raw) // 2])
    with pytest.raises(IndexDamagedError, match="manifest.json is truncated or invalid") as err:
        load_manifest(tmp_path)
    assert "\n" not in str(err.value)


def test_manifest_of_another_format_is_named(tmp_path):
    manifest_path(tmp_path).write_text(json.dumps({"format_version": 1, "embed_model": "none"}), encoding="utf-8")
    with pytest.raises(IndexDamagedError, match="format 1"):
        load_manifest(tmp_path)
