"""Celery tasks of the memory app. They take ids and are safe to re-run (a finished job is skipped;
a half-done one is redone: facts merge into current ones, summaries only cover uncovered spans)."""

from __future__ import annotations

from collections.abc import Callable

from celery import Task, shared_task

from core.models import Job
from core.task_runs import run_with_retries
from memory import services


def _fail(job_id: str, exc: BaseException) -> None:
    Job.objects.filter(pk=job_id).update(
        status=Job.Status.FAILED, errors=[f"{exc.__class__.__name__}: {exc}"[:500]]
    )


def _run(task: Task, job_id: str, work: Callable[[], None]) -> None:
    run_with_retries(task, f"memory job {job_id}", work, lambda exc: _fail(job_id, exc))


@shared_task(bind=True, acks_late=True, max_retries=None)
def memory_process(self, job_id: str, memory_ids: list[str]) -> None:
    _run(self, job_id, lambda: services.memories_process(job_id=job_id, memory_ids=memory_ids))


@shared_task(bind=True, acks_late=True, max_retries=None)
def memory_summarize(self, job_id: str) -> None:
    _run(self, job_id, lambda: services.memories_summarize_run(job_id=job_id))


@shared_task(bind=True, acks_late=True, max_retries=None)
def memory_consolidate(self, job_id: str) -> None:
    _run(self, job_id, lambda: services.memories_consolidate_run(job_id=job_id))


@shared_task(acks_late=True)
def memory_consolidate_all() -> list[str]:
    """Celery beat: one consolidation job per project (messages older than
    MEMORY_CONSOLIDATE_AFTER_DAYS folded into summaries)."""
    return services.memories_consolidate_schedule()
