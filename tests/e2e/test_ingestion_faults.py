"""Ingestion under faults: a worker killed with SIGKILL, Neo4j stopped mid-job, duplicate concurrent posts."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest

from core import graph
from core.models import Job
from core.runtime.processes import start_neo4j
from core.runtime.redis_client import get_redis
from knowledge.models import IngestBatch
from tests.conftest import make_tenant, start_worker, stop_worker, worker_env
from tests.knowledge.helpers import wait_job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _docs(n: int, tag: str) -> list[dict[str, str]]:
    return [
        {
            "title": f"{tag} {i}",
            "source_path": f"{tag}/{i}.txt",
            "text": f"Report {i} of {tag}: Ada Lovelace met Charles Babbage in London to discuss the Analytical "
            f"Engine and topic number {i}. The Royal Society published paper {i}.",
        }
        for i in range(n)
    ]


def _assert_exactly_once(project_id: str, n: int) -> None:
    docs = graph.read(
        "MATCH (d:Document {project_id: $p}) RETURN d.status AS s, d.doc_key AS k", p=project_id
    )
    assert len(docs) == n
    assert len({d["k"] for d in docs}) == n
    assert {d["s"] for d in docs} == {"ready"}
    per_doc = graph.read(
        "MATCH (d:Document {project_id: $p}) OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c) "
        "RETURN d.id AS id, count(c) AS chunks",
        p=project_id,
    )
    assert {r["chunks"] for r in per_doc} == {1}
    orphans = graph.read(
        "MATCH (c:Chunk {project_id: $p}) WHERE NOT ()-[:HAS_CHUNK]->(c) RETURN count(c) AS n", p=project_id
    )[0]["n"]
    assert orphans == 0
    keys = graph.read(
        "MATCH (e:Entity {project_id: $p}) RETURN count(e) AS n, count(DISTINCT e.key) AS k", p=project_id
    )[0]
    assert keys["n"] == keys["k"]
    lovelace = graph.read(
        "MATCH (e:Entity {project_id: $p, name: 'Ada Lovelace'}) RETURN count(e) AS n", p=project_id
    )[0]["n"]
    assert lovelace == 1


def test_worker_killed_mid_ingestion_then_restarted(settings) -> None:  # type: ignore[no-untyped-def]
    settings.INGEST_QUEUE = "kill-test"
    settings.INGEST_BATCH_SIZE = 10
    tenant = make_tenant("kill -9")
    worker = start_worker("kill", queue="kill-test", concurrency=2)
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"documents": _docs(200, "kill")}, format="json"
    )
    assert response.status_code == 202
    job_id = response.json()["job_id"]
    deadline = time.monotonic() + 120
    while IngestBatch.objects.filter(job_id=job_id, status="done").count() < 3:
        assert time.monotonic() < deadline, "no batch finished"
        time.sleep(0.05)
    os.killpg(worker.pid, signal.SIGKILL)  # the worker and its pool children, mid-batch
    worker.wait(timeout=10)
    done_at_kill = IngestBatch.objects.filter(job_id=job_id, status="done").count()
    assert done_at_kill < 20, "the job finished before the kill; nothing was tested"

    worker = start_worker("kill2", queue="kill-test", concurrency=2)
    try:
        job = wait_job(job_id, timeout=240)
    finally:
        stop_worker(worker)
    assert job.status == "succeeded", job.errors
    _assert_exactly_once(tenant.project.id, 200)


def test_a_batch_message_lost_in_flight_is_sent_again(settings) -> None:  # type: ignore[no-untyped-def]
    """A batch's message taken off the queue by a worker that died before recording it (kombu's
    BRPOP window) leaves nothing in the broker; a worker sends it again and the job finishes once."""
    settings.INGEST_QUEUE = f"lost-{uuid.uuid4().hex[:8]}"
    settings.INGEST_BATCH_SIZE = 10
    tenant = make_tenant("lost in flight")
    response = tenant.client(tenant.write_key).post(
        f"/api/v1/projects/{tenant.project.id}/documents", {"documents": _docs(30, "lost")}, format="json"
    )
    assert response.status_code == 202
    job_id = response.json()["job_id"]
    client = get_redis()
    assert client.llen(settings.INGEST_QUEUE) == 3
    assert client.rpop(settings.INGEST_QUEUE) is not None  # the first batch's message, gone
    worker = start_worker(
        "lost", queue=settings.INGEST_QUEUE, env={**worker_env(), "TASK_RECONCILE_EVERY_SEC": "1"}
    )
    try:
        job = wait_job(job_id, timeout=120)
    finally:
        stop_worker(worker)
    assert job.status == "succeeded", job.errors
    assert list(IngestBatch.objects.filter(job_id=job_id).values_list("attempts", flat=True)) == [1, 1, 1]
    _assert_exactly_once(tenant.project.id, 30)


def test_neo4j_stopped_mid_job_retries_then_finishes(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    from core.graph import reset_driver

    neo4j = start_neo4j(tmp_path / "neo4j")
    uri = f"bolt://127.0.0.1:{neo4j.port}"
    settings.NEO4J_URI = uri
    settings.INGEST_QUEUE = "outage-test"
    settings.INGEST_BATCH_SIZE = 10
    reset_driver()
    worker = start_worker("outage", queue="outage-test", env={**worker_env(), "NEO4J_URI": uri})
    try:
        tenant = make_tenant("outage")
        response = tenant.client(tenant.write_key).post(
            f"/api/v1/projects/{tenant.project.id}/documents",
            {"documents": _docs(100, "outage")},
            format="json",
        )
        job_id = response.json()["job_id"]
        deadline = time.monotonic() + 120
        while IngestBatch.objects.filter(job_id=job_id, status="done").count() < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        neo4j.stop()
        deadline = time.monotonic() + 60
        while not any("neo4j is unavailable" in e for e in Job.objects.get(pk=job_id).errors):
            assert time.monotonic() < deadline, "the outage was never reported on the job"
            time.sleep(0.2)
        assert Job.objects.get(pk=job_id).status == "running"
        neo4j = start_neo4j(tmp_path / "neo4j", neo4j.port)
        job = wait_job(job_id, timeout=240)
        assert job.status == "succeeded", job.errors
        _assert_exactly_once(tenant.project.id, 100)
    finally:
        stop_worker(worker)
        neo4j.stop()
        settings.NEO4J_URI = os.environ["NEO4J_URI"]
        reset_driver()


@pytest.mark.usefixtures("celery_worker_process")
def test_same_documents_posted_twice_concurrently() -> None:
    tenant = make_tenant("concurrent")
    docs = _docs(200, "twice")
    answers: list[tuple[int, dict]] = []  # checked here: an assert in a posting thread fails no test

    def post() -> None:
        response = tenant.client(tenant.write_key).post(
            f"/api/v1/projects/{tenant.project.id}/documents", {"documents": docs}, format="json"
        )
        answers.append((response.status_code, response.json()))

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _body in answers] == [202, 202], [b for s, b in answers if s != 202]
    results = [body for _status, body in answers]
    for result in results:
        assert wait_job(result["job_id"], timeout=240).status == "succeeded"
    ids = [{d["document_id"] for d in r["documents"]} for r in results]
    assert ids[0] == ids[1] and len(ids[0]) == 200
    _assert_exactly_once(tenant.project.id, 200)
