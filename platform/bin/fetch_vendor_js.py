"""Fetches the admin's pinned JavaScript libraries from the npm registry into static files (never a CDN at
run time, never a copy in the repository). Each package is pinned by version and by the registry's own
integrity hash of its tarball; the extracted file is checked again by SHA-256. Idempotent: a file that
is already there with the right hash is left alone. Run by `make deps` (so by `make run` and `make test`).

Registry: NPM_CONFIG_REGISTRY when set, else npm's configured registry when npm is installed, else
https://registry.npmjs.org/."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Pinned:
    package: str
    version: str
    integrity: str  # the registry's dist.integrity of the tarball
    files: dict[str, tuple[str, str]]  # path inside the tarball -> (destination, sha256 of the file)


VENDOR_DIR = ROOT / "curation" / "static" / "curation" / "vendor"

PINNED = [
    Pinned(
        package="cytoscape",
        version="3.34.4",
        integrity="sha512-msY99tMY8iWTg+sIPGfSqDcPNOt4xcj+v/K/7qUFaCUxxlqnMkUYLBjRUzn9W5CU/R2hrmtJa5+UtovrEM2ctg==",
        files={
            "package/dist/cytoscape.min.js": (
                "cytoscape-3.34.4.min.js",
                "081591ab735b2b6a3b31a3c60f8f3a3e2fee8c92939e0c7820ad1208571b6cd8",
            ),
            "package/LICENSE": ("cytoscape-3.34.4.LICENSE", ""),
        },
    ),
]


def registry() -> str:
    url = os.environ.get("NPM_CONFIG_REGISTRY", "")
    if not url and shutil.which("npm"):
        done = subprocess.run(
            ["npm", "config", "get", "registry"], capture_output=True, text=True, timeout=60, check=False
        )
        url = done.stdout.strip() if done.returncode == 0 else ""
    return (url or "https://registry.npmjs.org/").rstrip("/") + "/"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _present(pin: Pinned) -> bool:
    for dest, sha in pin.files.values():
        path = VENDOR_DIR / dest
        if not path.is_file() or (sha and _sha256(path.read_bytes()) != sha):
            return False
    return True


def fetch(pin: Pinned) -> None:
    url = f"{registry()}{pin.package}/-/{pin.package.split('/')[-1]}-{pin.version}.tgz"
    with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 (a pinned https registry)
        tarball = response.read()
    algorithm, expected = pin.integrity.split("-", 1)
    got = base64.b64encode(hashlib.new(algorithm, tarball).digest()).decode()
    if got != expected:
        raise SystemExit(f"{pin.package}@{pin.version}: the tarball's {algorithm} is not the pinned one")
    VENDOR_DIR.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for member, (dest, sha) in pin.files.items():
            extracted = archive.extractfile(member)
            if extracted is None:
                raise SystemExit(f"{pin.package}@{pin.version}: no {member} in the tarball")
            data = extracted.read()
            if sha and _sha256(data) != sha:
                raise SystemExit(f"{pin.package}@{pin.version}: {member} is not the pinned file")
            tmp = VENDOR_DIR / f".{dest}.tmp"
            tmp.write_bytes(data)
            tmp.replace(VENDOR_DIR / dest)
    print(f"fetched {pin.package}@{pin.version} into {VENDOR_DIR.relative_to(ROOT)}")


def main() -> int:
    for pin in PINNED:
        if not _present(pin):
            fetch(pin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
