"""/metrics scraped over HTTP from the real ASGI server, parsed with Prometheus's own text parser:
request latency by route, Neo4j query time, jobs by kind and outcome with their durations, queue depth
and LLM calls, errors and tokens move with what the platform did; and who may read them."""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from core.llm.client import chat
from core.models import Job
from core.runtime.redis_client import get_redis
from tests.conftest import make_tenant
from tests.knowledge.helpers import wait_job
from tests.support.openai_server import FakeOpenAI, Step, count_tokens

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.django_db(transaction=True),  # the web process must see the tenant and its key
]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _scrape(base: str) -> Samples:
    response = httpx.get(f"{base}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return _parse(response.text)


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.usefixtures("celery_worker_process")
def test_metrics_follow_what_the_platform_did(web: str, fake_openai: FakeOpenAI) -> None:
    before = _scrape(web)
    tenant = make_tenant("metrics")
    auth = {"Authorization": f"Bearer {tenant.write_key.key}"}
    documents = [{"title": "Hopper", "text": "Grace Hopper wrote the first compiler, the A-0 system."}]
    submitted = httpx.post(
        f"{web}/api/v1/projects/{tenant.project.id}/documents",
        json={"documents": documents},
        headers=auth,
        timeout=60,
    )
    assert submitted.status_code == 202, submitted.text
    assert wait_job(submitted.json()["job_id"]).status == Job.Status.SUCCEEDED
    for _ in range(3):
        found = httpx.post(
            f"{web}/api/v1/projects/{tenant.project.id}/search",
            json={"query": "first compiler"},
            headers=auth,
            timeout=120,  # the first search loads the embedder
        )
        assert found.status_code == 200, found.text
    missing = httpx.get(f"{web}/api/v1/projects/{uuid.uuid4()}", headers=auth, timeout=60)
    assert missing.status_code == 404
    # the LLM: one answer, then a call refused (4xx, not retried)
    fake_openai.queue(Step(content="Grace Hopper"), Step(status=400))
    assert chat([{"role": "user", "content": "who wrote the first compiler?"}]) == "Grace Hopper"
    with pytest.raises(Exception):  # noqa: B017 - the openai client's own 400 error
        chat([{"role": "user", "content": "again"}])
    after = _scrape(web)

    search = {"route": "api/v1/projects/<str:project_id>/search", "method": "POST", "status": "200"}
    grew = _value(after, "kp_http_request_duration_seconds_count", **search) - _value(
        before, "kp_http_request_duration_seconds_count", **search
    )
    assert grew == 3
    not_found = {"route": "api/v1/projects/<str:project_id>", "method": "GET", "status": "404"}
    assert _value(after, "kp_http_request_duration_seconds_count", **not_found) >= 1
    assert not any("project_id=" in name or tenant.project.id in str(labels) for name, labels in after)
    assert _value(after, "kp_neo4j_query_duration_seconds_count", access="read", outcome="ok") > _value(
        before, "kp_neo4j_query_duration_seconds_count", access="read", outcome="ok"
    )
    ingestion = {"kind": "ingest", "status": "succeeded"}
    assert _value(after, "kp_jobs", **ingestion) == _value(before, "kp_jobs", **ingestion) + 1
    finished = _value(after, "kp_job_duration_seconds_count", **ingestion)
    assert finished == _value(after, "kp_job_duration_seconds_bucket", le="+Inf", **ingestion) >= 1
    assert _value(after, "kp_job_duration_seconds_sum", **ingestion) > 0
    assert (
        _value(after, "kp_llm_calls_total", outcome="ok")
        == _value(before, "kp_llm_calls_total", outcome="ok") + 1
    )
    assert (
        _value(after, "kp_llm_calls_total", outcome="error")
        == _value(before, "kp_llm_calls_total", outcome="error") + 1
    )
    assert _value(after, "kp_llm_tokens_total", kind="completion") == _value(
        before, "kp_llm_tokens_total", kind="completion"
    ) + count_tokens("Grace Hopper", "fake-chat")


def test_queue_depth_counts_waiting_tasks(settings) -> None:  # type: ignore[no-untyped-def]
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    settings.BACKUP_QUEUE = queue
    get_redis().rpush(queue, b"{}", b"{}")
    try:
        samples = _parse(Client().get("/metrics").content.decode())
    finally:
        get_redis().delete(queue)
    assert _value(samples, "kp_queue_depth", queue=queue) == 2


def test_who_may_read_the_metrics(settings) -> None:  # type: ignore[no-untyped-def]
    local = Client()  # the test client's REMOTE_ADDR is 127.0.0.1
    assert local.get("/metrics").status_code == 200
    assert local.post("/metrics").status_code == 405
    assert local.generic("BREW", "/metrics").status_code == 405
    samples = _parse(local.get("/metrics").content.decode())
    brewed = {"route": "metrics", "method": "other", "status": "405"}
    assert _value(samples, "kp_http_request_duration_seconds_count", **brewed) >= 1  # not a label per method
    remote = Client(REMOTE_ADDR="203.0.113.9")
    assert remote.get("/metrics").status_code == 403
    settings.METRICS_TOKEN = "scrape-secret"
    assert local.get("/metrics").status_code == 403  # a token, once set, is asked of everyone
    assert remote.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    allowed = remote.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert allowed.status_code == 200 and b"kp_jobs" in allowed.content
