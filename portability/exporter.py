"""Export: every node and relationship a project owns, streamed from Neo4j into an archive
(portability.archive) or a GraphML file (portability.graphml), holding one page of rows at a time.

Nodes are read label by label, then the relationships leaving them. A relationship is written only
when both its ends were written, so the archive is whole even if the project changed while it was
read (the job refuses to start while the project's ingestion runs, and fails if one started meanwhile).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
from django.conf import settings

from core.graph.transfer import (
    encode_value,
    export_pages,
    node_pages,
    pack_props,
    relationship_pages,
    server_transfer,
)
from core.models import Project
from portability import archive
from portability.owners import LABELS, canonical_label

Progress = Callable[[str, int], None]


@dataclass
class Walk:
    """What one pass over the project's graph saw."""

    nodes: dict[str, int] = field(default_factory=dict)
    relationships: dict[str, int] = field(default_factory=dict)
    skipped_relationships: int = 0

    @property
    def node_total(self) -> int:
        return sum(self.nodes.values())


def project_nodes(project_id: str, walk: Walk, ids: set[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, properties) of every node of the project; their ids are added to `ids`."""
    batch = settings.PORTABILITY_BATCH
    for label in LABELS:
        for page in node_pages(label, project_id, batch=batch):
            walk.nodes[label] = walk.nodes.get(label, 0) + len(page)
            for props in page:
                ids.add(props["id"])
                yield label, props


def project_relationships(project_id: str, walk: Walk, ids: set[str]) -> Iterator[dict[str, Any]]:
    """The project's relationships whose both ends are among `ids`."""
    batch = settings.PORTABILITY_BATCH
    for label in LABELS:
        for page in relationship_pages(label, project_id, batch=batch):
            for row in page:
                end_label = canonical_label(row["el"])
                if end_label is None or row["s"] not in ids or row["e"] not in ids:
                    walk.skipped_relationships += 1
                    continue
                walk.relationships[row["t"]] = walk.relationships.get(row["t"], 0) + 1
                yield {
                    "type": row["t"],
                    "start_label": label,
                    "start": row["s"],
                    "end_label": end_label,
                    "end": row["e"],
                    "props": row["p"],
                }


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=encode_value, option=orjson.OPT_APPEND_NEWLINE)


def manifest_of(project: Project, walk: Walk, files: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": archive.FORMAT,
        "schema_version": archive.SCHEMA_VERSION,
        "created_at": datetime.now(UTC).isoformat(),
        "source": {"project_id": project.id, "name": project.name},
        "project": {
            "name": project.name,
            "chunk_size_tokens": project.chunk_size_tokens,
            "chunk_overlap_tokens": project.chunk_overlap_tokens,
            "default_retention_days": project.default_retention_days,
            "default_anonymize": project.default_anonymize,
            "default_accessibility": project.default_accessibility,
            "redact_pii_at_ingest": project.redact_pii_at_ingest,
        },
        "embedder": {"name": project.embedder, "dimensions": project.embedding_dimensions},
        "counts": {
            "nodes": walk.nodes,
            "relationships": walk.relationships,
            "node_total": walk.node_total,
            "relationship_total": sum(walk.relationships.values()),
        },
        "files": files,
        "checksum": archive.files_checksum(files),
    }


def _walk_here(
    project_id: str, walk: Walk, writers: dict[str, archive.MemberWriter], progress: Progress
) -> None:
    """The archive's lines read through Cypher and written by orjson."""
    ids = set[str]()
    nodes, rels = writers[archive.NODES], writers[archive.RELATIONSHIPS]
    for label, props in project_nodes(project_id, walk, ids):
        nodes.write(_dumps({"label": label, "props": pack_props(props)}))
        if nodes.lines % 10_000 == 0:
            progress("nodes", nodes.lines)
    for row in project_relationships(project_id, walk, ids):
        rels.write(_dumps({**row, "props": pack_props(row["props"])}))
        if rels.lines % 10_000 == 0:
            progress("relationships", rels.lines)


def _walk_on_server(
    project_id: str, walk: Walk, writers: dict[str, archive.MemberWriter], progress: Progress
) -> None:
    """The archive's lines written by the server (core.graph.transfer.export_pages), but for the
    rows it leaves to orjson."""
    for page in export_pages(project_id, list(LABELS), batch=settings.PORTABILITY_BATCH):
        writer = writers[archive.NODES if page.member == "nodes" else archive.RELATIONSHIPS]
        writer.write_block(page.lines, page.count)
        for row in page.rows:
            writer.write(_dumps(row))
        tally = walk.nodes if page.member == "nodes" else walk.relationships
        for key, n in page.counts.items():
            tally[key] = tally.get(key, 0) + n
        walk.skipped_relationships += page.skipped
        progress(page.member, writer.lines)


def export_ndjson(project: Project, target: IO[bytes], progress: Progress) -> dict[str, Any]:
    """Write the project's archive to `target`; returns its manifest. The server writes the lines
    when it can (`server_transfer`), else they are read through Cypher: the same archive."""
    walk = Walk()
    with tempfile.TemporaryDirectory(prefix="kp-export-") as scratch:
        paths = {name: Path(scratch) / name for name in archive.DATA_MEMBERS}
        level = settings.PORTABILITY_COMPRESS_LEVEL
        with (
            archive.compressing(paths[archive.NODES], level) as nodes,
            archive.compressing(paths[archive.RELATIONSHIPS], level) as rels,
        ):
            writers = {
                archive.NODES: archive.MemberWriter(nodes),
                archive.RELATIONSHIPS: archive.MemberWriter(rels),
            }
            walker = _walk_on_server if server_transfer() else _walk_here
            walker(project.id, walk, writers, progress)
        files = {name: writer.entry() for name, writer in writers.items()}
        manifest = manifest_of(project, walk, files)
        progress("archive", sum(writer.lines for writer in writers.values()))
        archive.assemble(target, manifest, paths, level)
    return manifest
