"""Imports that fail after they started writing leave the project empty, and an import whose worker is
killed with SIGKILL is handed to the next worker, which starts over and loads it exactly once."""

from __future__ import annotations

import os
import signal
import time

import pytest

from core.models import Job, Project
from tests.conftest import Tenant, start_worker, stop_worker, worker_env
from tests.knowledge.helpers import wait_job
from tests.portability.helpers import hand_archive, memory_rows, project_node_count, upload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]


@pytest.mark.usefixtures("celery_worker_process")
def test_an_import_failing_midway_leaves_the_project_empty(tenant_a: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.PORTABILITY_BATCH = 100
    rows = memory_rows(450)
    rows[420]["props"]["details"] = {"nested": "maps cannot be stored"}
    client = tenant_a.client(tenant_a.admin_key)
    response = upload(client, hand_archive(rows), project_id=tenant_a.project.id)
    assert response.status_code == 202, response.content
    job = wait_job(response.json()["job_id"])
    assert job.status == "failed" and "map" in job.errors[-1]
    assert project_node_count(tenant_a.project.id) == 0

    # a relationship naming a node the archive lacks fails the import after every node was written
    rows = memory_rows(250)
    dangling = {
        "type": "NEXT",
        "start_label": "Memory",
        "start": rows[0]["props"]["id"],
        "end_label": "Memory",
        "end": "not-in-the-archive",
        "props": {},
    }
    response = upload(client, hand_archive(rows, [dangling]), project_id=tenant_a.project.id)
    assert response.status_code == 202, response.content
    job = wait_job(response.json()["job_id"])
    assert job.status == "failed" and "lacks" in job.errors[-1]
    assert project_node_count(tenant_a.project.id) == 0

    # a failed import into a project it created leaves that project empty, its job readable
    response = upload(
        client, hand_archive(memory_rows(3) + [{"label": "Memory", "props": {"id": "m", "x": {"a": 1}}}])
    )
    job = wait_job(response.json()["job_id"])
    assert job.status == "failed"
    assert Project.objects.filter(pk=response.json()["project_id"]).exists()
    assert project_node_count(response.json()["project_id"]) == 0


@pytest.mark.e2e
@pytest.mark.slow
def test_worker_killed_mid_import_then_restarted(tenant_a: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.PORTABILITY_QUEUE = "import-kill-test"
    env = {**worker_env(), "PORTABILITY_BATCH": "50"}
    n = 20_000
    worker = start_worker("import-kill", queue="import-kill-test", env=env)
    try:
        response = upload(
            tenant_a.client(tenant_a.admin_key), hand_archive(memory_rows(n)), project_id=tenant_a.project.id
        )
        assert response.status_code == 202, response.content
        job_id = response.json()["job_id"]
        deadline = time.monotonic() + 120
        while project_node_count(tenant_a.project.id) < 1000 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        at_kill = project_node_count(tenant_a.project.id)
        assert 0 < at_kill < n, "the import finished before the kill; nothing was tested"
        assert Job.objects.get(pk=job_id).status == "running"
        worker = start_worker("import-kill2", queue="import-kill-test", env=env)
        job = wait_job(job_id, timeout=240)
        assert job.status == "succeeded", job.errors
        assert job.counts["nodes"] == n
        assert project_node_count(tenant_a.project.id) == n
    finally:
        stop_worker(worker)
