"""Celery tasks of the knowledge app. They take ids and are safe to re-run."""

from __future__ import annotations

from celery import Task, shared_task
from django.conf import settings

from core.errors import DependencyUnavailable
from core.jobs import job_note_error, run_with_retries
from core.jobs.tasks import JobOutcome, job_task
from core.models import Job
from knowledge import services
from knowledge.communities import communities_rebuild, communities_rebuild_if_quiet
from knowledge.models import IngestBatch


@shared_task(bind=True, acks_late=True, max_retries=None)
def ingest_batch(self: Task, batch_id: int) -> None:
    """A dependency outage (Neo4j, Redis, LLM) is retried with backoff and noted on the job; any
    other error fails the batch's documents with the reason."""

    def note(exc: DependencyUnavailable, attempt: int, delay: float) -> None:
        job_id = IngestBatch.objects.values_list("job_id", flat=True).get(pk=batch_id)
        job_note_error(job_id=job_id, error=f"{exc.message} (retry {attempt} in {delay:.0f}s)")

    def fail(exc: BaseException) -> None:
        if isinstance(exc, DependencyUnavailable):
            error = f"gave up after {settings.INGEST_MAX_RETRIES} retries: {exc.message}"
        else:
            error = f"{exc.__class__.__name__}: {exc}"
        services.ingest_batch_fail(batch_id=batch_id, error=error)

    run_with_retries(
        self, f"batch {batch_id}", lambda: services.ingest_batch_run(batch_id=batch_id), fail, on_retry=note
    )


@shared_task(acks_late=True)
def ingest_job_resume(job_id: str) -> None:
    """Re-run a failed ingestion job (the admin's action): its failed batches and their documents
    are pending again and queued."""
    services.ingest_job_resume(job_id=job_id)


@job_task(message_type="ingestion_progress")
def communities_rebuild_job(job: Job) -> JobOutcome:
    return communities_rebuild(project_id=job.project_id, job=job)


@shared_task(bind=True, acks_late=True)
def communities_rebuild_when_quiet(self: Task, project_id: str) -> None:
    wait = communities_rebuild_if_quiet(project_id=project_id)
    if wait is not None:
        raise self.retry(countdown=wait, max_retries=None)
