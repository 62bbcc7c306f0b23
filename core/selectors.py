"""Reads of the core app: projects and platform health."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from celery import current_app as current_celery_app
from django.conf import settings

from core import graph
from core.dto import ProjectData
from core.errors import NotFound
from core.llm.client import llm_ping
from core.models import Job, Project
from core.runtime import warmup
from core.runtime.redis_client import get_redis


def project_get(*, project_id: str) -> ProjectData:
    row = Project.objects.filter(pk=project_id).first()
    if row is None:
        raise NotFound("project not found")
    return project_data(row)


def project_list(
    *, project_id: str | None, limit: int = 100, offset: int = 0
) -> tuple[list[ProjectData], int]:
    """Projects by name; with `project_id` only that one (what an API key may see). Also the total."""
    rows = Project.objects.all()
    if project_id is not None:
        rows = rows.filter(pk=project_id)
    total = rows.count()
    return [project_data(row) for row in rows.order_by("name", "id")[offset : offset + limit]], total


def project_data(row: Project) -> ProjectData:
    return ProjectData(
        id=row.id,
        name=row.name,
        embedder=row.embedder,
        embedding_dimensions=row.embedding_dimensions,
        created_at=row.created_at,
    )


def job_get(*, job_id: str, project_id: str | None) -> Job:
    """A job; with `project_id` only that project's (another project's job answers 404)."""
    jobs = Job.objects.filter(pk=job_id)
    if project_id is not None:
        jobs = jobs.filter(project_id=project_id)
    job = jobs.first()
    if job is None:
        raise NotFound("job not found")
    return job


@dataclass
class ComponentHealth:
    name: str
    status: str  # up | down | not_configured
    required: bool
    latency_ms: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class HealthReport:
    ok: bool
    components: list[ComponentHealth]

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "unavailable",
            "components": {
                c.name: {"status": c.status, "required": c.required, "latency_ms": c.latency_ms, **c.detail}
                for c in self.components
            },
            # this web process's start-up warm-up (informational: never makes the answer 503)
            "warm_up": warmup.state.as_dict(),
        }


def _check_neo4j() -> dict[str, Any]:
    return graph.ping()


def _check_redis() -> dict[str, Any]:
    client = get_redis()
    client.ping()
    info = client.info("server")
    return {"version": info.get("redis_version")}


def _check_celery() -> dict[str, Any]:
    app = current_celery_app  # config.celery's app, the default of every thread

    with app.connection_for_write() as connection:
        replies = app.control.ping(timeout=settings.HEALTHZ_TIMEOUT_SEC / 2, limit=1, connection=connection)
    if not replies:
        raise RuntimeError("no Celery worker answered")
    return {"workers": [name for reply in replies for name in reply]}


def _check_llm() -> dict[str, Any]:
    return llm_ping(timeout_sec=settings.HEALTHZ_TIMEOUT_SEC)


_CHECKS: dict[str, Callable[[], dict[str, Any]]] = {
    "neo4j": _check_neo4j,
    "redis": _check_redis,
    "celery": _check_celery,
    "llm": _check_llm,
}


def health_report() -> HealthReport:
    """Run every check concurrently, each bounded by HEALTHZ_TIMEOUT_SEC."""
    required = set(settings.HEALTHZ_REQUIRED)
    timeout = settings.HEALTHZ_TIMEOUT_SEC
    components: list[ComponentHealth] = []
    pool = ThreadPoolExecutor(max_workers=len(_CHECKS), thread_name_prefix="healthz")
    try:
        started = {name: time.perf_counter() for name in _CHECKS}
        futures = {}
        for name, check in _CHECKS.items():
            if name == "llm" and settings.LLM_PROVIDER == "none":
                components.append(
                    ComponentHealth("llm", "not_configured", False, detail={"mode": "extractive"})
                )
                continue
            futures[name] = pool.submit(check)
        for name, future in futures.items():
            is_required = name in required
            try:
                detail = future.result(timeout=timeout + 0.5)
                status = "up"
            except FutureTimeout:
                detail, status = {"error": f"no answer within {timeout}s"}, "down"
            except Exception as exc:  # noqa: BLE001 - a health check reports every failure
                detail, status = {"error": f"{exc.__class__.__name__}: {str(exc)[:200]}"}, "down"
            latency = round((time.perf_counter() - started[name]) * 1000, 1)
            components.append(ComponentHealth(name, status, is_required, latency, detail))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    ok = all(c.status == "up" for c in components if c.required)
    order = list(_CHECKS)
    components.sort(key=lambda c: order.index(c.name))
    return HealthReport(ok=ok, components=components)
