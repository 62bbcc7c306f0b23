"""A processing job embeds the messages of the stores queued behind it (memory/embedding.py).

The stores' jobs go to a queue no worker reads, so they stay queued while this process runs them one
at a time, in the order a test chooses; their Celery messages are dropped from Redis afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from core import graph
from core.models import Job
from memory import services
from memory.embedding import claim_queued
from tests.conftest import make_tenant
from tests.memory.helpers import user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker_process")]


def _store(tenant: Any, thread: str, n: int) -> str:
    client = tenant.client(tenant.write_key)
    response = client.post(
        f"/api/v1/projects/{tenant.project.id}/memories",
        {
            "messages": [user(f"{thread} message {i}: the ferry leaves at {i} o'clock.") for i in range(n)],
            "scope": {"user_id": "u", "thread_id": thread},
            "embed_in_worker": True,
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    return str(response.json()["job_id"])


def _embedded(project_id: str, thread: str | None = None) -> tuple[int, int]:
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p}) WHERE $t IS NULL OR m.text STARTS WITH $t "
        "RETURN count(m) AS n, count(m.embedding) AS embedded",
        p=project_id,
        t=thread,
    )
    return rows[0]["n"], rows[0]["embedded"]


def _run(job_id: str) -> dict[str, Any]:
    return dict(services.memories_process(job=Job.objects.get(pk=job_id)).counts)


def _drop(*project_ids: str) -> None:
    for pid in project_ids:
        graph.write("MATCH (n {project_id: $p}) DETACH DELETE n", p=pid)


def test_the_first_job_embeds_the_stores_queued_behind_it_and_no_other_project(held, settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_EMBED_BATCH = 256
    tenant, other = make_tenant("embed-take"), make_tenant("embed-take-other")
    pid = tenant.project.id
    foreign = _store(other, "theirs", 10)  # queued in between: another project's
    jobs = [_store(tenant, f"t{i}", 30) for i in range(3)]
    assert _embedded(pid) == (90, 0)  # nothing embedded yet: every job is queued

    counts = _run(jobs[0])
    assert counts["taken"] == 60 and counts["embedded"] == 90
    assert _embedded(pid) == (90, 90)
    assert _embedded(other.project.id) == (10, 0)  # the tenant boundary: never another project's
    # the jobs it took from find their messages embedded, and still process their own
    later = [_run(job_id) for job_id in jobs[1:]]
    assert [c["embedded"] for c in later] == [0, 0]
    assert graph.read(
        "MATCH (m:Memory {project_id: $p}) WHERE m.processed IS NULL RETURN count(m) AS n", p=pid
    ) == [{"n": 0}]
    assert _run(foreign)["embedded"] == 10
    _drop(pid, other.project.id)


def test_a_job_takes_no_more_than_the_batch_and_leaves_the_rest_to_their_own_jobs(held, settings) -> None:  # type: ignore[no-untyped-def]
    settings.MEMORY_EMBED_BATCH = 60
    tenant = make_tenant("embed-room")
    pid = tenant.project.id
    jobs = [_store(tenant, f"r{i}", 30) for i in range(3)]
    counts = _run(jobs[0])
    assert counts["taken"] == 30 and counts["embedded"] == 60
    assert _embedded(pid, "r2") == (30, 0)
    assert _run(jobs[2])["embedded"] == 30
    assert _embedded(pid) == (90, 90)
    _drop(pid)


def test_a_claimed_job_is_not_taken_twice_and_its_own_run_embeds_what_is_left(held, settings) -> None:  # type: ignore[no-untyped-def]
    """A worker that took a queued job's messages and died before embedding them loses nothing: the
    claim keeps other jobs off them, and the job itself embeds them when it runs."""
    settings.MEMORY_EMBED_BATCH = 256
    tenant = make_tenant("embed-claim")
    pid = tenant.project.id
    jobs = [_store(tenant, f"c{i}", 20) for i in range(3)]
    # a job that is not running takes the last store's messages, then "dies" without embedding them
    assert len(claim_queued(project_id=pid, job_id="a-dead-worker", room=256)) == 60
    counts = _run(jobs[0])
    assert counts["taken"] == 0 and counts["embedded"] == 20
    assert _embedded(pid, "c2") == (20, 0)
    assert [_run(job_id)["embedded"] for job_id in jobs[1:]] == [20, 20]
    assert _embedded(pid) == (60, 60)
    _drop(pid)


def test_stores_embedded_in_the_request_are_not_taken(held, settings) -> None:  # type: ignore[no-untyped-def]
    tenant = make_tenant("embed-inline")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    response = client.post(
        f"/api/v1/projects/{pid}/memories",
        {"messages": [user("Embedded at once.")], "scope": {"user_id": "u", "thread_id": "i"}},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert claim_queued(project_id=pid, job_id="another", room=256) == []
    _drop(pid)
