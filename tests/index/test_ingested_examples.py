"""End to end with the real chunker: examples/specs ingested, indexed, searched, refs resolvable."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.index import ChunkStore, IndexBuilder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"


@pytest.fixture
def apis():
    ingest = pytest.importorskip("specrag.specs.ingest")
    if not EXAMPLES.is_dir():
        pytest.skip(f"{EXAMPLES} is absent")
    result = ingest.ingest_paths([EXAMPLES], workers=1)
    assert {a.api.file_id for a in result.apis} == {"petstore_v2", "users_api"}
    return result.apis


def test_examples_index_and_resolve_refs(settings, embed_model, apis):
    store = ChunkStore.open(settings, embed_model=embed_model)
    report = IndexBuilder(store, settings).build(apis, progress=False)
    assert report.chunks_embedded == sum(len(a.chunks) for a in apis)
    for search in (store.vector_search, store.lexical_search):
        top = search("get a user by id", ["users_api"], ["endpoint"], 3)
        assert "users_api:paths/~1users~1{userId}/get" in [h.node.node_id for h in top], search.__name__
        assert all(h.node.metadata["source_file"] == "petstore_v2"
                   for h in search("delete a pet", ["petstore_v2"], None, 10))
    every_ref = {ref for a in apis for c in a.chunks for ref in c.ref_ids}
    found = store.get_chunks(sorted(every_ref))
    assert set(found) == every_ref  # every in-spec reference points at a stored chunk
    assert IndexBuilder(store, settings).build(apis, progress=False).chunks_embedded == 0
    store.close()
