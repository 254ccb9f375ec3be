"""The service in a real uvicorn on 127.0.0.1, and `specrag serve` as a user starts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import pytest

from .live import DEMO_SPECS, LOCAL_MODEL, ROOT, free_port, running_uvicorn


class TestRealUvicorn:
    @pytest.fixture(scope="class")
    def base_url(self, demo_kbs):
        from specrag.serve.app import create_app

        with running_uvicorn(create_app(demo_kbs)) as url:
            yield url

    def test_basic_retrieval_over_loopback(self, base_url, kb_id):
        r = httpx.post(f"{base_url}/api/v1/retrieve/basic", json={"kb_id": kb_id, "query": "create a user"})
        assert r.status_code == 200 and r.json()["results"][0]["chunk_id"] == "users_api:paths/~1users/post"
        assert r.json()["request_id"] == r.headers["x-request-id"]

    def test_concurrent_requests_all_answer(self, base_url, kb_id):
        import asyncio

        async def many():
            async with httpx.AsyncClient(base_url=base_url) as client:
                return await asyncio.gather(*(client.post("/api/v1/retrieve/basic", json={
                    "kb_id": kb_id, "query": q, "mode": "hybrid"}) for q in ["list pets", "place an order",
                                                                          "delete a user", "find pets by tag"] * 5))

        responses = asyncio.run(many())
        assert [r.status_code for r in responses] == [200] * 20
        assert len({r.headers["x-request-id"] for r in responses}) == 20

    def test_errors_and_metrics_over_loopback(self, base_url, kb_id):
        assert httpx.post(f"{base_url}/api/v1/retrieve/basic", json={"kb_id": kb_id, "query": "x",
                                                                      "top_k": 1000}).status_code == 422
        metrics = httpx.get(f"{base_url}/metrics")
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
        assert 'specrag_http_requests_total{method="POST",route="/api/v1/retrieve/basic",status="422"}' in metrics.text

    def test_the_load_generator_times_real_requests_and_counts_failures(self, base_url, kb_id):
        import asyncio

        from specrag.bench.loadtest import LoadSpec, run_load

        spec = LoadSpec(url=base_url, kb_id=kb_id, queries=["list pets", "create a user"], clients=2, duration_s=1.0,
                        warmup_s=0.2, mode="hybrid", top_k=3)
        report = asyncio.run(run_load(spec))
        assert report.requests > 0 and report.errors == 0 and 0 < report.mean_results <= 3
        assert 0 < report.p50_ms <= report.p95_ms <= report.max_ms and report.client_cpu_s > 0
        failing = asyncio.run(run_load(spec.model_copy(update={"kb_id": "nope", "duration_s": 0.5})))
        assert failing.requests > 0 and failing.errors == failing.requests
        assert failing.error_samples[0].startswith("HTTP 404")


@contextmanager
def specrag_serve(tmp_path, *extra: str):
    """``specrag serve --corpus examples/specs ARGS`` on a free port; yields its URL once /readyz answers."""
    port = free_port()
    env = dict(os.environ, SPECRAG_EMBED_MODEL_PATH=str(LOCAL_MODEL) if (LOCAL_MODEL / "model.onnx").is_file() else "",
               SPECRAG_EMBED_MODEL="sentence-transformers/all-MiniLM-L6-v2" if (LOCAL_MODEL / "model.onnx").is_file()
               else "none", OPENAI_API_KEY="", SPECRAG_LLM_BASE_URL="")
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "specrag.cli", "serve", "--corpus", str(DEMO_SPECS), "--port",
                             str(port), "--data-dir", str(tmp_path / "data"), *extra], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=log, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-2000:]
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _log_lines(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines() if line.startswith("{")]


def test_specrag_serve_binds_to_loopback_and_answers(tmp_path):
    with specrag_serve(tmp_path) as url:
        r = httpx.post(f"{url}/api/v1/context", json={"query": "How do I create a user?"})
        assert r.status_code == 200 and r.json()["primary_chunks"][0]["id"] == "users_api:paths/~1users/post"
    lines = _log_lines(tmp_path)
    assert lines and all("request_id" in line for line in lines)
    assert any(line.get("event") == "context" and line["request_id"] for line in lines)


def test_worker_processes_share_the_port_and_their_metrics(tmp_path):
    with specrag_serve(tmp_path, "--workers", "2") as url:
        kb_id = httpx.get(f"{url}/api/v1/kbs").json()[0]["kb_id"]
        with httpx.Client(base_url=url) as client:  # one connection after another: both workers get some
            responses = [httpx.post(f"{url}/api/v1/retrieve/basic", json={"kb_id": kb_id, "query": "create a user"})
                         for _ in range(12)]
            scrapes = [client.get("/metrics").text for _ in range(4)] + [httpx.get(f"{url}/metrics").text
                                                                          for _ in range(4)]
    assert [r.status_code for r in responses] == [200] * 12
    assert len({r.headers["x-request-id"] for r in responses}) == 12
    counted = 'specrag_requests_total{endpoint="retrieve.basic",mode="vector",status="ok"} 12.0'
    assert all(counted in text for text in scrapes)  # every scrape, from either worker, sums both
    lines = _log_lines(tmp_path)
    pids = {line["message"] for line in lines if line["message"].startswith("Started server process")}
    assert len(pids) == 2
    answered = [line for line in lines if line.get("event") == "retrieve.basic"]
    assert {line["request_id"] for line in answered} == {r.headers["x-request-id"] for r in responses}
