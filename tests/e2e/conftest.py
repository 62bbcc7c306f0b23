"""Fixtures of the browser tests: the ASGI server on the session's services, and Debian's Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import worker_env
from tests.support.processes import manage, start_web, stop

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    """daphne on a free port, on the session's Neo4j, Redis and test database."""
    env = {**worker_env(), "VAR_DIR": str(tmp_path / "var"), "PYTHONUNBUFFERED": "1"}
    (tmp_path / "var").mkdir()
    manage("collectstatic", "--noinput", "--verbosity", "0", env=env)  # whitenoise serves STATIC_ROOT
    proc, base = start_web(env, tmp_path / "web.log")
    try:
        yield base
    finally:
        stop(proc)
        log = (tmp_path / "web.log").read_text()
        assert "Traceback" not in log, log


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            yield chromium
        finally:
            chromium.close()
