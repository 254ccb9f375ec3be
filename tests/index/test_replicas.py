"""Replicas on one real Chroma server (``chroma run`` on 127.0.0.1): each corpus in its own
collection, a replica starting from what another published, updates reaching it without a
restart, and a server killed mid-build."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest
from specrag.cli import main
from specrag.core.errors import ChromaUnavailableError, IndexDamagedError
from specrag.engine.factory import build_engine
from specrag.index.chroma_rows import ChromaRows
from specrag.index.collections import (
    OWNER,
    TENANT,
    ForeignCollectionError,
    collection_name,
    files_name,
)
from specrag.index.manifest import load_manifest
from specrag.index.replica import published_generation, sync_corpus
from specrag.index.store import ChunkStore
from specrag.index.workspace import (
    corpus_settings,
    synced_corpus_settings,
    update_index,
)
from specrag.serve.kbs import KnowledgeBases

from .chroma_server import ChromaServer

DEMO = Path(__file__).resolve().parents[2] / "examples" / "specs"
AVATAR_ID = "users_api:paths/~1users~1{userId}~1avatar/put"
QUERIES = ["create a user with an address", "list the pets", "delete a user", "find pets by status"]
AVATAR = """paths:
  /users/{userId}/avatar:
    put:
      operationId: uploadUserAvatar
      summary: Upload a profile picture for a user
      parameters:
        - name: userId
          in: path
          required: true
          schema: {type: string}
      responses:
        '204':
          description: Picture stored.
"""


@pytest.fixture
def server(tmp_path):
    server = ChromaServer(tmp_path / "server").start()
    yield server
    server.stop()


@pytest.fixture
def specs(tmp_path) -> Path:
    shutil.copytree(DEMO, tmp_path / "specs")
    return tmp_path / "specs"


def replica(settings, server: ChromaServer, name: str, **update):
    return settings.model_copy(update={"data_dir": settings.storage.data_dir.parent / name, "chroma_host": "127.0.0.1",
                                       "chroma_port": server.port, "openai_api_key": None, "llm_base_url": None,
                                       **update})


def index(settings, paths: list[Path], embed_model):
    store = ChunkStore.open(corpus_settings(settings, paths), embed_model=embed_model)
    try:
        return update_index(settings, paths, progress=False, store=store)
    finally:
        store.close()


def answers(engine) -> list[list[str]]:
    return [[c.id for c in engine.retrieve_context(q).chunks] for q in QUERIES]


def add_avatar_operation(specs: Path) -> None:
    path = specs / "users_api.yaml"
    path.write_text(path.read_text().replace("paths:\n", AVATAR, 1))


def vector_count(settings) -> int:
    store = ChunkStore(settings, None)
    try:
        return store.chroma.count()
    finally:
        store.close()


def test_a_replica_answers_from_what_another_published(server, specs, settings, embed_model, monkeypatch):
    one, two = replica(settings, server, "one"), replica(settings, server, "two")
    local, _ = index(one, [specs], embed_model)
    generation = ChunkStore.open(local, embed_model=None).manifest.generation
    assert published_generation(ChunkStore(local, None)) == generation
    monkeypatch.setattr("specrag.specs.incremental.ingest_changed", _forbidden)  # no spec parsing...
    monkeypatch.setattr("specrag.index.vector_reuse.VectorSource.embed", _forbidden)  # ...and no embedding
    kbs = KnowledgeBases.open(two)
    kb = kbs.default(None)
    assert kb.kb_id == local.storage.data_dir.name and kb.store.search_mode == "hybrid"
    assert kb.settings.storage.data_dir == two.storage.data_dir / "corpora" / local.storage.data_dir.name
    assert kb.store.manifest.generation == generation and kb.api_ids == {"users_api", "petstore_v2"}
    assert (kb.settings.catalogs_path / "catalog.json").read_bytes() == (local.catalogs_path / "catalog.json").read_bytes()
    first = answers(build_engine(local))
    assert all(first) and answers(kb.engine) == first
    kbs.close()


def test_specrag_query_on_a_fresh_replica_uses_the_corpus_on_the_server(server, specs, settings, embed_model,
                                                                         monkeypatch, capsys):
    local, _ = index(replica(settings, server, "one"), [specs], embed_model)
    expected = build_engine(local).retrieve_context(QUERIES[0])
    for name, value in {"SPECRAG_CHROMA_HOST": "127.0.0.1", "SPECRAG_CHROMA_PORT": str(server.port),
                        "SPECRAG_EMBED_MODEL_PATH": str(settings.embeddings.embed_model_path)}.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert main(["query", QUERIES[0], "--data-dir", str(settings.storage.data_dir.parent / "two"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in got["primary_chunks"]] == [c.id for c in expected.primary_chunks]


def test_an_update_reaches_a_running_replica_after_the_check_interval(server, specs, settings, embed_model,
                                                                      monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("specrag.index.replica.time.monotonic", lambda: clock[0])
    one, two = replica(settings, server, "one"), replica(settings, server, "two", chroma_sync_s=30)
    index(one, [specs], embed_model)
    kbs = KnowledgeBases.open(two)
    before = kbs.default(None)
    assert not before.store.get_chunks([AVATAR_ID])
    add_avatar_operation(specs)
    local, run = index(one, [specs], embed_model)  # replica one re-indexes the changed spec
    assert run.index["apis_updated"] == ["users_api"] and run.specs_parsed == [str(specs / "users_api.yaml")]
    clock[0] += 29
    assert kbs.default(None) is before  # not yet: the check interval has not passed
    clock[0] += 2
    after = kbs.default(None)
    assert after is not before and after.store.manifest.generation == ChunkStore(local, None).chroma.metadata[
        "specrag_generation"]
    assert AVATAR_ID in {c.id for c in after.engine.retrieve_context("upload a profile picture").chunks}
    assert "uploadUserAvatar" in after.operations("users_api")
    assert before.store.get_chunks(["users_api:components/schemas/User"])  # a request that started before still reads
    assert answers(after.engine) == answers(build_engine(local))
    kbs.close()


def test_corpora_have_collections_of_their_own_and_a_foreign_one_is_left_alone(server, specs, settings,
                                                                               embed_model):
    one = replica(settings, server, "one")
    users, _ = index(one, [specs / "users_api.yaml"], embed_model)
    count = vector_count(users)
    assert count > 0 and collection_name(users) == f"specrag_chunks-{users.storage.data_dir.name}"
    pets, _ = index(one, [specs / "petstore_v2.json"], embed_model)
    assert collection_name(pets) != collection_name(users)
    assert vector_count(users) == count and vector_count(pets) > 0
    fresh = replica(settings, server, "fresh")  # a first build on a fresh data dir starts from the server
    again, run = index(fresh, [specs / "users_api.yaml"], embed_model)
    assert run.index["chunks_embedded"] == 0 and run.index["apis_unchanged"] == ["users_api"]
    assert vector_count(users) == count

    store = ChunkStore(users, None)
    store.client.delete_collection(collection_name(users))
    store.client.create_collection(collection_name(users), metadata={OWNER: "someone-else", TENANT: "default"})
    store.close()
    with pytest.raises(ForeignCollectionError) as caught:
        index(one, [specs / "users_api.yaml"], embed_model)
    assert "\n" not in str(caught.value) and "someone-else" in str(caught.value)
    store = ChunkStore(users, None)
    assert store.client.get_collection(collection_name(users)).metadata[OWNER] == "someone-else"
    store.close()


def test_a_tenant_has_a_chroma_tenant_of_its_own(server, specs, settings, embed_model):
    acme = replica(settings, server, "one", tenant="acme")
    local, _ = index(acme, [specs / "users_api.yaml"], embed_model)
    default = ChunkStore(local.model_copy(update={"tenant": "default"}), None)
    assert collection_name(local) not in {c.name for c in default.client.list_collections()}
    assert vector_count(local) > 0
    default.close()
    other = replica(settings, server, "two", tenant="acme")
    kb = KnowledgeBases.open(other).default(None)
    assert kb.api_ids == {"users_api"}


@pytest.mark.parametrize("kill_after", ['include=["embeddings"]', ".add("])
def test_a_server_killed_mid_build_is_one_line_and_the_next_build_repairs(server, specs, settings, embed_model,
                                                                          monkeypatch, kill_after):
    """Killed while the changed API is pending (after its new text was looked up), or after its
    new row is written (committed locally, not published): the generation published before stays
    whole on the server (rows are only added before a commit), and a replica pulls it, never the
    half-written state."""
    one, two = replica(settings, server, "one"), replica(settings, server, "two")
    local, _ = index(one, [specs], embed_model)
    published = published_generation(ChunkStore(local, None))
    add_avatar_operation(specs)
    real_call = ChromaRows._call

    def kill_after_write(self, call):
        result = real_call(self, call)
        if kill_after in inspect.getsource(call):
            server.kill()
        return result

    monkeypatch.setattr(ChromaRows, "_call", kill_after_write)
    with pytest.raises(ChromaUnavailableError) as caught:
        index(one, [specs], embed_model)
    assert "\n" not in str(caught.value) and f"127.0.0.1:{server.port}" in str(caught.value)
    monkeypatch.setattr(ChromaRows, "_call", real_call)
    server.start()  # same path, same port
    stale = two.model_copy(update={"data_dir": two.storage.data_dir / "corpora" / local.storage.data_dir.name})
    assert published_generation(ChunkStore(stale, None)) == published
    assert sync_corpus(stale) and load_manifest(stale.storage.data_dir).generation == published
    pulled = ChunkStore.open(stale, embed_model=None)
    assert pulled.complete_api_ids() == {"users_api", "petstore_v2"} and not pulled.get_chunks([AVATAR_ID])
    pulled.close()

    repaired, run = index(one, [specs], embed_model)
    assert run.index["apis_repaired"] == (["users_api"] if kill_after != ".add(" else [])
    store = ChunkStore.open(repaired, embed_model=None)
    assert published_generation(store) == store.manifest.generation > published
    fresh, _ = index(replica(settings, server, "fresh", collection="fresh"), [specs], embed_model)
    expected = answers(build_engine(fresh))
    engine = build_engine(repaired)
    assert AVATAR_ID in {c.id for c in engine.retrieve_context("upload a profile picture").chunks}
    assert answers(engine) == expected
    assert synced_corpus_settings(two) == stale and answers(build_engine(stale)) == expected


def test_a_damaged_publication_is_one_line_and_pulls_nothing(server, specs, settings, embed_model):
    local, _ = index(replica(settings, server, "one"), [specs / "users_api.yaml"], embed_model)
    store = ChunkStore(local, None)
    companion = store.client.get_collection(files_name(local))
    generation = published_generation(store)
    companion.upsert(ids=["manifest.json#0"], documents=["not base64 at all!"], embeddings=[[0.0]],
                     metadatas=[{"path": "manifest.json", "part": 0, "parts": 1, "generation": generation}])
    two = replica(settings, server, "two")
    target = two.model_copy(update={"data_dir": two.storage.data_dir / "corpora" / local.storage.data_dir.name})
    with pytest.raises(IndexDamagedError) as caught:
        sync_corpus(target)
    assert "\n" not in str(caught.value) and "specrag index" in str(caught.value)
    assert not (target.storage.data_dir / "manifest.json").exists()


def _forbidden(*args, **kwargs):
    raise AssertionError("a replica starting from the server must not parse specs or embed")


def test_a_half_published_corpus_is_skipped_and_the_intact_ones_served(server, specs, settings, embed_model,
                                                                        monkeypatch, caplog):
    """The writer dies mid-publish (its second publication of pets: the manifest part of the new
    generation is on the server, the rest of the files and the marker are the old ones). A fresh
    replica starts: users is served, pets is logged and skipped; a later publish makes it appear."""
    from specrag.index import publish as publish_module

    one, two = replica(settings, server, "one"), replica(settings, server, "two")
    users, _ = index(one, [specs / "users_api.yaml"], embed_model)
    pets, _ = index(one, [specs / "petstore_v2.json"], embed_model)
    real_upsert = publish_module._upsert

    def killed_mid_publish(store, companion, batch):
        real_upsert(store, companion, batch[:1])  # the first part reaches the server, then the writer dies
        raise KeyboardInterrupt("killed mid-publish")

    pets_spec = specs / "petstore_v2.json"
    pets_spec.write_text(pets_spec.read_text().replace('"summary": "', '"summary": "Now: ', 1))
    monkeypatch.setattr(publish_module, "_upsert", killed_mid_publish)
    with pytest.raises(KeyboardInterrupt):
        index(one, [pets_spec], embed_model)
    monkeypatch.setattr(publish_module, "_upsert", real_upsert)

    kbs = KnowledgeBases.open(two, embed_model=embed_model)
    try:
        assert [kb.kb_id for kb in kbs.all_now()] == [users.storage.data_dir.name]
        assert kbs.default(None).api_ids == {"users_api"}
    finally:
        kbs.close()
    assert pets.storage.data_dir.name in caplog.text and "skipped" in caplog.text
    assert "1 of 2 corpora published" in caplog.text

    index(one, [pets_spec], embed_model)  # a later publish of pets completes
    caplog.clear()
    three = replica(settings, server, "three")  # (replica two would need a restart that lists the server's
    # corpora besides its own: KnowledgeBases.open does so only for a data dir with no index yet)
    kbs = KnowledgeBases.open(three, embed_model=embed_model)
    try:
        assert sorted(kb.kb_id for kb in kbs.all_now()) == sorted([users.storage.data_dir.name, pets.storage.data_dir.name])
        assert kbs.get(pets.storage.data_dir.name).api_ids == {"petstore_v2"}
        assert answers(kbs.get(pets.storage.data_dir.name).engine) == answers(build_engine(pets))
    finally:
        kbs.close()
    assert "skipped" not in caplog.text
