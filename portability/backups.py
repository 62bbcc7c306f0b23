"""Scheduled backups (docs/portability.md): Celery beat submits a backup job for every enabled
schedule that is due; the job writes an NDJSON export archive to Django's "backups" storage (a
directory by default, S3 or Azure Blob through django-storages) as `<project id>/<UTC time>-<job
id>.tar.gz`, then deletes that project's archives beyond the schedule's `keep`. `manage.py
backup_restore` lists them and restores one through the import (portability.services)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.errors import Conflict, NotFound
from core.jobs import broker_ensure, job_submit
from core.jobs.tasks import JobOutcome
from core.models import Job
from portability.models import BackupSchedule
from portability.services import ACTIVE, archive_stamp, export_checked, writers_active

logger = logging.getLogger(__name__)

BACKUP_TASK = "portability.tasks.backup_run"
# `<project id>/<YYYYmmddTHHMMSSffffffZ>-<job id>.tar.gz` (UTC, to the microsecond): only names of
# this shape are listed or pruned
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ARCHIVE_NAME = re.compile(rf"^({_UUID})/(\d{{8}}T\d{{12}}Z)-{_UUID}\.tar\.gz$")


@dataclass(frozen=True)
class Backup:
    name: str  # within the backups storage
    project_id: str
    taken_at: datetime
    size: int


def backup_storage() -> Storage:
    return storages["backups"]


def backups_due(*, now: datetime | None = None) -> list[str]:
    """Celery beat: a backup job for every enabled schedule whose time has come. A project whose graph
    is being written is left due and tried at the next check, until it has waited BACKUP_WAIT_MAX_SEC:
    then it is backed up while written (a project busy all day still gets its backup)."""
    now = now or timezone.now()
    due = BackupSchedule.objects.filter(enabled=True).filter(
        Q(next_run_at__isnull=True) | Q(next_run_at__lte=now)
    )
    submitted = []
    for schedule in due:
        overdue = now - (schedule.next_run_at or schedule.created_at)
        waited_enough = overdue.total_seconds() >= settings.BACKUP_WAIT_MAX_SEC
        try:
            submitted.append(backup_submit(schedule=schedule, now=now, while_written=waited_enough).id)
        except Conflict as exc:
            logger.info("backup of project %s waits: %s", schedule.project_id, exc.message)
    return submitted


def backup_submit(
    *, schedule: BackupSchedule, now: datetime | None = None, while_written: bool = False
) -> Job:
    """Queue a backup of the schedule's project now and move its next run `every_hours` on. 409 while
    a backup of it is queued or running, or (unless `while_written`) a job writing its graph is."""
    now = now or timezone.now()
    project_id = schedule.project_id
    running = Job.objects.filter(project_id=project_id, kind="backup", status__in=ACTIVE)
    if running.exists():
        raise Conflict("a backup of the project is queued or running")
    busy = writers_active(project_id)
    if busy and not while_written:
        raise Conflict("the project's graph is being written", details={"job_ids": busy})
    broker_ensure()
    with transaction.atomic():
        # the schedule's next run moves only if nobody moved it since it was read (two beats)
        moved = BackupSchedule.objects.filter(pk=schedule.pk, next_run_at=schedule.next_run_at).update(
            next_run_at=now + timedelta(hours=schedule.every_hours)
        )
        if not moved:
            raise Conflict("the backup was submitted by another check")
        job = job_submit(project_id=project_id, kind="backup", task=BACKUP_TASK, queue=settings.BACKUP_QUEUE)
        BackupSchedule.objects.filter(pk=schedule.pk).update(last_job=job)
    return job


def backup_run(job: Job) -> JobOutcome:
    """Write the project's archive to the backups storage, then prune beyond the schedule's `keep`.
    Writes to the project while it runs do not fail it (a backup is better than none); its counts
    name the jobs that overlapped."""
    name = f"{job.project_id}/{archive_stamp(job)}.tar.gz"
    counts = export_checked(job, "ndjson", name, backup_storage(), strict=False)
    schedule = BackupSchedule.objects.filter(project_id=job.project_id).first()
    pruned = backups_prune(project_id=job.project_id, keep=schedule.keep) if schedule else []
    return JobOutcome(
        counts={**counts, "pruned": len(pruned)},
        summary=f"backed up {counts['nodes']} nodes, {counts['relationships']} relationships"
        + (f"; deleted {len(pruned)} older backups" if pruned else ""),
    )


def _names(storage: Storage, project_id: str) -> list[str]:
    try:
        _dirs, files = storage.listdir(project_id)
    except FileNotFoundError:
        return []
    return sorted(f"{project_id}/{f}" for f in files if ARCHIVE_NAME.match(f"{project_id}/{f}"))


def backups_prune(*, project_id: str, keep: int) -> list[str]:
    """Delete the project's archives but the newest `keep`; the names deleted."""
    storage = backup_storage()
    old = _names(storage, project_id)[:-keep] if keep > 0 else []
    for name in old:
        storage.delete(name)
    return old


def backups_list(*, project_id: str | None = None) -> list[Backup]:
    """The archives in the backups storage (of one project, or all), oldest first."""
    storage = backup_storage()
    if project_id is None:
        try:
            projects, _files = storage.listdir("")
        except FileNotFoundError:
            projects = []
    else:
        projects = [project_id]
    found = []
    for pid in sorted(projects):
        for name in _names(storage, pid):
            match = ARCHIVE_NAME.match(name)
            assert match is not None  # _names keeps only matching names
            taken = datetime.strptime(match.group(2), "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
            found.append(Backup(name=name, project_id=pid, taken_at=taken, size=storage.size(name)))
    return sorted(found, key=lambda b: (b.taken_at, b.name))


def backup_open_name(name: str) -> str:
    """`name` if it is a backup in the storage; else NotFound."""
    if not ARCHIVE_NAME.match(name) or not backup_storage().exists(name):
        raise NotFound(f"no backup {name!r} in the backups storage")
    return name
