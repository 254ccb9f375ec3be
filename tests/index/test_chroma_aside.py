"""A re-index opens its embedded Chroma collection in a process of its own (chroma_aside.py): the
rows it writes are one per distinct embed text of the served generation, as an in-process run
writes them; its failures are the same one-line errors; and the build lets go of the model before
its commit.

The child is forked only from a process that has not loaded Chroma (one forked after a client
started hangs): this test process has, so the runs that use one are fresh interpreters, as a
``specrag index`` is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from specrag.bench.reindex import ReindexRequest, ReindexResult
from specrag.index import ChunkStore, IndexBuilder
from specrag.index.chroma_aside import ChromaAside
from specrag.index.collections import CHROMA_DATABASE
from specrag.index.embeddings import ReleasedEmbedder
from specrag.index.vector_reuse import hash_hex
from specrag.index.workspace import corpus_settings, update_index

from .conftest import MODEL_DIR
from .fleet import mini_fleet, pets_api
from .test_reindex import corpus, small  # noqa: F401 - the corpus fixture

linux_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Chroma process needs fork (Linux)")


def _reindex(settings, corpus) -> ReindexResult:
    """``update_index`` in a fresh interpreter (the bench's re-index child)."""
    request = ReindexRequest(settings=settings.model_dump(mode="json"), paths=[str(corpus)])
    done = subprocess.run([sys.executable, "-m", "specrag.bench.reindex"], input=request.model_dump_json(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return ReindexResult.model_validate_json(done.stdout.strip().splitlines()[-1])


def _edit(corpus) -> None:
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace("List all", "Show every"))


def _rows_match_the_generation(settings, corpus) -> None:
    store = ChunkStore.open(corpus_settings(settings, [corpus]), embed_model=None)
    try:
        used = {hash_hex(int(h)) for h in np.unique(store.local.pack.arrays["embed_hash"])}
        assert set(store.chroma.get(include=[])["ids"]) == used
    finally:
        store.close()


def test_this_process_forks_no_chroma_process_once_it_loaded_chroma():
    assert "chromadb" in sys.modules and not ChromaAside.available()


@linux_fork
def test_a_reindex_writes_chroma_from_a_process_of_its_own(settings, corpus, embed_model):  # skips without the model
    update_index(settings, [corpus], progress=False)
    _edit(corpus)
    result = _reindex(settings, corpus)
    assert result.apis_updated == ["weather"] and result.chunks_embedded == 1
    assert result.chroma_rss_mb is not None and result.peak_rss_mb > result.chroma_rss_mb > 0
    _rows_match_the_generation(settings, corpus)


@linux_fork
def test_a_run_with_nothing_to_write_stops_its_chroma_process_unused(settings, corpus, embed_model):
    update_index(settings, [corpus], progress=False)
    result = _reindex(settings, corpus)
    assert result.apis_updated == [] and result.chroma_rss_mb is None
    _rows_match_the_generation(settings, corpus)


@linux_fork
def test_a_chroma_store_that_cannot_be_opened_is_one_line_from_its_process(settings, corpus, embed_model):
    local, _ = update_index(settings, [corpus], progress=False)
    (local.storage.data_dir / "chroma" / CHROMA_DATABASE).write_bytes(b"not a database" * 100)
    _edit(corpus)
    done = subprocess.run([sys.executable, "-m", "specrag.cli", "index", str(corpus), "--data-dir",
                           str(settings.storage.data_dir)], capture_output=True, text=True, timeout=300, check=False,
                          env={"SPECRAG_EMBED_MODEL_PATH": str(MODEL_DIR), "PATH": "", "HOME": str(corpus)})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("specrag: error: the Chroma store in ") and " cannot be opened (" in last, done.stderr


@linux_fork
def test_the_client_opens_in_process_once_the_chroma_process_is_closed(settings, embed_model):
    """Calls that are not the collection's (listing, dropping it for a new model) close the
    process first: one process writes the store at a time."""
    store = ChunkStore.open(settings, embed_model=embed_model)
    IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    rows = store.chroma.count()
    store.close()
    code = textwrap.dedent(f"""
        import json, multiprocessing
        from specrag.core.settings import Settings
        from specrag.index import ChunkStore
        settings = Settings.model_validate_json({settings.model_dump_json()!r})
        store = ChunkStore.open(settings, chroma_aside=True)
        seen = [store.chroma.count(), store._client is None, len(multiprocessing.active_children())]
        seen += [bool(store.client.list_collections()), store._aside is None, store.chroma.count(),
                 len(multiprocessing.active_children())]
        store.close()
        print(json.dumps(seen))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen[:3] == [rows, True, 1]  # counted by the child, no client here
    assert seen[3:] == [True, True, rows, 0]  # then in process, the child gone


def test_a_build_that_owns_its_store_lets_go_of_the_model_before_the_commit(settings, embed_model):
    store = ChunkStore.open(settings, embed_model=embed_model)
    IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    model_id = store.embedder.model_id
    fleet = [a for a in mini_fleet() if a.api.file_id != "pets"] + [pets_api("2")]
    report = IndexBuilder(store, settings, release_model=True).build(fleet, progress=False)
    assert report.apis_updated == ["pets"] and report.search_mode == "hybrid"
    assert isinstance(store.embedder, ReleasedEmbedder) and store.embedder.model_id == model_id
    with pytest.raises(RuntimeError, match="was released"):
        store.embedder.embed_documents(["a text"])
    store.close()


@linux_fork
def test_the_chroma_process_dies_with_a_killed_run(settings, embed_model):
    """A ``kill -9`` of the run ends its Chroma process too: it holds the index lock's file (inherited)."""
    store = ChunkStore.open(settings, embed_model=embed_model)
    IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    store.close()
    code = textwrap.dedent(f"""
        import sys, time
        from specrag.core.settings import Settings
        from specrag.index import ChunkStore
        store = ChunkStore.open(Settings.model_validate_json({settings.model_dump_json()!r}), chroma_aside=True)
        print(store._aside._process.pid, flush=True)
        time.sleep(300)
    """)
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(run.stdout.readline())
    os.kill(run.pid, signal.SIGKILL)
    run.wait(30)
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited (its parent, gone, never waited for it)
