"""The service's Prometheus metrics, in a registry of their own (one per app, so two apps in one
process never share counters). Label values come from small fixed sets (endpoint, mode,
reasoning effort, status class, stage or span name): never a tenant, a query or an id.

With several worker processes (``specrag serve --workers N``) every worker writes its values to
files under ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, chosen when the
variable is set before the worker starts), and /metrics, whichever worker answers it, sums the
counters and histograms of all workers, those that exited included."""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
TOKEN_BUCKETS = (0, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 100000)
STEP_BUCKETS = (1, 2, 3, 5, 8, 13, 20)
RESULT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("specrag_requests", "Retrieval, context and plan requests by endpoint, search mode "
                                "and outcome (ok, client_error, server_error)", ["endpoint", "mode", "status"],
                                registry=r)
        self.latency = Histogram("specrag_latency_seconds", "Wall time of a retrieval, context or plan request",
                                 ["mode", "reasoning_effort"], buckets=LATENCY_BUCKETS, registry=r)
        self.tokens_used = Histogram("specrag_tokens_used", "cl100k tokens of the results returned",
                                     buckets=TOKEN_BUCKETS, registry=r)
        self.steps = Histogram("specrag_steps", "Steps taken by one request", buckets=STEP_BUCKETS, registry=r)
        self.results = Histogram("specrag_results", "Results (chunks) returned by one request",
                                 buckets=RESULT_BUCKETS, registry=r)
        self.truncated = Counter("specrag_truncated", "Answers cut short, by reason", ["reason"], registry=r)
        self.fallbacks = Counter("specrag_fallbacks", "Stages that did not use the LLM's answer (keyword methods "
                                 "answered instead, or no answer was synthesized), by stage and reason; offline "
                                 "mode (no_llm) is not counted", ["stage", "reason"], registry=r)
        self.stage_latency = Histogram("specrag_stage_latency_seconds", "Wall time of each stage (engine stages "
                                       "and LlamaIndex spans, by name)", ["stage"], buckets=LATENCY_BUCKETS,
                                       registry=r)
        self.http_requests = Counter("specrag_http_requests", "HTTP requests by route template, method and status",
                                     ["route", "method", "status"], registry=r)
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered: prometheus_client checks the values, builds the key and
        takes a lock on every ``labels`` call, and a request makes about eight (label sets are few and fixed)."""
        key = (metric, values)
        found = self._children.get(key)
        if found is None:
            found = self._children.setdefault(key, metric.labels(*values))
        return found

    def exposition(self) -> tuple[bytes, str]:
        """The text format Prometheus scrapes, and its content type."""
        if os.environ.get(MULTIPROCESS_DIR):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
