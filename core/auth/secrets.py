"""Per-install secrets kept in files under VAR_DIR (mode 0600), generated on first use.

The Django secret key and the passwords of the embedded Neo4j and Redis come from here when the
environment does not set them. Several processes start at once (web, worker, beat), so a file is
created atomically: the first process links a complete temporary file into place, the others read it.
Standard library only: `platform/run.py`, the settings and the test plugin use it before Django is
configured.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

MIN_SECRET_KEY_CHARS = 32
# Values that were ever published as defaults (this project's old default, Django's placeholder
# prefix) or that a deployment might copy from an example: never accepted outside DEBUG.
PUBLIC_SECRET_KEYS = frozenset(
    {
        "insecure-dev-key-change-me-in-production",
        "test-secret-key-not-for-production",
        "change-me",
        "changeme",
        "secret",
    }
)


def install_secret(path: Path, *, nbytes: int = 48) -> str:
    """The secret stored at `path`; a new random one (URL-safe text) is written there first if none is."""
    path = Path(path)
    existing = _read(path)
    if existing:
        return existing
    temp = _private_temp(path, secrets.token_urlsafe(nbytes) + "\n")
    try:
        with contextlib.suppress(FileExistsError):  # another process got there first
            os.link(temp, path)  # atomic
    finally:
        temp.unlink(missing_ok=True)
    # Whoever won, every process uses what is in the file now.
    for _ in range(50):
        stored = _read(path)
        if stored:
            return stored
        time.sleep(0.02)
    raise RuntimeError(f"secret file {path} exists but is empty")


def _read(path: Path) -> str:
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return ""
    if mode & 0o077:
        path.chmod(0o600)  # an older install's file, or a copy made with a wider mode
    return path.read_text().strip()


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by the owner only (replacing what was there)."""
    os.replace(_private_temp(Path(path), text), path)


def _private_temp(path: Path, text: str) -> Path:
    """A new file beside `path`, mode 0600, holding `text` on disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return temp
