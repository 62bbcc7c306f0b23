"""How the platform's Celery tasks run their work: a dependency outage (Neo4j, Redis, LLM) is retried
with exponential backoff up to INGEST_MAX_RETRIES, then the work is failed; any other error fails it
at once (logged). The task must be bound (`bind=True`) with `max_retries=None`."""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import (  # current_app: the project's app (config loads it); core imports no config
    Task,
    current_app,
)
from django.conf import settings

from core.errors import DependencyUnavailable
from core.runtime.redis_client import get_redis

logger = logging.getLogger(__name__)


def run_with_retries(
    task: Task,
    what: str,
    work: Callable[[], object],
    fail: Callable[[BaseException], None],
    on_retry: Callable[[DependencyUnavailable, int, float], None] | None = None,
) -> None:
    """Run `work`; `what` names it in logs; `fail` records a failure (it gets the exception);
    `on_retry(exc, attempt, delay)`, when given, notes a retry before it is scheduled."""
    try:
        work()
    except DependencyUnavailable as exc:
        if task.request.retries >= settings.INGEST_MAX_RETRIES:
            fail(exc)
            return
        delay = min(settings.RETRY_BACKOFF_MAX_SEC, settings.INGEST_RETRY_BASE_SEC * 2**task.request.retries)
        logger.warning("%s: %s unavailable, retry in %ss", what, exc.dependency, delay)
        if on_retry is not None:
            try:
                on_retry(exc, task.request.retries + 1, delay)
            except Exception:  # noqa: BLE001 - the note is best effort; the retry is what matters
                logger.exception("%s: could not note the retry", what)
        raise task.retry(exc=exc, countdown=delay) from exc
    except Exception as exc:
        logger.exception("%s failed", what)
        fail(exc)


def broker_ensure() -> None:
    """Raise DependencyUnavailable("redis") when the Celery broker cannot be reached. A request that
    writes work for a task calls this before writing: tasks are queued after the commit, so a broker
    found down only then would leave the work written and never queued (a 503 that wrote something)."""
    try:
        if settings.CELERY_BROKER_URL == settings.REDIS_URL:
            # the platform's own Redis: a PING on the shared client's kept connection (a fraction of
            # a millisecond, where a new broker connection costs ~3 ms on every store)
            get_redis().ping()
            return
        with current_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=0, timeout=settings.HEALTHZ_TIMEOUT_SEC)
    except Exception as exc:
        raise DependencyUnavailable("redis", f"celery broker: {exc}") from exc
