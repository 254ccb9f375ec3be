"""kill -9 in the middle of a build: queries never see the half-written API; the next build repairs.

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
from specrag.specs.models import ApiChunks

from .fleet import MODEL_DIR, api, component, endpoint

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["books", "music", "maps", "films", "trains", "games"]
BUILD = """
import json, logging, sys
from specrag.settings import Settings
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
    first_local = load_manifest(settings.data_dir).local_dir

    _killed_build(tmp_path, _fleet("2"), settings.data_dir)
    manifest = load_manifest(settings.data_dir)
    # books and music were written to Chroma, maps was being written: none of them is committed
    assert manifest.pending_ids() == {"books", "music", "maps"} and manifest.local_dir == first_local

    store = ChunkStore.open(settings, embed_model=embed_model)
    maps_rows = set(store.vectors.client.get(where={"source_file": "maps"})["ids"])
    assert "maps:paths/~1maps~1recommendations/get" in maps_rows  # the killed run's first batch
    assert "maps:paths/~1maps~1archive/get" not in maps_rows
    assert store.complete_api_ids() == {"films", "trains", "games"}
    for search in (store.vector_search, store.lexical_search):
        for file_ids in (None, ["maps"], ["maps", "books"], ["books", "music"]):
            hits = search("search maps books music by keyword", file_ids, None, 50)
            assert all(h.node.metadata["source_file"] not in {"maps", "books", "music"} for h in hits), \
                (search.__name__, file_ids)
    assert store.get_chunks([c.id for c in _topic_api("maps", "2").chunks]) == {}
    assert store.api_chunk_ids("maps") == [] and store.api_chunk_ids("books") == []
    # untouched APIs are still served, in the version the last committed build stored
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
    assert store.complete_api_ids() == set(NAMES) and not load_manifest(settings.data_dir).pending_ids()
    assert store.vectors.client.count() == 24
    maps_ids = [c.id for c in _topic_api("maps", "2").chunks]
    assert store.api_chunk_ids("maps") == maps_ids and set(store.get_chunks(maps_ids)) == set(maps_ids)
    assert "maps:paths/~1maps~1archive/get" not in store.get_chunks(["maps:paths/~1maps~1archive/get"])
    top = store.lexical_search("maps recommendations", None, None, 1)[0]
    assert top.node.node_id == "maps:paths/~1maps~1recommendations/get"
    assert [p.name for p in (settings.data_dir / "local").iterdir()] == [load_manifest(settings.data_dir).local_dir]
    store.close()
