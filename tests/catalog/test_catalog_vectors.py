"""The semantic signal of offline stage 1: catalog entry vectors, blended with what each API's
operations do (its mean endpoint vector)."""

from __future__ import annotations

import numpy as np
import pytest
from specrag.catalog.models import Catalog, CatalogEntry
from specrag.index.catalog_vectors import blend_with_centroids, catalog_vectors
from specrag.stages.api_select import KeywordApiSelector


def _unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


class _CountingEmbedder:
    """Records every text it is asked to embed; a vector from the text's bytes (no model needed
    to test what is asked of one)."""

    def __init__(self):
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [[float(len(t)), float(sum(t.encode()) % 97), 1.0] for t in texts]


def test_entries_that_read_the_same_are_embedded_once_and_cached_by_text(tmp_path):
    """Copies and versions of an API often keep its name and description: 2,540 entries of the
    4x fleet read as 637 texts."""
    same = {"name": "Pets", "description": "Adopt a pet", "domains": ["pets"]}
    catalog = Catalog(apis=[CatalogEntry(file_id="pets", **same), CatalogEntry(file_id="pets_v2", **same),
                            CatalogEntry(file_id="users", name="Users", description="Sign up")])
    model = _CountingEmbedder()
    vectors = catalog_vectors(catalog, model, "m", tmp_path)
    assert len(model.texts) == 2 and len(set(model.texts)) == 2
    assert vectors.shape == (3, 3) and np.array_equal(vectors[0], vectors[1])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    grown = Catalog(apis=[*catalog.apis, CatalogEntry(file_id="pets_v3", **same),
                          CatalogEntry(file_id="shop", name="Shop", description="Buy")])
    again = catalog_vectors(grown, model, "m", tmp_path)
    assert model.texts[2:] == ["Shop: Buy ()"]  # the cache answers for every text it holds
    assert np.array_equal(again[:3], vectors) and np.array_equal(again[3], vectors[0])


def test_blend_moves_each_entry_towards_its_centroid_and_keeps_unit_rows():
    entries = _unit([[1, 0, 0], [0, 1, 0]])
    centroids = _unit([[0, 0, 1], [0, 0, 1]])
    half = blend_with_centroids(entries, centroids, 0.5)
    assert np.allclose(np.linalg.norm(half, axis=1), 1.0)
    assert np.allclose(half[0], _unit([[1, 0, 1]])[0])
    assert np.allclose(blend_with_centroids(entries, centroids, 1.0), centroids)
    assert blend_with_centroids(entries, centroids, 0.0) is entries
    assert blend_with_centroids(entries, None, 0.5) is entries


def test_an_api_without_endpoints_keeps_its_entry_vector():
    entries = _unit([[1, 0, 0], [0, 1, 0]])
    centroids = np.array([[0, 0, 1], [0, 0, 0]], dtype=np.float32)
    blended = blend_with_centroids(entries, centroids, 0.7)
    assert np.allclose(blended[1], entries[1])
    assert not np.allclose(blended[0], entries[0])


@pytest.mark.needs_embeddings
def test_centroids_are_unit_means_of_each_apis_endpoint_vectors(demo_index):
    _, store = demo_index
    centroids = store.endpoint_centroids(["users_api", "petstore_v2", "no_such_api"])
    assert np.allclose(np.linalg.norm(centroids[:2], axis=1), 1.0)
    assert not centroids[2].any()
    local = store.local
    start, end = local.header.apis["users_api"].spans["endpoint"]
    mean = np.asarray(local.vectors[start:end], dtype=np.float32).mean(axis=0)
    assert np.allclose(centroids[0], mean / np.linalg.norm(mean), atol=1e-5)


@pytest.mark.needs_embeddings
def test_an_api_whose_catalog_text_says_nothing_is_found_by_what_its_operations_do(demo_index, demo_engine):
    """Both entries read like an editor's placeholder: the entry vectors cannot tell the APIs apart,
    the blended ones can."""
    _, store = demo_index
    selector = demo_engine.selector
    ids = selector.ids
    placeholder = np.asarray(store.embed_query("API: Welcome, a place to put general notes"), dtype=np.float32)
    entries = np.tile(placeholder / np.linalg.norm(placeholder), (len(ids), 1))
    blended = blend_with_centroids(entries, store.endpoint_centroids(ids), 0.5)
    query = "adopt a dog from the animal shop"
    plain = KeywordApiSelector(selector.catalog, {}, api_vectors=entries, embed_query=store.embed_query,
                               weights=(0.0, 1.0, 0.0))
    informed = KeywordApiSelector(selector.catalog, {}, api_vectors=blended, embed_query=store.embed_query,
                                  weights=(0.0, 1.0, 0.0))
    assert plain._semantic(query, 2) == ids[:2]  # a tie: catalog order
    assert informed._semantic(query, 1) == ["petstore_v2"]
    assert informed._semantic("sign up a new account with an email address", 1) == ["users_api"]


class _CountingEmbedder:
    """Embeds each text as (len, 1, 0) and counts the texts it was given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [[float(len(t)), 1.0, 0.0] for t in texts]


def test_entries_only_removed_reuse_the_cache_without_embedding(tmp_path):
    """A spec that left the corpus leaves a catalog whose entries are all cached: nothing to embed
    (it used to fail reshaping an empty batch, a traceback in `specrag index`)."""
    from specrag.catalog.models import Catalog, CatalogEntry
    from specrag.index.catalog_vectors import catalog_vectors

    entries = [CatalogEntry(file_id=f, name=f, description=f"the {f} API", domains=[]) for f in ("users", "pets")]
    embedder = _CountingEmbedder()
    both = catalog_vectors(Catalog(version="v1", apis=entries), embedder, "m", tmp_path)
    assert both.shape == (2, 3) and len(embedder.texts) == 2
    one = catalog_vectors(Catalog(version="v2", apis=entries[1:]), embedder, "m", tmp_path)
    assert np.allclose(one, both[1:]) and len(embedder.texts) == 2
    assert catalog_vectors(Catalog(version="v3", apis=[]), embedder, "m", tmp_path).size == 0
