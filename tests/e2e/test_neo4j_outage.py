"""Neo4j stopped under a running web server: 503 (not 500, no traceback) on every API that needs it
(projects, search, memories, ADK sessions, curation), /retrieve's documented 500 `retrieval_failed`,
nothing half-written, then recovery without restart."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import GraphDatabase

from core.runtime.processes import start_neo4j
from tests.support.processes import platform_env, provision, start_web, stop, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _assert_neo4j_503(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.request.url, response.text)
    error = response.json()["error"]
    assert error["code"] == "dependency_unavailable"
    assert error["details"]["dependency"] == "neo4j"
    assert response.headers["Retry-After"]
    assert "Traceback" not in response.text


def _graph_state(driver: Any, project_id: str) -> dict[str, Any]:
    """What the outage must leave as it was: memories, conversations and the session's event chain."""
    records, _, _ = driver.execute_query(
        "OPTIONAL MATCH (m:Memory {project_id: $p}) WITH count(m) AS memories "
        "OPTIONAL MATCH (c:Conversation {project_id: $p}) WITH memories, collect(c.accessibility) AS access "
        "OPTIONAL MATCH (e:Event {project_id: $p}) "
        "RETURN memories, access, count(e) AS events",
        p=project_id,
    )
    return dict(records[0])


def test_neo4j_outage_answers_503_and_recovers(tmp_path: Path, celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    neo4j = start_neo4j(tmp_path / "neo4j", password=os.environ["NEO4J_PASSWORD"])
    # the session's worker (for /healthz) shares this Redis: tasks of this test go to queues nobody reads
    env = platform_env(
        NEO4J_URI=f"bolt://127.0.0.1:{neo4j.port}",
        VAR_DIR=str(tmp_path / "var"),
        INGEST_QUEUE="neo4j-outage",
        MEMORY_QUEUE="neo4j-outage",
    )
    (tmp_path / "var").mkdir()
    project_id, key = provision(env, project="outage", scopes="admin")
    auth = {"Authorization": f"Bearer {key}"}
    web, base = start_web(env, tmp_path / "web.log")
    try:
        assert wait_for_status(f"{base}/healthz", 200).json()["components"]["neo4j"]["status"] == "up"
        assert httpx.post(f"{base}/api/v1/projects", json={"name": "before"}, headers=auth).status_code == 201
        api = f"{base}/api/v1/projects/{project_id}"
        sessions = f"{api}/apps/app/users/ada/sessions"
        remember = {"messages": [{"role": "user", "text": "I live in Lisbon."}], "scope": {"user_id": "ada"}}
        stored = httpx.post(f"{api}/memories", json=remember, headers=auth, timeout=30)
        assert stored.status_code == 201, stored.text
        conversation_id = stored.json()["conversation_id"]
        session = httpx.post(sessions, json={"session_id": "s1"}, headers=auth, timeout=30)
        assert session.status_code == 201, session.text
        first = {"event": {"author": "user", "invocation_id": "i1", "actions": {"state_delta": {"k": 1}}}}
        assert httpx.post(f"{sessions}/s1/events", json=first, headers=auth, timeout=30).status_code == 201
        with GraphDatabase.driver(
            f"bolt://127.0.0.1:{neo4j.port}", auth=("neo4j", os.environ["NEO4J_PASSWORD"])
        ) as driver:
            before = _graph_state(driver, project_id)
        with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as conn:
            jobs_before = conn.execute("SELECT count(*) FROM core_job").fetchone()[0]

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
        # memories: store and search
        more = {"messages": [{"role": "user", "text": "I moved to Porto."}], "scope": {"user_id": "ada"}}
        _assert_neo4j_503(httpx.post(f"{api}/memories", json=more, headers=auth, timeout=30))
        found = {"query": "where does Ada live", "scope": {"user_id": "ada"}}
        _assert_neo4j_503(httpx.post(f"{api}/memories/search", json=found, headers=auth, timeout=30))
        # ADK sessions: read, create, append
        _assert_neo4j_503(httpx.get(f"{sessions}/s1", headers=auth, timeout=30))
        _assert_neo4j_503(httpx.post(sessions, json={"session_id": "s2"}, headers=auth, timeout=30))
        second = {"event": {"author": "agent", "invocation_id": "i2", "actions": {"state_delta": {"k": 2}}}}
        _assert_neo4j_503(httpx.post(f"{sessions}/s1/events", json=second, headers=auth, timeout=30))
        # curation: a conversation's privacy settings
        privacy = f"{api}/conversations/{conversation_id}/privacy"
        _assert_neo4j_503(httpx.get(privacy, headers=auth, timeout=30))
        _assert_neo4j_503(httpx.patch(privacy, json={"accessibility": "public"}, headers=auth, timeout=30))
        # DRIFT keeps seed 002's contract: 500 `retrieval_failed` naming the dependency, no traceback
        drift = httpx.post(
            f"{base}/retrieve", json={"query": "Where is Lisbon?", "project_id": project_id}, headers=auth,
            timeout=60,
        )  # fmt: skip
        assert drift.status_code == 500, drift.text
        assert drift.json()["error"]["code"] == "retrieval_failed"
        assert drift.json()["error"]["details"]["dependency"] == "neo4j"
        assert "Traceback" not in drift.text
        # what does not need Neo4j keeps working
        assert httpx.get(f"{base}/api/v1/projects/{project_id}", headers=auth).status_code == 200
        with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as conn:
            assert conn.execute("SELECT count(*) FROM core_job").fetchone()[0] == jobs_before

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
            assert _graph_state(driver, project_id) == before  # the failed writes left nothing behind
        # and the same writes now go through
        assert httpx.post(f"{api}/memories", json=more, headers=auth, timeout=30).status_code == 201
        appended = httpx.post(f"{sessions}/s1/events", json=second, headers=auth, timeout=30)
        assert appended.status_code == 201, appended.text
        assert appended.json()["seq"] == 2
        s1 = httpx.get(f"{sessions}/s1", headers=auth, timeout=30).json()
        assert [e["invocation_id"] for e in s1["events"]] == ["i1", "i2"]
        assert s1["state"] == {"k": 2}
        changed = httpx.patch(privacy, json={"accessibility": "public"}, headers=auth, timeout=30)
        assert changed.status_code == 200, changed.text
        drift = httpx.post(
            f"{base}/retrieve", json={"query": "Where is Lisbon?", "project_id": project_id}, headers=auth,
            timeout=60,
        )  # fmt: skip
        assert drift.status_code == 200, drift.text

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
