"""The served generation's records and vectors are read with positional reads, not mapped: what
a query reads must not stay in the process's resident set, and a file cut short after it was
opened is a one-line damage error, not a crash (SIGBUS) of the server."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from specrag.core.errors import IndexDamagedError
from specrag.index import ChunkStore, IndexBuilder
from specrag.index.pack import Pack

from .fleet import mini_fleet


@pytest.fixture
def folder(settings, embed_model) -> Path:
    store = ChunkStore.open(settings, embed_model=embed_model)
    IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    folder = store.local.pack.folder
    store.close()
    return folder


def _mapped(name: str) -> bool:
    return any(line.rstrip().endswith(name) for line in Path("/proc/self/maps").read_text().splitlines())


def test_records_and_vectors_read_back_as_written(folder):
    pack = Pack.open(folder)
    n = pack.header.n_rows
    assert [json.loads(pack.record(row))["id"] for row in range(n)] == pack.ids
    vector_of = pack.arrays["vector_of"]
    np.testing.assert_array_equal(pack.vector_rows(0, n), pack.vectors[vector_of])
    np.testing.assert_array_equal(pack.vector_rows(2, 5), pack.vectors[vector_of[2:5]])
    assert pack.vector_rows(3, 3).shape == (0, pack.header.dim)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_reading_every_record_maps_no_page_of_them(folder):
    pack = Pack.open(folder)
    for row in range(pack.header.n_rows):
        pack.record(row)
    pack.vector_rows(0, pack.header.n_rows)
    assert not _mapped("chunks.bin")
    assert _mapped("post_docs.npy")  # the BM25 postings stay mapped: every query reads a few


def test_a_file_cut_short_after_opening_is_damage(folder):
    pack = Pack.open(folder)
    last = pack.header.n_rows - 1
    for name in ("chunks.bin", "vectors.f16"):
        path = folder / name
        os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(IndexDamagedError, match="chunks.bin ended early"):
        pack.record(last)
    with pytest.raises(IndexDamagedError, match="vectors.f16 ended early"):
        pack.vector_rows(last, last + 1)


def test_a_file_gone_before_opening_is_damage(folder):
    (folder / "chunks.bin").unlink()
    with pytest.raises(IndexDamagedError, match="chunks.bin"):
        Pack.open(folder, verify=False)


def test_a_dropped_generation_closes_its_files(folder):
    pack = Pack.open(folder)
    fds = list(pack._fds.values())
    assert all(os.fstat(fd) for fd in fds)
    del pack
    gc.collect()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_rows_are_found_by_id(folder):
    """Ids are one UTF-8 block found through their hashes: every id finds its row, any other
    string (a prefix, a near miss, a non-ASCII one) none."""
    pack = Pack.open(folder)
    ids = list(pack.ids)
    assert [pack.ids.row_of(i) for i in ids] == list(range(len(ids)))
    assert [pack.ids.row_of(i) for i in (ids[0][:-1], ids[0] + "x", "ünïcode:id", "")] == [None] * 4
    assert pack.ids[1:3] == ids[1:3] and pack.ids[-1] == ids[-1]
    ranked = sorted(range(len(ids)), key=ids.__getitem__)
    assert [int(r) for r in np.argsort(pack.arrays["id_rank"])] == ranked  # fusion's tie-break order
