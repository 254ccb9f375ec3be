"""One request's outcome, written once as a JSON event line and as Prometheus metrics.

HTTP routes and MCP tools wrap their work in :meth:`Telemetry.track`; the event line carries
``event, request_id, steps, sub_queries, total_results, total_tokens, total_latency_ms,
truncated, reasoning_effort`` (plus endpoint, mode, kb_id, status and the error, if any).
"""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import AsyncIterator

from pydantic import BaseModel, Field
from specrag.core.api_models import RetrievalResponse
from specrag.serve.errors import status_class
from specrag.serve.logs import request_id_var
from specrag.serve.metrics import ServiceMetrics

logger = logging.getLogger("specrag.requests")
current_telemetry: ContextVar["Telemetry | None"] = ContextVar("specrag_telemetry", default=None)


class Outcome(BaseModel):
    event: str = Field(description="retrieve.basic, retrieve.agentic, context, plan, mcp.<tool>")
    request_id: str | None = None
    endpoint: str
    mode: str = "none"
    reasoning_effort: str = "none"
    kb_id: str | None = None
    status: str = "ok"
    steps: int = 0
    sub_queries: int = 0
    total_results: int = 0
    total_tokens: int = 0
    total_latency_ms: float = 0.0
    truncated: bool = False
    truncated_reason: str | None = None
    error: str | None = None

    def add_response(self, response: RetrievalResponse) -> None:
        self.steps = len(response.steps)
        self.sub_queries = len({s.sub_query for s in response.steps if s.sub_query})
        self.total_results = len(response.results)
        self.total_tokens = response.total_tokens_used
        self.truncated, self.truncated_reason = response.truncated, response.truncated_reason

    def add_counts(self, results: int, tokens: int, truncated: bool = False, reason: str | None = None,
                   steps: int = 1) -> None:
        self.steps, self.sub_queries, self.total_results, self.total_tokens = steps, 1, results, tokens
        self.truncated, self.truncated_reason = truncated, reason if truncated else None


class Telemetry:
    def __init__(self, metrics: ServiceMetrics | None = None):
        self.metrics = metrics or ServiceMetrics()

    @asynccontextmanager
    async def track(self, endpoint: str, mode: str = "none", reasoning_effort: str = "none",
                    kb_id: str | None = None, event: str | None = None) -> AsyncIterator[Outcome]:
        """Times the block; an exception marks the outcome client_error or server_error and propagates."""
        outcome = Outcome(event=event or endpoint, endpoint=endpoint, mode=mode, reasoning_effort=reasoning_effort,
                          kb_id=kb_id, request_id=request_id_var.get())
        token = current_telemetry.set(self)
        start = time.perf_counter()
        try:
            yield outcome
        except Exception as exc:
            outcome.status, outcome.error = status_class(exc), f"{type(exc).__name__}: {str(exc)[:300]}"
            raise
        finally:
            outcome.total_latency_ms = round((time.perf_counter() - start) * 1000, 2)
            current_telemetry.reset(token)
            self.record(outcome)

    def record(self, outcome: Outcome) -> None:
        m = self.metrics
        m.child(m.requests, outcome.endpoint, outcome.mode, outcome.status).inc()
        m.child(m.latency, outcome.mode, outcome.reasoning_effort).observe(outcome.total_latency_ms / 1000)
        if outcome.status == "ok":
            m.tokens_used.observe(outcome.total_tokens)
            m.steps.observe(outcome.steps)
            m.results.observe(outcome.total_results)
        if outcome.truncated:
            m.child(m.truncated, outcome.truncated_reason or "unspecified").inc()
        level = logging.ERROR if outcome.status == "server_error" else logging.INFO
        logger.log(level, outcome.event, extra=outcome.model_dump(exclude={"request_id"}))
