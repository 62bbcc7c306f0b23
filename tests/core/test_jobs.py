"""One job lifecycle (core.jobs): a job is queued only when the transaction that created it commits,
its task records success or the failure's reason, a finished job is not run twice, a failed job is
run again from the admin with the inputs it was given, and every task a job names exists."""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import current_app
from django.db import transaction

from core import graph
from core.errors import Conflict
from core.jobs import job_create, job_rerun, job_submit
from core.jobs.tasks import JobOutcome, job_execute
from core.models import Job
from core.runtime.redis_client import get_redis
from knowledge.dto import DocumentInput
from knowledge.models import IngestBatch
from knowledge.services import documents_submit, ingest_batch_fail, ingest_batch_run, ingest_job_resume
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def queue() -> Iterator[str]:
    """A queue no worker reads: what a test queues stays there to be counted."""
    name = f"unconsumed-jobs-{uuid.uuid4().hex[:8]}"
    yield name
    get_redis().delete(name)


def _task_names(queue: str) -> list[str]:
    return [json.loads(raw)["headers"]["task"] for raw in get_redis().lrange(queue, 0, -1)]


def test_a_job_is_queued_only_when_its_transaction_commits(queue: str) -> None:
    pid = make_tenant("jobs commit").project.id
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = job_submit(
            project_id=pid, kind="memory_summarize", task="memory.tasks.memory_summarize", queue=queue
        )
        raise RuntimeError("the request failed after creating its job")
    assert not Job.objects.filter(pk=rolled_back.pk).exists()
    assert _task_names(queue) == []
    job = job_submit(
        project_id=pid,
        kind="memory_summarize",
        task="memory.tasks.memory_summarize",
        queue=queue,
        inputs={"scope": {"user_id": "u"}},
    )
    assert _task_names(queue) == ["memory.tasks.memory_summarize"]
    job.refresh_from_db()
    assert (job.status, job.task, job.queue, job.inputs) == (
        "queued",
        "memory.tasks.memory_summarize",
        queue,
        {"scope": {"user_id": "u"}},
    )


def test_a_run_records_its_outcome_and_a_finished_job_is_not_run_again() -> None:
    pid = make_tenant("jobs run").project.id
    job = job_create(project_id=pid, kind="probe", inputs={"n": 3})
    runs: list[int] = []

    def work(running: Job) -> JobOutcome:
        assert running.status == "running" and running.started_at is not None
        runs.append(running.inputs["n"])
        return JobOutcome(counts={"seen": running.inputs["n"]}, summary="done", timings={"wall_sec": 0.1})

    job_execute(job.id, work, message_type="memory_progress")
    job_execute(job.id, work, message_type="memory_progress")
    job.refresh_from_db()
    assert runs == [3]
    assert (job.status, job.phase, job.progress_pct, job.counts, job.timings) == (
        "succeeded",
        "done",
        100,
        {"seen": 3},
        {"wall_sec": 0.1},
    )
    assert job.finished_at is not None


def test_a_failing_task_fails_its_job_with_the_reason(queue: str) -> None:
    """The memory summarise task, run in-process on a scope that names no user of a project whose
    inputs are broken: the job ends failed and says why."""
    from memory.tasks import memory_summarize

    pid = make_tenant("jobs fail").project.id
    job = job_create(
        project_id=pid,
        kind="memory_summarize",
        task="memory.tasks.memory_summarize",
        queue=queue,
        inputs={"scope": {"no_such_field": "x"}},
    )
    memory_summarize.apply(args=(job.id,))
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.errors and job.errors[-1].startswith("TypeError") and "no_such_field" in job.errors[-1]


def test_only_a_failed_job_is_run_again_with_its_inputs(queue: str) -> None:
    pid = make_tenant("jobs rerun").project.id
    job = job_create(
        project_id=pid,
        kind="memory_consolidate",
        task="memory.tasks.memory_consolidate",
        queue=queue,
        inputs={"scope": {"user_id": "u"}, "older_than_days": 30},
    )
    with pytest.raises(Conflict):
        job_rerun(job_id=job.id)  # queued, not failed
    Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED, errors=["neo4j unavailable"])
    again = job_rerun(job_id=job.id)
    assert (again.status, again.inputs["older_than_days"]) == ("queued", 30)
    assert _task_names(queue) == ["memory.tasks.memory_consolidate"]
    legacy = job_create(project_id=pid, kind="memory_consolidate")  # no task: cannot be re-run
    Job.objects.filter(pk=legacy.pk).update(status=Job.Status.FAILED)
    with pytest.raises(Conflict):
        job_rerun(job_id=legacy.id)


def test_the_admin_reruns_failed_jobs(admin_client, queue: str) -> None:  # type: ignore[no-untyped-def]
    pid = make_tenant("jobs admin").project.id
    failed = job_create(
        project_id=pid, kind="memory_summarize", task="memory.tasks.memory_summarize", queue=queue
    )
    running = job_create(
        project_id=pid, kind="memory_summarize", task="memory.tasks.memory_summarize", queue=queue
    )
    Job.objects.filter(pk=failed.pk).update(status=Job.Status.FAILED)
    Job.objects.filter(pk=running.pk).update(status=Job.Status.RUNNING)
    response = admin_client.post(
        "/admin/core/job/",
        {"action": "rerun", "index": 0, "_selected_action": [failed.pk, running.pk]},
        follow=True,
    )
    assert response.status_code == 200
    notes = [str(m) for m in response.context["messages"]]
    assert "queued 1 job(s) again" in notes, notes
    assert any("only a failed job can be re-run" in note for note in notes), notes
    assert Job.objects.get(pk=failed.pk).status == "queued"
    assert Job.objects.get(pk=running.pk).status == "running"
    assert _task_names(queue) == ["memory.tasks.memory_summarize"]


@pytest.mark.usefixtures("unconsumed_ingest_queue")
def test_a_failed_ingestion_is_resumed_and_finishes() -> None:
    pid = make_tenant("jobs ingest rerun").project.id
    submitted = documents_submit(
        project_id=pid, documents=[DocumentInput(title="Limpets", text="Limpets cling to rocks at low tide.")]
    )
    (batch,) = IngestBatch.objects.filter(job_id=submitted.job_id)
    ingest_batch_fail(batch_id=batch.pk, error="neo4j unavailable: gave up")
    job = Job.objects.get(pk=submitted.job_id)
    assert job.status == "failed" and job.task == "knowledge.tasks.ingest_job_resume"
    status = "MATCH (d:Document {project_id: $p}) RETURN d.status AS s"
    assert graph.read(status, p=pid) == [{"s": "failed"}]
    job_rerun(job_id=job.id)
    assert ingest_job_resume(job_id=job.id) == 1
    assert graph.read(status, p=pid) == [{"s": "pending"}]
    ingest_batch_run(batch_id=batch.pk)
    job.refresh_from_db()
    assert job.status == "succeeded" and graph.read(status, p=pid) == [{"s": "ready"}]


def _named_tasks() -> set[str]:
    """Task names the server apps give as strings (job_enqueue, job_create, send_task, constants)."""
    names = set()
    for app in ("core", "knowledge", "memory", "retrieval", "sessions_graph", "curation"):
        for path in (REPO / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and re.fullmatch(r"[a-z_]+\.tasks\.[a-z_]+", node.value)
                ):
                    names.add(node.value)
    return names


def test_every_task_a_job_names_is_registered() -> None:
    import curation.tasks  # noqa: F401 - the worker imports every app's tasks (autodiscover)
    import knowledge.tasks  # noqa: F401
    import memory.tasks  # noqa: F401

    named = _named_tasks()
    assert {
        "memory.tasks.memory_process",
        "knowledge.tasks.ingest_batch",
        "curation.tasks.erasure_run",
    } <= named
    assert named - set(current_app.tasks) == set()
