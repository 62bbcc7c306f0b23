"""Celery tasks of the knowledge app. They take ids and are safe to re-run."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from core.errors import DependencyUnavailable
from core.models import Job
from knowledge import services
from knowledge.communities import communities_rebuild, communities_rebuild_if_quiet

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=None)
def ingest_batch(self, batch_id: int) -> None:
    """A dependency outage (Neo4j, Redis, LLM) is retried with backoff and noted on the job; any
    other error fails the batch's documents with the reason."""
    try:
        services.ingest_batch_run(batch_id=batch_id)
    except DependencyUnavailable as exc:
        attempt = self.request.retries + 1
        if attempt > settings.INGEST_MAX_RETRIES:
            services.ingest_batch_fail(
                batch_id=batch_id, error=f"gave up after {attempt - 1} retries: {exc.message}"
            )
            return
        delay = min(settings.RETRY_BACKOFF_MAX_SEC, settings.INGEST_RETRY_BASE_SEC * 2 ** (attempt - 1))
        logger.warning("batch %s: %s unavailable, retry %s in %ss", batch_id, exc.dependency, attempt, delay)
        try:
            from knowledge.models import IngestBatch

            job_id = IngestBatch.objects.values_list("job_id", flat=True).get(pk=batch_id)
            services.job_note_error(job_id=job_id, error=f"{exc.message} (retry {attempt} in {delay:.0f}s)")
        except Exception:  # noqa: BLE001 - the note is best effort; the retry is what matters
            logger.exception("could not note the error on the job")
        raise self.retry(exc=exc, countdown=delay) from exc
    except Exception as exc:
        logger.exception("batch %s failed", batch_id)
        services.ingest_batch_fail(batch_id=batch_id, error=f"{exc.__class__.__name__}: {exc}")


@shared_task(acks_late=True)
def communities_rebuild_job(job_id: str) -> None:
    job = Job.objects.get(pk=job_id)
    if job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED):
        return
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING)
    try:
        communities_rebuild(project_id=job.project_id, job=job)
    except Exception as exc:
        Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, errors=[str(exc)[:500]])
        raise


@shared_task(bind=True, acks_late=True)
def communities_rebuild_when_quiet(self, project_id: str) -> None:
    wait = communities_rebuild_if_quiet(project_id=project_id)
    if wait is not None:
        raise self.retry(countdown=wait, max_retries=None)
