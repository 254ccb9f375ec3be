"""Keys over real sockets: the MCP server over streamable HTTP, the logs of a real uvicorn (access
log on) and of `specrag serve` as a user starts it, and the loopback-only rule without keys."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import time

import httpx
import pytest

from .live import DEMO_SPECS, LOCAL_MODEL, ROOT, free_port, running_uvicorn
from .tenants import KEYS, MARKER, auth

SECRETS = list(KEYS.values())


def _call_get_operation(url: str, headers: dict) -> dict:
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def session() -> dict:
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        async with Client(transport) as client:
            result = await client.call_tool("get_operation", {"api": "users_api", "operation": "createUser"})
            return result.structured_content

    return anyio.run(session)


@pytest.fixture(scope="module")
def mcp_url(tenant_world):
    from specrag.serve.graph_wiring import mcp_tools
    from specrag.serve.mcp_http import streamable_http_app
    from specrag.serve.mcp_server import create_mcp_server

    tenants = tenant_world[0]
    app = streamable_http_app(create_mcp_server(tenants, **mcp_tools()), tenants, "127.0.0.1")
    with running_uvicorn(app, access_log=True) as url:
        yield f"{url}/mcp"


def test_mcp_over_streamable_http_needs_a_key_and_answers_from_its_tenant(mcp_url):
    assert httpx.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401
    assert httpx.post(mcp_url, json={}, headers={"X-API-Key": "wrong"}).status_code == 401
    beta = _call_get_operation(mcp_url, auth("beta"))
    acme = _call_get_operation(mcp_url, {"X-API-Key": KEYS["acme"]})
    assert MARKER in beta["summary"] and MARKER not in acme["summary"]


def test_no_key_in_any_log_line_of_a_real_server(tenant_world, mcp_url, caplog):
    from specrag.serve.app import create_app
    from specrag.serve.graph_wiring import routers
    from specrag.serve.logs import json_handler

    stream = io.StringIO()
    handler = json_handler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    caplog.set_level(logging.DEBUG)
    kb = tenant_world[1]
    try:
        with running_uvicorn(create_app(tenant_world[0], extra_routers=routers()), access_log=True) as url:
            for key in SECRETS:
                for headers in ({"Authorization": f"Bearer {key}"}, {"X-API-Key": key}):
                    assert httpx.post(f"{url}/api/v1/retrieve/basic", json={"kb_id": kb, "query": "create a user"},
                                      headers=headers).status_code == 200
                    assert httpx.post(f"{url}/api/v1/retrieve/basic", json={"kb_id": "nope", "query": "x"},
                                      headers=headers).status_code == 403
                    assert httpx.post(f"{url}/api/v1/retrieve/basic", json={"kb_id": kb, "query": "x", "top_k": 0},
                                      headers=headers).status_code == 422
                    assert httpx.get(f"{url}/api/v1/apis/nope/schemas/x", headers=headers).status_code == 404
                assert httpx.get(f"{url}/api/v1/kbs", headers={"X-API-Key": key + "x"}).status_code == 401
            _call_get_operation(mcp_url, auth("acme"))
    finally:
        root.removeHandler(handler)
    logged = caplog.text + stream.getvalue() + " ".join(repr(r.args) for r in caplog.records)
    assert "uvicorn.access" in {r.name for r in caplog.records}  # the access log was on and captured
    assert "http.request" in stream.getvalue()
    for secret in SECRETS:
        assert secret not in logged


def _env(**extra) -> dict:
    model = (LOCAL_MODEL / "model.onnx").is_file()
    return dict(os.environ, SPECRAG_EMBED_MODEL_PATH=str(LOCAL_MODEL) if model else "", OPENAI_API_KEY="",
                SPECRAG_EMBED_MODEL="sentence-transformers/all-MiniLM-L6-v2" if model else "none",
                SPECRAG_LLM_BASE_URL="", **extra)


def test_specrag_serve_with_keys_asks_for_them_and_never_logs_them(tmp_path):
    port, url = free_port(), None
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "specrag.cli", "serve", "--corpus", str(DEMO_SPECS), "--port",
                             str(port), "--data-dir", str(tmp_path / "data"), "--tenant", "acme"], cwd=ROOT,
                            env=_env(SPECRAG_API_KEYS=f"acme:{KEYS['acme']}"), stdout=subprocess.DEVNULL,
                            stderr=log, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        assert httpx.get(f"{url}/api/v1/kbs").status_code == 401
        kbs = httpx.get(f"{url}/api/v1/kbs", headers=auth("acme"))
        assert kbs.status_code == 200 and len(kbs.json()) == 1
        assert httpx.get(f"{url}/api/v1/kbs", headers=auth("beta")).status_code == 401  # beta has no key here
    finally:
        proc.terminate()
        proc.wait(timeout=60)  # uvicorn shuts down, then re-raises SIGTERM: the exit status is -15
    log.seek(0)
    text = log.read()
    assert "Finished server process" in text  # SIGTERM: a graceful shutdown
    assert "http.request" in text and KEYS["acme"] not in text and KEYS["beta"] not in text


def test_without_keys_serve_refuses_a_non_loopback_address(tmp_path):
    done = subprocess.run([sys.executable, "-m", "specrag.cli", "serve", "--host", "0.0.0.0", "--data-dir",
                           str(tmp_path)], cwd=ROOT, env=_env(SPECRAG_API_KEYS="", SPECRAG_API_KEYS_FILE=""),
                          capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1
    assert "not a loopback address" in lines[0] and "SPECRAG_API_KEYS_FILE" in lines[0]


def test_is_loopback():
    from specrag.cli.serve import is_loopback

    assert all(map(is_loopback, ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.4", "example.com", "::"]))
