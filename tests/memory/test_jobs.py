"""Memory jobs through a real Celery worker: a store queues processing, summarise and consolidate
run on demand, each with memory_progress events on Redis pub/sub."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from core import graph
from core.runtime.redis_client import get_redis
from tests.conftest import make_tenant
from tests.knowledge.helpers import wait_job
from tests.memory.helpers import assistant, count, store, user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker_process")]


def _events(pubsub, job_id: str) -> list[dict]:  # type: ignore[no-untyped-def]
    events = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if message:
            event = json.loads(message["data"])
            if event.get("job_id") == job_id:
                events.append(event)
                if event["phase"] == "done":
                    break
    return events


def test_store_queues_processing_with_progress_then_summarise_and_consolidate() -> None:
    tenant = make_tenant("mem-jobs")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    pubsub = get_redis().pubsub()
    pubsub.subscribe("ui:retrieval_progress")
    pubsub.get_message(timeout=2)
    old = (datetime.now(UTC) - timedelta(days=200)).isoformat()
    body = store(
        client,
        pid,
        [
            user("My name is Iris and I love tango.", timestamp=old),
            assistant("Nice to meet you, Iris.", timestamp=old),
        ],
        user_id="iris",
        thread_id="t",
    ).json()
    job = wait_job(body["job_id"])
    assert job.status == "succeeded" and job.counts["facts"] == 1 and job.counts["preferences"] == 1
    events = _events(pubsub, body["job_id"])
    assert [e["phase"] for e in events] == ["extracting", "summarizing", "done"]
    assert all(e["message_type"] == "memory_progress" and e["project_id"] == pid for e in events)

    summarize = client.post(
        f"/api/v1/projects/{pid}/memories:summarize", {"scope": {"user_id": "iris"}}, format="json"
    )
    assert summarize.status_code == 202
    assert wait_job(summarize.json()["job_id"]).counts["summaries"] == 1
    assert _events(pubsub, summarize.json()["job_id"])[-1]["phase"] == "done"

    consolidate = client.post(
        f"/api/v1/projects/{pid}/memories:consolidate",
        {"scope": {"user_id": "iris"}, "older_than_days": 90},
        format="json",
    )
    assert consolidate.status_code == 202
    done = wait_job(consolidate.json()["job_id"])
    assert done.status == "succeeded" and done.counts["folded"] == 2
    pubsub.close()
    assert count("Memory", pid) == 0
    kept = graph.read(
        "MATCH (f:Fact {project_id: $p})-[:EXTRACTED_FROM]->(:ConversationSummary {consolidated: true}) RETURN f.object AS o",
        p=pid,
    )
    assert kept == [{"o": "Iris"}]
    graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)


def test_consolidate_all_task_consolidates_every_project() -> None:
    """Consolidation on a schedule is the default retention policy's job (seed 003: turns older
    than 90 days condensed to summaries); the memory app's own beat task still works when enabled
    (run here directly; beat sending it on its schedule is tests/curation/test_beat.py)."""
    from django.conf import settings

    from curation.tasks import retention_enforce_all
    from memory.tasks import memory_consolidate_all

    entry = settings.CELERY_BEAT_SCHEDULE["retention-enforce"]
    assert entry["task"] == retention_enforce_all.name and entry["schedule"] == 24 * 3600
    assert "memory-consolidate" not in settings.CELERY_BEAT_SCHEDULE
    tenant = make_tenant("mem-beat")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    old = (datetime.now(UTC) - timedelta(days=100)).isoformat()
    store(client, pid, [user("An old note about the garden shed.", timestamp=old)], user_id="g")
    store(client, pid, [user("A fresh note.")], user_id="g")
    job_ids = memory_consolidate_all.apply().get()
    jobs = [wait_job(job_id) for job_id in job_ids]
    assert all(job.status == "succeeded" for job in jobs)
    assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.text AS t", p=pid) == [
        {"t": "A fresh note."}
    ]
    graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)


def test_stores_left_to_the_worker_are_all_embedded() -> None:
    """Five stores answered 202 at once; the worker's jobs embed every message (nothing lost)."""
    tenant = make_tenant("mem-embed-many")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    jobs = []
    for batch in range(5):
        response = client.post(
            f"/api/v1/projects/{pid}/memories",
            {
                "messages": [
                    user(f"Batch {batch}, message {i}: the ferry leaves at {i}.") for i in range(40)
                ],
                "scope": {"user_id": "many", "thread_id": f"t{batch}"},
                "embed_in_worker": True,
            },
            format="json",
        )
        assert response.status_code == 202, response.content
        jobs.append(response.json()["job_id"])
    assert all(wait_job(job_id).status == "succeeded" for job_id in jobs)
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n, count(m.embedding) AS embedded", p=pid
    )
    assert rows == [{"n": 200, "embedded": 200}]
    graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)
