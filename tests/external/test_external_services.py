"""The external-services tier: the platform against engines started as separate server processes, as a
deployment runs them (platform/compose.yaml): a Neo4j server with its own store (not the embedded
launcher the rest of the suite uses), PostgreSQL from Debian's packages instead of SQLite, a Redis
database of its own, one web process and two Celery workers. Everything is set up as an operator would
(management commands) and driven over HTTP; the engines are then read directly to show where the data
went. It proves nothing assumes one process, one worker or SQLite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from celery import Celery
from neo4j import GraphDatabase

from core import graph
from tests.support.external import neo4j_server, postgres_cluster
from tests.support.processes import REPO, provision, start_web, stop

pytestmark = [pytest.mark.slow, pytest.mark.external, pytest.mark.timeout(900)]

DOCUMENTS = [
    {"title": f"Harbour note {i}", "text": f"The harbour of port {i} was dredged by crew {i} in spring."}
    for i in range(8)
] + [{"title": "Hopper", "text": "Grace Hopper wrote the first compiler, the A-0 system, in 1952."}]


def _redis_url(database: int) -> str:
    """The session's Redis server, another database: a broker and locks of this platform alone."""
    return re.sub(r"/\d+$", f"/{database}", os.environ["REDIS_URL"])


def _worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork",
             "--concurrency", "1", "--loglevel", "info", "--hostname", f"{name}@%h",
             "--without-mingle", "--without-gossip"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def _wait_workers(broker: str, names: list[str]) -> None:
    app = Celery(broker=broker)
    deadline = time.monotonic() + 120
    while True:
        replies = app.control.ping(timeout=1)
        if all(any(host.startswith(f"{n}@") for reply in replies for host in reply) for n in names):
            return
        assert time.monotonic() < deadline, f"workers never answered: {replies}"


def _wait_job(base: str, auth: dict[str, str], job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while True:
        job = httpx.get(f"{base}/api/v1/jobs/{job_id}", headers=auth, timeout=30).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, f"job still {job['status']}"
        time.sleep(0.5)


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with (
        neo4j_server(tmp_path / "neo4j", log=tmp_path / "neo4j.log") as (uri, password),
        postgres_cluster(log=tmp_path / "postgres.log") as database_url,
    ):
        broker = _redis_url(7)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "NEO4J_URI": uri,
            "NEO4J_USERNAME": "neo4j",
            "NEO4J_PASSWORD": password,
            "DATABASE_URL": database_url,
            "REDIS_URL": broker,
            "CELERY_BROKER_URL": broker,
            "CELERY_RESULT_BACKEND": broker,
            "VAR_DIR": str(tmp_path / "var"),
            "INGEST_BATCH_SIZE": "1",  # one document per task: the batches spread over both workers
            "PYTHONUNBUFFERED": "1",
        }
        (tmp_path / "var").mkdir()
        import redis

        redis.Redis.from_url(broker).flushdb()
        project_id, key = provision(env, project="external", scopes="read,write")
        web, base = start_web(env, tmp_path / "web.log")
        workers = [_worker(n, env, tmp_path / f"{n}.log") for n in ("alpha", "beta")]
        try:
            _wait_workers(broker, ["alpha", "beta"])
            yield {
                "base": base,
                "auth": {"Authorization": f"Bearer {key}"},
                "project_id": project_id,
                "neo4j": (uri, password),
                "database_url": database_url,
                "logs": tmp_path,
            }
        finally:
            for proc in workers:
                stop(proc)
            stop(web)
            redis.Redis.from_url(broker).flushdb()
        for name in ("web", "alpha", "beta"):
            log = (tmp_path / f"{name}.log").read_text()
            assert "Traceback" not in log, f"{name}:\n{log[-5000:]}"


def test_the_platform_runs_on_a_neo4j_server_postgresql_and_two_workers(platform: dict[str, Any]) -> None:
    base, auth, pid = platform["base"], platform["auth"], platform["project_id"]
    url = f"{base}/api/v1/projects/{pid}"

    submitted = httpx.post(f"{url}/documents", json={"documents": DOCUMENTS}, headers=auth, timeout=60)
    assert submitted.status_code == 202, submitted.text
    job = _wait_job(base, auth, submitted.json()["job_id"])
    assert job["status"] == "succeeded", job
    found = httpx.post(
        f"{url}/search",
        json={"query": "who wrote the first compiler", "mode": "hybrid"},
        headers=auth,
        timeout=120,
    )
    assert found.status_code == 200, found.text
    assert found.json()["items"][0]["document_name"] == "Hopper"
    stored = httpx.post(
        f"{url}/memories",
        json={
            "messages": [{"role": "user", "text": "I moved to Lisbon in May."}],
            "scope": {"user_id": "ana", "thread_id": "t1"},
        },
        headers=auth,
        timeout=60,
    )
    assert stored.status_code in (201, 202), stored.text
    deadline = time.monotonic() + 120  # a store answers at once; a worker embeds the message
    while True:
        recalled = httpx.post(
            f"{url}/memories/search",
            json={"query": "when did she move to Lisbon", "scope": {"user_id": "ana"}},
            headers=auth,
            timeout=60,
        )
        assert recalled.status_code == 200, recalled.text
        if recalled.json()["items"]:
            break
        assert time.monotonic() < deadline, "the message was never searchable"
        time.sleep(0.5)
    assert "Lisbon" in recalled.json()["items"][0]["text"]

    # both workers ran ingestion batches (one document per task)
    ran = {
        name: len(
            re.findall(
                r"knowledge\.tasks\.ingest_batch\[[^\]]+\] succeeded",
                (platform["logs"] / f"{name}.log").read_text(),
            )
        )
        for name in ("alpha", "beta")
    }
    assert ran["alpha"] >= 1 and ran["beta"] >= 1 and sum(ran.values()) == len(DOCUMENTS), ran
    # the graph is in the Neo4j server, the job in PostgreSQL, nothing in the suite's embedded store
    uri, password = platform["neo4j"]
    with GraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (d:Document {project_id: $p}) RETURN count(d) AS n", p=pid
        )
        assert records[0]["n"] == len(DOCUMENTS)
        records, _, _ = driver.execute_query("MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n", p=pid)
        assert records[0]["n"] == 1
    with psycopg.connect(platform["database_url"]) as sql:
        row = sql.execute("SELECT status, kind FROM core_job WHERE id = %s", (job["id"],)).fetchone()
        assert row == ("succeeded", "ingest")
        assert sql.execute("SELECT count(*) FROM core_project").fetchone() == (1,)
    assert graph.read("MATCH (d:Document {project_id: $p}) RETURN count(d) AS n", p=pid)[0]["n"] == 0
