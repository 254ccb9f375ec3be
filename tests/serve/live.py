"""A real uvicorn on 127.0.0.1 (a free port), in a thread of the test process."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path

from specrag.bench.loadtest import free_port

__all__ = ["DEMO_SPECS", "LOCAL_MODEL", "ROOT", "free_port", "running_uvicorn"]

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPECS = ROOT / "examples" / "specs"
LOCAL_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"


@contextmanager
def running_uvicorn(app, timeout_s: float = 20.0, access_log: bool = False):
    """Yields the base URL; the server is stopped (and its thread joined) on exit: as on SIGTERM,
    requests in flight finish first."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=access_log,
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
