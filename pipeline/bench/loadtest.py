"""``specrag bench-serve``: closed-loop load on the HTTP service over loopback.

``clients`` concurrent clients each send basic retrievals back to back for ``duration_s``,
cycling through the labeled queries (each client starts at its own offset). Without a URL the
service is started here, as ``specrag serve`` in a child process on 127.0.0.1, and stopped after.
Reports latency percentiles, errors and throughput, plus the machine's load average before and
after (the machine is shared: the numbers mean little without it). With ``hot``, one spec is
changed and re-indexed in the middle of the run (``hot_reindex.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, Field
from specrag.bench.hot_reindex import HotReindex, ReindexReport, probe, reindex
from specrag.core.errors import SpecragError
from specrag.core.latency import Latency

READY_TIMEOUT_S = 300


class ServerFailed(SpecragError):
    """The service started for a load run exited or never became ready."""


class LoadSpec(BaseModel):
    url: str
    kb_id: str
    queries: list[str]
    clients: int = Field(20, ge=1)
    duration_s: float = Field(60.0, gt=0)
    warmup_s: float = Field(5.0, ge=0, description="load before timing starts (connections, caches, page cache)")
    mode: str = "vector"
    top_k: int = 10
    hot: HotReindex | None = Field(None, description="re-index a changed spec during the run")


class LoadReport(BaseModel):
    requests: int
    errors: int
    error_samples: list[str] = Field(default_factory=list)
    degraded: int = Field(0, description="answers that came a lesser way (e.g. keyword instead of vector search)")
    index_search_mode: str = Field(description="the knowledge base's search mode: hybrid, or lexical without vectors")
    throughput_rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    mean_results: float
    clients: int
    duration_s: float
    mode: str
    distinct_queries: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    cpus: int
    client_cpu_s: float = Field(0.0, description="CPU time of this load generator during the run: it shares the "
                                "machine's cores with the service")
    reindex: ReindexReport | None = None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _client(session, spec: LoadSpec, offset: int, stop_at: float, timed_from: float, out: dict) -> None:
    url = spec.url + "/api/v1/retrieve/basic"
    i = offset
    while (now := time.perf_counter()) < stop_at:
        body = {"kb_id": spec.kb_id, "query": spec.queries[i % len(spec.queries)], "mode": spec.mode,
                "top_k": spec.top_k}
        i += 1
        try:
            async with session.post(url, json=body) as r:
                ok, text = r.status == 200, await r.text()
            detail = f"HTTP {r.status}: {text[:200]}"
            answer = json.loads(text) if ok else {}
            results, degraded = len(answer.get("results", [])), bool(answer.get("degraded"))
        except Exception as exc:  # noqa: BLE001 - every failure is counted and sampled
            ok, detail, results, degraded = False, f"{type(exc).__name__}: {exc}", 0, False
        if now >= timed_from:
            out["latencies"].append((time.perf_counter() - now) * 1000)
            out["results"].append(results)
            out["degraded"] += [degraded] if degraded else []
            if not ok:
                out["errors"].append(detail)


async def run_load(spec: LoadSpec) -> LoadReport:
    """The load clients share one aiohttp session with a keep-alive connection each: the client
    runs on the same cores as the service, and httpx's AsyncClient spent three times the CPU per
    request (3.1 vs 1.0 ms, ``client_cpu_s``), CPU the service under test then lacked."""
    import aiohttp
    import httpx

    load_before, cpu_before = os.getloadavg(), time.process_time()
    out: dict[str, list] = {"latencies": [], "results": [], "errors": [], "degraded": []}
    limits = httpx.Limits(max_connections=spec.clients, max_keepalive_connections=spec.clients)
    connector = aiohttp.TCPConnector(limit=spec.clients, force_close=False)
    async with httpx.AsyncClient(base_url=spec.url, limits=limits, timeout=60) as http, \
            aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        kbs = (await http.get("/api/v1/kbs")).json()
        search_mode = next((k["search_mode"] for k in kbs if spec.kb_id in (k["kb_id"], k["alias"])), "unknown")
        start = time.perf_counter()
        timed_from, stop_at = start + spec.warmup_s, start + spec.warmup_s + spec.duration_s
        hot = ReindexReport(spec=spec.hot.spec.name, operation="", started_s=0.0) if spec.hot else None
        extra = [reindex(spec.hot, hot, timed_from), probe(http, spec.kb_id, spec.hot, hot, timed_from, stop_at)] \
            if spec.hot else []
        await asyncio.gather(*(_client(session, spec, c * max(1, len(spec.queries) // spec.clients), stop_at,
                                       timed_from, out) for c in range(spec.clients)), *extra)
    latencies = out["latencies"]
    latency = Latency.of(latencies)
    return LoadReport(requests=len(latencies), errors=len(out["errors"]), error_samples=out["errors"][:5],
                      degraded=len(out["degraded"]), index_search_mode=search_mode,
                      throughput_rps=round(len(latencies) / spec.duration_s, 1), p50_ms=latency.p50,
                      p95_ms=latency.p95, p99_ms=latency.p99, max_ms=latency.max,
                      mean_results=round(sum(out["results"]) / max(1, len(out["results"])), 2), clients=spec.clients,
                      duration_s=spec.duration_s, mode=spec.mode, distinct_queries=len(set(spec.queries)),
                      load_before=load_before, load_after=os.getloadavg(), cpus=os.cpu_count() or 0,
                      client_cpu_s=round(time.process_time() - cpu_before, 2), reindex=hot)


@contextmanager
def served(args: list[str], port: int) -> Iterator[str]:
    """``specrag serve ARGS --port PORT`` in a child process; yields its URL once /readyz answers 200.
    Its log goes to a temporary file (a pipe nobody reads would fill and stall the server)."""
    import tempfile

    import httpx

    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "specrag.cli", "serve", *args, "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=log, text=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise ServerFailed("specrag serve exited: " + " | ".join(log.read().strip().splitlines()[-3:]))
                try:
                    if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerFailed(f"specrag serve not ready after {READY_TIMEOUT_S} s")
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def load_queries(paths: list[Path]) -> list[str]:
    queries = [json.loads(line)["query"] for path in paths for line in path.read_text().splitlines() if line.strip()]
    if not queries:
        raise ValueError("no queries in " + ", ".join(map(str, paths)))
    return queries


def format_report(report: LoadReport) -> str:
    return "\n".join([
        f"basic retrieval ({report.mode}), {report.clients} clients, {report.duration_s:.0f} s, "
        f"{report.distinct_queries} distinct queries",
        f"requests {report.requests}   errors {report.errors}   degraded {report.degraded}   "
        f"throughput {report.throughput_rps} req/s   (index search mode: {report.index_search_mode})",
        f"latency p50 {report.p50_ms} ms   p95 {report.p95_ms} ms   p99 {report.p99_ms} ms   max {report.max_ms} ms",
        f"results per answer {report.mean_results}",
        f"machine: {report.cpus} cpus, load average before {report.load_before[0]:.2f}, "
        f"after {report.load_after[0]:.2f}; load generator CPU {report.client_cpu_s} s "
        f"({1000 * report.client_cpu_s / max(1, report.requests):.2f} ms per request)",
        *(f"  error: {e}" for e in report.error_samples),
        *([_format_reindex(report.reindex)] if report.reindex else []),
    ])


def _format_reindex(r: ReindexReport) -> str:
    return (f"hot re-index of {r.spec} ({r.operation}): changed at {r.started_s} s, `specrag index` done at "
            f"{r.indexed_s} s (exit {r.index_exit}), new version first seen at {r.first_seen_s} s "
            f"({r.seen_after_index_s} s after the index), {r.stale_after_seen} stale answers after that, "
            f"{r.probes} probes, {r.probe_errors} probe errors")
