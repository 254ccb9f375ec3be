"""kill -9 in the middle of a build: queries read the last complete generation whole, never the
half-written API; the next build repairs.

The build runs in a subprocess with SPECRAG_TEST_PAUSE_AFTER_APIS=2 (see builder.py), which makes
it sleep after it stored the first batch of its third API; the test then kills it with SIGKILL.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from specrag.index import ChunkStore, IndexBuilder, load_manifest
from specrag.index.builder import PAUSE_HOOK_ENV
from specrag.index.workspace import corpus_settings, update_index
from specrag.specs.models import ApiChunks

from .fleet import MODEL_DIR, api, component, endpoint, row_ids

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["books", "music", "maps", "films", "trains", "games"]
BUILD = """
import json, logging, sys
from specrag.core.settings import Settings
from specrag.index import ChunkStore, IndexBuilder
from specrag.specs.models import ApiChunks
logging.basicConfig(level=logging.WARNING)
apis = [ApiChunks.model_validate(a) for a in json.load(open(sys.argv[1]))]
settings = Settings(data_dir=sys.argv[2], embed_model_path=sys.argv[3])
IndexBuilder(ChunkStore.open(settings), settings, batch_size=2).build(apis, progress=False)
"""


def _topic_api(name: str, version: str) -> ApiChunks:
    extra = "archive" if version == "1" else "recommendations"
    return api(name, [
        endpoint(name, "get", f"/{name}", f"Search {name} by keyword", f"search_{name}"),
        endpoint(name, "get", f"/{name}/{{id}}", f"Get one of the {name} by id, version {version}", f"get_{name}"),
        endpoint(name, "get", f"/{name}/{extra}", f"The {extra} of {name}", f"{extra}_{name}"),
        component(name, f"{name.title()}Item", f"one item of {name}: title, year, rating"),
    ], version)


def _fleet(version: str) -> list[ApiChunks]:
    return [_topic_api(name, version) for name in NAMES]


def _killed_build(tmp_path: Path, apis: list[ApiChunks], data_dir: Path) -> None:
    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(json.dumps([a.model_dump(mode="json") for a in apis]), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", BUILD, str(fleet_file), str(data_dir), str(MODEL_DIR)],
                            cwd=ROOT, env=os.environ | {PAUSE_HOOK_ENV: "2"}, stderr=subprocess.PIPE, text=True)
    deadline, seen = time.monotonic() + 120, ""
    try:
        while "pausing mid-build" not in seen:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            line = proc.stderr.readline() if ready else ""
            assert line, f"build never reached the pause hook; stderr so far:\n{seen}"
            seen += line
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_kill_9_mid_build_then_repair(tmp_path, settings, embed_model):
    store = ChunkStore.open(settings, embed_model=embed_model)
    IndexBuilder(store, settings).build(_fleet("1"), progress=False)
    store.close()
    first_local = load_manifest(settings.storage.data_dir).local_dir

    _killed_build(tmp_path, _fleet("2"), settings.storage.data_dir)
    manifest = load_manifest(settings.storage.data_dir)
    # books and music were written to Chroma, maps was being written: none of them is committed
    assert manifest.pending_ids() == {"books", "music", "maps"} and manifest.local_dir == first_local

    store = ChunkStore.open(settings, embed_model=embed_model)
    rows = store.vectors.client
    assert rows.count() == 24 + 6  # every text of version 1, and the new texts of books, music and maps
    new_maps = row_ids(_topic_api("maps", "2").chunks)
    assert set(rows.get(ids=new_maps)["ids"]) == set(new_maps)  # the killed run's first batch of maps
    assert len(rows.get(ids=row_ids(_topic_api("films", "2").chunks))["ids"]) == 2  # films: not reached
    # rows are only added before the commit: nothing the served generation (version 1) uses is gone
    served = [i for name in NAMES for i in row_ids(_topic_api(name, "1").chunks)]
    assert set(rows.get(ids=served)["ids"]) == set(served)
    # nothing of the killed run is committed: the last complete generation is served whole, the
    # pending APIs in the version it holds (queries never read Chroma's half-written rows)
    assert store.complete_api_ids() == set(NAMES)
    for name in ("maps", "books", "music", "films"):
        assert store.api_chunk_ids(name) == [c.id for c in _topic_api(name, "1").chunks], name
    for search in (store.vector_search, store.lexical_search):
        hits = search("the recommendations of maps books music", None, None, 50)
        assert hits and all("recommendations" not in h.node.node_id for h in hits), search.__name__
    assert "maps:paths/~1maps~1recommendations/get" not in store.get_chunks(
        [c.id for c in _topic_api("maps", "2").chunks])
    assert store.lexical_search("maps archive", ["maps"], None, 1)[0].node.node_id == "maps:paths/~1maps~1archive/get"
    films = store.lexical_search("films archive", ["films"], None, 5)
    assert films[0].node.node_id == "films:paths/~1films~1archive/get"
    assert store.vector_search("the archive of films", ["films"], None, 1)[0].node.node_id == \
        "films:paths/~1films~1archive/get"
    store.close()

    store = ChunkStore.open(settings, embed_model=embed_model)
    report = IndexBuilder(store, settings).build(_fleet("2"), progress=False)
    assert report.apis_repaired == ["books", "music", "maps"] and report.apis_updated == ["films", "trains", "games"]
    # the killed run's Chroma rows and the unchanged texts keep their vectors: only the two new
    # texts of each API the killed run never reached are embedded
    assert (report.chunks_embedded, report.chunks_reused) == (6, 18) and report.local_written
    assert store.complete_api_ids() == set(NAMES) and not load_manifest(settings.storage.data_dir).pending_ids()
    assert store.vectors.client.count() == 24 and report.vectors_deleted == 12  # version 1's own texts, swept
    maps_ids = [c.id for c in _topic_api("maps", "2").chunks]
    assert store.api_chunk_ids("maps") == maps_ids and set(store.get_chunks(maps_ids)) == set(maps_ids)
    assert "maps:paths/~1maps~1archive/get" not in store.get_chunks(["maps:paths/~1maps~1archive/get"])
    top = store.lexical_search("maps recommendations", None, None, 1)[0]
    assert top.node.node_id == "maps:paths/~1maps~1recommendations/get"
    assert [p.name for p in (settings.storage.data_dir / "local").iterdir()] == [load_manifest(settings.storage.data_dir).local_dir]
    store.close()


def test_serving_after_a_reindex_killed_while_an_api_is_pending_serves_every_api(tmp_path, settings, embed_model):
    """`specrag index` killed (kill -9) while a changed API is pending, then `serve --kb specs`:
    the last complete generation is served whole, and /readyz's count says so."""
    from fastapi.testclient import TestClient
    from specrag.serve.app import create_app
    from specrag.serve.kbs import KnowledgeBases

    specs = tmp_path / "specs"
    specs.mkdir()
    for path in (ROOT / "examples" / "specs").iterdir():
        (specs / path.name).write_text(path.read_text())
    served = settings.model_copy(update={"openai_api_key": None, "llm_base_url": None})
    store = ChunkStore.open(corpus_settings(served, [specs]), embed_model=embed_model)
    update_index(served, [specs], progress=False, store=store)
    store.close()
    users = specs / "users_api.yaml"
    users.write_text(users.read_text().replace("summary: ", "summary: Now ", 1))
    (tmp_path / "empty.env").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECRAG_", "OPENAI_"))} | {
        PAUSE_HOOK_ENV: "0", "SPECRAG_EMBED_MODEL_PATH": str(MODEL_DIR), "SPECRAG_ENV_FILE": str(tmp_path / "empty.env")}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "specrag"), "index", str(specs), "--data-dir",
                             str(served.storage.data_dir)], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        while "pausing mid-build" not in seen:
            line = proc.stderr.readline()
            assert line, f"index never reached the pause hook: {seen}"
            seen += line
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert load_manifest(corpus_settings(served, [specs]).storage.data_dir).pending_ids() == {"users_api"}

    kbs = KnowledgeBases.open(served, keys=["specs"], embed_model=embed_model)
    try:
        kb = kbs.default(None)
        assert kb.api_ids == {"users_api", "petstore_v2"}
        assert kbs.with_api("users_api") is kb and kb.operations("users_api")
        assert [c.id for c in kb.engine.retrieve_context("create a user").chunks]
        with TestClient(create_app(kbs)) as client:
            ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["kbs"][0]["apis"] == 2
    finally:
        kbs.close()
