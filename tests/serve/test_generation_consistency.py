"""A reader never mixes generations: a served knowledge base reads the catalog, per-API indexes and
graphs of the generation it opened, not the files a build rewrites for the next one, until the
watcher swaps the next generation in (catalog/snapshot.py)."""

from __future__ import annotations

import httpx
import pytest

API = "petstore_v2"


def rename_pet(specs) -> None:
    """Schema ``Pet`` becomes ``Animal`` (its definition and every $ref): a real spec edit."""
    path = specs / f"{API}.json"
    text = path.read_text()
    assert '"Pet": {' in text and "#/definitions/Pet\"" in text
    path.write_text(text.replace('"Pet": {', '"Animal": {').replace("#/definitions/Pet\"", "#/definitions/Animal\""))


def get(kbs, url: str) -> httpx.Response:
    """One request to an app serving ``kbs`` (in process; no watcher runs: the test swaps)."""
    import anyio
    from specrag.serve.app import create_app

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(kbs))
        async with httpx.AsyncClient(transport=transport, base_url="http://specrag") as client:
            return await client.get(url)
    return anyio.run(call)


def forget_parsed_indexes(kb) -> None:
    """Drop the detailed indexes the engine read at start, as a fleet's queries do: it keeps the
    ``INDEX_CACHE`` (64) most recently used, and reads an evicted one again on demand."""
    kb.engine.graph.load_index.__self__._load.cache_clear()


def answers_of_the_old_generation(kbs, kb) -> None:
    """``kb`` (and ``kbs`` while it serves ``kb``) answers as the generation with ``Pet``."""
    pet = get(kbs, f"/api/v1/apis/{API}/schemas/Pet")
    assert pet.status_code == 200, pet.text
    assert pet.json()["chunk_id"] == f"{API}:definitions/Pet" and '"Animal"' not in pet.text
    assert get(kbs, f"/api/v1/apis/{API}/schemas/Animal").status_code == 404
    operation = get(kbs, f"/api/v1/apis/{API}/operations/POST /pets").json()
    assert f"{API}:definitions/Pet" in operation["ref_ids"]
    index = kb.api_index(API)
    assert "Pet" in {s.name for s in index.schemas} and "Animal" not in {s.name for s in index.schemas}
    assert kb.engine.graph.impact(API, "Pet").operations  # index and chunks agree: Pet is used
    assert {a["api"] for a in get(kbs, "/api/v1/apis").json()} == {e.file_id for e in kb.catalog.apis}


def test_a_served_knowledge_base_reads_its_own_generation_until_the_swap(served_copy):
    from specrag.catalog.io import load_api_graph
    from specrag.graph.models import ApiGraph
    from specrag.index.workspace import update_index
    from specrag.serve.reload import IndexWatcher
    from specrag.serve.tenancy import Tenants

    settings, specs, kbs = served_copy
    watcher = IndexWatcher(Tenants.local(kbs), interval_s=0.1)
    old = kbs.all()[0]
    old_graph = load_api_graph(old.settings.catalogs_path, API)
    assert isinstance(old_graph, ApiGraph)
    old_listing = old.store.manifest.catalogs
    forget_parsed_indexes(old)  # no graph read yet, and now no parsed index: both read on demand
    rename_pet(specs)
    local, run = update_index(settings, [specs], progress=False)
    assert API in run.index["apis_updated"]
    assert "Animal" in (local.catalogs_path / "indexes" / f"{API}.json").read_text()  # the next generation's
    assert kbs.all()[0] is old  # not swapped yet
    answers_of_the_old_generation(kbs, old)
    forget_parsed_indexes(old)
    answers_of_the_old_generation(kbs, old)  # read again: still the old generation's
    assert old.engine.graph.load_graph(API) == old_graph

    assert watcher.check() == [old.kb_id]
    new = kbs.all()[0]
    assert new is not old
    animal = get(kbs, f"/api/v1/apis/{API}/schemas/Animal")
    assert animal.status_code == 200 and animal.json()["chunk_id"] == f"{API}:definitions/Animal"
    missing = get(kbs, f"/api/v1/apis/{API}/schemas/Pet")
    assert missing.status_code == 404 and "Animal" in missing.text
    assert "Animal" in {s.name for s in new.api_index(API).schemas}
    assert new.engine.graph.load_graph(API) == load_api_graph(local.catalogs_path, API)

    # a request that still holds the old knowledge base finishes on the old generation, whose
    # local files the build removed (disk stays bounded: one local generation; the catalogs
    # listing it replaced is kept, with its blobs, one generation for such readers)
    from specrag.serve.kbs import KnowledgeBases

    forget_parsed_indexes(old)
    answers_of_the_old_generation(KnowledgeBases([old]), old)
    data = local.storage.data_dir / "local"
    assert sorted(p.name for p in data.iterdir()) == sorted([*new.store.manifest.live_files(), old_listing, "blobs"])


def test_a_build_stopped_before_its_commit_leaves_the_old_generation_whole(served_copy, monkeypatch):
    """A build that wrote the next catalogs and stopped before the manifest named them (killed, or
    still running): a knowledge base opened now serves the committed generation, catalogs included."""
    from specrag.index.builder import IndexBuilder
    from specrag.index.workspace import update_index
    from specrag.serve.kbs import KnowledgeBases

    settings, specs, kbs = served_copy
    kb_id = kbs.all()[0].kb_id

    def stopped(self, *args, **kwargs):
        raise KeyboardInterrupt("stopped before the commit")

    rename_pet(specs)
    monkeypatch.setattr(IndexBuilder, "build", stopped)
    with pytest.raises(KeyboardInterrupt):
        update_index(settings, [specs], progress=False)
    monkeypatch.undo()
    assert "Animal" in (kbs.all()[0].settings.catalogs_path / "indexes" / f"{API}.json").read_text()
    fresh = KnowledgeBases.open(settings, keys=[kb_id])
    try:
        answers_of_the_old_generation(fresh, fresh.all()[0])
    finally:
        fresh.close()
