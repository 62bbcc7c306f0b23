"""Neo4j stopped under a running web server: 503 (not 500, no traceback), then recovery without restart."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import httpx
import pytest
from neo4j import GraphDatabase

from core.runtime import start_neo4j
from tests.support.processes import manage, platform_env, start_web, stop, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_neo4j_outage_answers_503_and_recovers(tmp_path: Path, celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    neo4j = start_neo4j(tmp_path / "neo4j", password=os.environ["NEO4J_PASSWORD"])
    env = platform_env(NEO4J_URI=f"bolt://127.0.0.1:{neo4j.port}", VAR_DIR=str(tmp_path / "var"))
    (tmp_path / "var").mkdir()
    manage("migrate", "--noinput", env=env)
    manage("graph_schema", env=env)
    project_id = manage("create_project", "--name", "outage", env=env).strip()
    key = manage(
        "create_api_key", "--project", project_id, "--name", "k", "--scopes", "admin", env=env
    ).strip()
    auth = {"Authorization": f"Bearer {key}"}
    web, base = start_web(env, tmp_path / "web.log")
    try:
        assert wait_for_status(f"{base}/healthz", 200).json()["components"]["neo4j"]["status"] == "up"
        assert httpx.post(f"{base}/api/v1/projects", json={"name": "before"}, headers=auth).status_code == 201

        neo4j.stop()
        assert not neo4j.alive()

        health = httpx.get(f"{base}/healthz", timeout=30)
        assert health.status_code == 503
        assert health.json()["components"]["neo4j"]["status"] == "down"
        assert health.json()["components"]["redis"]["status"] == "up"

        response = httpx.post(f"{base}/api/v1/projects", json={"name": "during"}, headers=auth, timeout=30)
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "dependency_unavailable"
        assert error["details"]["dependency"] == "neo4j"
        assert response.headers["Retry-After"]
        assert "Traceback" not in response.text
        # nothing was written: the SQL row of the failed create was rolled back
        with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as conn:
            names = sorted(row[0] for row in conn.execute("SELECT name FROM core_project"))
        assert names == ["before", "outage"]
        # a search answers 503 too, never a 500 with a traceback
        for mode in ("vector", "fulltext", "hybrid"):
            found = httpx.post(
                f"{base}/api/v1/projects/{project_id}/search",
                json={"query": "anything", "mode": mode},
                headers=auth,
                timeout=30,
            )
            assert found.status_code == 503, found.text
            assert found.json()["error"]["details"]["dependency"] == "neo4j"
            assert "Traceback" not in found.text
        # what does not need Neo4j keeps working
        assert httpx.get(f"{base}/api/v1/projects/{project_id}", headers=auth).status_code == 200

        neo4j = start_neo4j(
            tmp_path / "neo4j", neo4j.port, password=os.environ["NEO4J_PASSWORD"]
        )  # same store
        wait_for_status(f"{base}/healthz", 200, timeout=60)
        assert httpx.post(f"{base}/api/v1/projects", json={"name": "after"}, headers=auth).status_code == 201
        again = httpx.post(
            f"{base}/api/v1/projects/{project_id}/search",
            json={"query": "anything"},
            headers=auth,
            timeout=30,
        )
        assert again.status_code == 200, again.text

        with GraphDatabase.driver(
            f"bolt://127.0.0.1:{neo4j.port}", auth=("neo4j", os.environ["NEO4J_PASSWORD"])
        ) as driver:
            records, _, _ = driver.execute_query("MATCH (p:Project) RETURN p.name AS name ORDER BY name")
        assert [r["name"] for r in records] == ["after", "before", "outage"]  # the store survived stop/start
    finally:
        stop(web)
        neo4j.stop()
    log = (tmp_path / "web.log").read_text()
    assert "Traceback" not in log, log
