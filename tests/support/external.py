"""Engines of the external-services tier, each a separate server process as in a deployment: a Neo4j
server (Neo4j's own server entry point with its own store, `platform/neo4j/server`, not the embedded
launcher) and a PostgreSQL cluster from Debian's packages (initdb + pg_ctl on a free port)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from neo4j import GraphDatabase

from core.runtime.processes import free_port
from tests.support.processes import REPO, stop


@contextmanager
def neo4j_server(home: Path, *, log: Path) -> Iterator[tuple[str, str]]:
    """A Neo4j server on a free Bolt port: (bolt URI, password of user neo4j). Stopped on exit."""
    port, password = free_port(), "server-pw-" + os.urandom(6).hex()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(REPO / "platform" / "neo4j" / "server"), str(home), str(port), password],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    uri = f"bolt://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, f"the Neo4j server exited:\n{log.read_text()[-3000:]}"
            try:
                with GraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
                    driver.verify_connectivity()
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert time.monotonic() < deadline, f"no Bolt after 240 s:\n{log.read_text()[-3000:]}"
                time.sleep(1)
        yield uri, password
    finally:
        stop(proc)


def postgres_bin() -> Path:
    """Debian's PostgreSQL programs (`platform/bin/install-system-deps` installs them when missing)."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert versions, "PostgreSQL is not installed (make deps installs Debian's postgresql)"
    return Path(versions[-1]).parent


def _as_owner(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, its programs run as the `postgres` system user."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextmanager
def postgres_cluster(*, log: Path) -> Iterator[str]:
    """A fresh PostgreSQL cluster on 127.0.0.1 and a free port with one database: its DATABASE_URL."""
    bin_dir, port = postgres_bin(), free_port()
    root = Path(tempfile.mkdtemp(prefix="kp-pg-"))  # not under pytest's 0700 dirs: postgres must enter it
    root.chmod(0o755)
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")

    def run(*args: str) -> None:
        done = subprocess.run(_as_owner(list(args)), capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}\n{done.stderr}"

    run(str(bin_dir / "initdb"), "-D", str(data), "-U", "platform", "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(
        str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "server.log"), "-w", "start"
    )
    try:
        run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "platform", "knowledge")
        yield f"postgresql://platform@127.0.0.1:{port}/knowledge"
    finally:
        subprocess.run(
            _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
            capture_output=True,
            timeout=120,
            check=False,
        )
        server_log = root / "server.log"
        if server_log.exists():
            log.write_text(server_log.read_text())
        shutil.rmtree(root, ignore_errors=True)
