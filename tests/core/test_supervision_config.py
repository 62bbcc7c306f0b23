"""supervisord's configuration as `make run` writes it (core.runtime.supervision); the processes it
supervises are killed and restarted for real in tests/e2e/test_supervision.py."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path

import pytest

from core.runtime.supervision import Program, labelled, procfile_programs, supervisor_config

REPO = Path(__file__).resolve().parents[2]


def test_the_procfile_becomes_programs_that_stop_in_order() -> None:
    programs = procfile_programs((REPO / "platform" / "Procfile").read_text())
    assert [p.name for p in programs] == ["neo4j", "redis", "worker", "beat", "web"]
    config = configparser.RawConfigParser()
    config.read_string(
        supervisor_config(
            programs, directory=Path("/srv/kp"), pid_file=Path("/run/100%/s.pid"), stop_wait_sec=60
        )
    )
    assert config.get("supervisord", "pidfile") == "/run/100%%/s.pid"  # supervisord expands `%`
    priority = {p.name: config.getint(f"program:{p.name}", "priority") for p in programs}
    # supervisord stops higher priorities first: the web server before the worker, the stores last
    assert priority["web"] > priority["worker"] == priority["beat"] > priority["neo4j"] == priority["redis"]
    for program in programs:
        section = f"program:{program.name}"
        assert config.getboolean(section, "autorestart") and config.getboolean(section, "killasgroup")
        assert config.getint(section, "stopwaitsecs") == 60


@pytest.mark.parametrize("line", ["web platform/bin/start-web", "we b: x", "web:", ": x"])
def test_a_line_that_is_not_name_colon_command_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="not a Procfile line"):
        procfile_programs(f"# comment\n{line}\n")


def test_every_output_line_carries_the_process_name() -> None:
    command = labelled(Program("web/2", "printf 'one\\ntwo\\n'; echo three >&2; exit 3"))
    run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == 3
    assert run.stdout.splitlines() == ["web/2  | one", "web/2  | two", "web/2  | three"]
