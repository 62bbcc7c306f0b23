"""Redis stopped under a running web server: what needs it answers 503 (not 500, no traceback) and
writes nothing, /healthz says Redis is down, and after Redis comes back the platform recovers without a
restart, with the work queued before the outage still done.

The test runs its own Redis (the session's is shared by every other test) on the session's Neo4j,
with its own SQL database, web server and Celery worker.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import graph
from core.runtime.processes import start_redis
from tests.support.processes import REPO, platform_env, provision, start_web, stop, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PASSWORD = "outage-test-redis"


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A real Celery worker on the test's Redis (answers pings there, not on the session's broker)."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "warning",
         "--hostname", f"redis-outage-{os.getpid()}@%h", "--without-mingle", "--without-gossip"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def _wait_job(base: str, auth: dict[str, str], job_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(f"{base}/api/v1/jobs/{job_id}", headers=auth, timeout=30).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def _document(title: str) -> dict[str, str]:
    return {
        "title": title,
        "source_path": f"outage/{title}.txt",
        "text": f"{title}: Grace Hopper wrote the first compiler for the UNIVAC I at Remington Rand.",
    }


def _documents_in_graph(project_id: str) -> list[str]:
    rows = graph.read("MATCH (d:Document {project_id: $p}) RETURN d.title AS t ORDER BY t", p=project_id)
    return [r["t"] for r in rows]


def test_redis_outage_answers_503_writes_nothing_and_recovers(tmp_path: Path) -> None:
    redis = start_redis(tmp_path / "redis", password=PASSWORD)
    env = platform_env(
        REDIS_URL=f"redis://:{PASSWORD}@127.0.0.1:{redis.port}/0",
        VAR_DIR=str(tmp_path / "var"),
        HEALTHZ_REQUIRED="neo4j,redis",
    )
    (tmp_path / "var").mkdir()
    db = tmp_path / "var" / "db.sqlite3"
    project_id, key = provision(env, project="redis outage", scopes="read,write,admin")
    auth = {"Authorization": f"Bearer {key}"}
    web, base = start_web(env, tmp_path / "web.log")
    documents = f"{base}/api/v1/projects/{project_id}/documents"
    worker: subprocess.Popen[bytes] | None = None
    try:
        assert wait_for_status(f"{base}/healthz", 200).json()["components"]["redis"]["status"] == "up"
        # queued before the outage; no worker runs yet, so the task waits in Redis through the outage
        before = httpx.post(documents, json=_document("before"), headers=auth, timeout=30)
        assert before.status_code == 202, before.text

        redis.stop()
        assert not redis.alive()

        health = httpx.get(f"{base}/healthz", timeout=30)
        assert health.status_code == 503
        assert health.json()["components"]["redis"]["status"] == "down"
        assert health.json()["components"]["neo4j"]["status"] == "up"

        with sqlite3.connect(db) as conn:
            jobs_before = conn.execute("SELECT count(*) FROM core_job").fetchone()[0]
        during = httpx.post(documents, json=_document("during"), headers=auth, timeout=60)
        assert during.status_code == 503, during.text
        error = during.json()["error"]
        assert error["code"] == "dependency_unavailable"
        assert error["details"]["dependency"] == "redis"
        assert during.headers["Retry-After"]
        # nothing was written: no job row, no document node
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM core_job").fetchone()[0] == jobs_before
        assert _documents_in_graph(project_id) == ["before"]
        memories = f"{base}/api/v1/projects/{project_id}/memories"
        message = {"messages": [{"role": "user", "text": "I moved to Oslo."}], "scope": {"user_id": "u1"}}
        stored = httpx.post(memories, json=message, headers=auth, timeout=60)
        assert stored.status_code == 503, stored.text
        assert stored.json()["error"]["details"]["dependency"] == "redis"
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM core_job").fetchone()[0] == jobs_before
        assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n", p=project_id)[0]["n"] == 0
        # every other request that queues a task checks the broker before it writes
        queued_work = [
            (f"{memories}:summarize", {"scope": {"user_id": "u1"}}),
            (f"{memories}:consolidate", {"scope": {"user_id": "u1"}, "older_than_days": 90}),
            (f"{base}/api/v1/projects/{project_id}/erasure-requests", {"user_id": "u1"}),
        ]
        for url, body in queued_work:
            refused = httpx.post(url, json=body, headers=auth, timeout=60)
            assert refused.status_code == 503, (url, refused.text)
            assert refused.json()["error"]["details"]["dependency"] == "redis"
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM core_job").fetchone()[0] == jobs_before
            assert conn.execute("SELECT count(*) FROM curation_erasurerequest").fetchone()[0] == 0
        # what needs no Redis keeps working (throttling fails open)
        assert httpx.get(f"{base}/api/v1/projects/{project_id}", headers=auth, timeout=30).status_code == 200
        found = httpx.post(
            f"{base}/api/v1/projects/{project_id}/search",
            json={"query": "Hopper", "mode": "fulltext"},
            headers=auth,
            timeout=30,
        )
        assert found.status_code == 200, found.text

        redis = start_redis(tmp_path / "redis", redis.port, password=PASSWORD)  # same append-only file
        deadline = time.monotonic() + 60
        while httpx.get(f"{base}/healthz", timeout=30).json()["components"]["redis"]["status"] != "up":
            assert time.monotonic() < deadline, "redis never reported up again"
            time.sleep(0.5)
        again = httpx.post(documents, json=_document("during"), headers=auth, timeout=30)
        assert again.status_code == 202, again.text
        assert again.json()["status"] == "queued"  # the failed attempt left no trace that makes it a no-op

        stored = httpx.post(memories, json=message, headers=auth, timeout=30)
        assert stored.status_code == 201, stored.text

        summarized = httpx.post(
            f"{memories}:summarize", json={"scope": {"user_id": "u1"}}, headers=auth, timeout=30
        )
        assert summarized.status_code == 202, summarized.text

        worker = _start_worker(env, tmp_path / "worker.log")
        for response in (before, again, stored, summarized):
            job = _wait_job(base, auth, response.json()["job_id"])
            assert job["status"] == "succeeded", job
        assert _documents_in_graph(project_id) == ["before", "during"]
        statuses = graph.read(
            "MATCH (d:Document {project_id: $p}) RETURN collect(DISTINCT d.status) AS s", p=project_id
        )[0]["s"]
        assert statuses == ["ready"]
    finally:
        if worker is not None:
            stop(worker)
        stop(web)
        redis.stop()
        graph.write_autocommit("MATCH (n {project_id: $p}) DETACH DELETE n", p=project_id)
    log = (tmp_path / "web.log").read_text()
    assert "Traceback" not in log, log
