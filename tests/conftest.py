"""Shared fixtures. Neo4j and Redis are real (see tests/plugins/services.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from core import graph
from core.dto import IssuedApiKey, ProjectData
from core.runtime.redis_client import get_redis
from core.services import api_key_create, project_create
from tests.support.openai_server import FakeOpenAI

REPO = Path(__file__).resolve().parent.parent


def _deferred_test_transactions() -> None:
    """The transaction pytest-django wraps a test in begins DEFERRED. The platform's SQLite
    transactions begin IMMEDIATE (config/settings.py): the wrapper would then hold the write lock for
    the whole test, and the web server or Celery worker a test starts could never write. Deferred,
    it takes no lock until the test itself writes. Transactions of the code under test inside a test
    are savepoints of the wrapper; outside one (transactional tests, servers) they begin IMMEDIATE."""
    from django.db import connections
    from django.test import TestCase

    enter = TestCase._enter_atomics.__func__  # type: ignore[attr-defined]

    def enter_deferred(cls: type[TestCase]) -> object:
        modes = {}
        for alias in cls._databases_names():  # type: ignore[attr-defined]
            connection = connections[alias]
            connection.ensure_connection()  # connecting sets the configured mode
            modes[alias] = getattr(connection, "transaction_mode", None)
            connection.transaction_mode = None
        try:
            return enter(cls)
        finally:
            for alias, mode in modes.items():
                connections[alias].transaction_mode = mode

    TestCase._enter_atomics = classmethod(enter_deferred)  # type: ignore[method-assign,assignment]


_deferred_test_transactions()


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def fake_openai(fake_openai_server: FakeOpenAI, settings) -> Iterator[FakeOpenAI]:  # type: ignore[no-untyped-def]
    """The fake server, reset, with the platform's LLM settings pointed at it and fast retries."""
    fake_openai_server.reset()
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = fake_openai_server.base_url
    settings.LLM_API_KEY = "sk-test"
    settings.LLM_MODEL = "fake-chat"
    settings.LLM_TIMEOUT_SEC = 2.0
    settings.RETRY_MAX_ATTEMPTS = 3
    settings.RETRY_BACKOFF_BASE_SEC = 0.01
    settings.RETRY_BACKOFF_FACTOR = 2.0
    settings.RETRY_BACKOFF_MAX_SEC = 0.05
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture(autouse=True)
def _forget_probes() -> None:
    """Each test starts with no failed-auth or cross-tenant probes counted (the suite's requests
    all come from one address, and many tests probe other tenants on purpose)."""
    from core.runtime.redis_client import get_redis

    with contextlib.suppress(Exception):  # tests that stop Redis run without it
        client = get_redis()
        keys = list(client.scan_iter("probe:*", count=1000))
        if keys:
            client.delete(*keys)


@pytest.fixture
def unconsumed_ingest_queue(settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Ingestion tasks this test's commits queue go to a queue no worker reads (the test ingests in
    its own process, and no worker runs another copy); the queue is removed afterwards."""
    settings.INGEST_QUEUE = f"unconsumed-{uuid.uuid4().hex[:8]}"
    try:
        yield settings.INGEST_QUEUE
    finally:
        get_redis().delete(settings.INGEST_QUEUE)


@pytest.fixture
def clean_graph() -> None:
    """Start the test from an empty graph (indexes and constraints stay)."""
    graph.write_autocommit("MATCH (n) CALL { WITH n DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")


@dataclass
class Tenant:
    project: ProjectData
    read_key: IssuedApiKey
    write_key: IssuedApiKey
    admin_key: IssuedApiKey

    def client(self, key: IssuedApiKey | None = None) -> APIClient:
        client = APIClient()
        if key is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.key}")
        return client


def make_tenant(name: str) -> Tenant:
    project = project_create(name=name)
    return Tenant(
        project=project,
        read_key=api_key_create(project_id=project.id, name="read", scopes=["read"]),
        write_key=api_key_create(project_id=project.id, name="write", scopes=["read", "write"]),
        admin_key=api_key_create(project_id=project.id, name="admin", scopes=["admin"]),
    )


@pytest.fixture
def tenant_a(db) -> Tenant:  # type: ignore[no-untyped-def]
    return make_tenant("tenant A")


@pytest.fixture
def tenant_b(db) -> Tenant:  # type: ignore[no-untyped-def]
    return make_tenant("tenant B")


def worker_env() -> dict[str, str]:
    """The environment of a worker process that shares the test session's databases."""
    from django.conf import settings

    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{settings.DATABASES['default']['NAME']}",
        "COMMUNITY_REBUILD_DELAY_SEC": "1",
        "INGEST_RETRY_BASE_SEC": "1",
    }


def start_worker(
    name: str, *, env: dict[str, str] | None = None, concurrency: int = 1, queue: str = "celery"
) -> subprocess.Popen[bytes]:
    """A real Celery worker process (prefork) consuming `queue`; returns once it answers a ping."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            "warning",
            "--hostname",
            f"{name}-{os.getpid()}@%h",
            "--without-mingle",
            "--without-gossip",
            "--queues",
            queue,
        ],
        cwd=REPO,
        env=env or worker_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    from config.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("celery worker exited at start-up")
        replies = app.control.ping(timeout=0.5)
        if any(name in host for reply in replies for host in reply):
            return proc
    proc.terminate()
    raise RuntimeError("celery worker did not answer ping within 60s")


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def start_beat(schedule_dir: Path, *, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real `celery -A config beat` process with its schedule file (and its output, for a failing
    test to show) in `schedule_dir`; `env` sets the schedule (RETENTION_EVERY_HOURS, ...)."""
    log = (schedule_dir / "beat.log").open("wb")
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "--loglevel",
                "info",
                "--schedule",
                str(schedule_dir / "celerybeat-schedule"),
                "--max-interval",
                "1",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


def until(found: Callable[[], Any], what: str, log: Path | None = None, limit_sec: float = 120) -> Any:
    """Poll until `found()` returns something truthy and return it (a bound on waiting, not a speed
    check); past the limit, fail with the end of `log` (a beat's or a server's output)."""
    deadline = time.monotonic() + limit_sec
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.3)
    said = log.read_text()[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"{what}: not seen within {limit_sec}s\n{said}")


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker) -> Iterator[subprocess.Popen[bytes]]:  # type: ignore[no-untyped-def]
    """A real Celery worker on the session's Redis and test database (for health checks and tasks)."""
    proc = start_worker("tests")
    yield proc
    stop_worker(proc)
