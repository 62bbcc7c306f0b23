"""Scheduled backups: Celery beat (a real `celery beat` process, its check shortened to a second)
backs up each project whose schedule is due, to the filesystem and to an S3-compatible server (moto's
standalone server on 127.0.0.1, reached through django-storages and boto3), keeps the newest `keep`,
and `manage.py backup_restore` lists and restores them. Also: what is not due or is busy waits, the
admin's "Back up now", and the restore command's bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import boto3
import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from core.errors import Conflict
from core.models import Job
from core.runtime.processes import free_port
from portability import backups, importer, services
from portability.models import BackupSchedule
from tests.conftest import Tenant, make_tenant, start_beat, start_worker, stop_worker, until, worker_env
from tests.knowledge.helpers import wait_job
from tests.memory.helpers import store, user
from tests.portability.content import answers_of, fill, graph_counts, settle
from tests.portability.helpers import hand_archive, memory_rows, project_node_count, stored_imports

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]

BUCKET = "kp-backups"
S3_QUEUE = "backup-s3-test"


def _backup_jobs(project_id: str) -> list[Job]:
    return list(Job.objects.filter(project_id=project_id, kind="backup").order_by("created_at"))


def _succeeded(project_id: str, n: int) -> Callable[[], bool]:
    def check() -> bool:
        jobs = _backup_jobs(project_id)
        failed = [job.errors for job in jobs if job.status == Job.Status.FAILED]
        assert not failed, failed
        return sum(job.status == Job.Status.SUCCEEDED for job in jobs) >= n

    return check


def _due_now(schedule: BackupSchedule) -> None:
    """What the passing of `every_hours` does: the schedule's next run is in the past."""
    BackupSchedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(seconds=1))


def _quiet() -> dict[str, StringIO]:
    return {"stdout": StringIO(), "stderr": StringIO()}


def _restore_over_lost_graph(tenant: Tenant, name: str) -> None:
    """The project's graph is lost; the backup named is restored into it (now empty) and the project
    has every node, relationship and answer back."""
    pid = tenant.project.id
    counts, answers = graph_counts(pid), answers_of(tenant)
    importer.erase(pid)
    assert sum(graph_counts(pid).values()) == 0
    out, err = StringIO(), StringIO()
    call_command("backup_restore", name, "--into", pid, stdout=out, stderr=err)
    assert f"into project {pid}" in out.getvalue()
    assert "  nodes: " in err.getvalue()  # progress as it loads
    assert graph_counts(pid) == counts
    assert answers_of(tenant) == answers


@pytest.fixture
def beat(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Starts `celery beat` with backups checked every second (and nothing else scheduled); stops it
    and waits until no backup job is left queued or running."""
    procs = []

    def run(**env: str) -> Path:
        schedule = {"BACKUP_CHECK_EVERY_SEC": "1", "RETENTION_EVERY_HOURS": "0", **env}
        procs.append(start_beat(tmp_path, env={**worker_env(), **schedule}))
        return tmp_path / "beat.log"

    yield run
    for proc in procs:
        stop_worker(proc)
    until(
        lambda: not Job.objects.filter(kind="backup", status__in=("queued", "running")).exists(),
        "backup jobs finished after beat stopped",
    )


@pytest.mark.slow
@pytest.mark.usefixtures("celery_worker_process")
def test_beat_backs_up_due_projects_to_the_filesystem_keeps_the_newest_and_restores(
    beat: Callable[..., Path],
) -> None:
    tenant, idle, unscheduled = make_tenant("backed-up"), make_tenant("disabled"), make_tenant("unscheduled")
    fill(tenant)
    pid = tenant.project.id
    schedule = BackupSchedule.objects.create(project_id=tenant.project.id, every_hours=24, keep=2)
    BackupSchedule.objects.create(project_id=idle.project.id, enabled=False)
    log = beat()

    until(_succeeded(pid, 1), "the first backup", log)
    schedule.refresh_from_db()
    assert schedule.next_run_at is not None
    assert schedule.next_run_at - timezone.now() > timedelta(hours=23)
    first = backups.backups_list(project_id=pid)
    assert [b.name for b in first] == [_backup_jobs(pid)[0].counts["archive"]]
    assert (Path(settings.BACKUP_DIR) / first[0].name).stat().st_size == first[0].size
    time.sleep(3)  # three checks: not due again for a day
    assert len(_backup_jobs(pid)) == 1

    for n in (2, 3):
        schedule.refresh_from_db()
        _due_now(schedule)
        until(_succeeded(pid, n), f"backup {n}", log)
    jobs = _backup_jobs(pid)
    kept = backups.backups_list(project_id=pid)
    assert [b.name for b in kept] == [job.counts["archive"] for job in jobs[1:]]  # the first is pruned
    assert jobs[-1].counts["pruned"] == 1
    assert BackupSchedule.objects.get(pk=schedule.pk).last_job_id == jobs[-1].id
    assert not _backup_jobs(idle.project.id) and not _backup_jobs(unscheduled.project.id)
    stored_for = {b.project_id for b in backups.backups_list()}
    assert pid in stored_for and not stored_for & {idle.project.id, unscheduled.project.id}

    with pytest.raises(CommandError, match="id_conflict"):  # its ids are the backed-up project's
        call_command(
            "backup_restore", kept[-1].name, "--into", unscheduled.project.id, "--replace", **_quiet()
        )
    assert sum(graph_counts(unscheduled.project.id).values()) == 0
    listing = StringIO()
    call_command("backup_restore", "--list", "--project", pid, stdout=listing, stderr=StringIO())
    assert [line.split("\t")[0] for line in listing.getvalue().splitlines()] == [b.name for b in kept]
    _restore_over_lost_graph(tenant, kept[-1].name)


@pytest.fixture
def s3_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """moto's S3-compatible server as its own process on 127.0.0.1, with an empty bucket; yields the
    options of django-storages' S3 backend that reach it."""
    port = free_port()
    log = (tmp_path / "moto.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
        start_new_session=True,
    )
    log.close()
    options = {
        "bucket_name": BUCKET,
        "endpoint_url": f"http://127.0.0.1:{port}",
        "access_key": "test-access",
        "secret_key": "test-secret",
        "region_name": "us-east-1",
    }
    client = _s3(options)

    def bucket_made() -> bool:
        try:
            client.create_bucket(Bucket=BUCKET)
        except Exception:  # noqa: BLE001 - the server is still starting
            return False
        return True

    until(bucket_made, "moto's S3 server answering", tmp_path / "moto.log", limit_sec=60)
    yield options
    proc.terminate()
    proc.wait(timeout=30)


def _s3(options: dict[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        aws_access_key_id=options["access_key"],
        aws_secret_access_key=options["secret_key"],
        region_name=options["region_name"],
    )


@pytest.mark.slow
@pytest.mark.usefixtures("celery_worker_process")
def test_beat_backs_up_to_an_s3_compatible_server_and_restores_from_it(
    beat: Callable[..., Path], s3_server: dict[str, str]
) -> None:
    tenant = make_tenant("s3")
    pid = tenant.project.id
    s3_env = {
        "BACKUP_STORAGE_BACKEND": "storages.backends.s3.S3Storage",
        "BACKUP_STORAGE_OPTIONS": json.dumps(s3_server),
        "BACKUP_QUEUE": S3_QUEUE,
    }
    worker = start_worker("backup-s3", env={**worker_env(), **s3_env}, queue=S3_QUEUE)
    try:
        fill(tenant)
        schedule = BackupSchedule.objects.create(project_id=tenant.project.id, keep=1)
        log = beat(**s3_env)  # its check goes to the S3 worker's queue, as the backups it submits
        until(_succeeded(pid, 1), "the backup to S3", log)
        _due_now(schedule)
        until(_succeeded(pid, 2), "the second backup to S3", log)
    finally:
        stop_worker(worker)
    jobs = _backup_jobs(pid)
    keys = [o["Key"] for o in _s3(s3_server).list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert keys == [jobs[-1].counts["archive"]]  # keep=1: the first was deleted from the bucket
    assert not (Path(settings.BACKUP_DIR) / pid).exists()  # nothing went to the filesystem

    s3_storages = {
        **settings.STORAGES,
        "backups": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": s3_server},
    }
    with override_settings(STORAGES=s3_storages):
        assert [b.name for b in backups.backups_list()] == keys
        assert backups.backups_list()[0].size == jobs[-1].counts["bytes"]
        _roll_back(tenant, keys[0])


def _roll_back(tenant: Tenant, name: str) -> None:
    """The project changes after its backup; `--replace` puts it back as the backup has it."""
    pid = tenant.project.id
    counts, answers = graph_counts(pid), answers_of(tenant)
    response = store(
        tenant.client(tenant.write_key), pid, [user("I adopted a cat named Radium")], user_id="bo"
    )
    assert response.status_code == 201, response.content
    settle(pid)
    assert graph_counts(pid) != counts
    out = StringIO()
    call_command("backup_restore", name, "--into", pid, "--replace", stdout=out, stderr=StringIO())
    assert f"into project {pid}" in out.getvalue()
    assert graph_counts(pid) == counts
    assert answers_of(tenant) == answers


@pytest.mark.usefixtures("celery_worker_process")
def test_a_schedule_waits_while_its_project_is_written_and_back_up_now_queues_one(
    admin_client: Any,
) -> None:
    tenant = make_tenant("busy")
    pid = tenant.project.id
    schedule = BackupSchedule.objects.create(project_id=tenant.project.id, keep=3)
    ingest = Job.objects.create(project_id=pid, kind="ingest", task="none", queue="none")
    assert backups.backups_due() == []
    schedule.refresh_from_db()
    assert schedule.next_run_at is None and not _backup_jobs(pid)  # still due, tried at the next check
    url = "/admin/portability/backupschedule/"
    response = admin_client.post(
        url, {"action": "back_up_now", "_selected_action": [schedule.pk]}, follow=True
    )
    assert "being written" in response.content.decode() and not _backup_jobs(pid)

    # due for longer than BACKUP_WAIT_MAX_SEC: backed up while written
    later = timezone.now() + timedelta(seconds=settings.BACKUP_WAIT_MAX_SEC + 1)
    [waited] = backups.backups_due(now=later)
    assert wait_job(waited).status == Job.Status.SUCCEEDED
    schedule.refresh_from_db()
    assert schedule.next_run_at == later + timedelta(hours=schedule.every_hours)

    Job.objects.filter(pk=ingest.pk).update(status=Job.Status.SUCCEEDED)
    response = admin_client.post(url, {"action": "back_up_now", "_selected_action": [schedule.pk]})
    assert response.status_code == 302
    [_, queued] = _backup_jobs(pid)
    job = wait_job(queued.id)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    schedule.refresh_from_db()
    assert schedule.last_job_id == job.id
    assert schedule.next_run_at is not None and schedule.next_run_at > timezone.now() + timedelta(hours=23)
    assert backups.backups_due() == []  # backed up just now: not due

    page = admin_client.get(f"{url}{schedule.pk}/change/").content.decode()
    assert job.counts["archive"] in page and f'/admin/core/job/{job.id}/change/">succeeded</a>' in page


def test_an_export_overlapping_a_write_fails_but_a_backup_records_it() -> None:
    tenant = make_tenant("overlap")
    pid = tenant.project.id
    started = timezone.now() - timedelta(minutes=1)
    job = Job.objects.create(project_id=pid, kind="backup", status="running", started_at=started)
    writer = Job.objects.create(project_id=pid, kind="memory_process")  # created while it ran
    storage = backups.backup_storage()
    with pytest.raises(Conflict, match="written while it was exported"):
        services.export_checked(job, "ndjson", f"{pid}/strict.tar.gz", storage)
    assert not storage.exists(f"{pid}/strict.tar.gz")
    counts = services.export_checked(job, "ndjson", f"{pid}/lenient.tar.gz", storage, strict=False)
    assert counts["overlapping_jobs"] == [writer.id] and storage.exists(counts["archive"])
    storage.delete(counts["archive"])


def test_a_curator_who_may_only_view_schedules_cannot_queue_a_backup(client: Any) -> None:
    tenant = make_tenant("no-right")
    schedule = BackupSchedule.objects.create(project_id=tenant.project.id)
    url = "/admin/portability/backupschedule/"
    staff = User.objects.create_user("viewer", password="pw-viewer-1234", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_backupschedule"))
    assert client.get(url).status_code == 200
    response = client.post(url, {"action": "back_up_now", "_selected_action": [schedule.pk]})
    assert response.status_code == 200  # the action is not offered: the list again, nothing done
    assert not _backup_jobs(tenant.project.id)


def test_a_restore_failing_midway_erases_what_it_wrote(tmp_path: Path, settings: Any) -> None:
    settings.PORTABILITY_BATCH = 100
    tenant = make_tenant("restore-fails")
    rows = memory_rows(450)
    rows[420]["props"]["details"] = {"nested": "maps cannot be stored"}  # passes the checks, not Neo4j
    archive_file = tmp_path / "fails.tar.gz"
    archive_file.write_bytes(hand_archive(rows))
    with pytest.raises(CommandError, match="the project is as it was: .*map"):
        call_command("backup_restore", "--file", str(archive_file), "--into", tenant.project.id, **_quiet())
    assert project_node_count(tenant.project.id) == 0
    [job] = Job.objects.filter(project_id=tenant.project.id, kind="import")
    assert job.status == Job.Status.FAILED and "map" in job.errors[-1]
    assert not stored_imports()


def test_backup_restore_refuses_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    tenant = make_tenant("restore-bad")
    quiet = _quiet()
    with pytest.raises(CommandError, match="name one backup"):
        call_command("backup_restore", **quiet)
    with pytest.raises(CommandError, match="not_found"):
        call_command(
            "backup_restore", f"{tenant.project.id}/20260101T000000000000Z-{uuid.uuid4()}.tar.gz", **quiet
        )
    with pytest.raises(CommandError, match="not_found"):
        call_command("backup_restore", "../../etc/passwd", **quiet)
    with pytest.raises(CommandError, match="no such file"):
        call_command("backup_restore", "--file", str(tmp_path / "missing.tar.gz"), **quiet)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not an archive at all")
    with pytest.raises(CommandError, match="invalid_archive"):
        call_command("backup_restore", "--file", str(junk), "--into", tenant.project.id, **quiet)
    with pytest.raises(CommandError, match="not both"):
        call_command(
            "backup_restore", "--file", str(junk), "--into", tenant.project.id, "--name", "x", **quiet
        )
    with pytest.raises(CommandError, match="--replace replaces"):
        call_command("backup_restore", "--file", str(junk), "--replace", **quiet)
    assert sum(graph_counts(tenant.project.id).values()) == 0
    assert not Job.objects.filter(kind="import").exists() and not stored_imports()
