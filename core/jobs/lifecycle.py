"""The lifecycle of a Job row: created with its inputs, queued on Celery once the transaction that
created it commits, started, finished with counts, failed with a reason, and re-run from the admin.

A job's Celery task takes only the job id (`Job.task` names it); everything the run needs is in
`Job.inputs`, so a failed job can be run again as it was first asked."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict
from core.models import Job


def job_create(
    *,
    project_id: str,
    kind: str,
    task: str = "",
    queue: str = "",
    inputs: dict[str, Any] | None = None,
    counts: dict[str, Any] | None = None,
) -> Job:
    """A queued job whose run is the Celery task named `task` on `queue`, called with the job id."""
    return Job.objects.create(
        project_id=project_id, kind=kind, task=task, queue=queue, inputs=inputs or {}, counts=counts or {}
    )


def job_enqueue(*, task: str, args: tuple[Any, ...], queue: str) -> None:
    """Send `task(*args)` to `queue` once the current transaction commits (at once outside one), so a
    worker never picks up work whose rows are not committed, and a rolled-back request queues nothing."""
    transaction.on_commit(lambda: current_app.send_task(task, args=args, queue=queue))


def job_submit(
    *,
    project_id: str,
    kind: str,
    task: str,
    queue: str,
    inputs: dict[str, Any] | None = None,
    counts: dict[str, Any] | None = None,
) -> Job:
    """Create a job and queue its task after the commit (the caller checks the broker first)."""
    with transaction.atomic():
        job = job_create(
            project_id=project_id, kind=kind, task=task, queue=queue, inputs=inputs, counts=counts
        )
        job_enqueue(task=task, args=(job.id,), queue=queue)
    return job


def job_start(*, job_id: str) -> Job | None:
    """Mark a job running and return it; None when it already finished (a redelivered task)."""
    job = Job.objects.get(pk=job_id)
    if job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED):
        return None
    started = job.started_at or timezone.now()
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING, started_at=started)
    job.status, job.started_at = Job.Status.RUNNING, started
    return job


def job_succeed(
    *,
    job: Job,
    counts: dict[str, Any],
    timings: dict[str, Any] | None = None,
    token_usage: dict[str, Any] | None = None,
) -> None:
    """Finish a job: its counts merged with what the run reports, phase done, 100 %."""
    changes: dict[str, Any] = {
        "status": Job.Status.SUCCEEDED,
        "phase": "done",
        "progress_pct": 100,
        "counts": {**job.counts, **counts},
        "finished_at": timezone.now(),
    }
    if timings is not None:
        changes["timings"] = timings
    if token_usage:
        changes["token_usage"] = token_usage
    Job.objects.filter(pk=job.pk).update(**changes)


def job_fail(*, job_id: str, error: str) -> None:
    """Fail a job that has not succeeded, keeping the reason (the last 20 reasons are kept)."""
    job = Job.objects.filter(pk=job_id).exclude(status=Job.Status.SUCCEEDED).first()
    if job is None:
        return
    Job.objects.filter(pk=job_id).update(
        status=Job.Status.FAILED, errors=(job.errors + [error[:500]])[-20:], finished_at=timezone.now()
    )


def job_note_error(*, job_id: str, error: str) -> None:
    """Record a passing error (a retried outage) on a job that goes on."""
    job = Job.objects.get(pk=job_id)
    job.errors = (job.errors + [error[:500]])[-20:]
    job.save(update_fields=["errors"])


def job_rerun(*, job_id: str) -> Job:
    """Queue a failed job again with the inputs it was first given (the admin's re-run)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status != Job.Status.FAILED:
            raise Conflict(f"only a failed job can be re-run; this one is {job.status}")
        if not job.task:
            raise Conflict("this job was created before jobs kept their task and inputs; submit it again")
        Job.objects.filter(pk=job_id).update(
            status=Job.Status.QUEUED, phase="queued", progress_pct=0, finished_at=None
        )
        job_enqueue(task=job.task, args=(job.id,), queue=job.queue)
    job.refresh_from_db()
    return job
