"""A real Chroma server (``chroma run``) on 127.0.0.1 for tests: started, killed, restarted on its path."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMA_BIN = Path(sys.executable).parent / "chroma"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChromaServer:
    def __init__(self, path: Path):
        if not CHROMA_BIN.exists():
            pytest.skip(f"no `chroma` CLI at {CHROMA_BIN}: cannot start a Chroma server")
        self.path, self.port = path, free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ChromaServer":
        self.proc = subprocess.Popen([str(CHROMA_BIN), "run", "--path", str(self.path), "--host", "127.0.0.1",
                                      "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v2/heartbeat", timeout=1)
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    pytest.fail("chroma server did not come up")
                time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: the server dies as in a crash, mid-request."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
