"""A span tree per request, from LlamaIndex instrumentation: every ``@dispatcher.span`` (the
service's entry points, ``BaseRetriever.retrieve`` / ``aretrieve``, ``postprocess_nodes``, embeddings, the
engine) becomes a stage-latency observation, and an OpenTelemetry span when a tracer is set.

Parents come from LlamaIndex's own span ids (which follow the request into worker threads), so
the OTel tree matches the instrumentation tree; the root span carries ``specrag.request_id``.
One handler per process, installed on the root dispatcher once; it reports to the telemetry of
the request in progress (a context variable), so two apps in one process never mix metrics.
(llama-index-observability-otel does the OTel half, but pins llama-index-instrumentation < 0.6,
older than the llama-index-core 0.14 here.)
"""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Optional

import llama_index.core.instrumentation as instrument
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from pydantic import ConfigDict, Field
from specrag.serve.logs import request_id_var
from specrag.serve.telemetry import current_telemetry
from specrag.stages.events import StageEndEvent

OFFLINE_REASON = "no_llm"  # a stage's fallback in offline mode: how it is configured, not a failure

_install_lock = threading.Lock()


def span_name(span_id: str) -> str:
    """``HybridRetriever.aretrieve-<uuid>`` -> ``HybridRetriever.aretrieve``."""
    return span_id.partition("-")[0]


class _OpenSpans:
    """Start times and OTel spans by span id: plain dicts, read on every span of every request
    (a pydantic private attribute costs a ``__getattr__`` fallback on each read)."""

    __slots__ = ("started", "otel")

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.otel: dict[str, Any] = {}


class SpanObserver(BaseSpanHandler[SimpleSpan]):
    tracer: Any = None  # an opentelemetry Tracer, or None
    spans: _OpenSpans = Field(default_factory=_OpenSpans, exclude=True)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def class_name(cls) -> str:
        return "SpecragSpanObserver"

    def new_span(self, id_: str, bound_args: inspect.BoundArguments, instance: Optional[Any] = None,
                 parent_span_id: Optional[str] = None, tags: Optional[dict[str, Any]] = None,
                 **kwargs: Any) -> SimpleSpan:
        spans = self.spans
        spans.started[id_] = time.perf_counter()
        tracer = self.tracer
        if tracer is not None:
            from opentelemetry import trace

            parent = spans.otel.get(parent_span_id) if parent_span_id else None
            context = trace.set_span_in_context(parent) if parent is not None else None
            span = tracer.start_span(span_name(id_), context=context)
            if parent is None and (request_id := request_id_var.get()):
                span.set_attribute("specrag.request_id", request_id)
            spans.otel[id_] = span
        return SimpleSpan.model_construct(id_=id_, parent_id=parent_span_id)  # built by us: nothing to validate

    def _close(self, id_: str, err: BaseException | None = None) -> SimpleSpan | None:
        spans = self.spans
        started = spans.started.pop(id_, None)
        if started is not None and (telemetry := current_telemetry.get()) is not None:
            metrics = telemetry.metrics
            metrics.child(metrics.stage_latency, span_name(id_)).observe(time.perf_counter() - started)
        span = spans.otel.pop(id_, None)
        if span is not None:
            from opentelemetry.trace import Status, StatusCode

            if err is not None:
                span.record_exception(err)
            span.set_status(Status(StatusCode.ERROR if err is not None else StatusCode.OK))
            span.end()
        return self.open_spans.get(id_)

    def prepare_to_exit_span(self, id_: str, bound_args: inspect.BoundArguments, instance: Optional[Any] = None,
                             result: Optional[Any] = None, **kwargs: Any) -> SimpleSpan | None:
        return self._close(id_)

    def prepare_to_drop_span(self, id_: str, bound_args: inspect.BoundArguments, instance: Optional[Any] = None,
                             err: Optional[BaseException] = None, **kwargs: Any) -> SimpleSpan | None:
        return self._close(id_, err)


class StageObserver(BaseEventHandler):
    """The engine's stages (select, expand, search, refs, synthesize) report their own wall time,
    and their fallbacks: the log tells an LLM failure once per process (specrag.core.fallbacks), the
    ``specrag_fallbacks`` counter counts every one."""

    @classmethod
    def class_name(cls) -> str:
        return "SpecragStageObserver"

    def handle(self, event: Any, **kwargs: Any) -> None:
        telemetry = current_telemetry.get()
        if telemetry is not None and isinstance(event, StageEndEvent) and event.stage:
            metrics = telemetry.metrics
            ms = getattr(event.result, "ms", None)
            if ms is not None:
                metrics.child(metrics.stage_latency, event.stage).observe(ms / 1000)
            for fallback in getattr(event.result, "fallbacks", ()):
                if fallback.reason != OFFLINE_REASON:
                    metrics.child(metrics.fallbacks, event.stage, fallback.reason).inc()


_observer: SpanObserver | None = None


def install_instrumentation(tracer: Any = None) -> SpanObserver:
    """Register the observers on LlamaIndex's root dispatcher (once per process); ``tracer`` (an
    OpenTelemetry Tracer) turns OTel export on, ``None`` leaves it as it was."""
    global _observer
    with _install_lock:
        if _observer is None:
            root = instrument.get_dispatcher()
            _observer = SpanObserver()
            root.add_span_handler(_observer)
            root.add_event_handler(StageObserver())
        if tracer is not None:
            _observer.tracer = tracer
    return _observer


def otel_tracer(exporter: str) -> Any:
    """A tracer exporting to ``console`` or ``otlp`` (OTEL_EXPORTER_OTLP_* variables); None for ``none``."""
    if exporter == "none":
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
        )
    except ImportError as exc:
        raise ImportError("OpenTelemetry export needs: pip install 'specrag[otel]'") from exc
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter,
        )

        span_exporter = OTLPSpanExporter()
    else:
        span_exporter = ConsoleSpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "specrag"}))
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return provider.get_tracer("specrag")
