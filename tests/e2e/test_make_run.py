"""`make run`'s process set (platform/run.py): everything starts, /healthz is 200, Ctrl-C stops it all,
and a second start on the same directories finds the same data."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest

from core.runtime.processes import free_port, free_ports, spawn_platform
from tests.support.platform_run import Platform
from tests.support.processes import REPO, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _ports() -> dict[str, int]:
    return dict(zip(("neo4j", "redis", "web"), free_ports(3), strict=True))


async def _mcp_session(base: str, key: str) -> tuple[set[str], list[Any], list[Any]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    async with http, Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        tools = await client.list_tools()
        found = await client.call_tool("search", {"query": "How are communities built?", "top_k": 3})
        message = {"role": "user", "text": "I take the night train to Vienna."}
        stored = await client.call_tool("memory_add", {"messages": [message], "scope": {"user_id": "mcp"}})
        assert not found.is_error and not stored.is_error, (found.content, stored.content)
        # the store's processing job, followed to its end (the platform is stopped next)
        job = {"job_id": stored.structured_content["job_id"]}
        for _ in range(120):
            status = (await client.call_tool("job_status", job)).structured_content["status"]
            if status in ("succeeded", "failed"):
                break
            await anyio.sleep(0.5)
        assert status == "succeeded", status
    return (
        {t.name for t in tools.tools},
        found.structured_content["items"],
        stored.structured_content["stored"],
    )


# Above the suite's 300 s: the waits below add up to about 860 s in the worst case (two starts of
# 240 s, the sample's 180 s, two shutdowns of 100 s).
@pytest.mark.timeout(1200)
def test_platform_starts_serves_and_stops_cleanly(tmp_path: Path) -> None:
    ports = _ports()
    platform = Platform(tmp_path / "var", ports)
    try:
        health = wait_for_status(f"{platform.base}/healthz", 200, timeout=240).json()
        assert {name for name, c in health["components"].items() if c["status"] == "up"} == {
            "neo4j",
            "redis",
            "celery",
        }
        time.sleep(0.5)
        project_id, key = platform.value("demo project"), platform.credentials()["DEMO_API_KEY"]
        assert platform.credentials()["DEMO_PROJECT_ID"] == project_id
        # no secret in the log: not the key, not the admin password
        assert (
            key not in platform.output() and platform.credentials()["ADMIN_PASSWORD"] not in platform.output()
        )
        assert re.search(r"credentials\s+\S+/credentials", platform.output())
        for name in ("secret_key", "neo4j_password", "redis_password"):
            assert (tmp_path / "var" / name).stat().st_mode & 0o777 == 0o600, name
        _embedded_services_need_passwords(ports, tmp_path / "var")
        response = httpx.get(
            f"{platform.base}/api/v1/projects/{project_id}", headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 200
        assert httpx.get(f"{platform.base}/admin/login/").status_code == 200
        assert httpx.get(f"{platform.base}/static/admin/css/base.css").status_code == 200
        assert httpx.get(f"{platform.base}/api/docs/").status_code == 200
        # the sample corpus is ingested by the platform's own worker
        deadline = time.monotonic() + 180
        ready = 0
        while ready < 5 and time.monotonic() < deadline:
            listing = httpx.get(
                f"{platform.base}/api/v1/projects/{project_id}/documents?status=ready",
                headers={"Authorization": f"Bearer {key}"},
            ).json()
            ready = listing["total"]
            time.sleep(1)
        assert ready == 5, platform.output()
        # the Agent Framework sample, offline, against this platform with the key it printed
        sample = REPO / "clients" / "agent-framework" / "samples" / "memory_two_sessions.py"
        clients = [REPO / "clients" / p / "src" for p in ("platform-client", "agent-framework")]
        env = {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": os.pathsep.join(str(p) for p in clients),
            "KNOWLEDGE_PLATFORM_URL": platform.base,
            "KNOWLEDGE_PLATFORM_API_KEY": key,
            "KNOWLEDGE_PLATFORM_PROJECT_ID": project_id,
        }
        run = subprocess.run(
            [sys.executable, str(sample)], env=env, capture_output=True, text=True, timeout=180, check=False
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert "Ana remembered across sessions: True; Bruno saw Ana's memory: False" in run.stdout
        # an MCP client (the SDK's own) lists the tools, searches and stores a memory
        listed, found, stored = anyio.run(_mcp_session, platform.base, key)
        assert {"search", "memory_add", "drift_search"} <= listed
        assert found and stored
    finally:
        leftovers = platform.ctrl_c()
    assert leftovers == [], f"processes left running: {leftovers}\n{platform.output()}"
    out = platform.output()
    assert "STOPPED" in out  # Neo4j's shutdown hook completed
    assert "SIGKILL" not in out
    assert "Traceback" not in out, out

    # a second start on the same directories: same demo project, a fresh key
    again = Platform(tmp_path / "var", _ports())
    try:
        wait_for_status(f"{again.base}/healthz", 200, timeout=240)
        time.sleep(0.5)
        assert again.value("demo project") == project_id
        assert again.credentials()["DEMO_API_KEY"] != key
        # the previous start's key is revoked; the new one works
        url = f"{again.base}/api/v1/projects/{project_id}"
        assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 401
        fresh = again.credentials()["DEMO_API_KEY"]
        assert httpx.get(url, headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    finally:
        assert again.ctrl_c() == []


def _embedded_services_need_passwords(ports: dict[str, int], var_dir: Path) -> None:
    """Neo4j and Redis of `make run` refuse a client without the generated password."""
    import neo4j
    import redis

    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=ports["redis"], socket_timeout=5).ping()
    password = (var_dir / "redis_password").read_text().strip()
    assert redis.Redis(port=ports["redis"], password=password, socket_timeout=5).ping()
    uri = f"bolt://127.0.0.1:{ports['neo4j']}"
    with (
        neo4j.GraphDatabase.driver(uri, auth=("neo4j", "neo4j")) as driver,
        pytest.raises(neo4j.exceptions.AuthError),
    ):
        driver.verify_connectivity()
    secret = (var_dir / "neo4j_password").read_text().strip()
    with neo4j.GraphDatabase.driver(uri, auth=("neo4j", secret)) as driver:
        driver.verify_connectivity()


@pytest.mark.timeout(600)  # a start of up to 180 s and a shutdown of 60 s, with room
def test_external_servers_are_not_started(tmp_path: Path) -> None:
    """With NEO4J_URI and REDIS_URL set (here: the test session's servers), run.py starts neither."""
    env = {
        **os.environ,
        "VAR_DIR": str(tmp_path / "var"),
        "WEB_PORT": str(free_port()),
        "CELERY_WORKER_CONCURRENCY": "1",
    }
    proc = spawn_platform(env)
    lines: list[str] = []
    threading.Thread(
        target=lambda: lines.extend(line.rstrip() for line in proc.stdout or []), daemon=True
    ).start()
    try:
        wait_for_status(f"http://127.0.0.1:{env['WEB_PORT']}/healthz", 200, timeout=180)
        names = {p.name() for p in psutil.Process(proc.pid).children(recursive=True)}
        assert "java" not in names
        assert "redis-server" not in names
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    out = "\n".join(lines)
    assert "neo4j: external server configured, not started" in out
    assert "redis: external server configured, not started" in out
