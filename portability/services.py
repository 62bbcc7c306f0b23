"""Export and import requests (docs/portability.md): checked here, run as jobs (portability.tasks).

Archives live in Django's `portability` storage (a directory, PORTABILITY_ARCHIVE_DIR): exports
under `exports/<project>/`, uploaded imports under `imports/` until their job has succeeded.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.storage import Storage, storages

from core import graph
from core.errors import Conflict, InvalidInput, NotFound
from core.jobs import broker_ensure, job_create, job_submit
from core.jobs.tasks import JobOutcome
from core.models import ApiKey, Job, Project
from core.progress.events import job_progress
from core.services import project_create, project_graph_changed
from portability import exporter, graphml, importer
from portability.owners import LABELS

EXPORT_TASK = "portability.tasks.export_run"
IMPORT_TASK = "portability.tasks.import_run"
FORMATS = {"ndjson": "tar.gz", "graphml": "graphml"}
# jobs that write a project's graph: an export or import waits until none is queued or running
WRITER_KINDS = ("ingest", "communities", "memory_process", "memory_summarize", "memory_consolidate", "import")
ACTIVE = (Job.Status.QUEUED, Job.Status.RUNNING)
PROGRESS_EVERY_SEC = 1.0


class IdConflict(Conflict):
    code = "id_conflict"


class EmbedderMismatch(Conflict):
    code = "embedder_mismatch"


def archive_storage() -> Storage:
    return storages["portability"]


def writers_active(project_id: str) -> list[str]:
    jobs = Job.objects.filter(project_id=project_id, kind__in=WRITER_KINDS, status__in=ACTIVE)
    return list(jobs.values_list("id", flat=True)[:20])


def export_submit(*, project_id: str, fmt: str) -> Job:
    """Queue an export; 409 while a job writing the project's graph is queued or running."""
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}", details={"field": "format"})
    busy = writers_active(project_id)
    if busy:
        raise Conflict(
            "the project's graph is being written (ingestion, memory or import jobs); "
            "export once they finish",
            details={"job_ids": busy},
        )
    broker_ensure()
    return job_submit(
        project_id=project_id,
        kind="export",
        task=EXPORT_TASK,
        queue=settings.PORTABILITY_QUEUE,
        inputs={"format": fmt},
    )


def _progress(
    job: Job, total: int = 0, echo: Callable[[str, int, int], None] | None = None
) -> Callable[[str, int], None]:
    """Progress events of a job: `done` rows of `phase` so far; a percentage when the total is known
    (an import's, from its manifest; an export reads as it goes and reports counts only). At most one
    event per PROGRESS_EVERY_SEC within a phase: a batch takes milliseconds, an event more."""
    state: dict[str, Any] = {"nodes": 0, "phase": None, "at": 0.0}

    def report(phase: str, done: int) -> None:
        if phase == "nodes":
            state["nodes"] = done
        now = time.monotonic()
        if phase == state["phase"] and now - state["at"] < PROGRESS_EVERY_SEC:
            return
        state["phase"], state["at"] = phase, now
        so_far = done if phase == "nodes" else state["nodes"] + done
        pct = min(99, 100 * so_far // total) if total else 0
        job_progress(
            job, message_type="portability_progress", phase=phase, pct=pct, summary=f"{done} {phase}"
        )
        if echo is not None:
            echo(phase, done, pct)

    return report


def export_write(
    project: Project, fmt: str, progress: Callable[[str, int], None], name: str, storage: Storage
) -> dict[str, Any]:
    """Export the project into `storage` under `name`; what the job reports."""
    with tempfile.TemporaryFile(prefix="kp-export-") as scratch:
        if fmt == "graphml":
            walk = graphml.export_graphml(project, scratch, progress)
            nodes, rels = walk.node_total, sum(walk.relationships.values())
        else:
            manifest = exporter.export_ndjson(project, scratch, progress)
            nodes, rels = manifest["counts"]["node_total"], manifest["counts"]["relationship_total"]
        size = scratch.tell()
        scratch.seek(0)
        digest = hashlib.sha256()
        while block := scratch.read(1 << 20):
            digest.update(block)
        scratch.seek(0)
        stored = storage.save(name, File(scratch, name=name))
    return {
        "format": fmt,
        "archive": stored,
        "bytes": size,
        "sha256": digest.hexdigest(),
        "nodes": nodes,
        "relationships": rels,
    }


def archive_stamp(job: Job) -> str:
    """The start of an archive's name: when it was taken, and by which job."""
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}-{job.id}"


def export_checked(job: Job, fmt: str, name: str, storage: Storage, *, strict: bool = True) -> dict[str, Any]:
    """Export the job's project into `storage`. If a job writing the project's graph was created after
    the export began, the archive is still whole (a relationship is written only with both its ends)
    but may mix before and after: `strict` fails (and drops the archive); otherwise the counts name
    those jobs (`overlapping_jobs`), as a scheduled backup on a busy project does."""
    project = Project.objects.get(pk=job.project_id)
    counts = export_write(project, fmt, _progress(job), name, storage)
    changed = Job.objects.filter(project_id=project.id, kind__in=WRITER_KINDS, created_at__gte=job.started_at)
    overlapping = list(changed.values_list("id", flat=True)[:20])
    if overlapping and strict:
        storage.delete(counts["archive"])
        raise Conflict("the project's graph was written while it was exported; export again")
    return {**counts, "overlapping_jobs": overlapping} if overlapping else counts


def export_run(job: Job) -> JobOutcome:
    """Write the project's archive to the archive storage."""
    fmt = str(job.inputs.get("format") or "ndjson")
    name = f"exports/{job.project_id}/{archive_stamp(job)}.{FORMATS[fmt]}"
    counts = export_checked(job, fmt, name, archive_storage())
    return JobOutcome(
        counts=counts, summary=f"exported {counts['nodes']} nodes, {counts['relationships']} relationships"
    )


def export_open(*, project_id: str, job_id: str) -> tuple[IO[bytes], str, int]:
    """The archive of a finished export of the project: (file, download name, size)."""
    job = Job.objects.filter(pk=job_id, project_id=project_id, kind="export").first()
    if job is None:
        raise NotFound("no such export")
    if job.status != Job.Status.SUCCEEDED:
        raise Conflict(
            f"the export is {job.status}; its archive is there once it succeeded",
            details={"status": job.status},
        )
    name = str(job.counts.get("archive") or "")
    storage = archive_storage()
    if not name or not storage.exists(name):
        raise NotFound("the export's archive is no longer stored")
    return storage.open(name, "rb"), name.rsplit("/", 1)[-1], int(storage.size(name))


def _project_empty(project_id: str) -> bool:
    return all(
        not graph.read(f"MATCH (n:{label}) WHERE n.project_id = $p RETURN 1 AS x LIMIT 1", p=project_id)
        for label in LABELS
    )


def _target(*, project_id: str | None, caller_project_id: str | None, replace: bool = False) -> Project:
    """The existing project an archive is imported into: the caller's, with nothing running, and
    empty unless its graph is to be replaced."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None or (caller_project_id is not None and caller_project_id != project_id):
        raise NotFound("project not found")
    busy = writers_active(project.id)
    if (
        busy
        or Job.objects.filter(
            project_id=project.id, kind__in=("export", "backup"), status__in=ACTIVE
        ).exists()
    ):
        raise Conflict(
            "the project has jobs queued or running; import once they finish", details={"job_ids": busy}
        )
    if not replace and not _project_empty(project.id):
        raise Conflict(
            "an archive is imported only into an empty project", details={"project_id": project.id}
        )
    return project


def _check_embedder(manifest: dict[str, Any], name: str, dimensions: int) -> None:
    embedder = manifest["embedder"]
    if embedder.get("name") != name or embedder.get("dimensions") != dimensions:
        raise EmbedderMismatch(
            f"the archive's vectors come from {embedder.get('name')} "
            f"({embedder.get('dimensions')} dimensions); "
            f"the project embeds with {name} ({dimensions})",
            details={"archive": embedder, "project": {"name": name, "dimensions": dimensions}},
        )


def _preflight(stored: str, replacing: str | None) -> dict[str, Any]:
    with archive_storage().open(stored, "rb") as handle:
        manifest, clashing, count = importer.preflight(handle, replacing=replacing)
    if count:
        raise IdConflict(
            f"{count} node ids of the archive exist already (in this or another project); "
            "import it into another platform, or delete the project it came from first",
            details={"count": count, "ids": clashing},
        )
    return manifest


_SETTINGS = (
    "chunk_size_tokens",
    "chunk_overlap_tokens",
    "default_retention_days",
    "default_anonymize",
    "default_accessibility",
    "redact_pii_at_ingest",
)


def _new_project(manifest: dict[str, Any], name: str | None, created_by_key: ApiKey | None) -> Project:
    """A project for the archive, with the settings its manifest carries (checked before it exists)."""
    chosen = {field: manifest["project"][field] for field in _SETTINGS if field in manifest["project"]}
    candidate = Project(name=name or str(manifest["project"].get("name") or "imported")[:200], **chosen)
    candidate.embedder, candidate.embedding_dimensions = str(manifest["embedder"]["name"]), 1
    try:
        candidate.full_clean(exclude=["created_by_key"])
    except ValidationError as exc:
        raise InvalidInput(
            "the archive's project settings are not valid", details={"project": exc.message_dict}
        ) from exc
    data = project_create(name=candidate.name, created_by_key=created_by_key)
    Project.objects.filter(pk=data.id).update(**chosen)
    return Project.objects.get(pk=data.id)


def import_submit(
    *,
    upload: File,
    project_id: str | None,
    name: str | None,
    created_by_key: ApiKey | None,
    caller_project_id: str | None,
    enqueue: bool = True,
    replace: bool = False,
) -> tuple[Project, Job]:
    """Store the uploaded archive, check it whole (manifest, checksums, rows, ids not taken, embedder)
    and queue its import into the given empty project or a new one. Nothing is written on failure.
    With `replace`, the given project need not be empty: the job erases its graph before loading
    (ids it holds itself do not clash). With `enqueue` false the job is only created, for the caller
    to run (manage.py backup_restore)."""
    if replace and not project_id:
        raise InvalidInput(
            "only an existing project's graph can be replaced", details={"field": "project_id"}
        )
    target = (
        _target(project_id=project_id, caller_project_id=caller_project_id, replace=replace)
        if project_id
        else None
    )
    if enqueue:
        broker_ensure()
    stored = archive_storage().save(f"imports/{uuid.uuid4()}.tar.gz", upload)
    try:
        manifest = _preflight(stored, project_id if replace else None)
        if target is not None:
            _check_embedder(manifest, target.embedder, target.embedding_dimensions)
        else:
            _check_embedder(
                manifest,
                f"{settings.EMBEDDINGS_PROVIDER}:{settings.EMBEDDINGS_MODEL}",
                settings.EMBEDDINGS_DIMENSIONS,
            )
        project = target or _new_project(manifest, name, created_by_key)
        job = (job_submit if enqueue else job_create)(
            project_id=project.id,
            kind="import",
            task=IMPORT_TASK,
            queue=settings.PORTABILITY_QUEUE,
            inputs={"archive": stored, "created_project": target is None},
            counts={
                "expected_nodes": manifest["counts"].get("node_total"),
                "expected_relationships": manifest["counts"].get("relationship_total"),
            },
        )
    except BaseException:
        archive_storage().delete(stored)
        raise
    return project, job


def import_run(job: Job, echo: Callable[[str, int, int], None] | None = None) -> JobOutcome:
    """Load the job's archive into its project: all of it, or (on any failure) nothing. `echo(phase,
    rows, percent)` hears the progress too (at most once a second a phase)."""
    stored = str(job.inputs["archive"])
    total = int(job.counts.get("expected_nodes") or 0) + int(job.counts.get("expected_relationships") or 0)
    storage = archive_storage()
    if not storage.exists(stored):
        raise NotFound("the uploaded archive is no longer stored")
    with storage.open(stored, "rb") as handle:
        written = importer.load(handle, project_id=job.project_id, progress=_progress(job, total, echo))
    project_graph_changed(project_id=job.project_id)
    storage.delete(stored)
    return JobOutcome(
        counts=written, summary=f"imported {written['nodes']} nodes, {written['relationships']} relationships"
    )
