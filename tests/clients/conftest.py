"""The client packages against the real platform: daphne on the session's Neo4j, Redis and test
database, reached over HTTP exactly as agents reach it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from knowledge_platform_client import PlatformSettings

from tests.conftest import Tenant, make_tenant, worker_env
from tests.support.processes import start_web, stop


@dataclass
class Platform:
    base: str
    log: Path

    def settings(self, tenant: Tenant, *, key: str = "write", **extra: object) -> PlatformSettings:
        issued = {"write": tenant.write_key, "read": tenant.read_key, "admin": tenant.admin_key}[key]
        return PlatformSettings(url=self.base, api_key=issued.key, project_id=tenant.project.id, **extra)


def _web(tmp_path_factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[Platform]:
    root = tmp_path_factory.mktemp(name)
    (root / "var").mkdir()
    proc, base = start_web(
        {**worker_env(), "VAR_DIR": str(root / "var"), "PYTHONUNBUFFERED": "1", **env}, root / "web.log"
    )
    try:
        yield Platform(base, root / "web.log")
    finally:
        stop(proc)
        log = (root / "web.log").read_text()
        assert "Traceback" not in log, log


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def platform_web(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Platform]:  # type: ignore[no-untyped-def]
    yield from _web(tmp_path_factory, "platform-web", API_THROTTLE_RATE="100000/min")


@pytest.fixture
def client_tenant(transactional_db) -> Tenant:  # type: ignore[no-untyped-def]
    """A committed tenant (the web process must see its keys), with a unique name."""
    return make_tenant(f"client {uuid.uuid4().hex[:8]}")


@pytest.fixture
def other_tenant(transactional_db) -> Tenant:  # type: ignore[no-untyped-def]
    return make_tenant(f"other {uuid.uuid4().hex[:8]}")
