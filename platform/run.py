#!/usr/bin/env python
"""Start the whole platform (make run): Neo4j, Redis, Celery worker and beat, and the web server.

Runs platform/Procfile through honcho. NEO4J_URI / REDIS_URL set means external servers: their
local process is not started. Ctrl-C (or SIGTERM) stops every process, Neo4j cleanly.
Run by path: platform/ is not a package (it would shadow the standard library's `platform`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import environ  # noqa: E402
import honcho.manager  # noqa: E402
from honcho.environ import parse_procfile  # noqa: E402

from core.auth.secrets import install_secret  # noqa: E402

# Neo4j needs more than honcho's default 5 s to shut down cleanly before a SIGKILL.
honcho.manager.KILL_WAIT = int(os.environ.get("SHUTDOWN_WAIT_SEC", "60"))


def process_env() -> dict[str, str]:
    env = environ.Env()
    if (REPO / ".env").is_file():
        env.read_env(REPO / ".env", overwrite=False)
    var_dir = Path(os.environ.get("VAR_DIR", REPO / "var")).resolve()
    values = {
        "VAR_DIR": str(var_dir),
        "NEO4J_DATA_DIR": os.environ.get("NEO4J_DATA_DIR", str(var_dir / "neo4j")),
        "REDIS_DATA_DIR": os.environ.get("REDIS_DATA_DIR", str(var_dir / "redis")),
        "PYTHONUNBUFFERED": "1",
        # The venv's executables (python, celery, daphne) come first on PATH for the scripts.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    var_dir.mkdir(parents=True, exist_ok=True)
    # The embedded Neo4j and Redis get per-install passwords (0600 files under VAR_DIR), created here
    # before any process starts so the services and their clients agree on them.
    if not env.str("NEO4J_URI", default=""):
        values["NEO4J_PASSWORD"] = env.str("NEO4J_PASSWORD", default="") or install_secret(
            var_dir / "neo4j_password"
        )
    if not env.str("REDIS_URL", default=""):
        values["REDIS_PASSWORD"] = env.str("REDIS_PASSWORD", default="") or install_secret(
            var_dir / "redis_password"
        )
    return {**os.environ, **values}


def main() -> int:
    env = process_env()
    procfile = parse_procfile((REPO / "platform" / "Procfile").read_text())
    skip = set()
    if env.get("NEO4J_URI"):
        skip.add("neo4j")
    if env.get("REDIS_URL"):
        skip.add("redis")
    manager = honcho.manager.Manager()
    for name, command in procfile.processes.items():
        if name not in skip:
            manager.add_process(name, command, env=env, cwd=str(REPO))
    for name in sorted(skip):
        print(f"{name}: external server configured, not started", flush=True)
    manager.loop()
    return int(manager.returncode or 0)


if __name__ == "__main__":
    sys.exit(main())
