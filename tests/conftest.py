"""Shared fixtures: the demo corpus indexed once per session in a temp folder (real Chroma,
real ONNX model from ../shared/models when present, lexical-only otherwise)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO_SPECS = ROOT / "examples" / "specs"
SHARED = ROOT.parent / "shared"
LOCAL_MODEL = SHARED / "models" / "all-MiniLM-L6-v2-onnx"


def pytest_collection_modifyitems(config, items):
    """Without the local model the demo index is lexical-only: tests of vector rankings skip, saying why."""
    if (LOCAL_MODEL / "model.onnx").is_file():
        return
    skip = pytest.mark.skip(reason=f"no embedding model at {LOCAL_MODEL}: these tests assert vector rankings")
    for item in items:
        if item.get_closest_marker("needs_embeddings"):
            item.add_marker(skip)


def demo_settings(data_dir: Path):
    from specrag.core.settings import Settings

    model = LOCAL_MODEL if (LOCAL_MODEL / "model.onnx").is_file() else None
    return Settings(data_dir=data_dir, embed_model_path=model, embed_model="sentence-transformers/all-MiniLM-L6-v2"
                    if model else "none", chroma_host=None, openai_api_key=None, llm_base_url=None)


@pytest.fixture(scope="session")
def make_demo_settings():
    """``demo_settings`` for tests that index into folders of their own."""
    return demo_settings


@pytest.fixture
def record_events():
    """``with record_events() as recorder:`` the events LlamaIndex's root dispatcher sends inside
    the block land in ``recorder.events`` (a real event handler, registered for the block only)."""
    from contextlib import contextmanager

    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    class Recorder(BaseEventHandler):
        events: list = []

        @classmethod
        def class_name(cls) -> str:
            return "Recorder"

        def handle(self, event, **kwargs) -> None:
            self.events.append(event)

    @contextmanager
    def recording():
        root, handler = get_dispatcher(), Recorder(events=[])
        root.add_event_handler(handler)
        try:
            yield handler
        finally:
            root.event_handlers.remove(handler)

    return recording


@pytest.fixture
def anyio_backend():
    """Async tests (``@pytest.mark.anyio``) run on asyncio, the loop servers use."""
    return "asyncio"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After an async test, collect its garbage while no loop runs: the OpenAI SDK closes a dropped
    async client by scheduling the close on whatever loop is running, which would be the next
    test's, with the transport of this test's closed loop (an 'Event loop is closed' error there)."""
    result = yield
    if item.get_closest_marker("anyio"):
        gc.collect()
    return result


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory):
    """(corpus settings, store) for the demo corpus, built once."""
    from specrag.index.store import ChunkStore
    from specrag.index.workspace import corpus_settings, update_index

    settings = demo_settings(tmp_path_factory.mktemp("demo-index"))
    store = ChunkStore.open(corpus_settings(settings, [DEMO_SPECS]))
    local, _ = update_index(settings, [DEMO_SPECS], progress=False, store=store)
    yield local, store
    store.close()


@pytest.fixture(scope="session")
def demo_engine(demo_index):
    from specrag.engine.factory import build_engine

    local, store = demo_index
    return build_engine(local, store)


@pytest.fixture
def under_hash_seeds():
    """Runs a Python script in fresh processes, one per PYTHONHASHSEED, from the project root, and
    returns the set of their outputs: one output means the result does not follow set order."""
    import os
    import subprocess
    import sys

    def run(script: str, seeds=range(4)) -> set[str]:
        return {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT,
                               env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in seeds}
    return run


@pytest.fixture(autouse=True)
def fresh_fallback_notices():
    """Each test hears an LLM failure told again: the notice is once per process."""
    from specrag.core.fallbacks import NOTICES

    NOTICES.forget()
    yield
    NOTICES.forget()


@pytest.fixture(autouse=True)
def fresh_caches():
    """After each test, every process-wide cache of the package is emptied (``specrag.core.caches``):
    no test sees what an earlier one left there. ~20 us a test, plus the refills (under a ms each)."""
    yield
    from specrag.core import caches

    caches.reset_all()
