"""OpenTelemetry tracing on the real stack: a web process and a Celery worker with TRACING_ENABLED send
their spans over OTLP/HTTP to a real receiver; one trace runs from the HTTP request that submits
documents, across Redis, into the worker's task and its Neo4j queries; a search is one trace with its
queries. With tracing off nothing is sent. LLM calls are spans with their token counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from core.llm.client import chat
from core.models import Job
from core.runtime import tracing
from tests.conftest import make_tenant, start_worker, stop_worker, worker_env
from tests.knowledge.helpers import wait_job
from tests.support.openai_server import FakeOpenAI, Step, count_tokens
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.processes import start_web, stop

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.django_db(transaction=True),  # the web process must see the tenant and its key
]

QUEUE = "traced"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver().start()
    yield server
    server.stop()


def _env(receiver: OtlpReceiver, enabled: bool) -> dict[str, str]:
    return {
        **worker_env(),
        "TRACING_ENABLED": "true" if enabled else "false",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: spans leave within a moment, not the default 5 s
        "INGEST_QUEUE": QUEUE,  # only this test's worker runs the ingestion
        "PYTHONUNBUFFERED": "1",
    }


def _submit_and_search(base: str) -> tuple[str, str]:
    tenant = make_tenant("traced")
    auth = {"Authorization": f"Bearer {tenant.write_key.key}"}
    documents = [{"title": "Hopper", "text": "Grace Hopper wrote the first compiler, the A-0 system."}]
    url = f"{base}/api/v1/projects/{tenant.project.id}"
    submitted = httpx.post(f"{url}/documents", json={"documents": documents}, headers=auth, timeout=60)
    assert submitted.status_code == 202, submitted.text
    assert wait_job(submitted.json()["job_id"]).status == Job.Status.SUCCEEDED
    found = httpx.post(f"{url}/search", json={"query": "first compiler"}, headers=auth, timeout=120)
    assert found.status_code == 200, found.text
    return str(tenant.project.id), submitted.json()["job_id"]


def _server_span(spans: list[ReceivedSpan], method: str, route_end: str) -> ReceivedSpan | None:
    for span in spans:
        route = str(span.attributes.get("http.route", ""))
        if span.kind == "server" and span.name.startswith(method) and route.endswith(route_end):
            return span
    return None


def test_one_trace_runs_from_the_request_through_the_broker_into_the_worker(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    env = _env(receiver, enabled=True)
    web, base = start_web(env, tmp_path / "web.log")
    worker = start_worker("traced", env=env, queue=QUEUE)
    try:
        _submit_and_search(base)

        def complete(spans: list[ReceivedSpan]) -> bool:
            submit = _server_span(spans, "POST", "/documents")
            search = _server_span(spans, "POST", "/search")
            return bool(
                submit
                and search
                and any(
                    s.service == "knowledge-platform-worker" and s.trace_id == submit.trace_id for s in spans
                )
                and any(s.name.startswith("neo4j") and s.trace_id == search.trace_id for s in spans)
            )

        spans = receiver.wait_for(complete)
    finally:
        stop_worker(worker)
        stop(web)
    submit = _server_span(spans, "POST", "/documents")
    search = _server_span(spans, "POST", "/search")
    assert submit is not None and search is not None and submit.service == "knowledge-platform-web"
    by_trace = [s for s in spans if s.trace_id == submit.trace_id]
    # the web process publishes the batch task inside the request; the worker runs it in the same trace
    # (and what the task publishes in turn, a follow-up task, stays in the trace too)
    publish = [s for s in by_trace if s.kind == "producer" and s.service == "knowledge-platform-web"]
    run = [s for s in by_trace if s.kind == "consumer" and s.service == "knowledge-platform-worker"]
    assert publish and run, [(s.service, s.kind, s.name) for s in by_trace]
    assert any(r.parent_id in {p.span_id for p in publish} for r in run)
    assert {r.parent_id for r in run} <= {p.span_id for p in by_trace if p.kind == "producer"}
    # the task's Neo4j writes are its children, with their Cypher
    writes = [s for s in by_trace if s.name == "neo4j write" and s.service == "knowledge-platform-worker"]
    assert writes and all(s.attributes["db.system.name"] == "neo4j" for s in writes)
    assert any(
        "MERGE" in str(s.attributes.get("db.query.text", ""))
        or "CREATE" in str(s.attributes.get("db.query.text", ""))
        for s in writes
    )
    # the search: one trace, its reads under the request's span
    reads = [s for s in spans if s.trace_id == search.trace_id and s.name == "neo4j read"]
    assert (
        reads
        and search.attributes.get("http.response.status_code", search.attributes.get("http.status_code"))
        == 200
    )


def test_with_tracing_off_nothing_is_sent(receiver: OtlpReceiver, tmp_path: Path) -> None:
    env = _env(receiver, enabled=False)
    web, base = start_web(env, tmp_path / "web.log")
    worker = start_worker("untraced", env=env, queue=QUEUE)
    try:
        _submit_and_search(base)
    finally:
        stop_worker(worker)  # a worker's pool flushes its spans as it stops: none may come
        stop(web)
    assert receiver.requests == 0 and receiver.spans == []


def test_an_llm_call_is_a_span_with_its_tokens(fake_openai: FakeOpenAI, monkeypatch: Any) -> None:
    """In this process, the platform's tracer is swapped for one of the SDK with its in-memory exporter
    (the test process has no tracer provider of its own); the LLM is the local OpenAI-compatible server."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", provider.get_tracer("test"))
    fake_openai.queue(Step(content="Grace Hopper"), Step(status=400))

    assert chat([{"role": "user", "content": "who wrote the first compiler?"}]) == "Grace Hopper"
    with pytest.raises(Exception):  # noqa: B017 - the openai client's own 400 error
        chat([{"role": "user", "content": "again"}])

    ok, refused = exporter.get_finished_spans()
    assert ok.name == "chat fake-chat" and ok.attributes["gen_ai.request.model"] == "fake-chat"
    assert ok.attributes["gen_ai.usage.output_tokens"] == count_tokens("Grace Hopper", "fake-chat")
    assert ok.attributes["gen_ai.usage.input_tokens"] > 0 and ok.status.is_ok
    assert not refused.status.is_ok and "gen_ai.usage.input_tokens" not in refused.attributes
