"""File stamps: a touched file is unchanged, an edited one changed, a deleted one changed, and an
mtime too recent to vouch for the bytes makes the stamper read them (the "racy" case)."""

from __future__ import annotations

import os
import time

from specrag.specs.sources import (
    RACY_NS,
    SourceRecord,
    SourceState,
    Stamper,
    load_sources,
    save_sources,
)


def _state(stamper: Stamper, path: str, checked_ns: int) -> SourceState:
    record = SourceRecord(explicit=True, outcome="ignored", stamps={path: stamper.stamp(path)})
    return SourceState(chunker_version="1", max_tokens=1500, checked_ns=checked_ns, records={path: record})


def test_touched_edited_and_deleted_files(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("openapi: 3.0.0\n")
    old = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(old, old))
    state = _state(Stamper(None, 1 << 20), str(path), checked_ns=time.time_ns())
    record = state.records[str(path)]
    assert Stamper(state, 1 << 20).unchanged(record) is record  # same size and old mtime: trusted without reading
    os.utime(path, ns=(old + 10**9, old + 10**9))
    touched = Stamper(state, 1 << 20).unchanged(record)
    assert touched is not None and touched.stamps[str(path)].mtime_ns == old + 10**9  # same bytes: refreshed
    path.write_text("openapi: 3.1.0\n")
    assert Stamper(state, 1 << 20).unchanged(record) is None
    path.unlink()
    assert Stamper(state, 1 << 20).unchanged(record) is None


def test_same_size_same_mtime_edit_is_caught_while_the_mtime_is_recent(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("openapi: 3.0.0\n")
    mtime = os.stat(path).st_mtime_ns
    state = _state(Stamper(None, 1 << 20), str(path), checked_ns=mtime + RACY_NS // 2)  # checked right after the write
    path.write_text("openapi: 3.0.9\n")  # same size, then the old mtime put back
    os.utime(path, ns=(mtime, mtime))
    assert Stamper(state, 1 << 20).unchanged(state.records[str(path)]) is None


def test_state_round_trip_and_damage(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("x: 1\n")
    state = _state(Stamper(None, 1 << 20), str(path), checked_ns=1)
    save_sources(tmp_path, state)
    assert load_sources(tmp_path) == state
    (tmp_path / "sources.json").write_text('{"chunker_version": "1", "rec', encoding="utf-8")
    assert load_sources(tmp_path) is None  # a damaged state only costs reading every spec again
