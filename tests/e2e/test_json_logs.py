"""LOG_FORMAT=json through the real start scripts: the web process and a Celery worker write their log
records as JSON objects (access records included), with no text log line or banner among them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from config.celery import app
from core.runtime.processes import free_port, port_open
from tests.conftest import stop_worker, worker_env
from tests.support.processes import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

PLAIN_RECORD = re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:,.]+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
# what the start scripts' commands print, not log records (Celery prints its shutdown notice itself)
COMMAND_OUTPUT = {"neo4j and redis are up", "worker: Warm shutdown (MainProcess)"}


def _records(log: Path) -> tuple[list[dict[str, Any]], list[str]]:
    records, text = [], []
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            text.append(line)
    return records, text


def _start(script: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(REPO / "platform" / "bin" / script)],
        cwd=REPO,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_web_and_worker_log_json(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **worker_env(),
        "LOG_FORMAT": "json",
        "VAR_DIR": str(tmp_path / "var"),
        "DEMO_BOOTSTRAP": "false",
        "WEB_PORT": str(port),
        "CELERY_WORKER_CONCURRENCY": "1",
        "CELERY_LOGLEVEL": "info",
        # the scripts run `python`, `celery` and `daphne` from PATH, as make run sets it
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    (tmp_path / "var").mkdir()
    web_log, worker_log = tmp_path / "web.log", tmp_path / "worker.log"
    web = _start("start-web", env, web_log)
    worker = _start("start-worker", env, worker_log)
    try:
        deadline = time.monotonic() + 180
        while not port_open(port):
            assert web.poll() is None and time.monotonic() < deadline, web_log.read_text()
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).status_code in (200, 503)
        assert httpx.get(f"http://127.0.0.1:{port}/nowhere", timeout=60).status_code == 404
        while not any(
            host.startswith("worker@") for reply in app.control.ping(timeout=0.5) for host in reply
        ):
            assert worker.poll() is None and time.monotonic() < deadline, worker_log.read_text()
    finally:
        stop_worker(web)  # SIGTERM, then SIGKILL after 30 s
        stop_worker(worker)

    records, text = _records(web_log)
    assert not [line for line in text if PLAIN_RECORD.match(line) or '"GET /' in line], text
    access = [r for r in records if r["logger"] == "core.access"]
    assert {(r["route"], r["status"]) for r in access} >= {("healthz", 200), ("unmatched", 404)}
    assert all({"time", "level", "message", "method", "path", "duration_ms"} <= r.keys() for r in access)
    assert any(r["logger"].startswith("daphne") for r in records)  # the server's own records, as JSON

    records, text = _records(worker_log)
    assert set(text) <= COMMAND_OUTPUT, text  # no banner, no text log line
    assert any(r["logger"].startswith("celery") and r["level"] == "INFO" for r in records), records
