import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from core.runtime.processes import free_port
from memory.indexes import version_supports_vectors
from tests.plugins.services import started
from tests.support.openai_server import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_healthz_all_up(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    response = APIClient().get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    components = body["components"]
    assert components["neo4j"]["status"] == "up"
    assert version_supports_vectors(components["neo4j"]["version"])
    if started("neo4j"):  # the embedded launcher's Neo4j, whose line follows the JDK (its pom.xml)
        (kernel,) = (REPO / "platform" / "neo4j" / "target" / "lib").glob("neo4j-kernel-[0-9]*.jar")
        assert components["neo4j"]["version"] == kernel.stem.removeprefix("neo4j-kernel-")
    assert components["redis"]["status"] == "up"
    assert components["redis"]["version"].startswith("7.")
    assert components["celery"]["status"] == "up"
    assert components["celery"]["workers"]
    assert components["llm"] == {
        "status": "not_configured",
        "required": False,
        "latency_ms": None,
        "mode": "extractive",
    }


@pytest.mark.django_db
def test_healthz_checks_configured_llm(celery_worker_process, fake_openai: FakeOpenAI) -> None:  # type: ignore[no-untyped-def]
    response = APIClient().get("/healthz")
    assert response.status_code == 200
    assert response.json()["components"]["llm"]["status"] == "up"
    assert fake_openai.requests_to("/models")


@pytest.mark.django_db
def test_healthz_503_when_required_llm_is_down(celery_worker_process, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    response = APIClient().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["components"]["llm"]["status"] == "down"
    assert "error" in body["components"]["llm"]
    assert body["components"]["neo4j"]["status"] == "up"

    settings.HEALTHZ_REQUIRED = ["neo4j", "redis", "celery"]  # an operator may make the LLM optional
    assert APIClient().get("/healthz").status_code == 200


@pytest.mark.django_db
def test_healthz_503_without_a_worker(settings) -> None:  # type: ignore[no-untyped-def]
    # A Celery app on an empty, separate broker database: no worker listens there.
    from config.celery import app

    original = app.conf.broker_url
    app.conf.broker_url = settings.REDIS_URL.rsplit("/", 1)[0] + "/9"
    try:
        response = APIClient().get("/healthz")
    finally:
        app.conf.broker_url = original
    assert response.status_code == 503
    assert response.json()["components"]["celery"]["status"] == "down"


def test_stdlib_platform_module_is_not_shadowed() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import platform, uuid; print(platform.system()); print(uuid.uuid4())"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Linux"
    assert not (REPO / "platform" / "__init__.py").exists()
