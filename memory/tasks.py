"""Celery tasks of the memory app: each takes a job id (its inputs are on the job) and is safe to
re-run (a finished job is skipped; a half-done one is redone: facts merge into current ones,
summaries only cover uncovered spans)."""

from __future__ import annotations

from celery import shared_task

from core.jobs.tasks import JobOutcome, job_task
from core.models import Job
from memory import services


@job_task(message_type="memory_progress")
def memory_process(job: Job) -> JobOutcome:
    return services.memories_process(job=job)


@job_task(message_type="memory_progress")
def memory_summarize(job: Job) -> JobOutcome:
    return services.memories_summarize_run(job=job)


@job_task(message_type="memory_progress")
def memory_consolidate(job: Job) -> JobOutcome:
    return services.memories_consolidate_run(job=job)


@shared_task(acks_late=True)
def memory_consolidate_all() -> list[str]:
    """Celery beat: one consolidation job per project (messages older than
    MEMORY_CONSOLIDATE_AFTER_DAYS folded into summaries)."""
    return services.memories_consolidate_schedule()
