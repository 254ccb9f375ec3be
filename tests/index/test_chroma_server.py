"""The scale-out path: a real Chroma server (``chroma run``) reached through HttpClient."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.index import ChunkStore, IndexBuilder

from .fleet import mini_fleet

CHROMA_BIN = Path(sys.executable).parent / "chroma"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path):
    if not CHROMA_BIN.exists():
        pytest.skip(f"no `chroma` CLI at {CHROMA_BIN}: cannot start a Chroma server")
    port = _free_port()
    proc = subprocess.Popen([str(CHROMA_BIN), "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("chroma server did not come up")
            time.sleep(0.2)
    yield port
    proc.terminate()
    proc.wait(timeout=30)


def test_build_and_query_through_a_chroma_server(chroma_server, tmp_path, settings, embed_model):
    settings = settings.model_copy(update={"chroma_host": "127.0.0.1", "chroma_port": chroma_server})
    store = ChunkStore.open(settings, embed_model=embed_model)
    report = IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    assert report.chunks_embedded == 11 and report.search_mode == "hybrid"
    assert any((tmp_path / "server").iterdir()) and not (settings.data_dir / "chroma").exists()
    hits = store.vector_search("dog or cat", ["pets", "weather"], None, 5)
    assert hits[0].node.node_id == "pets:components/schemas/Pet"
    assert {h.node.metadata["source_file"] for h in hits} <= {"pets", "weather"}
    assert set(store.get_chunks(["users:components/schemas/User"])) == {"users:components/schemas/User"}
    report = IndexBuilder(store, settings).build(mini_fleet()[:2], progress=False)
    assert report.apis_removed == ["weather"]
    assert store.vectors.client.get(where={"source_file": "weather"})["ids"] == []
    store.close()
