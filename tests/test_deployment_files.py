"""platform/compose.yaml and platform/Dockerfile read as Compose and Docker would: every service the
deployment needs, pinned images, the platform's processes started by the same scripts `make run` uses,
only documented settings, several workers by default. (No Docker on the machines that run the suite:
tests/external/ runs the same topology as separate processes.)"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.unit


def _compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((REPO / "platform" / "compose.yaml").read_text())


def _documented() -> set[str]:
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.M))


def test_compose_has_every_service_of_a_deployment_with_pinned_images() -> None:
    services = _compose()["services"]
    assert set(services) == {"neo4j", "postgres", "redis", "web", "worker", "beat"}
    for name in ("neo4j", "postgres", "redis"):
        image = services[name]["image"]
        assert re.search(r":\d", image) and "latest" not in image, image
        assert "healthcheck" in services[name]
    assert services["neo4j"]["image"].startswith("neo4j:2026.08.")  # the line the launcher embeds
    replicas = re.fullmatch(r"\$\{WORKERS:-(\d+)\}", str(services["worker"]["deploy"]["replicas"]))
    assert replicas and int(replicas[1]) >= 2


def test_the_platforms_processes_use_the_scripts_of_make_run_and_documented_settings() -> None:
    services = _compose()["services"]
    procfile = (REPO / "platform" / "Procfile").read_text()
    documented = _documented()
    for name in ("web", "worker", "beat"):
        script = services[name]["command"][0]
        assert (REPO / script).is_file() and os.access(REPO / script, os.X_OK), script
        assert script in procfile
        assert set(services[name]["environment"]) <= documented, (
            set(services[name]["environment"]) - documented
        )
        depends = services[name]["depends_on"]
        assert {k: v["condition"] for k, v in depends.items()} == dict.fromkeys(
            ("neo4j", "postgres", "redis"), "service_healthy"
        )
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgresql://")
    assert services["web"]["environment"]["NEO4J_URI"] == "bolt://neo4j:7687"


def test_the_dockerfile_installs_the_lock_and_the_pinned_static_files() -> None:
    dockerfile = (REPO / "platform" / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -r requirements.lock" in dockerfile
    assert "platform/bin/fetch_vendor_js.py" in dockerfile
    assert re.search(r"^FROM python:3\.11-", dockerfile, re.M)
    assert re.search(r"^USER (?!root)", dockerfile, re.M)
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", "var", ".env", "platform/neo4j/target"} <= set(ignored)  # no store or secret in an image
