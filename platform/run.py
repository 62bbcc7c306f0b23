#!/usr/bin/env python
"""Start the whole platform (make run): Neo4j, Redis, Celery worker and beat, and the web server.

Runs platform/Procfile's processes under supervisord (core.runtime.supervision): a process that dies
is restarted while the others keep serving, and Ctrl-C (or SIGTERM) stops every process, Neo4j
cleanly. NEO4J_URI / REDIS_URL set means external servers: their local process is not started.
Run by path: platform/ is not a package (it would shadow the standard library's `platform`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import environ  # noqa: E402

from core.auth.secrets import install_secret  # noqa: E402
from core.runtime.supervision import procfile_programs, supervisor_config  # noqa: E402


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
        # One id per `make run`: a web process restarted within it skips the preparation (and the new
        # demo key) of its first start (platform/bin/start-web).
        "PLATFORM_RUN_ID": uuid.uuid4().hex,
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
    skip = {name for name, var in (("neo4j", "NEO4J_URI"), ("redis", "REDIS_URL")) if env.get(var)}
    programs = procfile_programs((REPO / "platform" / "Procfile").read_text())
    for name in sorted(skip):
        print(f"{name}: external server configured, not started", flush=True)
    var_dir = Path(env["VAR_DIR"])
    config = var_dir / "supervisord.conf"
    config.write_text(
        supervisor_config(
            [p for p in programs if p.name not in skip],
            directory=REPO,
            pid_file=var_dir / "supervisord.pid",
            # Neo4j needs well over supervisord's default 10 s to shut down cleanly before a SIGKILL
            stop_wait_sec=int(env.get("SHUTDOWN_WAIT_SEC", "60")),
        )
    )
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "supervisor.supervisord", "--configuration", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def forward(signum: int, _frame: FrameType | None) -> None:
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM if signum == signal.SIGTERM else signal.SIGINT)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    # supervisord writes to a pipe, relayed here: its children open /dev/stdout anew, which on a
    # file would write from the file's start
    assert supervisor.stdout is not None
    for line in iter(supervisor.stdout.readline, b""):
        try:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            pass
    return supervisor.wait()


if __name__ == "__main__":
    sys.exit(main())
