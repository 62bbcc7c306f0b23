"""Start and stop the embedded services (Neo4j launcher, Redis) as child processes.

Used by the test session and the benchmarks; `make run` uses the same scripts under supervisord.
Imports nothing from Django so it can run before settings exist.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # core/runtime/processes.py -> the repository
PLATFORM_RUN = REPO / "platform" / "run.py"
NEO4J_RUN = REPO / "platform" / "neo4j" / "run"
REDIS_RUN = REPO / "platform" / "redis" / "run"


class ServiceStartError(RuntimeError):
    pass


def spawn_platform(env: dict[str, str]) -> subprocess.Popen[str]:
    """The whole platform as `make run` starts it (platform/run.py), in its own session, with its
    output (supervisord's and every process's lines) on a text pipe for the caller to read."""
    return subprocess.Popen(
        [sys.executable, str(PLATFORM_RUN)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now: all are held while the others are chosen (ports
    asked for one by one may repeat, and two services would then race for one port)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class ManagedProcess:
    name: str
    proc: subprocess.Popen[str]
    port: int
    data_dir: Path
    started_sec: float
    output: deque[str] = field(default_factory=lambda: deque(maxlen=200))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, wait for a clean exit, SIGKILL only as a last resort."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def tail(self) -> str:
        return "\n".join(self.output)


def _pump(process: ManagedProcess, ready: threading.Event, marker: str | None) -> None:
    assert process.proc.stdout is not None
    for line in process.proc.stdout:
        process.output.append(line.rstrip())
        if marker and line.startswith(marker):
            ready.set()
    ready.set()  # EOF: the process ended (the caller checks whether it is alive)


def _spawn(
    name: str, argv: list[str], *, port: int, data_dir: Path, env: dict[str, str], marker: str | None
) -> tuple[ManagedProcess, threading.Event]:
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    managed = ManagedProcess(name=name, proc=proc, port=port, data_dir=data_dir, started_sec=started)
    ready = threading.Event()
    threading.Thread(target=_pump, args=(managed, ready, marker), daemon=True, name=f"{name}-output").start()
    return managed, ready


def _port_opens(port: int, *, within: float) -> bool:
    """Bolt printed READY; on a loaded machine the first connect may still take a moment."""
    deadline = time.monotonic() + within
    while not port_open(port, timeout=1.0):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def start_neo4j(
    data_dir: Path, port: int | None = None, *, password: str = "", timeout: float = 240.0
) -> ManagedProcess:
    """Run platform/neo4j/run; return once it printed READY (Bolt accepts connections). With a
    password, auth is on for the user `neo4j`."""
    port = port or free_port()
    env = {"NEO4J_BOLT_PORT": str(port), "NEO4J_PASSWORD": password}
    managed, ready = _spawn(
        "neo4j", [str(NEO4J_RUN), str(data_dir)], port=port, data_dir=data_dir, env=env, marker="READY"
    )
    if not ready.wait(timeout) or not managed.alive() or not _port_opens(port, within=10.0):
        managed.stop(timeout=10)
        raise ServiceStartError(f"neo4j did not start on port {port}:\n{managed.tail()}")
    managed.started_sec = time.monotonic() - managed.started_sec
    return managed


def start_redis(
    data_dir: Path, port: int | None = None, *, password: str = "", timeout: float = 30.0
) -> ManagedProcess:
    port = port or free_port()
    env = {"REDIS_PORT": str(port), "REDIS_LOGLEVEL": "warning", "REDIS_PASSWORD": password}
    managed, _ready = _spawn(
        "redis", [str(REDIS_RUN), str(data_dir)], port=port, data_dir=data_dir, env=env, marker=None
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not managed.alive():
            break
        if port_open(port):
            managed.started_sec = time.monotonic() - managed.started_sec
            return managed
        time.sleep(0.05)
    managed.stop(timeout=5)
    raise ServiceStartError(f"redis did not start on port {port}:\n{managed.tail()}")
