"""`make run` supervises its processes: each one killed with SIGKILL in turn (worker, web, beat, Redis,
Neo4j) is started again while the others keep serving, the API answers again within 30 s, every job
in flight when a process died finishes exactly once, and SIGTERM then stops every process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import neo4j
import pytest

from core.runtime.processes import free_ports
from tests.support.platform_run import Platform
from tests.support.processes import wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAMS = ("worker", "web", "beat", "redis", "neo4j")
BACK_WITHIN_SEC = 30  # the bound for the API to answer again after a process died


def _docs(tag: str, n: int = 20) -> list[dict[str, str]]:
    return [
        {
            "title": f"{tag} {i}",
            "source_path": f"supervision/{tag}/{i}.txt",
            "text": f"Note {i} about the {tag}: Grace Hopper wrote the first compiler in {1950 + i}.",
        }
        for i in range(n)
    ]


def _serving(api: httpx.Client, base: str, project_id: str) -> bool:
    """/healthz says every component is up and a search (Neo4j, Redis, the embedder) answers."""
    try:
        health = httpx.get(f"{base}/healthz", timeout=5)
        search = api.post(
            f"/api/v1/projects/{project_id}/search", json={"query": "first compiler", "mode": "hybrid"}
        )
    except httpx.HTTPError:
        return False
    return health.status_code == 200 and search.status_code == 200


def _back(platform: Platform, api: httpx.Client, project_id: str, program: str, old_pid: int) -> float:
    """Seconds from the kill until `program` runs again under a new pid and the platform serves."""
    killed = time.monotonic()
    while time.monotonic() - killed < BACK_WITHIN_SEC:
        respawned = platform.spawned_pid(program) != old_pid
        if respawned and _serving(api, platform.base, project_id):
            return time.monotonic() - killed
        time.sleep(0.5)
    raise AssertionError(
        f"{program}: not serving {BACK_WITHIN_SEC} s after the kill\n{platform.output()[-6000:]}"
    )


def _job_done(api: httpx.Client, job_id: str, timeout: float = 300) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = api.get(f"/api/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return dict(job)
        time.sleep(1)
    raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s")


@pytest.mark.timeout(1500)
def test_each_process_killed_is_restarted_and_no_job_is_lost(tmp_path: Path) -> None:
    ports = dict(zip(("neo4j", "redis", "web"), free_ports(3), strict=True))
    platform = Platform(tmp_path / "var", ports)
    try:
        wait_for_status(f"{platform.base}/healthz", 200, timeout=240)
        time.sleep(0.5)
        credentials = platform.credentials()
        project_id, key = credentials["DEMO_PROJECT_ID"], credentials["DEMO_API_KEY"]
        api = httpx.Client(base_url=platform.base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        jobs = {}
        for program in PROGRAMS:
            response = api.post(
                f"/api/v1/projects/{project_id}/documents", json={"documents": _docs(program)}
            )
            assert response.status_code == 202, response.text
            jobs[program] = response.json()["job_id"]
            time.sleep(1.5)  # past Redis's once-a-second append-only fsync: the queued task is on disk
            old_pid = platform.spawned_pid(program)
            os.killpg(old_pid, signal.SIGKILL)  # the process and all it started (pool children, sed)
            took = _back(platform, api, project_id, program, old_pid)
            print(f"{program}: serving again {took:.1f} s after SIGKILL")
        # the web process restarted within this run and kept the key it issued
        assert platform.credentials()["DEMO_API_KEY"] == key
        for program, job_id in jobs.items():
            job = _job_done(api, job_id)
            assert job["status"] == "succeeded", (program, job)
        _assert_each_document_once(platform.var_dir, ports["neo4j"], project_id)
        before_stop = len(platform.lines)
    finally:
        leftovers = platform.stop(signal.SIGTERM)
    assert leftovers == [], f"processes left running: {leftovers}\n{platform.output()}"
    stopping = "\n".join(platform.lines[before_stop:])
    assert "with SIGKILL" not in stopping, stopping  # every process stopped on SIGTERM in time
    assert "STOPPED" in stopping  # Neo4j's shutdown hook completed


def _assert_each_document_once(var_dir: Path, port: int, project_id: str) -> None:
    password = (var_dir / "neo4j_password").read_text().strip()
    with neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=("neo4j", password)) as driver:
        rows, _, _ = driver.execute_query(
            "MATCH (d:Document {project_id: $p}) WHERE d.source_path STARTS WITH 'supervision/' "
            "OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c) "
            "RETURN d.source_path AS path, d.status AS status, count(c) AS chunks",
            p=project_id,
        )
    assert len(rows) == 20 * len(PROGRAMS)
    assert len({r["path"] for r in rows}) == len(rows)
    assert {r["status"] for r in rows} == {"ready"}
    assert {r["chunks"] for r in rows} == {1}
