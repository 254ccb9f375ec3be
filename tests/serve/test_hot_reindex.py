"""Hot re-index: a spec changed and re-indexed while the server answers; no request fails, the
answers show the new version after the swap, and requests in flight finish on shutdown."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import httpx

from .live import LOCAL_MODEL, ROOT, running_uvicorn
from .tenants import MARKER, mark_create_user


def _create_user_text(kb) -> str:
    return kb.store.get_chunks(["users_api:paths/~1users/post"])["users_api:paths/~1users/post"].text


def test_the_watcher_swaps_in_a_new_generation_and_the_old_one_still_answers(served_copy):
    from specrag.index.lock import IndexLock
    from specrag.index.workspace import update_index
    from specrag.serve.reload import IndexWatcher, served_generation
    from specrag.serve.tenancy import Tenants

    settings, specs, kbs = served_copy
    watcher = IndexWatcher(Tenants.local(kbs), interval_s=0.1)
    assert watcher.check() == [] and watcher.check() == []  # nothing changed: no swap
    old = kbs.all()[0]
    mark_create_user(specs)
    local, _ = update_index(settings, [specs], progress=False)
    assert MARKER not in _create_user_text(kbs.all()[0])  # not yet swapped
    with IndexLock(local.storage.data_dir, 0):  # a build holds the lock: the watcher waits for it
        assert watcher.check() == []
    assert watcher.check() == [old.kb_id] and watcher.swaps == 1
    new = kbs.all()[0]
    assert new is not old and served_generation(new) != served_generation(old)
    assert not (local.storage.data_dir / "local" / served_generation(old)).exists()  # the builder removed it
    assert MARKER in _create_user_text(new)
    assert MARKER not in _create_user_text(old)  # a request holding the old one finishes on it
    assert old.engine.retriever.retrieve("create a user")  # from its mapped (deleted) generation
    assert watcher.check() == []


def test_a_damaged_new_index_keeps_the_old_one_serving(served_copy, caplog):
    from specrag.index.manifest import manifest_path
    from specrag.serve.reload import IndexWatcher
    from specrag.serve.tenancy import Tenants

    settings, specs, kbs = served_copy
    watcher = IndexWatcher(Tenants.local(kbs), interval_s=0.1)
    old = kbs.all()[0]
    manifest_path(old.settings.storage.data_dir).write_text("{not json")
    assert watcher.check() == [] and kbs.all()[0] is old
    assert "keeps serving" in caplog.text
    assert watcher.check() == []  # said once per change, not on every pass


def test_reindex_while_clients_send_requests_over_loopback(served_copy):
    from specrag.serve.app import create_app

    settings, specs, kbs = served_copy
    kb_id = kbs.all()[0].kb_id
    statuses, seen = [], []  # (time, whether the answer showed the new summary)
    stop = threading.Event()

    async def clients(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            async def one(mode: str) -> None:
                while not stop.is_set():
                    try:
                        r = await http.post("/api/v1/retrieve/basic", json={
                            "kb_id": kb_id, "query": f"create a user {MARKER}", "mode": mode,
                            "similarity_threshold": 0})
                    except httpx.HTTPError as exc:  # a failed request is counted, never lost with its thread
                        statuses.append(type(exc).__name__)
                        continue
                    statuses.append(r.status_code)
                    if r.status_code == 200:
                        seen.append((time.monotonic(), MARKER in r.text))
            await asyncio.gather(*(one(m) for m in ("keyword", "vector", "hybrid", "keyword")))

    with running_uvicorn(create_app(kbs, reload_interval_s=0.2)) as url:
        load = threading.Thread(target=asyncio.run, args=(clients(url),))
        load.start()
        try:
            time.sleep(1.0)
            mark_create_user(specs)
            env = {"SPECRAG_EMBED_MODEL_PATH": str(LOCAL_MODEL), "SPECRAG_EMBED_MODEL": settings.embeddings.embed_model}
            done = subprocess.run([sys.executable, "-m", "specrag.cli", "index", str(specs), "--data-dir",
                                   str(settings.storage.data_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, **env})
            assert done.returncode == 0, done.stderr
            indexed = time.monotonic()
            deadline = indexed + 30
            while not any(new for _, new in seen[-4:]) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)  # more answers after the swap
        finally:
            stop.set()
            load.join(60)
    assert statuses and set(statuses) == {200}, f"{len(statuses)} requests, statuses {set(statuses)}"
    first_new = next(i for i, (_, new) in enumerate(seen) if new)
    assert not any(new for t, new in seen[:first_new])
    assert all(new for _, new in seen[first_new:])  # after the swap, only the new version
    assert seen[first_new][0] <= indexed + 30 and len(seen) - first_new >= 4


def test_requests_in_flight_finish_when_the_server_stops(demo_kbs):
    from fastapi import APIRouter
    from specrag.serve.app import create_app

    slow = APIRouter()

    @slow.get("/slow")
    async def slow_route() -> dict:
        await asyncio.sleep(1.0)
        return {"done": True}

    result = {}
    with running_uvicorn(create_app(demo_kbs, extra_routers=[slow], reload_interval_s=0.1)) as url:
        thread = threading.Thread(target=lambda: result.update(r=httpx.get(f"{url}/slow", timeout=10)))
        thread.start()
        time.sleep(0.3)
    thread.join(10)
    assert result["r"].status_code == 200 and result["r"].json() == {"done": True}
