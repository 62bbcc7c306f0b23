"""OpenTelemetry tracing, off unless TRACING_ENABLED: spans for HTTP requests (Django), Celery tasks (the
publishing side and the worker's run, one trace across the broker), Neo4j queries and LLM calls, sent
over OTLP/HTTP in batches to OTEL_EXPORTER_OTLP_ENDPOINT (the SDK reads the standard OTEL_* variables).

The spans of Neo4j and LLM calls are opened through the OpenTelemetry API everywhere; without a tracer
provider (tracing off) they are the API's no-op spans, so the code paths are the same either way."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from opentelemetry import trace

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("knowledge_platform")
QUERY_TEXT_MAX = 2000
_started = threading.Lock()
_state: dict[str, Any] = {"pid": None}


def tracing_start(role: str) -> bool:
    """Install the tracer provider and instrument Django and Celery in this process, once per process
    (a forked worker child calls it again: the parent's exporter thread did not survive the fork).
    `role` names the service when OTEL_SERVICE_NAME is not set (`knowledge-platform-web`, …)."""
    if not settings.TRACING_ENABLED:
        return False
    with _started:
        if _state["pid"] == os.getpid():
            return True
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.django import DjangoInstrumentor
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        name = settings.OTEL_SERVICE_NAME or f"knowledge-platform-{role}"
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        if not DjangoInstrumentor().is_instrumented_by_opentelemetry:
            DjangoInstrumentor().instrument(tracer_provider=provider)
        if not CeleryInstrumentor().is_instrumented_by_opentelemetry:
            CeleryInstrumentor().instrument(tracer_provider=provider)
        _state["pid"] = os.getpid()
        logger.info("tracing on: service %s, OTLP/HTTP", name)
        return True


def tracing_flush(timeout_ms: int = 5000) -> None:
    """Send the spans still batched (a worker child exits, a test waits for them)."""
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush(timeout_ms)


@contextmanager
def neo4j_span(access: str, query: str | None) -> Iterator[None]:
    attributes = {"db.system.name": "neo4j", "db.operation.name": access}
    if query:
        attributes["db.query.text"] = query[:QUERY_TEXT_MAX]
    with tracer.start_as_current_span(f"neo4j {access}", kind=trace.SpanKind.CLIENT, attributes=attributes):
        yield


@contextmanager
def llm_span(model: str) -> Iterator[trace.Span]:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    with tracer.start_as_current_span(
        f"chat {model}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span
