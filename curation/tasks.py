"""Celery tasks of curation. They take ids and are safe to re-run: a finished run or erasure is
skipped, a half-done one goes on from where it stopped (acks_late: a killed worker's task is
delivered again; a database that is down is waited for with backoff)."""

from __future__ import annotations

from celery import Task, shared_task

from core.errors import DependencyUnavailable
from core.jobs import run_with_retries
from curation import services


def _reason(exc: BaseException) -> str:
    if isinstance(exc, DependencyUnavailable):
        return f"{exc.dependency} unavailable"
    return f"{exc.__class__.__name__}: {exc}"


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def retention_run(self: Task, run_id: str) -> None:
    run_with_retries(
        self,
        f"retention run {run_id}",
        lambda: services.policy_run_execute(run_id=run_id),
        lambda exc: services.policy_run_fail(run_id=run_id, error=_reason(exc)),
    )


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def erasure_run(self: Task, request_id: str) -> None:
    run_with_retries(
        self,
        f"erasure {request_id}",
        lambda: services.erasure_execute(request_id=request_id),
        lambda _exc: services.erasure_fail(request_id=request_id),
    )


@shared_task(acks_late=True)
def retention_enforce_all() -> list[str]:
    """Celery beat: a run of every enabled retention policy in each of its projects."""
    return services.retention_enforce_all()
