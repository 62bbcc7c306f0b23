"""Prometheus metrics at `/metrics` (text exposition format).

Two kinds of figures, by where they live:
- this web process's own: request latency by route (`kp_http_request_duration_seconds`) and the time
  of the Neo4j queries it ran (`kp_neo4j_query_duration_seconds`); several web processes are scraped
  one by one, as usual.
- the platform's, read at scrape time from the stores every process shares, so they hold for every
  worker on every host and survive restarts: jobs by kind and status and the durations of finished
  ones (SQL), Celery queue depths and LLM calls, errors and tokens (Redis counters every process
  adds to).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from core.runtime.redis_client import get_redis
from core.runtime.tracing import neo4j_span

logger = logging.getLogger(__name__)
access_log = logging.getLogger("core.access")

LLM_COUNTERS_KEY = "metrics:llm"
# any other method a client sends is counted as "other": labels must stay a small set
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
JOB_BUCKETS = (0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)

REGISTRY = CollectorRegistry()
HTTP_SECONDS = Histogram(
    "kp_http_request_duration_seconds",
    "HTTP requests served by this process, by route pattern, method and status",
    ["route", "method", "status"],
    registry=REGISTRY,
)
NEO4J_SECONDS = Histogram(
    "kp_neo4j_query_duration_seconds",
    "Neo4j queries and transactions run by this process, by access mode and outcome",
    ["access", "outcome"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
    registry=REGISTRY,
)


@contextmanager
def neo4j_timed(access: str, query: str | None = None) -> Iterator[None]:
    """Times a query or transaction, and traces it as a span when tracing is on."""
    started = time.perf_counter()
    outcome = "error"
    try:
        with neo4j_span(access, query):
            yield
        outcome = "ok"
    finally:
        NEO4J_SECONDS.labels(access, outcome).observe(time.perf_counter() - started)


def llm_call_record(*, ok: bool, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
    """Count one LLM call (every attempt, retries included) in Redis, shared by every process. Fails
    open: metrics never fail a call."""
    try:
        pipe = get_redis().pipeline(transaction=False)
        pipe.hincrby(LLM_COUNTERS_KEY, "calls_ok" if ok else "calls_error", 1)
        if prompt_tokens:
            pipe.hincrby(LLM_COUNTERS_KEY, "prompt_tokens", prompt_tokens)
        if completion_tokens:
            pipe.hincrby(LLM_COUNTERS_KEY, "completion_tokens", completion_tokens)
        pipe.execute()
    except Exception:  # noqa: BLE001 - Redis down: the call itself must go on
        logger.debug("llm metrics not recorded", exc_info=True)


class RequestMetricsMiddleware:
    """Times every request; the route is the URL pattern matched (`api/v1/projects/<str:project_id>`),
    so a label never carries an id. With JSON logs, also the access record (daphne's text access lines
    are off then)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else "unmatched"
        took = time.perf_counter() - started
        method = request.method if request.method in METHODS else "other"
        HTTP_SECONDS.labels(route, method, str(response.status_code)).observe(took)
        if settings.LOG_FORMAT == "json":
            access_log.info(
                "request",
                extra={
                    "method": request.method,
                    "path": request.path,
                    "route": route,
                    "status": response.status_code,
                    "duration_ms": round(took * 1000, 1),
                },
            )
        return response


class PlatformCollector(Collector):
    """Figures read at scrape time from SQL and Redis."""

    def collect(self) -> Iterator[Any]:
        yield from _jobs()
        try:
            yield from _redis_figures()
        except Exception:  # noqa: BLE001 - Redis down: the other figures are still served
            logger.warning("metrics: Redis figures unavailable", exc_info=True)


def _jobs() -> Iterator[Any]:
    from core.models import Job

    current = GaugeMetricFamily("kp_jobs", "Jobs by kind and status", labels=["kind", "status"])
    counts: dict[tuple[str, str], int] = defaultdict(int)
    durations: dict[tuple[str, str], list[float]] = defaultdict(list)
    rows = Job.objects.values_list("kind", "status", "started_at", "finished_at").iterator(chunk_size=2000)
    for kind, status, started, finished in rows:
        counts[(kind, status)] += 1
        if started is not None and finished is not None:
            durations[(kind, status)].append(max(0.0, (finished - started).total_seconds()))
    for (kind, status), n in sorted(counts.items()):
        current.add_metric([kind, status], n)
    yield current
    histogram = HistogramMetricFamily(
        "kp_job_duration_seconds",
        "Finished jobs by kind and outcome, from start to finish",
        labels=["kind", "status"],
    )
    for (kind, status), values in sorted(durations.items()):
        buckets = [(_bound(b), float(sum(1 for v in values if v <= b))) for b in JOB_BUCKETS]
        buckets.append(("+Inf", float(len(values))))
        histogram.add_metric([kind, status], buckets, sum(values))
    yield histogram


def _bound(value: float) -> str:
    return repr(float(value))


def _queues() -> list[str]:
    names = {
        "celery",
        settings.INGEST_QUEUE,
        settings.MEMORY_QUEUE,
        settings.PORTABILITY_QUEUE,
        settings.BACKUP_QUEUE,
        settings.RETENTION_QUEUE,
    }
    return sorted(names)


def _redis_figures() -> Iterator[Any]:
    client = get_redis()
    queues = _queues()
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.llen(queue)
    pipe.hgetall(LLM_COUNTERS_KEY)
    *lengths, llm = pipe.execute()
    depth = GaugeMetricFamily("kp_queue_depth", "Tasks waiting in each Celery queue", labels=["queue"])
    for queue, length in zip(queues, lengths, strict=True):
        depth.add_metric([queue], int(length))
    yield depth
    llm_values = {k.decode(): int(v) for k, v in (llm or {}).items()}
    calls = CounterMetricFamily(
        "kp_llm_calls", "LLM calls by outcome (retried attempts each count)", labels=["outcome"]
    )
    calls.add_metric(["ok"], llm_values.get("calls_ok", 0))
    calls.add_metric(["error"], llm_values.get("calls_error", 0))
    yield calls
    tokens = CounterMetricFamily("kp_llm_tokens", "LLM tokens by kind", labels=["kind"])
    tokens.add_metric(["prompt"], llm_values.get("prompt_tokens", 0))
    tokens.add_metric(["completion"], llm_values.get("completion_tokens", 0))
    yield tokens


REGISTRY.register(PlatformCollector())


def _allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: with METRICS_TOKEN set, for `Authorization: Bearer <token>` only; without it, for
    clients on this machine only."""
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET"})
    if not _allowed(request):
        return HttpResponse("metrics: forbidden\n", status=403, content_type="text/plain")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
