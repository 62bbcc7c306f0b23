"""Helpers for end-to-end tests that run the platform's real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from core.runtime.processes import free_port, port_open

REPO = Path(__file__).resolve().parents[2]


def platform_env(**overrides: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONUNBUFFERED": "1",
        # a server process runs as `make run` starts it, loading the embedder as it starts
        "EMBEDDINGS_WARM_AT_START": "true",
    }
    env.update(overrides)
    return env


def manage(*args: str, env: dict[str, str], timeout: float = 120) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def provision(env: dict[str, str], *, project: str, scopes: str) -> tuple[str, str]:
    """A fresh platform's SQL and graph schema, one project and an API key for it, through the
    management commands (as an operator would): the project id and the key."""
    manage("migrate", "--noinput", env=env)
    manage("graph_schema", env=env)
    project_id = manage("create_project", "--name", project, env=env).strip()
    key = manage(
        "create_api_key", "--project", project_id, "--name", "k", "--scopes", scopes, env=env
    ).strip()
    return project_id, key


def start_web(
    env: dict[str, str], log_path: Path, port: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """daphne on `port` (a free one when None); the log is appended to, so a restart keeps it."""
    port = port or free_port()
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not port_open(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"web server did not start:\n{log_path.read_text()}")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}"


def wait_for_status(url: str, status: int, timeout: float = 90) -> httpx.Response:
    deadline = time.monotonic() + timeout
    last: httpx.Response | None = None
    while time.monotonic() < deadline:
        try:
            last = httpx.get(url, timeout=10)
            if last.status_code == status:
                return last
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} never answered {status}; last: {last and (last.status_code, last.text)}")


def stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
