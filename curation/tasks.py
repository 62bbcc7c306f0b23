"""Celery tasks of curation. They take ids and are safe to re-run: a finished run or erasure is
skipped, a half-done one goes on from where it stopped (acks_late: a killed worker's task is
delivered again; a database that is down is waited for with backoff)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import Task, shared_task
from django.conf import settings

from core.errors import DependencyUnavailable
from curation import services

logger = logging.getLogger(__name__)


def _run(task: Task, what: str, work: Callable[[], object], fail: Callable[[str], None]) -> None:
    try:
        work()
    except DependencyUnavailable as exc:
        if task.request.retries >= settings.INGEST_MAX_RETRIES:
            fail(f"{exc.dependency} unavailable")
            return
        delay = min(settings.RETRY_BACKOFF_MAX_SEC, settings.INGEST_RETRY_BASE_SEC * 2**task.request.retries)
        logger.warning("%s: %s unavailable, retry in %ss", what, exc.dependency, delay)
        raise task.retry(exc=exc, countdown=delay) from exc
    except Exception as exc:
        logger.exception("%s failed", what)
        fail(f"{exc.__class__.__name__}: {exc}")


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def retention_run(self: Task, run_id: str) -> None:
    _run(
        self,
        f"retention run {run_id}",
        lambda: services.policy_run_execute(run_id=run_id),
        lambda error: services.policy_run_fail(run_id=run_id, error=error),
    )


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def erasure_run(self: Task, request_id: str) -> None:
    _run(
        self,
        f"erasure {request_id}",
        lambda: services.erasure_execute(request_id=request_id),
        lambda _error: services.erasure_fail(request_id=request_id),
    )


@shared_task(acks_late=True)
def retention_enforce_all() -> list[str]:
    """Celery beat: a run of every enabled retention policy in each of its projects."""
    return services.retention_enforce_all()
