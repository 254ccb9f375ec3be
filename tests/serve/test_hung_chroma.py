"""A replica whose Chroma server hangs (SIGSTOP: it keeps its port and accepts connections, and
never answers): the process stays live, the local index keeps serving, what needs the server fails
with one line within SPECRAG_CHROMA_TIMEOUT_S, and SIGCONT restores everything.

A real ``chroma run`` (tests/index/chroma_server.py), a corpus published on it, a replica app
pulled from it, served by a real uvicorn (live.py)."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import threading
import time

import httpx
import pytest
from index.chroma_server import (
    ChromaServer,  # tests/ is on sys.path (rootdir-relative packages)
)
from specrag.core.errors import ChromaUnavailableError
from specrag.index.workspace import (
    corpus_settings,
    synced_corpus_settings,
    update_index,
)
from specrag.serve.app import create_app
from specrag.serve.kbs import KnowledgeBases

from .live import DEMO_SPECS, running_uvicorn

TIMEOUT_S = 1.5  # SPECRAG_CHROMA_TIMEOUT_S of the replica
SLACK_S = 1.5  # the most a failing call may take beyond it here (a loaded 2-core machine)
HEALTHZ_P99_S = 0.1
QUERY = "How do I create a user?"


def _chunk_ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text[:500]
    body = response.json()
    return [c["id"] for key in ("primary_chunks", "signature_chunks", "referenced_chunks") for c in body[key]]


def _wait_for(what: str, check, within_s: float):
    deadline = time.monotonic() + within_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {within_s} s")
        time.sleep(0.05)


def _in_thread(call, within_s: float):
    """(result or exception, seconds taken) of ``call`` run in a daemon thread, or fails the test
    when it has not returned within ``within_s`` (the call may hang forever: the test does not)."""
    out: list = []

    def run():
        started = time.monotonic()
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            result = exc
        out.append((result, time.monotonic() - started))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within_s)
    if not out:
        pytest.fail(f"still waiting on the stopped Chroma server after {within_s} s")
    return out[0]


@pytest.fixture
def chroma(tmp_path):
    server = ChromaServer(tmp_path / "chroma").start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM until it runs again
    server.stop()


@pytest.mark.needs_embeddings  # a lexical index stores nothing in Chroma: there is no replica to pull
def test_a_stopped_chroma_server_delays_no_request_of_a_replica(tmp_path, chroma, make_demo_settings):
    specs = tmp_path / "specs"
    shutil.copytree(DEMO_SPECS, specs)
    base = make_demo_settings(tmp_path / "data").model_copy(update={
        "chroma_host": "127.0.0.1", "chroma_port": chroma.port, "chroma_timeout_s": TIMEOUT_S, "chroma_sync_s": 0})
    publisher = base.model_copy(update={"data_dir": tmp_path / "publisher"})
    update_index(publisher, [specs], progress=False)  # the build publishes the corpus on the server
    kbs = KnowledgeBases.open(base.model_copy(update={"data_dir": tmp_path / "replica"}))
    fresh = base.model_copy(update={"data_dir": tmp_path / "fresh"})  # a replica with no local index yet
    app = create_app(kbs)
    pid = chroma.proc.pid
    try:
        with running_uvicorn(app) as url, httpx.Client(base_url=url, timeout=TIMEOUT_S + 10) as http:
            before = _chunk_ids(http.post("/api/v1/context", json={"query": QUERY}))
            assert before

            os.kill(pid, signal.SIGSTOP)
            try:
                # every request starts a check of the server (chroma_sync_s=0); none waits for it
                started = time.monotonic()
                context = http.post("/api/v1/context", json={"query": QUERY})
                took = time.monotonic() - started
                assert _chunk_ids(context) == before
                assert took < TIMEOUT_S, f"a context request took {took:.2f} s while Chroma is stopped"

                latencies = []
                for i in range(100):
                    if i % 20 == 0:  # more requests that start checks, between the health probes
                        assert _chunk_ids(http.post("/api/v1/context", json={"query": QUERY})) == before
                    started = time.monotonic()
                    assert http.get("/healthz", timeout=2).json() == {"status": "ok"}
                    latencies.append(time.monotonic() - started)
                p50, p99 = statistics.median(latencies), statistics.quantiles(latencies, n=100, method="inclusive")[98]
                print(f"healthz while Chroma is stopped: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
                      f"max {max(latencies) * 1000:.1f} ms")
                assert p99 < HEALTHZ_P99_S, f"healthz p99 {p99 * 1000:.0f} ms while Chroma is stopped"

                # /readyz answers at once, and tells the truth once a check has timed out
                def unreachable():
                    started = time.monotonic()
                    ready = http.get("/readyz")
                    assert time.monotonic() - started < 0.5 and ready.status_code == 200
                    chroma_status = ready.json()["chroma"]
                    return chroma_status if chroma_status["reachable"] is False else None

                told = _wait_for("/readyz saying the Chroma server is unreachable", unreachable, TIMEOUT_S + 2 * SLACK_S)
                assert told["server"] == f"127.0.0.1:{chroma.port}" and "\n" not in told["error"]
                assert f"127.0.0.1:{chroma.port}" in told["error"] and f"no answer within {TIMEOUT_S:g} s" \
                    in told["error"]

                # what needs the server (a fresh replica's first query) fails with one line, in time
                error, took = _in_thread(lambda: synced_corpus_settings(fresh), TIMEOUT_S + 10)
                print(f"a query needing the stopped server: {took:.2f} s: {error}")
                assert isinstance(error, ChromaUnavailableError), error
                assert "\n" not in str(error) and f"127.0.0.1:{chroma.port}" in str(error)
                assert took < TIMEOUT_S + SLACK_S, f"the error came after {took:.2f} s"
            finally:
                os.kill(pid, signal.SIGCONT)

            # service restored: the next check reaches the server; the fresh replica pulls
            _wait_for("/readyz saying the Chroma server is reachable again",
                      lambda: http.get("/readyz").json()["chroma"]["reachable"] is True, 20)
            assert _chunk_ids(http.post("/api/v1/context", json={"query": QUERY})) == before
            assert http.get("/readyz").json()["chroma"]["error"] is None
            local, took = _in_thread(lambda: synced_corpus_settings(fresh), 30)
            assert not isinstance(local, Exception), local
            assert (local.storage.data_dir / "manifest.json").is_file()
    finally:
        os.kill(pid, signal.SIGCONT)
        kbs.close()


def test_a_server_client_times_out_on_a_stopped_server(tmp_path, chroma, make_demo_settings):
    """Each call of a ChunkStore's server client, opening it included, is bounded by chroma_timeout_s."""
    from specrag.index.collections import session_timeout
    from specrag.index.store import ChunkStore

    settings = make_demo_settings(tmp_path / "data").model_copy(update={
        "chroma_host": "127.0.0.1", "chroma_port": chroma.port, "chroma_timeout_s": TIMEOUT_S})
    local = corpus_settings(settings, [DEMO_SPECS])
    store = ChunkStore(local, None)
    opened = ChunkStore(local, None)
    try:
        assert session_timeout(opened.client) == TIMEOUT_S
        os.kill(chroma.proc.pid, signal.SIGSTOP)
        try:
            for what, call in {"opening a client": lambda: store.client,
                               "a call on an open client": lambda: opened.chroma}.items():
                error, took = _in_thread(call, TIMEOUT_S + 10)
                assert isinstance(error, ChromaUnavailableError), (what, error)
                assert "\n" not in str(error) and f"127.0.0.1:{chroma.port}" in str(error), what
                assert "no answer within" in str(error) and took < TIMEOUT_S + SLACK_S, (what, took)
        finally:
            os.kill(chroma.proc.pid, signal.SIGCONT)
        assert opened.chroma.count() == 0  # the same client works once the server answers again
    finally:
        store.close()
        opened.close()
