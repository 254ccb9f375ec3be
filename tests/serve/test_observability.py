"""/metrics after a few requests, a request_id on every log line of a request (threads included),
and the span tree of a request exported to OpenTelemetry."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re

import pytest

pytestmark = pytest.mark.anyio
BASIC = "/api/v1/retrieve/basic"


def _samples(text: str, name: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(rf"^{name}(\{{.*\}}|) (\S+)$", text, re.M)}


async def test_metrics_count_requests_and_observe_latencies(client, kb_id):
    for mode in ("vector", "keyword", "hybrid"):
        await client.post(BASIC, json={"kb_id": kb_id, "query": "create a user", "mode": mode})
    await client.post(BASIC, json={"kb_id": "nope", "query": "create a user"})
    await client.post("/api/v1/context", json={"query": "How do I create a user?"})
    text = (await client.get("/metrics")).text
    requests = _samples(text, "specrag_requests_total")
    assert requests['{endpoint="retrieve.basic",mode="vector",status="ok"}'] == 1
    assert requests['{endpoint="retrieve.basic",mode="keyword",status="ok"}'] == 1
    assert requests['{endpoint="retrieve.basic",mode="vector",status="client_error"}'] == 1
    assert requests['{endpoint="context",mode="context",status="ok"}'] == 1
    for histogram in ("specrag_latency_seconds", "specrag_tokens_used", "specrag_steps", "specrag_results",
                      "specrag_stage_latency_seconds"):
        assert _samples(text, histogram + "_count"), histogram
    assert _samples(text, "specrag_latency_seconds_count")['{mode="hybrid",reasoning_effort="none"}'] == 1
    assert _samples(text, "specrag_results_count")[""] == 4  # the four that succeeded
    stages = _samples(text, "specrag_stage_latency_seconds_count")
    for stage in ("select", "expand", "search", "refs", "HybridRetriever.retrieve", "BasicRetrieval.run"):
        assert any(f'stage="{stage}"' in labels for labels in stages), stage
    assert "# TYPE specrag_truncated_total counter" in text
    labels = " ".join(re.findall(r"\{[^}]*\}", text))
    assert "tenant" not in labels and "create a user" not in labels and kb_id not in labels


@pytest.mark.parametrize("queued", [False, True], ids=["direct", "queued"])
async def test_every_log_line_of_a_request_carries_its_request_id(client, kb_id, monkeypatch, queued):
    from specrag.serve.logs import QUIET, configure_json_logging

    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    quiet_levels = {name: logging.getLogger(name).level for name in QUIET}  # the server's config, undone below
    handler = configure_json_logging(logging.INFO, stream, queued=queued)
    for kb in client._transport.app.state.tenants.knowledge_bases():  # the engine logs its stats from a worker thread
        monkeypatch.setattr(kb.engine.settings.retrieval, "log_retrieval_stats", True)
    try:
        ids = [f"req-{i:04d}-test" for i in range(4)]
        responses = await asyncio.gather(*(
            client.post("/api/v1/context", json={"query": "How do I create a user?"}, headers={"X-Request-ID": rid})
            for rid in ids))
    finally:
        handler.close()  # a queued handler writes every line enqueued before it stops
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
        for name, level in quiet_levels.items():
            logging.getLogger(name).setLevel(level)
    assert [r.headers["x-request-id"] for r in responses] == ids
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines and all(line["request_id"] in ids for line in lines)
    for rid in ids:
        mine = [line for line in lines if line["request_id"] == rid]
        assert {m["message"] for m in mine} >= {"context", "http.request"}
        assert any(m["logger"] == "specrag.engine.query_engine" for m in mine)  # written in a worker thread
        event = next(m for m in mine if m["message"] == "context")
        assert {"event", "request_id", "steps", "sub_queries", "total_results", "total_tokens", "total_latency_ms",
                "truncated", "reasoning_effort"} <= set(event)


async def test_a_request_is_one_span_tree_in_opentelemetry(client, kb_id):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )
    from specrag.serve.tracing import install_instrumentation

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = install_instrumentation(provider.get_tracer("test"))
    try:
        r = await client.post("/api/v1/context", json={"query": "How do I create a user?"})
    finally:
        observer.tracer = None
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1 and roots[0].name == "ApiQueryEngine.aretrieve_context"
    assert roots[0].attributes["specrag.request_id"] == r.headers["x-request-id"]
    assert {s.context.trace_id for s in spans} == {roots[0].context.trace_id}
    names = {s.name for s in spans}
    assert {"HybridRetriever.retrieve", "ReferenceExpander._postprocess_nodes", "ProducerExpander._postprocess_nodes"} <= names
    by_id = {s.context.span_id: s for s in spans}
    for span in spans:  # every span reaches the root through its parents
        while span.parent is not None:
            span = by_id[span.parent.span_id]
        assert span is roots[0]


def test_a_remembered_metric_child_is_the_one_labels_gives_and_counts_in_the_exposition():
    from specrag.serve.metrics import ServiceMetrics

    metrics = ServiceMetrics()
    first = metrics.child(metrics.requests, "retrieve.basic", "vector", "ok")
    assert metrics.child(metrics.requests, "retrieve.basic", "vector", "ok") is first
    assert first is metrics.requests.labels(endpoint="retrieve.basic", mode="vector", status="ok")
    first.inc()
    metrics.child(metrics.requests, "retrieve.basic", "vector", "ok").inc()
    metrics.child(metrics.requests, "retrieve.basic", "keyword", "ok").inc()
    text = metrics.exposition()[0].decode()
    requests = _samples(text, "specrag_requests_total")
    assert requests['{endpoint="retrieve.basic",mode="vector",status="ok"}'] == 2
    assert requests['{endpoint="retrieve.basic",mode="keyword",status="ok"}'] == 1
