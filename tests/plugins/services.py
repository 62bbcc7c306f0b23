"""pytest plugin: real Neo4j and Redis for the test session.

Loaded with `-p tests.plugins.services` so it runs before pytest-django reads the settings: it
starts the embedded Neo4j launcher and Redis on free ports with fresh temp dirs and exports
NEO4J_URI / REDIS_URL. When those variables already point at external servers, nothing is started.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from core.auth.secrets import install_secret
from core.runtime.processes import ManagedProcess, start_neo4j, start_redis

_started: list[ManagedProcess] = []
_temp_dirs: list[Path] = []


def _session_environment(prefix: str) -> Path:
    """A fresh temp dir whose var/ is the session's VAR_DIR, and the settings the suite decides."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    _temp_dirs.append(root)
    os.environ["VAR_DIR"] = str(root / "var")
    (root / "var" / "static").mkdir(parents=True)
    # The suite decides LLM and embedder settings itself; a developer's .env must not leak in.
    os.environ["LLM_PROVIDER"] = "none"
    os.environ["EMBEDDINGS_PROVIDER"] = "local"
    # No warm-up thread in the test process: its model import parses source while pytest rewrites
    # test modules, and CPython 3.11's AST recursion counter is not thread-safe (a collection error)
    os.environ["EMBEDDINGS_WARM_AT_START"] = "false"
    # No DJANGO_SECRET_KEY: the session's processes share the per-install key in VAR_DIR/secret_key.
    os.environ.pop("DJANGO_SECRET_KEY", None)
    return root


def _start_services() -> None:
    root = _session_environment("kp-test-")
    # The embedded services run with generated passwords, as under `make run`.
    if not os.environ.get("REDIS_URL"):
        password = install_secret(root / "var" / "redis_password")
        redis = start_redis(root / "redis", password=password)
        _started.append(redis)
        os.environ["REDIS_URL"] = f"redis://:{password}@127.0.0.1:{redis.port}/0"
    if not os.environ.get("NEO4J_URI"):
        password = install_secret(root / "var" / "neo4j_password")
        neo4j = start_neo4j(root / "neo4j", password=password)
        _started.append(neo4j)
        os.environ["NEO4J_URI"] = f"bolt://127.0.0.1:{neo4j.port}"
        os.environ["NEO4J_USERNAME"] = "neo4j"
        os.environ["NEO4J_PASSWORD"] = password


def _unit_tier() -> None:
    """`make test-unit`: tests marked `unit` need neither Neo4j nor Redis, so none is started; the
    settings point at a closed port, so a test that reaches for either fails at once."""
    _session_environment("kp-unit-")
    os.environ["NEO4J_URI"] = "bolt://127.0.0.1:9"
    os.environ["REDIS_URL"] = "redis://127.0.0.1:9/0"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):  # type: ignore[no-untyped-def]
    if os.environ.get("TEST_TIER") == "unit":
        _unit_tier()
    elif not any(a in ("--collect-only", "--co", "--help", "-h") for a in args):
        try:
            _start_services()
        except Exception:
            _stop_services()
            raise
    return (yield)


def started(name: str) -> bool:
    """Whether the suite started this service itself (not an external server from the environment)."""
    return any(proc.name == name for proc in _started)


def _stop_services() -> None:
    while _started:
        _started.pop().stop()
    while _temp_dirs:
        shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    _stop_services()


def pytest_report_header(config: pytest.Config) -> list[str]:
    redis_url = re.sub(r"//:[^@]*@", "//:***@", os.environ.get("REDIS_URL", ""))
    lines = [f"neo4j: {os.environ.get('NEO4J_URI')}  redis: {redis_url}"]
    if os.environ.get("NEO4J_URI"):
        lines.append(f"neo4j line: {_neo4j_line()}")
    for proc in _started:
        lines.append(f"started {proc.name} (pid {proc.pid}) in {proc.started_sec:.1f}s")
    return lines


def _neo4j_line() -> str:
    """The version and edition of the Neo4j the suite runs against, and the JDK of the embedded one."""
    import psutil
    from neo4j import GraphDatabase

    auth = (os.environ.get("NEO4J_USERNAME", "neo4j"), os.environ.get("NEO4J_PASSWORD", ""))
    try:
        with GraphDatabase.driver(os.environ["NEO4J_URI"], auth=auth) as driver:
            records, _, _ = driver.execute_query(
                "CALL dbms.components() YIELD name, versions, edition RETURN name, versions, edition"
            )
        line = ", ".join(f"{r['name']} {'/'.join(r['versions'])} {r['edition']}".strip() for r in records)
    except Exception as exc:  # the header must not stop the session; the tests will say why
        line = f"unknown ({type(exc).__name__})"
    for proc in _started:
        if proc.name == "neo4j":
            try:
                java = Path(psutil.Process(proc.pid).exe())
                line += f" on {java.parent.parent}"
            except psutil.Error:
                pass
    return line
