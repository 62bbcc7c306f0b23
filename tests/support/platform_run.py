"""`make run` (platform/run.py) as a test drives it: started in its own session with its output kept."""

from __future__ import annotations

import os
import re
import signal
import threading
from pathlib import Path
from typing import IO

import psutil

from core.runtime.processes import spawn_platform


class Platform:
    def __init__(self, var_dir: Path, ports: dict[str, int], **extra_env: str) -> None:
        own = ("NEO4J_URI", "NEO4J_PASSWORD", "REDIS_URL", "REDIS_PASSWORD", "VAR_DIR")  # as on a new machine
        env = {k: v for k, v in os.environ.items() if k not in own}
        env.update(
            VAR_DIR=str(var_dir),
            NEO4J_BOLT_PORT=str(ports["neo4j"]),
            REDIS_PORT=str(ports["redis"]),
            WEB_PORT=str(ports["web"]),
            CELERY_WORKER_CONCURRENCY="1",
            NEO4J_HEAP="512m",
        )
        env.update(extra_env)
        self.proc = spawn_platform(env)
        self.lines: list[str] = []
        assert self.proc.stdout is not None  # here, not in the reading thread, where it would fail no test
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.base = f"http://127.0.0.1:{ports['web']}"
        self.var_dir = var_dir

    def credentials(self) -> dict[str, str]:
        """What `make run` wrote to VAR_DIR/credentials (secrets never go to its output)."""
        path = self.var_dir / "credentials"
        assert path.stat().st_mode & 0o777 == 0o600
        pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        return {name: value for name, value in pairs if not name.startswith("#")}

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self.lines.append(line.rstrip())

    def output(self) -> str:
        return "\n".join(self.lines)

    def value(self, label: str) -> str:
        for line in self.lines:
            match = re.search(rf"{label}\s+(\S+)$", line)
            if match:
                return match.group(1)
        raise AssertionError(f"{label} not printed:\n{self.output()}")

    def spawned_pid(self, program: str) -> int:
        """The pid supervisord last started `program` with (it prints every start)."""
        found = [int(m.group(1)) for m in re.finditer(rf"spawned: '{program}' with pid (\d+)", self.output())]
        assert found, f"{program} never started:\n{self.output()}"
        return found[-1]

    def ctrl_c(self, timeout: float = 90) -> list[psutil.Process]:
        return self.stop(signal.SIGINT, timeout)

    def stop(self, signum: int, timeout: float = 90) -> list[psutil.Process]:
        """Send `signum` to run.py; the processes it started that are still alive 10 s after it ended."""
        children = psutil.Process(self.proc.pid).children(recursive=True)
        self.proc.send_signal(signum)
        self.proc.wait(timeout=timeout)
        gone, alive = psutil.wait_procs(children, timeout=10)
        return alive
