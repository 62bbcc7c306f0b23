from __future__ import annotations

import time
from typing import Any

from rest_framework.test import APIClient

from core import graph
from core.models import Job


def wait_job(job_id: str, timeout: float = 120) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {Job.objects.get(pk=job_id).status} after {timeout}s")


def graph_counts(project_id: str) -> dict[str, int]:
    out = {}
    for label in ("Document", "Chunk", "Entity", "Community", "Source"):
        out[label] = graph.read(f"MATCH (n:{label} {{project_id: $p}}) RETURN count(n) AS n", p=project_id)[
            0
        ]["n"]
    out["RELATED"] = graph.read(
        "MATCH (:Entity {project_id: $p})-[r:RELATED]->() RETURN count(r) AS n", p=project_id
    )[0]["n"]
    return out


def post_document(client: APIClient, project_id: str, **body: Any):  # type: ignore[no-untyped-def]
    return client.post(f"/api/v1/projects/{project_id}/documents", body, format="json")
