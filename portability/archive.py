"""The export archive (docs/portability.md): a gzip'd tar whose first member is `manifest.json`,
then `nodes.ndjson` (one node per line: `{"label", "props"}`) and `relationships.ndjson` (one per
line: `{"type", "start_label", "start", "end_label", "end", "props"}`).

The manifest names the archive's schema version, the source project and its settings, the embedder,
the counts by label and type, and each data member's SHA-256, byte and line counts; `checksum` is the
SHA-256 of the canonical JSON of those file entries. Readers check the version and every checksum
before anything is written, so a truncated or altered archive is refused whole.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import tarfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from isal import igzip, igzip_threaded

from core.errors import InvalidInput, PlatformError

FORMAT = "knowledge-platform-export"
SCHEMA_VERSION = 2  # 2: long float lists may be packed ({"$t": "f32"}); 1 never packs them
MANIFEST = "manifest.json"
NODES = "nodes.ndjson"
RELATIONSHIPS = "relationships.ndjson"
DATA_MEMBERS = (NODES, RELATIONSHIPS)
_READ_CHUNK = 1 << 20


class ArchiveInvalid(InvalidInput):
    code = "invalid_archive"


class ArchiveChecksumMismatch(InvalidInput):
    code = "checksum_mismatch"


class ArchiveVersionUnsupported(InvalidInput):
    code = "unsupported_schema_version"


def files_checksum(files: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(files, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass
class MemberWriter:
    """One NDJSON data member being written to a scratch file: counted and hashed as it goes."""

    handle: IO[bytes]
    digest: Any = field(default_factory=hashlib.sha256)
    lines: int = 0
    size: int = 0

    def write(self, line: bytes) -> None:
        self.handle.write(line)
        self.digest.update(line)
        self.lines += 1
        self.size += len(line)

    def write_block(self, block: bytes, lines: int) -> None:
        """`lines` whole lines at once."""
        if block:
            self.handle.write(block)
            self.digest.update(block)
        self.lines += lines
        self.size += len(block)

    def entry(self) -> dict[str, Any]:
        return {"sha256": self.digest.hexdigest(), "bytes": self.size, "lines": self.lines}


def _level(level: int) -> int:
    return max(0, min(level, 3))  # ISA-L's gzip has levels 0-3


def compressing(path: Path, level: int) -> IO[bytes]:
    """A scratch file a data member is written to as a gzip member of its own, compressed by ISA-L
    in a thread beside the one writing (`assemble` puts it into the archive as it is)."""
    return igzip_threaded.open(path, "wb", compresslevel=_level(level), threads=1)


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _padding(size: int, block: int = tarfile.BLOCKSIZE) -> bytes:
    return b"\0" * (-size % block)


def assemble(target: IO[bytes], manifest: dict[str, Any], members: dict[str, Path], level: int) -> None:
    """Write the archive: the manifest first (so a reader can refuse early), then each data member,
    whose scratch file (`compressing`) is already gzip'd. A gzip file may be several gzip members
    one after another (RFC 1952), read as one stream by every gzip reader: the tar's headers and
    padding are compressed here and the members' data copied as they are, so the archive costs no
    compression after the walk."""
    body = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    pending = _header(MANIFEST, len(body)) + body + _padding(len(body))
    length = len(pending)
    for name, path in members.items():
        size = manifest["files"][name]["bytes"]
        head = _header(name, size)
        target.write(igzip.compress(pending + head, compresslevel=_level(level)))
        with path.open("rb") as data:
            shutil.copyfileobj(data, target, _READ_CHUNK)
        pending = _padding(size)
        length += len(head) + size + len(pending)
    end = b"\0" * (2 * tarfile.BLOCKSIZE)
    length += len(end)
    target.write(
        igzip.compress(pending + end + _padding(length, tarfile.RECORDSIZE), compresslevel=_level(level))
    )


def _open(source: IO[bytes]) -> tarfile.TarFile:
    # gzip.GzipFile reads every gzip member of the file (assemble writes several); tarfile's own
    # "r|gz" stops after the first
    try:
        return tarfile.open(fileobj=gzip.GzipFile(fileobj=source, mode="rb"), mode="r|")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ArchiveInvalid(f"not a gzip'd tar archive: {exc}") from exc


def check_manifest(raw: bytes) -> dict[str, Any]:
    try:
        manifest = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ArchiveInvalid(f"{MANIFEST} is not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveInvalid(f"{MANIFEST} does not describe a {FORMAT} archive")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise ArchiveInvalid(f"{MANIFEST} has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise ArchiveVersionUnsupported(
            f"the archive's schema version is {version}; this platform reads up to {SCHEMA_VERSION}",
            details={"schema_version": version, "supported": SCHEMA_VERSION},
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != set(DATA_MEMBERS):
        raise ArchiveInvalid(f"{MANIFEST} must list the files {', '.join(DATA_MEMBERS)}")
    if manifest.get("checksum") != files_checksum(files):
        raise ArchiveChecksumMismatch(f"{MANIFEST}'s checksum does not match its file entries")
    for key in ("source", "project", "embedder", "counts"):
        if not isinstance(manifest.get(key), dict):
            raise ArchiveInvalid(f"{MANIFEST} has no {key!r} object")
    return manifest


def _member_lines(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[bytes]:
    handle = tar.extractfile(member)
    if handle is None:
        raise ArchiveInvalid(f"{member.name} is not a regular file")
    yield from handle


def _checked_lines(name: str, lines: Iterator[bytes], expected: dict[str, Any]) -> Iterator[bytes]:
    """The member's lines, and at its end an error unless its hash and counts are the manifest's."""
    digest, count, size = hashlib.sha256(), 0, 0
    for line in lines:
        digest.update(line)
        count += 1
        size += len(line)
        yield line
    if (digest.hexdigest(), count, size) != (
        expected.get("sha256"),
        expected.get("lines"),
        expected.get("bytes"),
    ):
        raise ArchiveChecksumMismatch(
            f"{name} does not match the manifest (SHA-256, lines or bytes differ)",
            details={"file": name, "lines": count, "expected_lines": expected.get("lines")},
        )


def read(source: IO[bytes]) -> Iterator[tuple[str, Any]]:
    """Walk an archive once: ("manifest", dict) first, then ("line", (member, bytes)) for every data
    line, each member's checksum verified at its end. Anything wrong raises an `InvalidInput`."""
    tar = _open(source)
    try:
        manifest: dict[str, Any] | None = None
        seen: list[str] = []
        for member in tar:
            if manifest is None:
                if member.name != MANIFEST:
                    raise ArchiveInvalid(f"the archive must start with {MANIFEST}, not {member.name}")
                manifest = check_manifest(b"".join(_member_lines(tar, member)))
                yield "manifest", manifest
                continue
            if member.name not in DATA_MEMBERS or member.name in seen:
                raise ArchiveInvalid(f"unexpected member {member.name!r} in the archive")
            seen.append(member.name)
            expected = manifest["files"][member.name]
            for line in _checked_lines(member.name, _member_lines(tar, member), expected):
                yield "line", (member.name, line)
        if manifest is None or seen != list(DATA_MEMBERS):
            raise ArchiveInvalid(
                "the archive is incomplete: " + ", ".join(DATA_MEMBERS) + " must follow the manifest"
            )
    except PlatformError:
        raise
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ArchiveInvalid(f"the archive is damaged or truncated: {exc}") from exc
    finally:
        tar.close()


def parse_line(member: str, line: bytes) -> dict[str, Any]:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ArchiveInvalid(f"{member}: a line is not JSON: {exc}") from exc
    if not isinstance(row, dict):
        raise ArchiveInvalid(f"{member}: a line is not a JSON object")
    return row
