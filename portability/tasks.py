"""Celery tasks of exports and imports: each takes its job's id (core.jobs.tasks.job_task)."""

from __future__ import annotations

from core.jobs.tasks import JobOutcome, job_task
from core.models import Job
from portability import services


@job_task(message_type="portability_progress")
def export_run(job: Job) -> JobOutcome:
    """Write the project's export archive to the archive storage."""
    return services.export_run(job)


@job_task(message_type="portability_progress")
def import_run(job: Job) -> JobOutcome:
    """Load the job's uploaded archive into its project, all or nothing."""
    return services.import_run(job)
