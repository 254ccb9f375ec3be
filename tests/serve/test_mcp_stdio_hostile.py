"""``specrag mcp`` over stdio answers every request, hostile ones included: raw JSON-RPC lines
written to a real subprocess's stdin, each reply awaited with a timeout (a hang fails the test
instead of stalling it)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPLY_S = 60.0
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class StdioServer:
    def __init__(self, data_dir: Path):
        env = {**os.environ, "SPECRAG_EMBED_MODEL": "none", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "specrag.cli", "mcp", "--corpus", str(ROOT / "examples" /
                                      "specs"), "--data-dir", str(data_dir)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.buffer = b""

    def send(self, line: bytes | str | dict) -> None:
        raw = json.dumps(line) if isinstance(line, dict) else line
        self.proc.stdin.write((raw.encode() if isinstance(raw, str) else raw) + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = REPLY_S) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                raise AssertionError(f"no reply within {timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise AssertionError(f"the server exited ({self.proc.poll()})")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served = StdioServer(tmp_path_factory.mktemp("mcp-stdio"))
    served.send(INIT)
    assert served.reply(timeout=180)["id"] == 1
    served.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield served
    served.close()


def _call(request_id, arguments: str) -> str:
    return ('{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"get_context","arguments":%s}}'
            % (json.dumps(request_id), arguments))


HOSTILE = {
    "lone-surrogate-escape": (2, _call(2, '{"query":"\\ud800 user"}')),
    "deep-params": (3, _call(3, '{"query":"x","kb_id":' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "}")),
    "deep-params-id-last": ("last", '{"jsonrpc":"2.0","method":"tools/call","params":' + "[" * 50_000 + "]" * 50_000
                            + ',"id":"last"}'),
    "not-json": (None, "this is not json"),
    "truncated-json": (4, '{"jsonrpc":"2.0","id":4,"method":"tools/list"'),
    "no-method": (5, '{"jsonrpc":"2.0","id":5,"params":{}}'),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_every_hostile_request_gets_an_error_reply(server, case):
    request_id, line = HOSTILE[case]
    server.send(line)
    reply = server.reply()
    assert reply["id"] == request_id and reply["error"]["code"] in (-32700, -32600), reply
    server.send({"jsonrpc": "2.0", "id": 100, "method": "tools/list"})  # and the server goes on
    assert server.reply()["result"]["tools"]


def test_raw_surrogate_bytes_are_answered_too(server):
    server.send(b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"get_context","arguments":'
                b'{"query":"\xed\xa0\x80 create a user"}}}')
    reply = server.reply()
    assert reply["id"] == 6 and ("result" in reply or "error" in reply)
