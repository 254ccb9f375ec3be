"""Fixtures: the two hand-written specs (OpenAPI 3 shop, Swagger 2 library) ingested once."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def fixture_apis():
    from specrag.specs.ingest import ingest_paths

    ingest = ingest_paths([FIXTURES], 1500, progress=False, workers=1)
    assert not ingest.report.specs_skipped
    return {api.api.file_id: api for api in ingest.apis}


class DictLookup:
    """A ChunkLookup over ingested chunks (what the store answers, without a store)."""

    def __init__(self, apis):
        self.chunks = {c.id: c for api in apis for c in api.chunks}

    def get_chunks(self, ids):
        return {i: self.chunks[i] for i in ids if i in self.chunks}
