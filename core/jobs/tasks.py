"""The Celery side of a job: `job_task` turns a function of a Job into a task that takes the job id,
skips a job that already finished, marks it running, retries a dependency outage with backoff,
records success (counts, timings, token usage, a "done" progress event) or the failure's reason."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from celery import Task, shared_task

from core.errors import DependencyUnavailable
from core.jobs.lifecycle import job_fail, job_start, job_succeed
from core.jobs.runs import run_with_retries
from core.models import Job
from core.progress.events import job_progress


@dataclass
class JobOutcome:
    """What a job's run reports: counts merged into the job's, and the summary of its "done" event."""

    counts: dict[str, Any]
    summary: str
    timings: dict[str, Any] | None = None
    token_usage: dict[str, Any] = field(default_factory=dict)


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, DependencyUnavailable):
        return f"{exc.dependency} unavailable: {exc.message}"
    return f"{exc.__class__.__name__}: {exc}"


def job_execute(job_id: str, work: Callable[[Job], JobOutcome], *, message_type: str) -> None:
    """Run a job in this process: skipped when it already finished, else marked running, worked, and
    marked succeeded with a "done" progress event. An exception propagates (the caller fails the job)."""
    job = job_start(job_id=job_id)
    if job is None:
        return
    outcome = work(job)
    job_succeed(job=job, counts=outcome.counts, timings=outcome.timings, token_usage=outcome.token_usage)
    job_progress(job, message_type=message_type, phase="done", pct=100, summary=outcome.summary)


def job_task(*, message_type: str) -> Callable[[Callable[[Job], JobOutcome]], Task]:
    """Decorate `work(job) -> JobOutcome` into a task taking the job id (same module and name): an
    outage is retried with backoff up to INGEST_MAX_RETRIES, any other error fails the job at once."""

    def wrap(work: Callable[[Job], JobOutcome]) -> Task:
        def run(self: Task, job_id: str) -> None:
            run_with_retries(
                self,
                f"job {job_id}",
                lambda: job_execute(job_id, work, message_type=message_type),
                lambda exc: job_fail(job_id=job_id, error=failure_reason(exc)),
            )

        run.__name__, run.__qualname__, run.__doc__ = work.__name__, work.__qualname__, work.__doc__
        run.__module__ = work.__module__
        return shared_task(bind=True, acks_late=True, max_retries=None)(run)

    return wrap
