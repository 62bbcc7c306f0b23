"""`make run`'s process supervision: the Procfile's processes under supervisord.

supervisord restarts a child that dies (after `STARTSECS` of running: at once; a child that dies
sooner is retried after 1, 2, 3 … s, `START_RETRIES` times, then left FATAL while the others keep
serving) and, on SIGINT or SIGTERM, stops every child's whole process group: the web server first,
then the worker and beat, Neo4j and Redis last, each given `stop_wait_sec` before a SIGKILL.
Imports nothing from Django: platform/run.py uses it before settings exist.
"""

from __future__ import annotations

import getpass
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

STARTSECS = 5
START_RETRIES = 10
# supervisord starts lower numbers first and stops them last: the stores outlive their clients
PRIORITY = {"neo4j": 10, "redis": 10, "worker": 20, "beat": 20, "web": 30}
LABEL_WIDTH = 7


@dataclass(frozen=True)
class Program:
    name: str
    command: str


def procfile_programs(text: str) -> list[Program]:
    """The `name: command` lines of a Procfile, in order; comments and blank lines skipped."""
    programs = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip().isidentifier() or not command.strip():
            raise ValueError(f"not a Procfile line: {raw!r}")
        programs.append(Program(name.strip(), command.strip()))
    return programs


def labelled(program: Program) -> str:
    """The program's command with every output line prefixed by its name, as `make run` prints it.

    The prefixing `sed` ignores SIGINT and SIGTERM, so a child's last lines at shutdown still come
    through; it ends when the child's output closes."""
    label = f"{program.name:<{LABEL_WIDTH}}| ".replace("/", r"\/")
    # `bash -c` runs a simple command in place (the pid supervisord watches is the program's own)
    command = f"exec bash -c {shlex.quote(program.command)}"
    script = f"exec > >(trap '' INT TERM; exec sed -u 's/^/{label}/') 2>&1; {command}"
    return f"bash -c {shlex.quote(script)}"


def supervisor_config(programs: list[Program], *, directory: Path, pid_file: Path, stop_wait_sec: int) -> str:
    """supervisord's configuration for `programs`, run in the foreground with every line on stdout.

    The children inherit supervisord's environment (no secret is written to the file)."""
    lines = [
        "[supervisord]",
        "nodaemon=true",
        # nodaemon echoes supervisord's own log (starts, exits, restarts) to stdout already
        "logfile=/dev/null",
        "logfile_maxbytes=0",
        f"pidfile={_value(pid_file)}",
        "loglevel=info",
    ]
    if os.geteuid() == 0:
        lines.append(f"user={getpass.getuser()}")  # root stays root, and says so without a warning
    for program in programs:
        lines += [
            "",
            f"[program:{program.name}]",
            f"command={_value(labelled(program))}",
            f"directory={_value(directory)}",
            f"priority={PRIORITY.get(program.name, 30)}",
            "autostart=true",
            "autorestart=true",
            f"startsecs={STARTSECS}",
            f"startretries={START_RETRIES}",
            "stopsignal=TERM",
            f"stopwaitsecs={stop_wait_sec}",
            "stopasgroup=true",
            "killasgroup=true",
            "redirect_stderr=true",
            # a pipe here (platform/run.py relays it): /dev/stdout opened anew on a file would write
            # from its start, over supervisord's own lines
            "stdout_logfile=/dev/stdout",
            "stdout_logfile_maxbytes=0",
        ]
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    """A value for supervisord's ini file: `%` starts its own expansions."""
    text = str(value)
    if "\n" in text:
        raise ValueError(f"a supervisord value cannot span lines: {text!r}")
    return text.replace("%", "%%")
