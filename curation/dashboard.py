"""The project dashboard of the admin: what a project holds, what its jobs do, what its LLM use
costs, and when retention and backups last ran. Reads only."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from core import graph
from core.llm.usage import project_tokens_per_day
from core.models import Job, Project
from curation import cypher
from curation.models import PolicyRun

TOKEN_DAYS = 14  # days in the token chart
JOB_DAYS = 30  # days of jobs counted by kind
LISTED_JOBS = 10  # running and failed jobs listed


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    pct: float  # of the chart's largest value, for its width or height
    detail: str = ""  # what the value is made of, for its tooltip

    # a column of the token chart: at most 100 px tall, standing on y = 110
    @property
    def height(self) -> float:
        return self.pct

    @property
    def top(self) -> float:
        return round(110 - self.pct, 1)


@dataclass
class ProjectDashboard:
    project: Project
    documents: list[Bar]
    counts: dict[str, int]
    jobs_running: list[Job]
    jobs_failed: list[Job]
    jobs_by_kind: list[dict[str, Any]]
    tokens_per_day: list[Bar]
    tokens_total: int
    tokens_jobs: int
    tokens_requests: int | None  # None: Redis could not say
    last_retention: PolicyRun | None
    last_backup: Job | None


def bars(values: list[tuple[str, int]]) -> list[Bar]:
    top = max((v for _, v in values), default=0)
    return [Bar(label, value, round(100 * value / top, 1) if top else 0.0) for label, value in values]


def _tokens_per_day(project_id: str, today: date) -> tuple[list[Bar], int, int | None]:
    """Columns of the token chart (jobs' tokens plus those spent inside requests, per day), the jobs'
    total and the requests' total (None when Redis could not say)."""
    days = [today - timedelta(days=TOKEN_DAYS - 1 - i) for i in range(TOKEN_DAYS)]
    by_jobs: Counter[date] = Counter()
    jobs = Job.objects.filter(project_id=project_id, created_at__date__gte=days[0]).exclude(token_usage={})
    for created, usage in jobs.values_list("created_at", "token_usage"):
        by_jobs[timezone.localdate(created)] += int((usage or {}).get("total_tokens") or 0)
    by_requests = project_tokens_per_day(project_id, days)
    requests = by_requests or {}
    columns = bars([(d.strftime("%b %d"), by_jobs[d] + requests.get(d, 0)) for d in days])
    detailed = [
        replace(bar, detail=f"jobs {by_jobs[d]:,}, requests {requests.get(d, 0):,}")
        for bar, d in zip(columns, days, strict=True)
    ]
    total_requests = sum(requests.values()) if by_requests is not None else None
    return detailed, sum(by_jobs.values()), total_requests


def _jobs_by_kind(project_id: str, since: Any) -> list[dict[str, Any]]:
    statuses = [str(value) for value in Job.Status.values]
    rows = (
        Job.objects.filter(project_id=project_id, created_at__gte=since)
        .values("kind")
        .annotate(**{s: Count("id", filter=Q(status=s)) for s in statuses})
        .order_by("kind")
    )
    return [dict(row) for row in rows]


def project_dashboard(*, project: Project) -> ProjectDashboard:
    project_id = project.pk
    documents = [(r["status"], r["n"]) for r in graph.read(cypher.DASHBOARD_DOCUMENTS, project_id=project_id)]
    counts = graph.read(cypher.DASHBOARD_COUNTS, project_id=project_id)[0]
    now = timezone.now()
    jobs = Job.objects.filter(project_id=project_id)
    tokens, tokens_jobs, tokens_requests = _tokens_per_day(project_id, timezone.localdate(now))
    return ProjectDashboard(
        project=project,
        documents=bars(documents),
        counts={"documents": sum(n for _, n in documents), **counts},
        jobs_running=list(jobs.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING])[:LISTED_JOBS]),
        jobs_failed=list(jobs.filter(status=Job.Status.FAILED)[:LISTED_JOBS]),
        jobs_by_kind=_jobs_by_kind(project_id, now - timedelta(days=JOB_DAYS)),
        tokens_per_day=tokens,
        tokens_total=sum(bar.value for bar in tokens),
        tokens_jobs=tokens_jobs,
        tokens_requests=tokens_requests,
        last_retention=PolicyRun.objects.filter(project_id=project_id, dry_run=False)
        .select_related("policy")
        .order_by("-created_at")
        .first(),
        last_backup=jobs.filter(kind="backup").order_by("-created_at").first(),
    )
