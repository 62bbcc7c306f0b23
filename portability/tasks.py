"""Celery tasks of exports, imports and backups: each job task takes its job's id
(core.jobs.tasks.job_task); `backups_due` is Celery beat's."""

from __future__ import annotations

from celery import shared_task

from core.jobs.tasks import JobOutcome, job_task
from core.models import Job
from portability import backups, services


@job_task(message_type="portability_progress")
def export_run(job: Job) -> JobOutcome:
    """Write the project's export archive to the archive storage."""
    return services.export_run(job)


@job_task(message_type="portability_progress")
def import_run(job: Job) -> JobOutcome:
    """Load the job's uploaded archive into its project, all or nothing."""
    return services.import_run(job)


@job_task(message_type="portability_progress")
def backup_run(job: Job) -> JobOutcome:
    """Write a backup archive of the project to the backups storage; prune beyond the schedule."""
    return backups.backup_run(job)


@shared_task(acks_late=True)
def backups_due() -> list[str]:
    """Celery beat: a backup job for every enabled schedule that is due."""
    return backups.backups_due()
