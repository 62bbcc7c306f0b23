"""`manage.py backup_restore`: list the backups in the backups storage, or restore one (or an export
archive from a file) into a new project, an empty existing one, or over an existing project's graph
(--replace). The import runs in this process, with the same checks and all-or-nothing load as
POST /projects:import (docs/portability.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import PlatformError
from core.jobs import job_fail
from core.jobs.tasks import JobOutcome, failure_reason, job_execute
from core.models import Job
from portability import backups, services


class Command(BaseCommand):
    help = (
        "List backups (--list) or restore one: a backup's name from --list, or --file with an export "
        "archive, into a new project (--name), an empty existing one (--into), or over one's graph "
        "(--into with --replace)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("backup", nargs="?", help="the backup's name, as --list prints it")
        parser.add_argument("--list", action="store_true", help="list the stored backups, oldest first")
        parser.add_argument("--project", help="with --list: only this project's backups")
        parser.add_argument("--file", type=Path, help="restore this export archive (.tar.gz) instead")
        parser.add_argument("--into", metavar="PROJECT_ID", help="restore into this empty project")
        parser.add_argument("--name", help="name of the new project (default: the archive's)")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="with --into: the project need not be empty; its graph is erased and replaced",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["list"]:
                self._list(options["project"])
            else:
                self._restore(options)
        except PlatformError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc

    def _import(self, job: Job) -> JobOutcome:
        return services.import_run(job, echo=self._echo)

    def _echo(self, phase: str, rows: int, pct: int) -> None:
        self.stderr.write(f"  {phase}: {rows} ({pct} %)")

    def _list(self, project_id: str | None) -> None:
        found = backups.backups_list(project_id=project_id)
        for backup in found:
            taken = backup.taken_at.strftime("%Y-%m-%d %H:%M:%S UTC")
            self.stdout.write(f"{backup.name}\t{taken}\t{backup.size} bytes")
        self.stderr.write(f"{len(found)} backups")

    def _restore(self, options: dict[str, Any]) -> None:
        if bool(options["backup"]) == bool(options["file"]):
            raise CommandError("name one backup, or one archive with --file (or use --list)")
        if options["into"] and options["name"]:
            raise CommandError("--into restores into an existing project, --name into a new one: not both")
        if options["replace"] and not options["into"]:
            raise CommandError("--replace replaces the graph of the project named by --into")
        if options["file"]:
            path: Path = options["file"]
            if not path.is_file():
                raise CommandError(f"no such file: {path}")
            handle = path.open("rb")
        else:
            handle = backups.backup_storage().open(backups.backup_open_name(options["backup"]), "rb")
        with handle:
            project, job = services.import_submit(
                upload=File(handle, name="restore.tar.gz"),
                project_id=options["into"],
                name=options["name"],
                created_by_key=None,
                caller_project_id=None,
                enqueue=False,
                replace=options["replace"],
            )
        self.stderr.write(f"checked; restoring into project {project.id} ({project.name}), job {job.id}")
        try:
            job_execute(job.id, self._import, message_type="portability_progress")
        except BaseException as exc:
            job_fail(job_id=job.id, error=failure_reason(exc))
            # the backup or file is where it was: the copy checked for this restore is not kept
            services.archive_storage().delete(str(job.inputs["archive"]))
            left = "left empty" if options["replace"] else "as it was"
            raise CommandError(
                f"the restore failed, what it wrote was erased, the project is {left}: {failure_reason(exc)}"
            ) from exc
        job.refresh_from_db()
        self.stdout.write(
            f"restored {job.counts.get('nodes')} nodes and {job.counts.get('relationships')} "
            f"relationships into project {project.id} ({project.name})"
        )
