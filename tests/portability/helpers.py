"""Archives built by hand for the import's bad-input tests, and small helpers of the export tests."""

from __future__ import annotations

import hashlib
import io
import math
import struct
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from core import graph
from core.graph import transfer
from portability import archive
from portability.owners import LABELS
from tests.plugins.services import started


def members(nodes: list[dict[str, Any]], rels: list[dict[str, Any]]) -> dict[str, bytes]:
    return {
        archive.NODES: b"".join(orjson.dumps(row) + b"\n" for row in nodes),
        archive.RELATIONSHIPS: b"".join(orjson.dumps(row) + b"\n" for row in rels),
    }


def manifest_for(data: dict[str, bytes], nodes: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    files = {
        name: {"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body), "lines": body.count(b"\n")}
        for name, body in data.items()
    }
    counts: dict[str, int] = {}
    for row in nodes:
        counts[row["label"]] = counts.get(row["label"], 0) + 1
    manifest = {
        "format": archive.FORMAT,
        "schema_version": archive.SCHEMA_VERSION,
        "created_at": "2026-11-27T00:00:00+00:00",
        "source": {"project_id": "source-project", "name": "hand made"},
        "project": {"name": "hand made"},
        "embedder": {
            "name": f"{settings.EMBEDDINGS_PROVIDER}:{settings.EMBEDDINGS_MODEL}",
            "dimensions": settings.EMBEDDINGS_DIMENSIONS,
        },
        "counts": {"nodes": counts, "relationships": {}, "node_total": len(nodes), "relationship_total": 0},
        "files": files,
    }
    manifest["checksum"] = archive.files_checksum(files)
    manifest.update(overrides)
    return manifest


def tar_bytes(manifest: dict[str, Any], data: dict[str, bytes]) -> bytes:
    """An archive as portability.archive writes it, from the given manifest and member bodies."""
    out = io.BytesIO()
    with tempfile.TemporaryDirectory() as scratch:
        paths = {}
        for name, body in data.items():
            paths[name] = Path(scratch) / name
            with archive.compressing(paths[name], 1) as handle:
                handle.write(body)
        archive.assemble(out, manifest, paths, 1)
    return out.getvalue()


def memory_rows(n: int, *, user_id: str = "ana") -> list[dict[str, Any]]:
    return [
        {
            "label": "Memory",
            "props": {
                "id": str(uuid.uuid4()),
                "project_id": "source-project",
                "text": f"hand made message {i}",
                "role": "user",
                "user_id": user_id,
                "timestamp": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
            },
        }
        for i in range(n)
    ]


def hand_archive(
    nodes: list[dict[str, Any]], rels: list[dict[str, Any]] | None = None, **overrides: Any
) -> bytes:
    data = members(nodes, rels or [])
    return tar_bytes(manifest_for(data, nodes, **overrides), data)


def upload(client: APIClient, body: bytes, **fields: str) -> Any:
    return client.post(
        "/api/v1/projects:import",
        {"archive": SimpleUploadedFile("project.tar.gz", body, "application/gzip"), **fields},
        format="multipart",
    )


def project_node_count(project_id: str) -> int:
    return sum(
        graph.read(f"MATCH (n:{label}) WHERE n.project_id = $p RETURN count(n) AS n", p=project_id)[0]["n"]
        for label in LABELS
    )


def stored_imports() -> list[str]:
    root = Path(settings.PORTABILITY_ARCHIVE_DIR) / "imports"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def member_names(body: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return tar.getnames()


def member_rows(body: bytes, name: str) -> list[dict[str, Any]]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        handle = tar.extractfile(name)
        assert handle is not None
        return [orjson.loads(line) for line in handle]


def float32_vector(n: int, scale: float = 3.0) -> list[float]:
    """`n` floats that are each exactly a 32-bit float (as embedders give), so they travel packed."""
    return [struct.unpack("<f", struct.pack("<f", math.sin(i) / scale))[0] for i in range(n)]


def server_transfer_or_skip() -> None:
    """The launcher registers the kp.transfer procedure and function; an external server may lack
    them (then the server's path cannot be tested there)."""
    if started("neo4j"):
        assert transfer.server_transfer()
    elif not transfer.server_transfer():
        pytest.skip("an external Neo4j without the platform's transfer procedures")
